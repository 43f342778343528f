"""Does an answer contain an expected ("gold") answer? One rule for ``eval`` and the benches.

A text contains a gold string when it holds it as whole words: not as part of a longer
number or word (``10`` is not in ``100``, ``sort`` not in ``sorted``, but ``%20`` is in
``%20Ni`` and ``Enum(`` in ``Enum(value``), compared case- and width-folded with runs of
whitespace made one space. Scripts written without spaces between words (Chinese,
Japanese; :data:`actors.text.CJK_RUN`) have no word edge to respect: ``盛大游戏`` is in
``由盛大游戏运营``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from actors.text import CJK_RUN

__all__ = ["contains_gold", "fold", "gold_pattern", "holds_gold"]


def fold(text: str) -> str:
    """NFKC, case folded, runs of whitespace made one space (what a reader would not tell apart)."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


#: What may not touch a gold string's edge of each kind: a digit extends a number, a
#: letter or ``_`` extends a word (``10`` is not in ``100``, ``sort`` not in ``sorted``).
_DIGIT, _WORD = r"\d", r"[^\W\d]"


def _edge(char: str) -> str | None:
    if char.isdigit():
        return _DIGIT
    if CJK_RUN.match(char):  # no spaces between words: any neighbour may be a word edge
        return None
    return _WORD if re.match(_WORD, char) else None


def gold_pattern(gold: str) -> re.Pattern[str] | None:
    """A folded gold string, not part of a longer number or word; None for a blank one.

    Search :func:`fold`-ed text with it (:func:`holds_gold`).
    """
    g = fold(gold)
    if not g:
        return None
    first, last = _edge(g[0]), _edge(g[-1])
    return re.compile((f"(?<!{first})" if first else "") + re.escape(g)
                      + (f"(?!{last})" if last else ""))


def holds_gold(folded_text: str, patterns: Iterable[re.Pattern[str] | None]) -> bool:
    """Whether already-folded text matches one of :func:`gold_pattern`'s patterns (compile
    the patterns once to search many texts)."""
    return any(p is not None and p.search(folded_text) for p in patterns)


def contains_gold(text: str, golds: Sequence[str]) -> bool:
    """``text`` holds a gold string as whole words (case, width and whitespace folded)."""
    return holds_gold(fold(text), map(gold_pattern, golds))
