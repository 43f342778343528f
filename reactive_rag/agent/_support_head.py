"""A learned embedding factor on top of the lexical support score.

The lexical score (:func:`~._support.support_score`) sees a flipped direction
only when statement and quote spell it with words it knows. A sentence
embedding sees more, but plain cosine barely separates "X raises Y" from
"X lowers Y" (both are about X and Y). What does separate them a little is a
*contrast*: is the quote closer to the statement, or to the statement with
its polarity flipped (direction words swapped for their opposites, negations
removed, or a "not" put in)? And the other way round for the quote::

    s_flip = cos(v, u) - cos(v, flip(u))     # u statement, v quote
    q_flip = cos(u, v) - cos(u, flip(v))
    factor = min(1, exp(a * s_flip + b * q_flip - reference))
    score  = lexical score * factor

``a``, ``b`` and ``reference`` come from a logistic regression of SUPPORT vs
CONTRADICT on ``-log(lexical score)``, ``s_flip`` and ``q_flip`` over the
SciFact *train* split only (``bench/_support_auc.py --fit --write-head``):
``a`` and ``b`` are the contrast coefficients divided by the lexical one (so
they are in log-score units), and ``reference`` is the median of
``a * s_flip + b * q_flip`` over the supporting train pairs (the best of the
quartiles on train). They ship as numbers in ``data/support_head.json``, with
the name of the embedder they were fitted for: vectors of another model mean
something else, so with any other embedder the head does not apply and the
score is the lexical one.

The factor never exceeds 1: it can only lower a score, so every exact-fact
check of the lexical score (an added year, another name, a dropped "not")
still fails a claim on its own. The flip uses the lexical score's generic
opposite and negation lists; nothing is taken from any data set.
"""

from __future__ import annotations

import functools
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from actors.models import Embedder, FloatMatrix
from actors.text import stem

from ._support import _NEGATION_WORDS, _OPPOSITES, _OPPOSITES_TEXT, SupportScore, _polar

__all__ = [
    "DEFAULT_SUPPORT_HEAD_PATH",
    "EmbeddingSupport",
    "SupportHeadError",
    "SupportHeadWeights",
    "flip_polarity",
    "load_support_head",
]

DEFAULT_SUPPORT_HEAD_PATH = Path(__file__).parent / "data" / "support_head.json"
"""The shipped weights (fitted on SciFact train for MiniLM int8)."""

_FORMAT = "reactive-rag/support-head/1"


class SupportHeadError(ValueError):
    """The head's weights file is missing, unreadable or not a support-head file."""


@dataclass(frozen=True, slots=True)
class SupportHeadWeights:
    """The fitted numbers of the embedding factor (see the module docstring).

    ``model`` is the :attr:`~actors.models.Embedder.name` the weights were
    fitted with; ``fitted_on`` says which data (for humans, not checked).
    """

    model: str
    statement_flip: float
    quote_flip: float
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
            SupportHeadError: wrong format tag, missing field or non-finite number.
        """
        if data.get("format") != _FORMAT:
            raise SupportHeadError(
                f"{source}: not a support-head file (format {data.get('format')!r}, "
                f"expected {_FORMAT!r})")
        try:
            model = data["model"]
            numbers = {k: data[k] for k in ("statement_flip", "quote_flip", "reference")}
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


# --- the factor -----------------------------------------------------------------------


class EmbeddingSupport:
    """The embedding factor for one embedder, with a small vector cache.

    A verifier checks a few claims per run, so :meth:`prepare` embeds the four
    texts of every claim (statement, quote and their flips) in one batch call
    and keeps the vectors (LRU, ``cache_size`` texts): a repaired draft
    re-citing the same quotes costs nothing more. Thread-safe.

    Args:
        embedder: the embedder the weights were fitted for.
        weights: the fitted numbers (default: the shipped file).
        cache_size: vectors kept.

    Raises:
        SupportHeadError: ``embedder.name`` is not the model of ``weights``, or the
            default weights file is missing or corrupt.
    """

    def __init__(self, embedder: Embedder, weights: SupportHeadWeights | None = None, *,
                 cache_size: int = 1024) -> None:
        self.weights = weights if weights is not None else load_support_head()
        if embedder.name != self.weights.model:
            raise SupportHeadError(
                f"support-head weights are for {self.weights.model!r}, not {embedder.name!r}")
        if cache_size < 4:
            raise ValueError("cache_size must be >= 4 (one claim's texts)")
        self.embedder = embedder
        self._cache: OrderedDict[str, FloatMatrix] = OrderedDict()
        self._size = cache_size
        self._lock = threading.Lock()
        self.embedded = 0
        """Texts sent to the embedder so far (cache misses)."""

    @classmethod
    def for_embedder(cls, embedder: Embedder, weights: SupportHeadWeights | None = None
                     ) -> EmbeddingSupport | None:
        """The head for ``embedder``, or None when the weights are for another model.

        Raises:
            SupportHeadError: the default weights file is missing or corrupt.
        """
        w = weights if weights is not None else load_support_head()
        return cls(embedder, w) if embedder.name == w.model else None

    def prepare(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Embed, in one call, the texts of these (statement, quote) pairs not yet cached."""
        texts: list[str] = []
        for statement, quote in pairs:
            texts += [statement, quote, flip_polarity(statement), flip_polarity(quote)]
        with self._lock:
            todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if not todo:
            return
        vectors = np.asarray(self.embedder.embed_passages(todo), dtype=np.float32)
        if vectors.shape[0] != len(todo):
            raise ValueError(f"embedder returned {vectors.shape[0]} vectors for {len(todo)} texts")
        with self._lock:
            self.embedded += len(todo)
            for text, vec in zip(todo, vectors, strict=True):
                self._cache[text] = vec
                self._cache.move_to_end(text)
            while len(self._cache) > max(self._size, len(todo)):
                self._cache.popitem(last=False)

    def _vector(self, text: str) -> FloatMatrix:
        with self._lock:
            vec = self._cache.get(text)
            if vec is not None:
                self._cache.move_to_end(text)
                return vec
        # Evicted since prepare() by another thread's batch: embed it alone.
        row: FloatMatrix = np.asarray(self.embedder.embed_passages([text])[0], dtype=np.float32)
        with self._lock:
            self.embedded += 1
            self._cache[text] = row
        return row

    def contrasts(self, statement: str, quote: str) -> tuple[float, float]:
        """``(s_flip, q_flip)``: how much closer each side is to the other than to its flip."""
        self.prepare([(statement, quote)])
        u, v = self._vector(statement), self._vector(quote)
        uf, vf = self._vector(flip_polarity(statement)), self._vector(flip_polarity(quote))
        return float(v @ u - v @ uf), float(u @ v - u @ vf)

    def factor(self, statement: str, quote: str) -> float:
        """The multiplier (0..1] the lexical score gets for this pair."""
        s_flip, q_flip = self.contrasts(statement, quote)
        w = self.weights
        return min(1.0, math.exp(w.statement_flip * s_flip + w.quote_flip * q_flip
                                 - w.reference))

    def rescore(self, parts: SupportScore, statement: str, quote: str) -> SupportScore:
        """``parts`` with the factor applied (recorded as ``embedding_factor``)."""
        f = self.factor(statement, quote)
        return replace(parts, score=parts.score * f, embedding_factor=f)

