"""The typed verdicts the machine acts on: answerability, spam and staleness.

Answerability is the verdict before the machine asks the writer.

A run may hold real, correctly quoted text that does not answer the question
(a page about another country, a function with a similar name). Calling that
"answered" is as wrong as inventing a quote, so the machine asks a judge
whether the chosen evidence covers every part of the question, and acts on
the typed verdict: write, search for the missing part, write a partial
answer that says what is missing, or end with ``no_evidence``.

The judge is injected (like the evidence selector): it must be pure and
deterministic, because it runs inside the state machine.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from actors.text import AskedPeriod
from streams import EvidenceChunk, Hit, SearchFilters

__all__ = [
    "Answerability",
    "AnswerabilityJudge",
    "FlaggedHit",
    "SpamKind",
    "SpamVerdict",
    "StaleVerdict",
    "Verdict",
    "limits_note",
    "partial_note",
]

Verdict = Literal["answerable", "partial", "unanswerable"]
SpamKind = Literal["stuffing", "echo", "boilerplate", "mirror"]


@dataclass(frozen=True, slots=True)
class Answerability:
    """Whether the chosen evidence answers the question, part by part.

    Attributes:
        verdict: ``answerable`` only when every part is covered.
        answer_type: what the question asks for (``who``, ``when``, ``how_to``...).
        covered: the parts of the question the evidence covers (entities, terms, the answer).
        missing: the parts it does not cover, in words a user can read.
        reason: one plain sentence saying why.
        searches: queries that could find the missing parts (the agent runs them once).
        extra_ids: held chunks outside the writer's pick that cover a missing part;
            the machine adds them to the writer's evidence.
    """

    verdict: Verdict
    answer_type: str = ""
    covered: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    reason: str = ""
    searches: tuple[str, ...] = ()
    extra_ids: tuple[str, ...] = ()


AnswerabilityJudge = Callable[[str, Sequence[EvidenceChunk], Sequence[EvidenceChunk]],
                              Answerability]
"""``(question, chosen evidence, all held evidence) -> Answerability``; pure."""


def _listing(parts: Sequence[str]) -> str:
    quoted = [f"'{p}'" for p in parts]
    if len(quoted) <= 1:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + " and " + quoted[-1]


def partial_note(judged: Answerability) -> str:
    """The plain note under a partial answer: what was found, what is missing."""
    missing = _listing(judged.missing) or "part of the question"
    found = f" It covers {_listing(judged.covered)}." if judged.covered else ""
    return (f"Partial answer: the sources found do not cover {missing}.{found} "
            "The rest of the question is not answered here.")


def limits_note(resource: str | None) -> str:
    """The plain note under an answer the finalizer built when a budget ran out."""
    what = {"wall_clock": "time", "tool_calls": "tool-call", "steps": "step",
            "tokens": "token", "read_tokens": "reading"}.get(resource or "", "")
    budget = f"the {what} budget" if what else "the budget"
    return (f"Note: based on what was found before {budget} ran out; "
            "it may be incomplete.")


@dataclass(frozen=True, slots=True)
class FlaggedHit:
    """One result the run should not use as it came, and why (for people to read)."""

    url: str
    host: str
    kind: SpamKind
    reason: str
    original: str = ""  # a mirror's kept copy (its URL)


@dataclass(frozen=True, slots=True)
class SpamVerdict:
    """What :func:`spam_flags` found in one search's results, best-ranked first.

    Attributes:
        flagged: every flagged result, spam and mirrors, in result order.
        hosts: hosts of spam results with no clean result in the same search:
            candidates for ``SearchFilters.exclude_sites`` (one bad page on a big
            site does not condemn the site).
    """

    flagged: tuple[FlaggedHit, ...] = ()
    hosts: tuple[str, ...] = ()

    @property
    def spam(self) -> tuple[FlaggedHit, ...]:
        """Stuffed and boilerplate results: to drop and report."""
        return tuple(f for f in self.flagged if f.kind != "mirror")

    @property
    def mirrors(self) -> tuple[FlaggedHit, ...]:
        """Copies of a kept result on other hosts: to drop quietly."""
        return tuple(f for f in self.flagged if f.kind == "mirror")

    @property
    def urls(self) -> tuple[str, ...]:
        """URLs of the spam results (what ``ResultsFlagged(kind="spam").urls`` lists)."""
        return tuple(f.url for f in self.spam)

    @property
    def mirror_urls(self) -> tuple[str, ...]:
        """URLs of the mirror copies."""
        return tuple(f.url for f in self.mirrors)

    @property
    def dropped(self) -> frozenset[str]:
        """Every flagged URL: the results not to use."""
        return frozenset(f.url for f in self.flagged)

    @property
    def reasons(self) -> dict[str, str]:
        """Reason per flagged URL."""
        return {f.url: f.reason for f in self.flagged}

    @property
    def reason(self) -> str:
        """One line about the spam for the planner and the log ("" when there is none)."""
        spam = self.spam
        if not spam:
            return ""
        parts = "; ".join(f"{f.host or f.url}: {f.reason}" for f in spam[:3])
        more = f"; and {len(spam) - 3} more" if len(spam) > 3 else ""
        noun = "result looks" if len(spam) == 1 else "results look"
        return f"{len(spam)} {noun} like spam or a content farm ({parts}{more})"

    def clean(self, hits: Sequence[Hit]) -> list[Hit]:
        """``hits`` without the flagged ones, in order."""
        dropped = self.dropped
        return [h for h in hits if h.url not in dropped]


@dataclass(frozen=True, slots=True)
class StaleVerdict:
    """Every dated result is older than the period the question asks about.

    Attributes:
        period: the period asked about.
        filters: the suggested filter: ``date_from`` only, because pages about
            a period are mostly written during or after it (a ``date_to`` would
            drop the retrospectives that answer "who won last year?").
        urls: the dated results, all too old.
        newest: the newest publication date among them.
        undated: how many results had no usable date (they count neither way).
        reason: one line for the planner and the log.
    """

    period: AskedPeriod
    filters: SearchFilters
    urls: tuple[str, ...]
    newest: dt.date
    undated: int
    reason: str
