"""The chat client's value types: messages, requests, tool calls, usage, results, the model seam."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

__all__ = [
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "ChatResult",
    "DeltaCallback",
    "RawToolCall",
    "Usage",
    "chat_url",
    "function_tool",
]

ChatMessage = Mapping[str, Any]
"""One message in the OpenAI shape: ``{"role": ..., "content": ..., ...}``."""

DeltaCallback = Callable[[str], None]
"""Called with each piece of content as it streams in."""


@dataclass(frozen=True, slots=True)
class RawToolCall:
    """A tool call exactly as the model wrote it; ``arguments_json`` is unvalidated text."""

    id: str
    name: str
    arguments_json: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one completion; ``estimated`` when the server sent none (chars/4)."""

    prompt: int
    completion: int
    total: int
    estimated: bool = False


@dataclass(frozen=True, slots=True)
class ChatResult:
    """A finished completion: text, tool calls in the model's order, usage, why it stopped."""

    content: str
    tool_calls: tuple[RawToolCall, ...] = ()
    usage: Usage = field(default_factory=lambda: Usage(0, 0, 0, estimated=True))
    finish_reason: str | None = None
    model: str = ""


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One completion request: what every :class:`ChatModel` takes (derive copies with
    :func:`dataclasses.replace`).

    Args:
        messages: the conversation in the OpenAI shape (kept as a tuple: the caller may
            go on appending to its own list).
        tools: function tools the model may call (see :func:`function_tool`).
        tool_choice: ``"auto"``, ``"required"``, ``"none"`` or a specific function.
        timeout_s: this call's whole deadline (``None``: the client's default).
        on_delta: called with each content piece as it arrives.
        temperature, max_tokens, response_format: sent when given.
        stream: ask for an event stream (default). ``False`` asks for one JSON body,
            for servers that cannot stream some requests (llama-cpp-python cannot
            stream tool calls with ``tool_choice="auto"``); ``on_delta`` then gets the
            whole content at once.
    """

    messages: Sequence[ChatMessage]
    tools: Sequence[Mapping[str, Any]] | None = None
    tool_choice: str | Mapping[str, Any] | None = None
    timeout_s: float | None = None
    on_delta: DeltaCallback | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    response_format: Mapping[str, Any] | None = None
    stream: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))
        if self.tools is not None:
            object.__setattr__(self, "tools", tuple(self.tools))


class ChatModel(Protocol):
    """What the chat planner and writer need from a chat model (a seam for other clients)."""

    model: str

    async def complete(self, request: ChatRequest) -> ChatResult:
        """Run one completion; raise :class:`ChatError` subclasses on failure."""
        ...


def function_tool(name: str, description: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A tool definition in the OpenAI ``tools`` shape (JSON Schema ``parameters``)."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": dict(parameters)},
    }


def chat_url(base_url: str) -> str:
    """The completions endpoint: ``{base_url}/chat/completions``, adding ``/v1`` to a bare host.

    ``http://h:8000`` and ``http://h:8000/v1`` both give ``http://h:8000/v1/chat/completions``;
    any other path (``.../v1beta/openai``) is kept as the user wrote it.
    """
    root = base_url.rstrip("/")
    if root.endswith("/chat/completions"):
        return root
    if urlsplit(root).path in ("", "/"):
        root += "/v1"
    return root + "/chat/completions"
