"""A learned embedding factor on top of the lexical support score.

The lexical score (:func:`~._support.support_score`) sees a flipped direction
only when statement and quote spell it with words it knows. A sentence
embedding sees more, but plain cosine barely separates "X raises Y" from
"X lowers Y" (both are about X and Y). What does separate them is a
*contrast* with the text's polarity flips (:func:`polarity_flips`: direction
words swapped for their opposites, all of them or only the first or the last,
negations removed, or a "not" put in), measured word by word on MiniLM's
contextual token vectors, plus one sentence-level number; each is taken at
its worst flip::

    align(a, b)     = mean over a's word pieces of the best cosine to b's word pieces
    statement_align = min over flips f of  align(s, q) - align(f(s), q)   # s statement
    quote_align     = min over flips f of  align(q, s) - align(f(q), s)   # q quote
    flip_agreement  = min over flips f of  cos(u - f(u), v - f(v))        # sentence vectors
    factor = min(1, exp(a * statement_align + b * quote_align + c * flip_agreement
                        - reference))
    score  = lexical score * factor

``statement_align`` asks whether the quote's words match the statement's
better than those of any of its opposites (the flipped words are what
changes); ``flip_agreement`` whether flipping moves statement and quote the
same way (both say "raises") or opposite ways (one says "lowers"). ``a``,
``b``, ``c`` and ``reference`` come from a logistic regression of SUPPORT vs
CONTRADICT on ``-log(lexical score)`` and the three numbers over the SciFact
*train* split only (``bench/_support_auc.py --fit --head --write-head``): the
coefficients divided by the lexical one (log-score units), ``reference`` the
median of the linear part over the supporting train pairs. They ship in
``data/support_head.json`` with the name of the embedder they were fitted for:
vectors of another model mean something else, so with any other embedder (or
one without token vectors, :class:`~actors.models.TokenEmbedder`) the head does
not apply and the score is the lexical one. Cost: one forward pass for each
distinct text of a claim (statement, quote and their flips: 4 to 8), batched
per verification.

The factor never exceeds 1: it can only lower a score, so every exact-fact
check of the lexical score (an added year, another name, a dropped "not")
still fails a claim on its own. The flips use the lexical score's generic
opposite and negation lists; nothing is taken from any data set.
"""

from __future__ import annotations

import functools
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from actors.models import Embedder, TokenEmbedder, TokenVectors
from actors.text import stem

from ._support import _NEGATION_WORDS, _OPPOSITES, _OPPOSITES_TEXT, SupportScore, _polar

__all__ = [
    "DEFAULT_SUPPORT_HEAD_PATH",
    "EmbeddingSupport",
    "HeadFeatures",
    "SupportHeadError",
    "SupportHeadWeights",
    "flip_polarity",
    "head_features",
    "load_support_head",
    "polarity_flips",
]

DEFAULT_SUPPORT_HEAD_PATH = Path(__file__).parent / "data" / "support_head.json"
"""The shipped weights (fitted on SciFact train for MiniLM int8)."""

_FORMAT = "reactive-rag/support-head/2"
_NUMBERS = ("statement_align", "quote_align", "flip_agreement", "reference")


class SupportHeadError(ValueError):
    """The head's weights file is missing, unreadable or not a support-head file."""


@dataclass(frozen=True, slots=True)
class SupportHeadWeights:
    """The fitted numbers of the embedding factor (see the module docstring).

    ``model`` is the :attr:`~actors.models.Embedder.name` the weights were
    fitted with; ``fitted_on`` says which data (for humans, not checked).
    """

    model: str
    statement_align: float
    quote_align: float
    flip_agreement: float
    reference: float
    fitted_on: str = ""

    def to_json(self) -> dict[str, Any]:
        """The file's content: these numbers plus a format tag."""
        return {"format": _FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, source: str = "support head") -> (
            SupportHeadWeights):
        """Parse what :meth:`to_json` wrote.

        Raises:
            SupportHeadError: wrong format tag (an older head's file included),
                missing field or non-finite number.
        """
        tag = data.get("format")
        if tag != _FORMAT:
            older = isinstance(tag, str) and tag.startswith(_FORMAT.rsplit("/", 1)[0] + "/")
            hint = (" (an older head formula; refit it with "
                    "`bench/_support_auc.py --fit --head --write-head`)") if older else ""
            raise SupportHeadError(
                f"{source}: not a support-head file of this version (format {tag!r}, "
                f"expected {_FORMAT!r}){hint}")
        try:
            model = data["model"]
            numbers = {k: data[k] for k in _NUMBERS}
        except KeyError as exc:
            raise SupportHeadError(f"{source}: missing field {exc.args[0]!r}") from None
        if not isinstance(model, str) or not model:
            raise SupportHeadError(f"{source}: 'model' must be a non-empty string")
        for key, value in numbers.items():
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value):
                raise SupportHeadError(f"{source}: {key!r} must be a finite number, "
                                       f"got {value!r}")
        return cls(model=model, fitted_on=str(data.get("fitted_on", "")),
                   **{k: float(v) for k, v in numbers.items()})


def load_support_head(path: str | Path | None = None) -> SupportHeadWeights:
    """Read head weights (default: the shipped file).

    Raises:
        SupportHeadError: the file is missing, is not JSON, or is malformed.
    """
    file = Path(path) if path is not None else DEFAULT_SUPPORT_HEAD_PATH
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise SupportHeadError(f"support-head weights not readable at {file}: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SupportHeadError(f"support-head weights at {file} are not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise SupportHeadError(f"support-head weights at {file}: expected a JSON object")
    return SupportHeadWeights.from_json(data, source=str(file))


# --- the polarity flip ----------------------------------------------------------------

# One plain word for each side of each pair of opposites: "raises" on one side becomes
# the other side's first word ("decrease"), which is all an embedding needs.
_SWAPS = tuple((a.split()[0], b.split()[0], sides)
               for (a, b), sides in zip(_OPPOSITES_TEXT, _OPPOSITES, strict=True))
_FLIP_WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)?")
_AUXILIARIES = frozenset((
    "is", "are", "was", "were", "be", "can", "could", "may", "might", "will", "would",
    "should", "must", "has", "have", "had", "does", "do", "did"))


@functools.lru_cache(maxsize=8192)
def _swap(word: str) -> str | None:
    lower = word.lower().replace("\u2019", "'")
    if lower in _NEGATION_WORDS or lower.endswith("n't"):
        return ""
    st = stem([lower])[0]
    for one, other, (side_a, side_b) in _SWAPS:
        if _polar(st, side_a):
            return other
        if _polar(st, side_b):
            return one
    return None


@functools.lru_cache(maxsize=4096)
def flip_polarity(text: str) -> str:
    """``text`` saying the opposite, roughly: what the embedding contrast compares with.

    Direction and evaluation words become their opposites and negations are
    removed ("X does not reduce Y" -> "X does increase Y"); a sentence with
    neither gets a "not" after its first auxiliary verb, else an
    "It is not true that" in front.
    """
    changed = False

    def sub(m: re.Match[str]) -> str:
        nonlocal changed
        swapped = _swap(m.group())
        if swapped is None:
            return m.group()
        changed = True
        return swapped

    flipped = _FLIP_WORD.sub(sub, text)
    if changed:
        return " ".join(flipped.split())
    words = text.split()
    for i, w in enumerate(words):
        if w.lower() in _AUXILIARIES:
            return " ".join([*words[: i + 1], "not", *words[i + 1 :]])
    return "It is not true that " + text[:1].lower() + text[1:]


@functools.lru_cache(maxsize=4096)
def polarity_flips(text: str) -> tuple[str, str, str]:
    """Three ways ``text`` could say the opposite: every polar word flipped
    (:func:`flip_polarity`), only the first one, only the last one.

    Flipping every word of "higher intake lowers risk" gives "lower intake
    raises risk", which says the same; flipping one of them does not. With
    no direction or negation word the three are the same "not" sentence.
    """
    found = [m for m in _FLIP_WORD.finditer(text) if _swap(m.group()) is not None]
    if not found:
        every = flip_polarity(text)
        return every, every, every

    def only(m: re.Match[str]) -> str:
        return " ".join((text[: m.start()] + (_swap(m.group()) or "") + text[m.end() :]).split())

    return flip_polarity(text), only(found[0]), only(found[-1])


# --- the factor -----------------------------------------------------------------------


class HeadFeatures(NamedTuple):
    """The three numbers the factor is made of (see the module docstring)."""

    statement_align: float
    quote_align: float
    flip_agreement: float


def _align(a: TokenVectors, b: TokenVectors) -> float:
    """Mean over ``a``'s word pieces of the best cosine to one of ``b``'s (0 if either is empty)."""
    if not len(a.tokens) or not len(b.tokens):
        return 0.0
    return float((a.tokens @ b.tokens.T).max(axis=1).mean())


def _agreement(u: TokenVectors, uf: TokenVectors, v: TokenVectors, vf: TokenVectors) -> float:
    du, dv = u.sentence - uf.sentence, v.sentence - vf.sentence
    norm = float(np.linalg.norm(du) * np.linalg.norm(dv))
    return float(du @ dv) / norm if norm > 0 else 0.0


def head_features(s: TokenVectors, q: TokenVectors, s_flips: Sequence[TokenVectors],
                  q_flips: Sequence[TokenVectors]) -> HeadFeatures:
    """The features of one pair from the vectors of its texts and their
    :func:`polarity_flips`, each at its worst (smallest) over the flips."""
    if not s_flips or len(s_flips) != len(q_flips):
        raise ValueError("head_features needs as many statement flips as quote flips (>= 1)")
    s_q, q_s = _align(s, q), _align(q, s)
    return HeadFeatures(min(s_q - _align(f, q) for f in s_flips),
                        min(q_s - _align(f, s) for f in q_flips),
                        min(_agreement(s, sf, q, qf)
                            for sf, qf in zip(s_flips, q_flips, strict=True)))


class EmbeddingSupport:
    """The embedding factor for one embedder, with a small vector cache.

    A verifier checks a few claims per run, so :meth:`prepare` embeds the texts
    of every claim (statement, quote and their flips, 4 to 8 distinct) in one
    batch call and keeps their vectors (LRU, ``cache_size`` texts): a repaired draft
    re-citing the same quotes costs nothing more. Thread-safe.

    Args:
        embedder: the embedder the weights were fitted for; it must give token
            vectors (:class:`~actors.models.TokenEmbedder`, as MiniLM does).
        weights: the fitted numbers (default: the shipped file).
        cache_size: texts whose vectors are kept (a text's token vectors take
            1.5 KB per word piece: 256 sentence-sized texts are a few MB).

    Raises:
        SupportHeadError: ``embedder.name`` is not the model of ``weights``, the
            embedder gives no token vectors, or the default weights file is
            missing or corrupt.
    """

    def __init__(self, embedder: TokenEmbedder | Embedder,
                 weights: SupportHeadWeights | None = None, *, cache_size: int = 256) -> None:
        self.weights = weights if weights is not None else load_support_head()
        if embedder.name != self.weights.model:
            raise SupportHeadError(
                f"support-head weights are for {self.weights.model!r}, not {embedder.name!r}")
        if not isinstance(embedder, TokenEmbedder):
            raise SupportHeadError(
                f"the support head needs token vectors; {embedder.name!r} here is a "
                f"{type(embedder).__name__} without embed_tokens()")
        if cache_size < 8:
            raise ValueError("cache_size must be >= 8 (one claim's texts)")
        self.embedder: TokenEmbedder = embedder
        self._cache: OrderedDict[str, TokenVectors] = OrderedDict()
        self._size = cache_size
        self._lock = threading.Lock()
        self.embedded = 0
        """Texts sent to the embedder so far (cache misses)."""

    @classmethod
    def for_embedder(cls, embedder: TokenEmbedder | Embedder,
                     weights: SupportHeadWeights | None = None) -> EmbeddingSupport | None:
        """The head for ``embedder``, or None when the weights are for another model
        or the embedder gives no token vectors.

        Raises:
            SupportHeadError: the default weights file is missing or corrupt.
        """
        w = weights if weights is not None else load_support_head()
        if embedder.name != w.model or not isinstance(embedder, TokenEmbedder):
            return None
        return cls(embedder, w)

    def prepare(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Embed, in one call, the texts of these (statement, quote) pairs not yet cached."""
        texts: list[str] = []
        for statement, quote in pairs:
            texts += [statement, quote, *polarity_flips(statement), *polarity_flips(quote)]
        with self._lock:
            todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if not todo:
            return
        vectors = self.embedder.embed_tokens(todo)
        if len(vectors) != len(todo):
            raise ValueError(f"embedder returned {len(vectors)} vectors for {len(todo)} texts")
        with self._lock:
            self.embedded += len(todo)
            for text, vec in zip(todo, vectors, strict=True):
                self._cache[text] = vec
                self._cache.move_to_end(text)
            while len(self._cache) > max(self._size, len(todo)):
                self._cache.popitem(last=False)

    def _vectors(self, text: str) -> TokenVectors:
        with self._lock:
            vec = self._cache.get(text)
            if vec is not None:
                self._cache.move_to_end(text)
                return vec
        # Evicted since prepare() by another thread's batch: embed it alone.
        got = self.embedder.embed_tokens([text])
        if len(got) != 1:
            raise ValueError(f"embedder returned {len(got)} vectors for 1 text")
        with self._lock:
            self.embedded += 1
            self._cache[text] = got[0]
        return got[0]

    def features(self, statement: str, quote: str) -> HeadFeatures:
        """The pair's :class:`HeadFeatures` (embedding its texts if not cached)."""
        self.prepare([(statement, quote)])
        return head_features(self._vectors(statement), self._vectors(quote),
                             [self._vectors(f) for f in polarity_flips(statement)],
                             [self._vectors(f) for f in polarity_flips(quote)])

    def factor_of(self, features: HeadFeatures) -> float:
        """The multiplier (0..1] these features give under the weights."""
        w = self.weights
        linear = (w.statement_align * features.statement_align
                  + w.quote_align * features.quote_align
                  + w.flip_agreement * features.flip_agreement)
        return min(1.0, math.exp(min(0.0, linear - w.reference)))

    def factor(self, statement: str, quote: str) -> float:
        """The multiplier (0..1] the lexical score gets for this pair."""
        return self.factor_of(self.features(statement, quote))

    def rescore(self, parts: SupportScore, statement: str, quote: str) -> SupportScore:
        """``parts`` with the factor applied (recorded as ``embedding_factor``)."""
        f = self.factor(statement, quote)
        return replace(parts, score=parts.score * f, embedding_factor=f)
