"""The run: a pure state machine with budgets and outcomes, and the controller hosting it."""

from ._answerability import Answerability, AnswerabilityJudge, Verdict, limits_note, partial_note
from ._budget import Budget
from ._conflicts import conflict_claims, conflicts_for_answer, find_conflicts
from ._context import RunContext
from ._controller import RunController
from ._exceptions import IllegalTransition, NoRunningLoop, RunConfigError, RunError
from ._machine import (
    CallResult,
    Command,
    Finish,
    InFlight,
    Phase,
    RunState,
    call_signature,
    chunk_from_hit,
    fall_back_to_rag,
    initial_state,
    round_overlap,
    saturated,
    step,
)

__all__ = [
    "Answerability",
    "AnswerabilityJudge",
    "Budget",
    "CallResult",
    "Command",
    "Finish",
    "IllegalTransition",
    "InFlight",
    "NoRunningLoop",
    "Phase",
    "RunConfigError",
    "RunContext",
    "RunController",
    "RunError",
    "RunState",
    "Verdict",
    "call_signature",
    "chunk_from_hit",
    "conflict_claims",
    "conflicts_for_answer",
    "fall_back_to_rag",
    "find_conflicts",
    "initial_state",
    "limits_note",
    "partial_note",
    "round_overlap",
    "saturated",
    "step",
]
