"""Judgement: every decision about language a run needs, behind one typed seam.

This package holds the contracts only: the :class:`Judgement` bundle the run machine
consumes (sufficiency, conflicts, spam, staleness, key points), the typed verdicts,
and the planner and writer policy protocols. Implementations live below it and are
chosen by the engine's assembler: :mod:`reactive_rag.judgement.offline` (rules and
small fitted heads that run with no model server) and :mod:`reactive_rag.judgement.model`
(backed by a chat model). The machine never imports an implementation.
"""

from ._policy import (
    Decision,
    Draft,
    PlannerBase,
    PlannerHooks,
    PlannerPolicy,
    PlannerView,
    Rejection,
    WriterBase,
    WriterHooks,
    WriterPolicy,
    planner_context_tokens,
)
from ._seam import (
    ConflictCheck,
    FollowupRewriter,
    Judgement,
    PointCompressor,
    Rewrite,
    SpamCheck,
    StaleCheck,
    Turn,
)
from ._verdicts import (
    Answerability,
    AnswerabilityJudge,
    FlaggedHit,
    SpamKind,
    SpamVerdict,
    StaleVerdict,
    Verdict,
    limits_note,
    partial_note,
)

__all__ = [
    "Answerability",
    "AnswerabilityJudge",
    "ConflictCheck",
    "Decision",
    "Draft",
    "FlaggedHit",
    "FollowupRewriter",
    "Judgement",
    "PlannerBase",
    "PlannerHooks",
    "PlannerPolicy",
    "PlannerView",
    "PointCompressor",
    "Rejection",
    "Rewrite",
    "SpamCheck",
    "SpamKind",
    "SpamVerdict",
    "StaleCheck",
    "StaleVerdict",
    "Turn",
    "Verdict",
    "WriterBase",
    "WriterHooks",
    "WriterPolicy",
    "limits_note",
    "partial_note",
    "planner_context_tokens",
]
