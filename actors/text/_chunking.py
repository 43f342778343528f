"""Sentence-aware chunking with overlap, keeping character offsets into the source."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["TextChunk", "chunk_text", "split_sentences"]

# A sentence ends at . ! ? (plus closing quotes/brackets) followed by whitespace,
# or at a blank line (paragraph break, headings, list items; see _PARAGRAPH).
_BOUNDARY = re.compile(r"(?<=[.!?])([\"'\u201d\u2019)\]]*)\s+")
_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_WORD = re.compile(r"\S+")
_ABBREV_TEXT = (
    "e.g i.e etc vs cf al fig figs eq eqs no nos vol dr mr mrs ms prof st jr sr inc ltd co "
    "approx resp ca"
)
_ABBREV = frozenset(_ABBREV_TEXT.split())


@dataclass(frozen=True, slots=True)
class TextChunk:
    """One chunk: ``text == source[start:end]``; ``position`` counts chunks from 0.

    Neighbours are ``position - 1`` and ``position + 1`` of the same document;
    the indexer turns them into prev/next chunk ids.
    """

    text: str
    position: int
    start: int
    end: int
    word_count: int


def split_sentences(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` character spans of the sentences of ``text`` (whitespace trimmed).

    Rule based (no model): splits after ``.``/``!``/``?`` and at blank lines,
    but not after common abbreviations (``e.g.``, ``Dr.``, ``et al.``) or
    single initials. A code paragraph (one whose first line is indented by four
    or more spaces, the :func:`~actors.text.clean_markup` convention) is one
    span: a period inside code ends no sentence.
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _PARAGRAPH.finditer(text):
        _add_paragraph(text, start, m.start(), spans)
        start = m.end()
    _add_paragraph(text, start, len(text), spans)
    return spans


def _add_paragraph(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    line_start = text.rfind("\n", 0, start) + 1
    first = text[line_start:end].lstrip("\n")
    if first.startswith(("    ", "\t")) and first.strip():
        _add_span(text, start, end, spans)
        return
    for m in _BOUNDARY.finditer(text, start, end):
        stop = m.start() + len(m.group(1) or "")
        if text[m.start() - 1] == "." and "\n" not in m.group() and (
            _is_abbreviation(text, m.start()) or _is_item_number(text, start, m.start())
        ):
            continue
        _add_span(text, start, stop, spans)
        start = m.end()
    _add_span(text, start, end, spans)


def _is_item_number(text: str, start: int, dot_end: int) -> bool:
    """ "2. Mix the dough": a list item's number at the start of a line, not a sentence."""
    line_start = max(start, text.rfind("\n", 0, dot_end) + 1)
    return text[line_start : dot_end - 1].strip().isdigit() and dot_end - 1 - line_start <= 4


def _is_abbreviation(text: str, dot_end: int) -> bool:
    i = dot_end - 1
    j = i
    while j > 0 and not text[j - 1].isspace():
        j -= 1
    word = text[j:i].lower().lstrip("(\"'")
    return word in _ABBREV or (len(word) == 1 and word.isalpha()) or "." in word


def _add_span(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        spans.append((start, end))


def chunk_text(
    text: str,
    *,
    target_words: int = 220,
    overlap_ratio: float = 0.1,
    max_words: int = 300,
) -> list[TextChunk]:
    """Split ``text`` into chunks of about ``target_words`` words, sentence-aligned.

    Consecutive chunks share their boundary sentences (about ``overlap_ratio``
    of ``target_words``) so a fact straddling a boundary is whole in at least
    one chunk. A chunk never ends mid-sentence unless that sentence alone is
    longer than ``max_words``; such a sentence is cut into word windows.

    Raises:
        ValueError: on sizes that cannot work (``max_words < target_words`` ...).
    """
    if target_words < 1 or max_words < target_words:
        raise ValueError("need 1 <= target_words <= max_words")
    if not 0.0 <= overlap_ratio < 0.5:
        raise ValueError("overlap_ratio must be in [0, 0.5)")
    overlap_words = round(target_words * overlap_ratio)

    # Units: (start, end, words) — sentences, long ones cut into word windows.
    units: list[tuple[int, int, int]] = []
    for s, e in split_sentences(text):
        # pattern.finditer(text, pos, endpos) already reports positions in ``text``
        words = [m.span() for m in _WORD.finditer(text, s, e)]
        if len(words) <= max_words:
            units.append((s, e, len(words)))
            continue
        step = max(1, target_words - overlap_words)
        for i in range(0, len(words), step):
            window = words[i : i + target_words]
            units.append((window[0][0], window[-1][1], len(window)))
            if i + target_words >= len(words):
                break

    chunks: list[TextChunk] = []
    i = 0
    while i < len(units):
        j = i
        count = 0
        while j < len(units) and (count == 0 or count + units[j][2] <= target_words):
            count += units[j][2]
            j += 1
        start, end = units[i][0], units[j - 1][1]
        chunks.append(TextChunk(text[start:end], len(chunks), start, end, count))
        if j >= len(units):
            break
        # Next chunk starts with the tail sentences of this one: at least
        # ``overlap_words`` if whole sentences allow, at most twice that, and
        # always making progress past ``i``.
        k = j
        tail = 0
        while k - 1 > i and tail < overlap_words and tail + units[k - 1][2] <= 2 * overlap_words:
            k -= 1
            tail += units[k][2]
        i = k
    return chunks
