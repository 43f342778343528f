"""The run: a pure state machine with budgets and outcomes, and the controller hosting it."""

from ._budget import Budget
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
    "call_signature",
    "chunk_from_hit",
    "fall_back_to_rag",
    "initial_state",
    "round_overlap",
    "saturated",
    "step",
]
