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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from actors.text import AskedPeriod
from streams import EvidenceChunk, Hit, SearchFilters

__all__ = [
    "Answerability",
    "AnswerabilityJudge",
    "FlaggedHit",
    "QuestionSimilarity",
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


@dataclass(frozen=True, slots=True)
class QuestionSimilarity:
    """How close each held passage is to the question, by the run's embedder.

    The final rerank measures it (``rerank.completed.similarity``); a judge fitted
    on one embedder's cosines uses them only when ``model`` is that embedder.
    """

    model: str
    scores: Mapping[str, float]  # chunk id -> cosine to the question


class AnswerabilityJudge(Protocol):
    """``(question, chosen evidence, all held evidence) -> Answerability``; pure.

    ``similarity`` is what the final rerank measured; the run passes it (by keyword)
    only when one did, so a judge must accept the keyword but never needs it.
    """

    def __call__(self, question: str, chosen: Sequence[EvidenceChunk],
                 held: Sequence[EvidenceChunk] = (), *,
                 similarity: QuestionSimilarity | None = None) -> Answerability: ...


def _listing(parts: Sequence[str], language: str = "en") -> str:
    if language == "zh":
        return "、".join(f"“{p}”" for p in parts)
    quoted = [f"'{p}'" for p in parts]
    if len(quoted) <= 1:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + " and " + quoted[-1]


def partial_note(judged: Answerability, language: str = "en") -> str:
    """The plain note under a partial answer: what was found, what is missing.

    ``language`` is the question's ("en" or "zh"): the note is read beside the answer.
    """
    if language == "zh":
        missing = _listing(judged.missing, "zh") or "问题的一部分"
        found = f"已涵盖{_listing(judged.covered, 'zh')}。" if judged.covered else ""
        return f"部分回答：找到的资料未涉及{missing}。{found}问题的其余部分此处未作回答。"
    missing = _listing(judged.missing) or "part of the question"
    found = f" It covers {_listing(judged.covered)}." if judged.covered else ""
    return (f"Partial answer: the sources found do not cover {missing}.{found} "
            "The rest of the question is not answered here.")


def limits_note(resource: str | None, language: str = "en") -> str:
    """The plain note under an answer the finalizer built when a budget ran out."""
    if language == "zh":
        what_zh = {"wall_clock": "时间", "tool_calls": "工具调用", "steps": "步数",
                   "tokens": "令牌", "read_tokens": "阅读"}.get(resource or "", "")
        return f"注意：以下内容基于{what_zh}预算用尽前找到的资料，可能不完整。"
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
