"""Sentence-aware chunking with overlap, keeping character offsets into the source."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._language import CJK_CHARS

__all__ = ["CHUNKING_VERSION", "TextChunk", "chunk_text", "split_sentences"]

CHUNKING_VERSION = "chunks-2"
"""Changes whenever :func:`chunk_text` cuts the same text differently (2: a manual's items
start chunks; CJK characters count as words; sentences end at 。！？；), so an index
re-chunks its documents instead of keeping chunks cut the old way."""

# A sentence ends at . ! ? (plus closing quotes/brackets) followed by whitespace,
# or at a blank line (paragraph break, headings, list items; see _PARAGRAPH).
# CJK text writes no space after a sentence: it ends after 。 and full-width ! ? ; (a run of
# them; the closing quotes/brackets that follow stay with it), whitespace or not.
_BOUNDARY = re.compile(
    r"(?<=[.!?])([\"'\u201d\u2019)\]]*)\s+"
    r"|(?<=[\u3002\uff01\uff1f\uff1b])([\u3002\uff01\uff1f\uff1b!?\u300d\u300f\u201d\u2019"
    r"\uff09\u3011\"')\]]*)\s*"
)
_PARAGRAPH = re.compile(r"\n[ \t]*\n")
# A word for sizing chunks: a run of non-space characters, or one CJK character (Chinese
# and Japanese write no spaces: a sentence of them is many words, not one).
_WORD = re.compile(rf"[{CJK_CHARS}]|[^\s{CJK_CHARS}]+")
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
    after ``。`` and full-width ``!?;`` with or without whitespace (CJK text writes
    none), but not after common abbreviations (``e.g.``, ``Dr.``, ``et al.``) or
    single initials.
    A code paragraph (one whose first line is indented by four or more spaces, the
    :func:`~actors.text.clean_markup` convention) is one span: a period inside code
    ends no sentence.
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
        stop = m.start() + len(m.group(1) or m.group(2) or "")
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


# --- where a document's structure starts a new item ---------------------------------
# Paragraphs (in the clean_markup convention) that open an item of a manual: a
# heading or definition term (a short one-line label ending with ":"), a
# parameter/option entry ("--name  what it does", "max_size: what it is"), a
# numbered list item. A long chunk is cut before them, so each chunk holds one
# item with its label at its start.
_LABEL = re.compile(r"\A[^\n]{1,120}:\Z")
_LABEL_MAX_WORDS = 12
# "For example:" and "as follows:" lead into what comes next; they label no new item.
_LEAD_IN = re.compile(
    r"\b(?:example|examples|e\.g|following|follows|below|such as|like this|instance)\b",
    re.IGNORECASE,
)
_ENTRY = re.compile(
    r"\A(?:"
    r"-{1,2}[A-Za-z0-9][\w-]*(?:[ =][<\[]?[\w.-]+[>\]]?)?(?:,\s*-{1,2}[\w-]+)*"  # --opt ARG
    r"(?:\s{2,}|\s+--?\s+|:\s+)"
    r"|[A-Za-z_$@][\w$@]*(?:[._=(<\[-][\w$@.=()<>\[\],*-]*)+(?:\s{2,}|\s+--?\s+|:\s+)"  # a.b: ...
    r"|[A-Z][A-Z0-9_]{2,}(?:\s{2,}|\s+--?\s+|:\s+)"  # NAME: ...
    r"|[A-Za-z_]\w*\s+--?\s+"  # name -- ...
    r")\S"
)
_NUMBERED = re.compile(r"\A\d{1,3}[.)]\s+\S")


def _item_starts(text: str) -> dict[int, bool]:
    """Offsets of the paragraphs of ``text`` that start a new structural item.

    True for a label (heading, term), False for an entry or a numbered item: a
    list's items are short and read together, so they only choose where a chunk
    that is already half full ends.
    """
    bounds = [0]
    for m in _PARAGRAPH.finditer(text):
        bounds.extend((m.start(), m.end()))
    bounds.append(len(text))
    paragraphs = [(bounds[k], bounds[k + 1]) for k in range(0, len(bounds), 2)]
    starts: dict[int, bool] = {}
    for n, (s, e) in enumerate(paragraphs):
        body = text[s:e]
        if body.lstrip("\n").startswith(("    ", "\t")):
            continue  # code
        para = body.strip()
        if not para:
            continue
        offset = s + len(body) - len(body.lstrip())
        has_next = any(text[a:b].strip() for a, b in paragraphs[n + 1 :])
        if _NUMBERED.match(para):
            starts[offset] = False  # a list item, even one that labels a sub-list
        elif "\n" not in para and _LABEL.match(para) and has_next and (
            len(para.split()) <= _LABEL_MAX_WORDS and not _LEAD_IN.search(para)
        ):
            starts[offset] = True
        elif _ENTRY.match(para):
            starts[offset] = False
    return starts


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

    Where the text's structure starts a new item (a heading or definition term,
    a parameter/option entry, a numbered list item; see ``_item_starts``) a
    chunk that already holds ``target_words // 8`` words (half ``target_words``
    before an entry or list item) ends before it, and the
    next chunk starts at the item with no overlap: a manual's parameters each get
    a chunk led by their own label instead of sharing one with their neighbours.
    Plain prose paragraphs have no such starts and chunk as before.

    Raises:
        ValueError: on sizes that cannot work (``max_words < target_words`` ...).
    """
    if target_words < 1 or max_words < target_words:
        raise ValueError("need 1 <= target_words <= max_words")
    if not 0.0 <= overlap_ratio < 0.5:
        raise ValueError("overlap_ratio must be in [0, 0.5)")
    overlap_words = round(target_words * overlap_ratio)

    min_words = {True: max(1, target_words // 8), False: max(1, target_words // 2)}
    starts = _item_starts(text)

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
            strong = starts.get(units[j][0])
            if strong is not None and count >= min_words[strong]:
                break  # a new item starts here: it leads the next chunk
            count += units[j][2]
            j += 1
        start, end = units[i][0], units[j - 1][1]
        chunks.append(TextChunk(text[start:end], len(chunks), start, end, count))
        if j >= len(units):
            break
        if units[j][0] in starts:
            i = j  # no overlap across items: the tail belongs to the previous one
            continue
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
