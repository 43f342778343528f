"""Judgement: every decision about language a run needs, behind one typed seam.

This package holds the contracts only: the :class:`Judgement` bundle the run machine
consumes (sufficiency, conflicts, spam, staleness, key points), the typed verdicts,
the planner and writer policy protocols, and the model judges' protocols (support,
sufficiency). Implementations live below it and are
chosen by the engine's assembler: :mod:`reactive_rag.judgement.offline` (rules and
small fitted heads that run with no model server) and :mod:`reactive_rag.judgement.model`
(backed by a chat model). The machine never imports an implementation.
"""

from ._judges import (
    JudgeError,
    ModelAnswerability,
    ModelRewriter,
    SufficiencyJudge,
    SupportItem,
    SupportJudge,
    SupportLabel,
    SupportVerdict,
)
from ._policy import (
    Decision,
    Draft,
    ModelBacked,
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
    QuestionSimilarity,
    SpamKind,
    SpamVerdict,
    StaleVerdict,
    Verdict,
    limits_note,
    partial_note,
)
from ._whole_document import (
    DocumentRef,
    WholeDocumentCheck,
    WholeDocumentJudge,
    WholeDocumentRequest,
)

__all__ = [
    "Answerability",
    "AnswerabilityJudge",
    "ConflictCheck",
    "Decision",
    "DocumentRef",
    "Draft",
    "FlaggedHit",
    "FollowupRewriter",
    "JudgeError",
    "Judgement",
    "ModelAnswerability",
    "ModelBacked",
    "ModelRewriter",
    "PlannerBase",
    "PlannerHooks",
    "PlannerPolicy",
    "PlannerView",
    "PointCompressor",
    "QuestionSimilarity",
    "Rejection",
    "Rewrite",
    "SpamCheck",
    "SpamKind",
    "SpamVerdict",
    "StaleCheck",
    "StaleVerdict",
    "SufficiencyJudge",
    "SupportItem",
    "SupportJudge",
    "SupportLabel",
    "SupportVerdict",
    "Turn",
    "Verdict",
    "WholeDocumentCheck",
    "WholeDocumentJudge",
    "WholeDocumentRequest",
    "WriterBase",
    "WriterHooks",
    "WriterPolicy",
    "limits_note",
    "partial_note",
    "planner_context_tokens",
]
