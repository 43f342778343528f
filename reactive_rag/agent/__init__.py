"""The agent's brains and their host actors: planner, writer, verifier policies.

Offline defaults (no model server): :class:`OfflinePlanner` (query expansion,
multi-hop bridges, read-on), :class:`ExtractiveWriter` (quotes are exact
sentences) and :func:`verify` (registry and quote checks in code). Chat-model
policies plug in through the same protocols."""

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
from ._reader import (
    ReaderActor,
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
    "DEFAULT_SUPPORT_THRESHOLD",
    "AsyncEntailmentModel",
    "EntailmentModel",
    "LoopCheck",
    "LoopVerdictLike",
    "PlannerActor",
    "QuoteMatch",
    "ReaderActor",
    "SelectorActor",
    "Verification",
    "VerificationLike",
    "VerifierActor",
    "VerifyFunction",
    "VerifyPolicy",
    "WriterActor",
    "bearing_on_question",
    "match_quote",
    "normalize_text",
    "render_answer",
    "verify",
    "verify_async",
]
