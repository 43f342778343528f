"""Citation verification in code: every kept claim cites registered evidence that says it.

A model (or a buggy extractor) can cite an id it never saw, paraphrase a quote,
or quote the right words from the wrong chunk. None of that may reach a user as
a "verified" answer, so the checks here are deterministic string checks over
this run's registry, with an optional entailment model on top:

1. the ``source_id`` is registered in this run;
2. the quote is long enough to mean something (>= ``min_quote_words`` words,
   unless it is the whole of a short chunk);
3. the quote occurs in the cited chunk: exactly after normalising (NFKC,
   case-fold, quote marks, dashes, punctuation, whitespace), else fuzzily
   (best-matching window, rapidfuzz ``partial_ratio_alignment`` >= threshold);
   numbers, negations and capitalised names must match exactly even in a
   fuzzy match, because a changed year, a dropped "not" or another name is a
   different fact, not a typo;
4. if the quote fails in the cited chunk but occurs in another registered
   chunk, the error names that chunk ("quote found in X, not in Y") so a
   repair can fix the id instead of inventing a new quote;
5. with an :class:`EntailmentModel`, the quote must support the statement.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from rapidfuzz import fuzz

from streams import Claim, ClaimError, EvidenceChunk

__all__ = [
    "EntailmentModel",
    "EntailmentReport",
    "QuoteMatch",
    "Verification",
    "VerifyPolicy",
    "evaluate_entailment",
    "match_quote",
    "normalize_text",
    "verify",
]

# Quote marks, apostrophes, dashes and similar that writers (and models) swap
# freely; mapped to one ASCII form before comparing.
_CHAR_MAP = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u00b4": "'",
        "`": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u2026": "...",
    }
)
_TOKEN = re.compile(r"[^\W_]+")
_NUMBER = re.compile(r"\d")
# ("t" is the tail of "doesn't" and the like once punctuation splits words.)
_NEGATIONS = frozenset({"not", "no", "never", "nor", "none", "neither", "without", "t"})


def normalize_text(text: str) -> str:
    """Canonical form for quote matching: word tokens, case-folded, single-spaced.

    Punctuation (including quote marks and dashes) becomes a word break, so
    ``"It's  the \u201cbest\u201d"`` and ``it s the "best"`` compare equal;
    digits stay, so numbers still have to match.
    """
    text = unicodedata.normalize("NFKC", text).translate(_CHAR_MAP).casefold()
    return " ".join(_TOKEN.findall(text))


def _light(text: str) -> str:
    # Same characters, only case, quote marks and whitespace canonicalised:
    # an exact substring stays a substring even when it starts mid-word.
    return " ".join(unicodedata.normalize("NFKC", text).translate(_CHAR_MAP).casefold().split())


_RAW_WORD = re.compile(r"[^\W_]+")
_ELLIPSIS = re.compile(r"\s*(?:\[\s*(?:\.\s*){3}\]|\.\s*\.\s*\.|\u2026)\s*")


def _names(quote: str) -> list[str]:
    # Capitalised words after the first: proper names, which a fuzzy match
    # must not swap ("Gustave Eiffel" -> "Gustave Flaubert" is another fact).
    words = _RAW_WORD.findall(unicodedata.normalize("NFKC", quote))
    return [w.casefold() for w in words[1:] if w[:1].isupper() and not w.isupper()]


def _critical(tokens: Iterable[str]) -> list[str]:
    # Tokens a fuzzy match must not change: numbers and negations.
    return [t for t in tokens if _NUMBER.search(t) or t in _NEGATIONS]


@dataclass(frozen=True, slots=True)
class QuoteMatch:
    """How a quote matched a chunk: ``kind`` is ``"exact"``, ``"fuzzy"`` or ``"none"``."""

    kind: str
    score: float
    reason: str = ""

    @property
    def ok(self) -> bool:
        """Whether the quote counts as occurring in the chunk."""
        return self.kind != "none"


def match_quote(
    quote: str,
    chunk_text: str,
    *,
    fuzzy_threshold: float = 0.9,
    min_quote_words: int = 3,
) -> QuoteMatch:
    """Check that ``quote`` occurs in ``chunk_text`` (normalised exact, then fuzzy).

    Args:
        quote: the text a claim says it quotes.
        chunk_text: the cited chunk's text.
        fuzzy_threshold: minimum similarity (0..1) of the best-matching window.
        min_quote_words: shorter quotes are rejected unless they are the whole chunk.

    An elided quote ("A ... B") matches when each part does, in order.
    """
    whole = _match_one(quote, chunk_text, fuzzy_threshold, min_quote_words)
    if whole.ok:
        return whole  # the source itself may contain "..."
    parts = [p for p in _ELLIPSIS.split(quote) if normalize_text(p)]
    if len(parts) > 1:
        return _match_elided(parts, chunk_text, fuzzy_threshold, min_quote_words)
    return whole


def _match_elided(
    parts: list[str], chunk_text: str, fuzzy_threshold: float, min_quote_words: int
) -> QuoteMatch:
    total = sum(len(normalize_text(p).split()) for p in parts)
    if total < min_quote_words:
        return QuoteMatch("none", 0.0, f"quote too short ({total} words, need {min_quote_words})")
    c = normalize_text(chunk_text)
    kind, score, last = "exact", 1.0, -1
    for part in parts:
        m = _match_one(part, chunk_text, fuzzy_threshold, 2)
        if not m.ok:
            return QuoteMatch("none", m.score, f"elided quote part not found: {m.reason}")
        at = c.find(normalize_text(part))
        if m.kind == "exact" and at >= 0:
            if at < last:
                return QuoteMatch("none", m.score, "elided quote parts are out of order")
            last = at
        if m.kind == "fuzzy":
            kind = "fuzzy"
        score = min(score, m.score)
    return QuoteMatch(kind, score)


def _match_one(
    quote: str, chunk_text: str, fuzzy_threshold: float, min_quote_words: int
) -> QuoteMatch:
    q = normalize_text(quote)
    c = normalize_text(chunk_text)
    q_tokens = q.split()
    if not q_tokens:
        return QuoteMatch("none", 0.0, "empty quote")
    if len(q_tokens) < min_quote_words and q != c:
        return QuoteMatch(
            "none", 0.0, f"quote too short ({len(q_tokens)} words, need {min_quote_words})"
        )
    if f" {q} " in f" {c} " or _light(quote) in _light(chunk_text):
        return QuoteMatch("exact", 1.0)
    if not c:
        return QuoteMatch("none", 0.0, "quote not found in cited chunk")
    if len(q) > len(c):
        # partial_ratio would slide the *chunk* over the quote and forgive
        # everything the quote adds; a quote longer than its source must match whole.
        whole = fuzz.ratio(q, c) / 100.0
        if whole < fuzzy_threshold:
            return QuoteMatch("none", whole, "quote is longer than the cited chunk")
    align = fuzz.partial_ratio_alignment(q, c, score_cutoff=fuzzy_threshold * 100.0)
    if align is None:
        return QuoteMatch("none", 0.0, "quote not found in cited chunk")
    # Widen the aligned window to whole tokens (plus a little slack) before
    # comparing numbers and negations, so a window cut mid-number still counts.
    start = c.rfind(" ", 0, max(0, align.dest_start - 8)) + 1
    end = c.find(" ", min(len(c), align.dest_end + 8))
    window = c[start : (len(c) if end < 0 else end)].split()
    score = align.score / 100.0
    missing = [t for t in [*_critical(q_tokens), *_names(quote)] if t not in window]
    if missing:
        return QuoteMatch(
            "none", score, f"quote changes {', '.join(repr(t) for t in missing)} of the source"
        )
    # Whole tokens strictly inside the matched window (the edges may be cut).
    inner = c[align.dest_start : align.dest_end].split()[1:-1]
    q_set = set(q_tokens)
    dropped = [t for t in _critical(inner) if t not in q_set]
    if dropped:
        shown = "n't" if dropped[0] == "t" else dropped[0]
        return QuoteMatch("none", score, f"quote drops {shown!r} from the source")
    return QuoteMatch("fuzzy", score)


@runtime_checkable
class EntailmentModel(Protocol):
    """Scores how strongly ``premise`` supports ``hypothesis`` (0..1, higher = supports).

    No model ships offline (see MODELS.md); a user plugs in a model server or a
    local NLI model behind this protocol.
    """

    def score(self, premise: str, hypothesis: str) -> float:
        """Probability-like support score of ``hypothesis`` given ``premise``."""
        ...


@dataclass(frozen=True, slots=True)
class VerifyPolicy:
    """When a draft passes: >= ``min_kept`` claims kept, <= ``max_dropped_ratio`` dropped."""

    min_kept: int = 1
    max_dropped_ratio: float = 0.5

    def passes(self, kept: int, total: int) -> bool:
        """Apply the policy to ``kept`` of ``total`` claims."""
        if kept < self.min_kept or total == 0:
            return False
        return (total - kept) / total <= self.max_dropped_ratio


@dataclass(frozen=True, slots=True)
class Verification:
    """The verifier's verdict on one draft: claims kept, errors for the dropped ones."""

    kept: list[Claim]
    errors: list[ClaimError]
    total: int = 0
    policy: VerifyPolicy = field(default_factory=VerifyPolicy)
    kept_indices: tuple[int, ...] = ()

    @property
    def passed(self) -> bool:
        """Whether the draft may be committed (see :class:`VerifyPolicy`)."""
        return self.policy.passes(len(self.kept), self.total)

    @property
    def dropped(self) -> int:
        """How many claims failed a check."""
        return self.total - len(self.kept)


def _find_elsewhere(
    quote: str,
    cited: str,
    registry: Mapping[str, EvidenceChunk],
    *,
    fuzzy_threshold: float,
    min_quote_words: int,
) -> str | None:
    exact: str | None = None
    fuzzy: str | None = None
    for cid, chunk in registry.items():
        if cid == cited:
            continue
        m = match_quote(
            quote, chunk.text, fuzzy_threshold=fuzzy_threshold, min_quote_words=min_quote_words
        )
        if m.kind == "exact":
            exact = cid
            break
        if m.kind == "fuzzy" and fuzzy is None:
            fuzzy = cid
    return exact or fuzzy


def verify(
    claims: Sequence[Claim],
    registry: Mapping[str, EvidenceChunk],
    *,
    fuzzy_threshold: float = 0.9,
    entailment: EntailmentModel | None = None,
    entailment_threshold: float = 0.5,
    min_quote_words: int = 3,
    policy: VerifyPolicy | None = None,
) -> Verification:
    """Check every claim against this run's evidence registry.

    Args:
        claims: the draft's claims, in order (error indices refer to this order).
        registry: every chunk registered in this run, by id.
        fuzzy_threshold: minimum similarity of a quote's best window in its chunk.
        entailment: optional model; when given, the quote must support the statement.
        entailment_threshold: minimum entailment score.
        min_quote_words: quotes shorter than this are too weak to verify anything.
        policy: when the draft as a whole passes.

    Returns:
        The kept claims (in order) and one :class:`ClaimError` per dropped claim.
    """
    if not 0.0 < fuzzy_threshold <= 1.0:
        raise ValueError("fuzzy_threshold must be in (0, 1]")
    kept: list[Claim] = []
    kept_indices: list[int] = []
    errors: list[ClaimError] = []
    for index, claim in enumerate(claims):
        reason = _check(
            claim,
            registry,
            fuzzy_threshold=fuzzy_threshold,
            entailment=entailment,
            entailment_threshold=entailment_threshold,
            min_quote_words=min_quote_words,
        )
        if reason is None:
            kept.append(claim)
            kept_indices.append(index)
        else:
            errors.append(ClaimError(index=index, source_id=claim.source_id, reason=reason))
    return Verification(
        kept=kept,
        errors=errors,
        total=len(claims),
        policy=policy or VerifyPolicy(),
        kept_indices=tuple(kept_indices),
    )


def _check(
    claim: Claim,
    registry: Mapping[str, EvidenceChunk],
    *,
    fuzzy_threshold: float,
    entailment: EntailmentModel | None,
    entailment_threshold: float,
    min_quote_words: int,
) -> str | None:
    if not claim.statement.strip():
        return "empty statement"
    chunk = registry.get(claim.source_id)
    if chunk is None:
        where = _find_elsewhere(
            claim.quote,
            claim.source_id,
            registry,
            fuzzy_threshold=fuzzy_threshold,
            min_quote_words=min_quote_words,
        )
        hint = f" (quote found in {where})" if where else ""
        return f"unknown source id {claim.source_id!r}{hint}"
    m = match_quote(
        claim.quote, chunk.text, fuzzy_threshold=fuzzy_threshold, min_quote_words=min_quote_words
    )
    if not m.ok:
        if m.reason.startswith(("empty", "quote too short")):
            return m.reason
        where = _find_elsewhere(
            claim.quote,
            claim.source_id,
            registry,
            fuzzy_threshold=fuzzy_threshold,
            min_quote_words=min_quote_words,
        )
        if where is not None:
            return f"quote found in {where}, not in {claim.source_id}"
        return m.reason
    if entailment is not None:
        s = float(entailment.score(claim.quote, claim.statement))
        if s < entailment_threshold:
            return (
                "quote does not support the statement "
                f"(entailment {s:.2f} < {entailment_threshold:.2f})"
            )
    return None


# --- entailment evaluation ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EntailmentReport:
    """How well a model separates supporting from contradicting evidence (ROC AUC)."""

    n: int
    positives: int
    negatives: int
    auc: float
    path: str


def _default_data_dir() -> Path:
    env = os.environ.get("REACTIVE_RAG_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared" / "data"


def _auc(pos: Sequence[float], neg: Sequence[float]) -> float:
    # Mann-Whitney U with ties counted as half.
    wins = 0.0
    for p in pos:
        for q in neg:
            wins += 1.0 if p > q else 0.5 if p == q else 0.0
    return wins / (len(pos) * len(neg))


def evaluate_entailment(
    model: EntailmentModel,
    path: str | os.PathLike[str] | None = None,
    *,
    limit: int | None = None,
) -> EntailmentReport:
    """Measure ``model``'s AUC on SciFact claim/evidence pairs (SUPPORT vs CONTRADICT).

    Args:
        model: the entailment model to evaluate.
        path: the ``scifact_claim_evidence_nli.jsonl`` file; default: the shared data
            folder (``$REACTIVE_RAG_DATA`` or ``../shared/data`` beside the repo).
        limit: evaluate only the first ``limit`` pairs.

    Raises:
        FileNotFoundError: when the data file is not there.
        ValueError: when the file lacks either label.
    """
    file = (
        Path(path) if path is not None else _default_data_dir() / "scifact_claim_evidence_nli.jsonl"
    )
    if not file.is_file():
        raise FileNotFoundError(f"entailment evaluation data not found: {file}")
    pos: list[float] = []
    neg: list[float] = []
    with file.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            label = str(row.get("label", "")).upper()
            if label not in ("SUPPORT", "CONTRADICT"):
                continue
            premise = " ".join(str(e) for e in row.get("evidence", []))
            s = float(model.score(premise, str(row["claim"])))
            (pos if label == "SUPPORT" else neg).append(s)
            if limit is not None and len(pos) + len(neg) >= limit:
                break
    if not pos or not neg:
        raise ValueError(f"{file} needs both SUPPORT and CONTRADICT rows")
    return EntailmentReport(
        n=len(pos) + len(neg),
        positives=len(pos),
        negatives=len(neg),
        auc=_auc(pos, neg),
        path=str(file),
    )
