"""The run: a pure state machine with budgets and outcomes, and the controller hosting it."""

from ._budget import Budget
from ._controller import RunController
from ._exceptions import IllegalTransition, RunConfigError, RunError
from ._machine import (
    Command,
    EvidenceSelector,
    Finish,
    InFlight,
    Phase,
    RunState,
    call_signature,
    chunk_from_hit,
    fall_back_to_rag,
    initial_state,
    step,
)

__all__ = [
    "Budget",
    "Command",
    "EvidenceSelector",
    "Finish",
    "IllegalTransition",
    "InFlight",
    "Phase",
    "RunConfigError",
    "RunController",
    "RunError",
    "RunState",
    "call_signature",
    "chunk_from_hit",
    "fall_back_to_rag",
    "initial_state",
    "step",
]
