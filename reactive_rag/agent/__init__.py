"""The agent's host actors: planner, selector, sufficiency judge, writer, verifier, reader.

Each actor hosts a policy or check behind a typed seam: the planner and writer policies
(:mod:`reactive_rag.judgement`, offline or chat-backed), the loop check, and
:func:`verify` (registry, quote and support checks in code) for the verifier. The reader
reads on from a found passage to its neighbours in the source.
"""

from ._actors import (
    LoopCheck,
    LoopVerdictLike,
    PlannerActor,
    SelectorActor,
    SufficiencyActor,
    VerificationLike,
    VerifierActor,
    VerifyFunction,
    WriterActor,
    render_answer,
)
from ._handoff import Catalogue, HandoffActor, TaskStarter, index_catalogue
from ._reader import ReaderActor
from ._verifier import (
    DEFAULT_SUPPORT_THRESHOLD,
    EntailmentJudge,
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
    "Catalogue",
    "EntailmentJudge",
    "EntailmentModel",
    "HandoffActor",
    "LoopCheck",
    "LoopVerdictLike",
    "PlannerActor",
    "QuoteMatch",
    "ReaderActor",
    "SelectorActor",
    "SufficiencyActor",
    "TaskStarter",
    "Verification",
    "VerificationLike",
    "VerifierActor",
    "VerifyFunction",
    "VerifyPolicy",
    "WriterActor",
    "bearing_on_question",
    "index_catalogue",
    "match_quote",
    "normalize_text",
    "render_answer",
    "verify",
    "verify_async",
]
