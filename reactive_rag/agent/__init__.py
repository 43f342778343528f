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
    VerificationLike,
    VerifierActor,
    VerifyFunction,
    WriterActor,
    render_answer,
)
from ._chat_planner import (
    DEFAULT_PLANNER_PROMPT,
    PLANNER_TOOLS,
    ChatPlanner,
    Rejection,
    ScopeCheck,
    default_scope,
)
from ._chat_writer import DEFAULT_WRITER_PROMPT, ChatWriter, parse_claims
from ._extractive_writer import ExtractiveWriter
from ._loop_guard import LoopGuard, LoopVerdict, normalize_query, saturated
from ._offline_planner import (
    OfflinePlanner,
    desubjectivize,
    extract_entities,
    question_entities,
    select_evidence,
)
from ._policy import (
    Decision,
    Draft,
    PlannerPolicy,
    PlannerView,
    QueryRecord,
    WriteMode,
    WriterPolicy,
)
from ._verifier import (
    EntailmentModel,
    EntailmentReport,
    QuoteMatch,
    Verification,
    VerifyPolicy,
    evaluate_entailment,
    match_quote,
    normalize_text,
    verify,
)

__all__ = [
    "DEFAULT_PLANNER_PROMPT",
    "DEFAULT_WRITER_PROMPT",
    "PLANNER_TOOLS",
    "ChatPlanner",
    "ChatWriter",
    "Decision",
    "Draft",
    "EntailmentModel",
    "EntailmentReport",
    "ExtractiveWriter",
    "LoopCheck",
    "LoopGuard",
    "LoopVerdict",
    "LoopVerdictLike",
    "OfflinePlanner",
    "PlannerActor",
    "PlannerPolicy",
    "PlannerView",
    "QueryRecord",
    "QuoteMatch",
    "Rejection",
    "ScopeCheck",
    "Verification",
    "VerificationLike",
    "VerifierActor",
    "VerifyFunction",
    "VerifyPolicy",
    "WriteMode",
    "WriterActor",
    "WriterPolicy",
    "default_scope",
    "desubjectivize",
    "evaluate_entailment",
    "extract_entities",
    "match_quote",
    "normalize_query",
    "normalize_text",
    "parse_claims",
    "question_entities",
    "render_answer",
    "saturated",
    "select_evidence",
    "verify",
]
