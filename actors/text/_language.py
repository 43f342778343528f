"""Which script a text is written in, and how CJK runs become words.

Chinese writes no spaces between words, so every tool that counts or matches
words (BM25, keyword coverage, dedup) needs the runs of Han characters cut into
words first. The cut comes from ``rjieba`` (jieba-rs, which ships its
dictionary: nothing is downloaded). Kana and Hangul runs are left whole: Korean
already separates words with spaces, and jieba's dictionary knows no Japanese.
"""

from __future__ import annotations

import functools
import re
from typing import Literal

__all__ = [
    "CJK_CHARS",
    "CJK_RUN",
    "CJK_SHARE",
    "HAN_RUN",
    "cjk_ngrams",
    "is_cjk_text",
    "segment_cjk",
    "text_language",
]

CJK_SHARE = 0.3
"""Share of CJK characters among letters from which a text counts as CJK: a Chinese
sentence that names a Latin-script product or person stays Chinese."""

CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
"""The CJK character ranges (kana, Han, Hangul) as a regex class body: the one definition
behind :data:`CJK`, :data:`CJK_RUN` and the chunker's word count."""

CJK_RUN = re.compile(f"[{CJK_CHARS}]+")
"""A run of CJK characters (kana, Han, Hangul)."""

HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
"""A run of Han characters: what the word segmenter cuts."""

Language = Literal["zh", "en"]


def is_cjk_text(text: str) -> bool:
    """True when CJK characters are at least 30% of the letters of ``text``.

    Letters are what ``str.isalpha`` accepts (Han characters included), so digits,
    punctuation and spaces do not dilute the share; a text with no letters is not CJK.
    """
    letters = cjk = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            if CJK_RUN.match(ch):
                cjk += 1
    return letters > 0 and cjk >= CJK_SHARE * letters


def text_language(text: str) -> Language:
    """``"zh"`` for a CJK text (:func:`is_cjk_text`), else ``"en"``: what answers are written in."""
    return "zh" if is_cjk_text(text) else "en"


@functools.lru_cache(maxsize=65536)
def _cut(run: str) -> tuple[str, ...]:
    import rjieba

    return tuple(w for w in rjieba.cut(run) if w.strip())


def segment_cjk(run: str) -> list[str]:
    """The words of one CJK run (jieba's precise mode for Han; other runs stay whole).

    ``run`` should be a match of :data:`CJK_RUN`; Han parts are cut by the dictionary,
    kana and Hangul parts are kept as one word each.
    """
    out: list[str] = []
    pos = 0
    for m in HAN_RUN.finditer(run):
        if m.start() > pos:
            out.append(run[pos:m.start()])
        out.extend(_cut(m.group()) if len(m.group()) > 1 else (m.group(),))
        pos = m.end()
    if pos < len(run):
        out.append(run[pos:])
    return out


def cjk_ngrams(run: str) -> list[str]:
    """Every character and every pair of adjacent characters of a CJK run.

    What BM25 indexes for CJK text: on the CMRC 2018 trial set (1,002 questions over
    256 paragraphs) BM25 recall@5 was 0.965 with these, 0.961 with bigrams alone and
    0.955 with jieba words: n-grams need no dictionary, so names jieba cuts apart
    still match.
    """
    if len(run) <= 1:
        return [run] if run else []
    return [*run, *(run[i:i + 2] for i in range(len(run) - 1))]
