"""Yes/no answers without a model: compare what the sources say about each named thing.

"Were A and B of the same nationality?" or "Are A and B both X?" is answered
by a word, and that word is an inference, not a quote. The inference is made
here in code from one description sentence per named thing, and written as a
*lead* ("Yes: both are American.") whose every content word occurs in the
quotes it rests on (the verifier checks that again), followed by the quotes.

The judge answers only what the evidence shows: "yes" when each thing's
description holds the asked property (or the same nationality), "no" when
both descriptions were found and they differ or one lacks it; no lead at all
when a description is missing, or when two descriptions share a place name
(places nest, so a shared city does not make the same district).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from actors.text import DEMONYMS, STOPWORDS, content_terms, split_sentences, tokenize
from streams import Claim, EvidenceChunk

from ._question import extract_entities

__all__ = ["LEAD_WORDS", "YesNo", "answer_yes_no", "describe"]

_SAME = re.compile(r"\bsame\s+([a-z]+)", re.IGNORECASE)
_BOTH = re.compile(r"\bboth\b", re.IGNORECASE)
_NATIONALITY = frozenset({"nationality", "country", "citizenship", "origin", "nation"})
LEAD_WORDS = frozenset({"yes", "no", "both", "same", "neither", "only", "are", "is", "not",
                         "while", "described", "as", "for", "before", "after"})
"""Words a lead may use that its quotes need not contain: they state the verdict."""


@dataclass(frozen=True, slots=True)
class YesNo:
    """A yes/no verdict, the lead sentence that says it, and the quotes it rests on."""

    verdict: Literal["yes", "no"]
    lead: str
    claims: tuple[Claim, ...]


def describe(entity: str, evidence: Sequence[EvidenceChunk],
             prefer: Callable[[str], int] | None = None,
             ) -> tuple[EvidenceChunk, tuple[int, int]] | None:
    """The sentence that describes ``entity``: in a chunk titled after it, else naming it.

    The first such sentence, or, with ``prefer``, the one of the first few
    (:data:`DESCRIPTION_SENTENCES`) of that chunk that ``prefer`` scores highest
    (the earliest on a tie): "X is a magazine. It was started in 1989." is
    described by its second sentence when the date is what is compared.
    """
    key = set(content_terms(entity))
    if not key:
        return None
    titled = [c for c in evidence if c.title and key <= set(content_terms(c.title))]
    naming = [c for c in evidence if c not in titled and key <= set(content_terms(c.text))]
    for chunk in [*titled, *naming]:
        found: list[tuple[int, int]] = []
        for start, end in split_sentences(chunk.text):
            sentence = chunk.text[start:end]
            about = chunk in titled or key <= set(content_terms(sentence))
            if about and len(tokenize(sentence)) >= 4:
                found.append((start, end))
                if prefer is None or len(found) >= DESCRIPTION_SENTENCES:
                    break
        if found:
            if prefer is None:
                return chunk, found[0]
            best = max(found, key=lambda span: (prefer(chunk.text[span[0]:span[1]]), -span[0]))
            return chunk, best
    return None


DESCRIPTION_SENTENCES = 3
"""How far into a thing's own chunk :func:`describe` looks for a preferred sentence."""


def _values(sentence: str, attribute: str, entities: Sequence[str]) -> set[str]:
    """What a description says of the attribute: nationality words, else the places and
    other names it gives (not the compared things' own names)."""
    words = tokenize(sentence)
    if attribute in _NATIONALITY:
        return {w for w in words if w in DEMONYMS}
    own = {t for e in entities for t in tokenize(e)}
    return {name for name in extract_entities(sentence)
            if not set(tokenize(name)) & own and not any(ch.isdigit() for ch in name)}


def _claim(chunk: EvidenceChunk, span: tuple[int, int]) -> Claim:
    quote = chunk.text[span[0]:span[1]]
    return Claim(statement=" ".join(quote.split()), source_id=chunk.id, quote=quote)


def answer_yes_no(question: str, entities: Sequence[str],
                  evidence: Sequence[EvidenceChunk]) -> YesNo | None:
    """Answer a two-thing yes/no question from the evidence, or None when it cannot say."""
    if len(entities) < 2:
        return None
    a, b = entities[0], entities[1]
    found_a, found_b = describe(a, evidence), describe(b, evidence)
    if found_a is None or found_b is None or found_a[0].id == found_b[0].id:
        return None
    claims = (_claim(*found_a), _claim(*found_b))
    sa, sb = claims[0].quote, claims[1].quote
    same = _SAME.search(question)
    if same is not None:
        attribute = same.group(1).lower()
        va, vb = _values(sa, attribute, entities), _values(sb, attribute, entities)
        if not va or not vb:
            return None
        shared = sorted(va & vb)
        if attribute in _NATIONALITY:
            if shared:
                return YesNo("yes", f"Yes: both are {shared[0].capitalize()}.", claims)
            return YesNo("no", f"No: {a} is {sorted(va)[0].capitalize()}, while {b} is "
                               f"{sorted(vb)[0].capitalize()}.", claims)
        if shared:
            return None  # places nest ("a district of a city"): sharing one proves nothing
        return YesNo("no", f"No: {sorted(va)[0]} for {a}, while {sorted(vb)[0]} for {b}.",
                     claims)
    if _BOTH.search(question) or _joined(question, a, b):
        # "Are A and B both X?", and "Are A and B X?", which asks the same of each.
        named = {t for e in entities for t in content_terms(e)}
        wanted = [w for w in tokenize(question)
                  if w not in STOPWORDS and w not in LEAD_WORDS and content_terms(w)
                  and content_terms(w)[0] not in named and w not in _QUESTION_WORDS
                  and w not in _LINKING]
        if not wanted:
            return None
        stems = {content_terms(w)[0] for w in wanted}

        def covers(sentence: str) -> int:
            return len(stems & set(content_terms(sentence)))

        # The sentence of each description that says most of the asked property.
        found_a, found_b = describe(a, evidence, covers), describe(b, evidence, covers)
        if found_a is None or found_b is None or found_a[0].id == found_b[0].id:
            return None
        claims = (_claim(*found_a), _claim(*found_b))
        sa, sb = claims[0].quote, claims[1].quote
        has_a = [w for w in wanted if content_terms(w)[0] in set(content_terms(sa))]
        has_b = [w for w in wanted if content_terms(w)[0] in set(content_terms(sb))]
        if has_a and has_b and len(has_a) == len(has_b) == len(wanted):
            return YesNo("yes", f"Yes: both are described as {' '.join(wanted)}.", claims)
        if has_a and not has_b:
            return YesNo("no", f"No: only {a} is described as {' '.join(has_a)}.", claims)
        if has_b and not has_a:
            return YesNo("no", f"No: only {b} is described as {' '.join(has_b)}.", claims)
    return None


def _joined(question: str, a: str, b: str) -> bool:
    """The question names ``a`` and ``b`` joined by "and" ("Are A and B X?")."""
    pattern = rf"{re.escape(a)}\W*\s+and\s+{re.escape(b)}"
    return re.search(pattern, question, re.IGNORECASE) is not None


# Words that only link a thing to the property asked about ("both located in X"):
# a description says "a city in X" without them.
_LINKING = frozenset(["located", "situated", "based", "considered", "known", "classified",
                      "regarded", "listed", "called", "named", "found"])
_QUESTION_WORDS = frozenset(
    [
        "are", "were", "is", "was", "do", "does", "did", "have", "has", "had", "can", "could",
        "would", "should", "will",
    ]
)
