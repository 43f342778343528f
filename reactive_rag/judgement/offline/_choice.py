"""Which of two named things came first, without a model: compare the dates they are given.

"Who is older, A or B?" and "Which was founded first, A or B?" are answered
by one of the two names, and which one is an inference from the dates the
evidence gives each, not a quote. The first date of each thing's own
description (its first sentence that gives one, among the first few of its
chunk: a person's "(born 3 May 1960)", a band's "formed in 1995") is
compared here in code and written as a *lead* naming the one asked for first
("A: 3 May 1960, before B: 9 June 1975."), followed by the two
descriptions it rests on. Every word of the lead is a name, a date copied
from a quote, or a verdict word (:data:`~reactive_rag.judgement.offline._yes_no.LEAD_WORDS`).

No lead when either description or its date is missing, or the dates tie.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from actors.text import DateMention, date_mentions
from streams import Claim, EvidenceChunk

from ._yes_no import describe

__all__ = ["Choice", "answer_choice"]

# The question asks for the earlier one ("older", "born first") or the later one.
_EARLIER = re.compile(r"\b(?:older|oldest|first|earlier|earliest|sooner)\b", re.IGNORECASE)
_LATER = re.compile(r"\b(?:younger|youngest|later|latest|last|newer|newest|more\s+recent(?:ly)?)\b",
                    re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Choice:
    """The one of two named things the question asks for, the lead that says it, its quotes."""

    chosen: str
    lead: str
    claims: tuple[Claim, ...]


def _first_date(sentence: str) -> DateMention | None:
    """The most precise date ``sentence`` gives (a day over a month over a year), the
    earliest-placed of those; a decade is too coarse to order two things by."""
    dated = [d for d in date_mentions(sentence) if d.precision > 0]
    return min(dated, key=lambda d: (-d.precision, d.start)) if dated else None


def _claim(chunk: EvidenceChunk, span: tuple[int, int]) -> Claim:
    quote = chunk.text[span[0]:span[1]]
    return Claim(statement=" ".join(quote.split()), source_id=chunk.id, quote=quote)


def answer_choice(question: str, entities: Sequence[str],
                  evidence: Sequence[EvidenceChunk]) -> Choice | None:
    """Answer "which of A or B came first / is older / younger" from the dates given."""
    later = _LATER.search(question) is not None
    if len(entities) < 2 or not (later or _EARLIER.search(question)):
        return None
    a, b = entities[0], entities[1]
    def dated(sentence: str) -> int:
        return int(_first_date(sentence) is not None)

    found_a, found_b = describe(a, evidence, dated), describe(b, evidence, dated)
    if found_a is None or found_b is None or found_a[0].id == found_b[0].id:
        return None
    claims = (_claim(*found_a), _claim(*found_b))
    date_a, date_b = _first_date(claims[0].quote), _first_date(claims[1].quote)
    if date_a is None or date_b is None:
        return None
    # Compare only as precisely as both are written: a year against a full date is by year.
    precision = min(date_a.precision, date_b.precision)
    ka, kb = date_a.key[:precision], date_b.key[:precision]
    if ka == kb:
        return None
    first_is_a = (ka < kb) != later
    (name, date), (other, other_date) = ((a, date_a), (b, date_b))[:: 1 if first_is_a else -1]
    word = "after" if later else "before"
    lead = f"{name}: {date.text}, {word} {other}: {other_date.text}."
    ordered = claims if first_is_a else claims[::-1]
    return Choice(name, lead, ordered)
