"""Conversations: follow-up questions read against earlier turns, with rolling history."""

from ._conversation import Conversation
from ._history import FOLD_EVERY, VERBATIM, HistorySummary, ModelRewriter, Turn
from ._state import (
    PreparedTurn,
    SessionState,
    aprepare_turn,
    arecord_turn,
    prepare_turn,
    record_turn,
)

__all__ = [
    "FOLD_EVERY",
    "VERBATIM",
    "Conversation",
    "HistorySummary",
    "ModelRewriter",
    "PreparedTurn",
    "SessionState",
    "Turn",
    "aprepare_turn",
    "arecord_turn",
    "prepare_turn",
    "record_turn",
]
