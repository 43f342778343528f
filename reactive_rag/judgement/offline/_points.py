"""Context compression: each round's new evidence as a few key points with back-references.

After a round, the planner need not read every chunk the round brought: it
sees at most :data:`MAX_POINTS` *key points*, each at most about
:data:`POINT_WORDS` words, taken from the sentences of the new chunks that best
cover the question and carry facts (numbers, dates, capitalised names). Each
point names the registered chunks it came from, so a ``recall`` tool call can
bring them back in full (the run answers it from its registry: no I/O).

Extractive and deterministic (regexes, stems, set algebra): it runs inside the
pure state machine.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from actors.text import CAPITALISED_NAME, content_terms, split_sentences
from streams import EvidenceChunk, KeyPoint

__all__ = ["MAX_POINTS", "POINT_WORDS", "KeyPoint", "compress_round",
           "protected_spans", "trim_words"]

MAX_POINTS = 5  # new points per round
POINT_WORDS = 50  # words per point (a little more only to keep a name or a number whole)
_SLACK = 8  # words a point may run over to keep a protected span whole

_MONTHS = (r"(?:January|February|March|April|May|June|July|August|September|October|"
           r"November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.?")
# Dates first (they contain numbers), then numbers with their unit-ish tail, then names.
_DATE = re.compile(
    rf"\b(?:\d{{1,2}}\s+{_MONTHS}\s+\d{{3,4}}|{_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{3,4}}"
    rf"|{_MONTHS}\s+\d{{3,4}}|\d{{4}}-\d{{2}}-\d{{2}}|\d{{1,2}}/\d{{1,2}}/\d{{2,4}})\b"
)
_NUMBER = re.compile(r"(?<![\w.])[$€£]?\d[\d,.]*(?:\s*(?:%|percent|million|billion|thousand))?")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class _Sentence:
    text: str
    terms: frozenset[str]
    facts: int
    order: tuple[int, int]  # (chunk arrival, sentence position): ties keep reading order
    chunk_id: str


def protected_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of dates, numbers and capitalised names: never cut inside one."""
    spans: list[tuple[int, int]] = []
    for rx in (_DATE, _NUMBER, CAPITALISED_NAME):
        for m in rx.finditer(text):
            s, e = m.start(), m.end()
            while e > s and text[e - 1] in ".,;:":
                e -= 1
            if e > s and not any(a < e and s < b for a, b in spans):
                spans.append((s, e))
    return sorted(spans)


def _facts(text: str) -> int:
    """Dates, numbers and names in a sentence (a name that opens it counts only if it is long)."""
    count = 0
    for s, e in protected_spans(text):
        piece = text[s:e]
        if piece[:1].isupper() and s == 0 and " " not in piece:
            continue  # a capitalised first word is usually just the start of a sentence
        count += 1
    return count


def trim_words(text: str, wanted: frozenset[str], limit: int = POINT_WORDS) -> str:
    """``text`` cut to about ``limit`` words around what best covers ``wanted`` stems.

    The cut never falls inside a date, a number or a name (the window grows by
    a few words, or shrinks, to the edge of one). A cut end is marked with "…"
    glued to the neighbouring word, so the point keeps its word count.
    """
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    if len(words) <= limit:
        return _SPACE.sub(" ", text).strip()
    spans = protected_spans(text)

    def inside(pos: int) -> tuple[int, int] | None:
        return next(((a, b) for a, b in spans if a < pos < b), None)

    def word_index(pos: int) -> int:
        return next(i for i, (s, e) in enumerate(words) if s <= pos < e or s >= pos)

    gain = [len(wanted & set(content_terms(text[s:e]))) + (1 if inside(s + 1) else 0)
            for s, e in words]
    best, best_i = -1, 0
    for i in range(len(words) - limit + 1):
        score = sum(gain[i:i + limit])
        if score > best:
            best, best_i = score, i
    start, end = best_i, best_i + limit  # words[start:end]
    # widen (a little) or narrow to the edges of any protected span the cut falls in
    span = inside(words[start][0])
    if span is not None:
        first = word_index(span[0])
        start = first if start - first <= _SLACK else word_index(span[1])
    if end < len(words):
        span = inside(words[end - 1][1])
        if span is not None:
            last = max(i for i, (s, _) in enumerate(words) if s < span[1]) + 1
            end = last if last - end <= _SLACK else word_index(span[0])
    end = max(end, start + 1)
    piece = _SPACE.sub(" ", text[words[start][0]:words[end - 1][1]]).strip()
    if start > 0:
        piece = "\u2026" + piece
    if end < len(words):
        piece += "\u2026"
    return piece


def _sentences(chunks: Sequence[EvidenceChunk]) -> list[_Sentence]:
    out: list[_Sentence] = []
    for n, chunk in enumerate(chunks):
        text = chunk.text
        for k, (s, e) in enumerate(split_sentences(text) or [(0, len(text))]):
            sentence = _SPACE.sub(" ", text[s:e]).strip()
            if len(sentence.split()) < 3:
                continue
            out.append(_Sentence(sentence, frozenset(content_terms(sentence)), _facts(sentence),
                                 (n, k), chunk.id))
    return out


def _score(sentence: _Sentence, question_terms: frozenset[str],
           title_terms: frozenset[str]) -> float:
    if not question_terms:
        return min(sentence.facts, 4) * 0.2
    have = sentence.terms | title_terms
    cover = (len(question_terms & sentence.terms)
             + 0.5 * len(question_terms & (have - sentence.terms))) / len(question_terms)
    return cover + 0.15 * min(sentence.facts, 4)


def compress_round(question: str, chunks: Sequence[EvidenceChunk], round_: int, *,
                   max_points: int = MAX_POINTS, max_words: int = POINT_WORDS,
                   prefix: str = "k") -> tuple[KeyPoint, ...]:
    """At most ``max_points`` key points of ``chunks`` (a round's new evidence), best first.

    A point is one sentence (trimmed to about ``max_words`` words by
    :func:`trim_words`) that covers the question and carries facts; a sentence
    that several chunks share (overlapping chunks, mirrored pages) is one point
    citing all of them. Points spread over chunks: a chunk's second point must
    beat every other chunk's first. A point repeating an earlier one (mostly
    the same words) is skipped. Ids are ``{prefix}{round}-{n}``.
    """
    chunks = [c for c in chunks if c.text.strip()]
    if not chunks or max_points <= 0:
        return ()
    q_terms = frozenset(content_terms(question))
    titles = {c.id: frozenset(content_terms(c.title)) for c in chunks}
    by_text: dict[str, list[str]] = {}
    unique: list[_Sentence] = []
    for s in _sentences(chunks):
        key = s.text.casefold()
        if key in by_text:
            if s.chunk_id not in by_text[key]:
                by_text[key].append(s.chunk_id)
            continue
        by_text[key] = [s.chunk_id]
        unique.append(s)
    scored = sorted(unique, key=lambda s: (-_score(s, q_terms, titles[s.chunk_id]), s.order))
    picked: list[_Sentence] = []
    per_chunk: dict[str, int] = {}
    # two passes: first the best sentence of each chunk, then seconds (spread before depth)
    for allowed in (1, 2):
        for s in scored:
            if len(picked) >= max_points:
                break
            if s in picked or per_chunk.get(s.chunk_id, 0) >= allowed:
                continue
            if q_terms and not q_terms & (s.terms | titles[s.chunk_id]):
                continue  # about something else: no point, whatever facts it holds
            if any(_redundant(s.terms, p.terms) for p in picked):
                continue
            picked.append(s)
            per_chunk[s.chunk_id] = per_chunk.get(s.chunk_id, 0) + 1
    return tuple(
        KeyPoint(id=f"{prefix}{round_}-{n}", text=trim_words(s.text, q_terms, max_words),
                 chunk_ids=tuple(by_text[s.text.casefold()]), round=round_)
        for n, s in enumerate(picked, 1))


def _redundant(a: frozenset[str], b: frozenset[str]) -> bool:
    if not a or not b:
        return False
    return len(a & b) / len(a | b) >= 0.7
