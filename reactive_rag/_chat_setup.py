"""Chat planner and writer factories from one chat client.

One place decides how a chat server's quirks change the policies, so
``reactive-rag ask --model-url`` and a server tenant's ``[chat]`` table behave
the same with the same server.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Literal

from actors.models import ChatModel

from .agent import ChatPlanner, ChatWriter, PlannerPolicy, WriterPolicy

__all__ = ["CHAT_QUIRKS", "CHAT_ROLES", "ChatQuirks", "ChatRole", "chat_policies"]

ChatQuirks = Literal["none", "llama-cpp-python"]
"""``llama-cpp-python``: no streamed tool calls, tool results sent as user messages."""
CHAT_QUIRKS: tuple[ChatQuirks, ...] = ("none", "llama-cpp-python")

ChatRole = Literal["planner", "writer"]
CHAT_ROLES: tuple[ChatRole, ...] = ("planner", "writer")


def chat_policies(
    client: ChatModel,
    *,
    quirks: ChatQuirks = "none",
    roles: Collection[ChatRole] = CHAT_ROLES,
    timeout_s: float = 30.0,
) -> tuple[Callable[[], PlannerPolicy] | None, Callable[[], WriterPolicy] | None]:
    """Per-run factories of the chat planner and writer (``None`` for a role not in ``roles``).

    A factory, not an instance: a chat planner keeps one run's conversation.
    ``timeout_s`` caps each model call (the run's remaining time caps it further).
    """
    quirky = quirks == "llama-cpp-python"
    planner: Callable[[], PlannerPolicy] | None = None
    writer: Callable[[], WriterPolicy] | None = None
    if "planner" in roles:
        def planner() -> PlannerPolicy:
            return ChatPlanner(client, timeout_s=timeout_s, stream=not quirky,
                               results_as_user=quirky)
    if "writer" in roles:
        def writer() -> WriterPolicy:
            return ChatWriter(client, timeout_s=timeout_s)
    return planner, writer
