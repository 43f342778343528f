"""The seam between the pure run machine and every judgement of language it needs.

The machine (:mod:`reactive_rag.run`) decides *what to do*; whether evidence answers
a question, whether results look like spam or are too old, where sources disagree
and which sentences are a round's key points are judgements of *text*. They reach
the machine as one :class:`Judgement` value of typed callables, one per decision,
so the machine imports no implementation: :func:`reactive_rag.judgement.offline.offline_judgement`
builds today's rules, and a family
left ``None`` is switched off (the machine then proceeds as if nothing was found).
Every callable must be pure and deterministic: it runs inside the state machine,
and a resumed run replays it. Decisions a chat model makes (sufficiency, statement
support, follow-ups) go through actors and events instead (:mod:`._judges`), with these
rules as their hints and fallbacks.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from actors.rerank import Credibility
from streams import Conflict, ConflictDetected, EvidenceChunk, Hit, KeyPoint

from ._verdicts import AnswerabilityJudge, SpamVerdict, StaleVerdict
from ._whole_document import WholeDocumentCheck

__all__ = [
    "ConflictCheck",
    "FollowupRewriter",
    "Judgement",
    "PointCompressor",
    "Rewrite",
    "SpamCheck",
    "StaleCheck",
    "Turn",
]


class ConflictCheck(Protocol):
    """Where the writer's evidence ``ids`` disagree on what the question asks.

    Returns the events to announce and the conflicts to hand the writer.
    """

    def __call__(self, question: str, evidence: Mapping[str, EvidenceChunk],
                 ids: Sequence[str], credibility: Credibility | None = None,
                 ) -> tuple[tuple[ConflictDetected, ...], tuple[Conflict, ...]]: ...


class SpamCheck(Protocol):
    """Which of one search's results (or one opened page) are spam or mirrors."""

    def __call__(self, question: str, hits: Sequence[Hit], *,
                 credibility: Callable[[str], float | None] | None = None) -> SpamVerdict: ...


class StaleCheck(Protocol):
    """Whether every dated result is older than the period the question asks about."""

    def __call__(self, question: str, hits: Sequence[Hit],
                 today: dt.date) -> StaleVerdict | None: ...


@dataclass(frozen=True, slots=True)
class Turn:
    """One question of a conversation and what its run ended with."""

    run_id: str
    question: str
    standalone: str
    outcome: str
    answer: str = ""
    evidence: tuple[EvidenceChunk, ...] = ()
    """The chunks the answer cited, then the run's best others (capped): reusable later."""


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A question as asked, as read alone, and what each reference was taken to mean."""

    original: str
    standalone: str
    resolved: dict[str, str] = field(default_factory=dict)
    turns: tuple[str, ...] = ()
    """Run ids of the turns the references were resolved against."""

    @property
    def changed(self) -> bool:
        return self.standalone != self.original


class FollowupRewriter(Protocol):
    """A follow-up question read as a standalone one, against the conversation's turns."""

    def __call__(self, question: str, history: Sequence[Turn]) -> Rewrite: ...


class PointCompressor(Protocol):
    """A round's new evidence as a few key points for the planner (``compress_context``)."""

    def __call__(self, question: str, chunks: Sequence[EvidenceChunk],
                 round_: int) -> tuple[KeyPoint, ...]: ...


@dataclass(frozen=True, slots=True)
class Judgement:
    """The decisions a run's machine delegates, one per family; ``None`` switches one off.

    Attributes:
        sufficiency: does the chosen evidence answer every part of the question
            (before the writer is asked); off: the writer is always asked. Where a
            chat model judges sufficiency (an actor answering ``answerability.requested``:
            a model call cannot run inside the pure machine), this verdict is only its
            hint, and stands in when the model fails.
        conflicts: disagreements among the writer's evidence; off: none announced.
        spam: spam and mirror copies among web results; off: every result kept.
        stale: results older than the period asked about; off: never flagged.
        points: key points of each round's evidence; off: the planner sees no points.
        followups: a conversation's follow-up read as a standalone question (used by
            :mod:`reactive_rag.conversation`, not by the machine); off: asked as written.
        whole_document: which document, if any, a question asks for whole (used by the
            hand-off actor, which lists the collections' documents; not by the machine);
            off: no question is handed to the background summary task by the rules.
    """

    sufficiency: AnswerabilityJudge | None = None
    conflicts: ConflictCheck | None = None
    spam: SpamCheck | None = None
    stale: StaleCheck | None = None
    points: PointCompressor | None = None
    followups: FollowupRewriter | None = None
    whole_document: WholeDocumentCheck | None = None
