"""Conversations: follow-up questions read against earlier turns, with rolling history."""

from ._conversation import Conversation
from ._history import FOLD_EVERY, VERBATIM, HistorySummary, Turn
from ._state import PreparedTurn, SessionState, prepare_turn, record_turn

__all__ = [
    "FOLD_EVERY",
    "VERBATIM",
    "Conversation",
    "HistorySummary",
    "PreparedTurn",
    "SessionState",
    "Turn",
    "prepare_turn",
    "record_turn",
]
