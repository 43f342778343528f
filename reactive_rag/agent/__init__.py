"""The agent's brains and their host actors: planner, writer, verifier policies.

Offline defaults (no model server): :class:`OfflinePlanner` (query expansion,
multi-hop bridges, read-on), :class:`ExtractiveWriter` (quotes are exact
sentences) and :func:`verify` (registry and quote checks in code). Chat-model
policies plug in through the same protocols.
"""

from ._actors import (
    LoopCheck,
    LoopVerdictLike,
    PlannerActor,
    SelectorActor,
    VerificationLike,
    VerifierActor,
    VerifyFunction,
    WriterActor,
    render_answer,
)
from ._answerability import QuestionNeeds, analyse_question, judge_answerability
from ._chat_entailment import DEFAULT_ENTAILMENT_PROMPT, ChatEntailment, EntailmentError
from ._chat_planner import (
    DEFAULT_PLANNER_PROMPT,
    PLANNER_TOOLS,
    ChatPlanner,
    ScopeCheck,
    default_scope,
)
from ._chat_writer import DEFAULT_WRITER_PROMPT, ChatWriter, parse_claims
from ._evidence_pick import select_evidence
from ._extractive_writer import ExtractiveWriter
from ._loop_guard import LoopGuard, LoopVerdict, normalize_query
from ._offline_planner import OfflinePlanner
from ._policy import (
    Decision,
    Draft,
    PlannerPolicy,
    PlannerView,
    Rejection,
    WriterPolicy,
)
from ._question import desubjectivize, extract_entities, question_entities
from ._support import DEFAULT_SUPPORT_WEIGHTS, SupportScore, SupportWeights, support_score
from ._support_head import (
    DEFAULT_SUPPORT_HEAD_PATH,
    EmbeddingSupport,
    HeadFeatures,
    SupportHeadError,
    SupportHeadWeights,
    flip_polarity,
    head_features,
    load_support_head,
    polarity_flips,
)
from ._verifier import (
    DEFAULT_SUPPORT_THRESHOLD,
    AsyncEntailmentModel,
    EntailmentModel,
    QuoteMatch,
    Verification,
    VerifyPolicy,
    bearing_on_question,
    match_quote,
    normalize_text,
    verify,
    verify_async,
)

__all__ = [
    "DEFAULT_ENTAILMENT_PROMPT",
    "DEFAULT_PLANNER_PROMPT",
    "DEFAULT_SUPPORT_HEAD_PATH",
    "DEFAULT_SUPPORT_THRESHOLD",
    "DEFAULT_SUPPORT_WEIGHTS",
    "DEFAULT_WRITER_PROMPT",
    "PLANNER_TOOLS",
    "AsyncEntailmentModel",
    "ChatEntailment",
    "ChatPlanner",
    "ChatWriter",
    "Decision",
    "Draft",
    "EmbeddingSupport",
    "EntailmentError",
    "EntailmentModel",
    "ExtractiveWriter",
    "HeadFeatures",
    "LoopCheck",
    "LoopGuard",
    "LoopVerdict",
    "LoopVerdictLike",
    "OfflinePlanner",
    "PlannerActor",
    "PlannerPolicy",
    "PlannerView",
    "QuestionNeeds",
    "QuoteMatch",
    "Rejection",
    "ScopeCheck",
    "SelectorActor",
    "SupportHeadError",
    "SupportHeadWeights",
    "SupportScore",
    "SupportWeights",
    "Verification",
    "VerificationLike",
    "VerifierActor",
    "VerifyFunction",
    "VerifyPolicy",
    "WriterActor",
    "WriterPolicy",
    "analyse_question",
    "bearing_on_question",
    "default_scope",
    "desubjectivize",
    "extract_entities",
    "flip_polarity",
    "head_features",
    "judge_answerability",
    "load_support_head",
    "match_quote",
    "normalize_query",
    "normalize_text",
    "parse_claims",
    "polarity_flips",
    "question_entities",
    "render_answer",
    "select_evidence",
    "support_score",
    "verify",
    "verify_async",
]
