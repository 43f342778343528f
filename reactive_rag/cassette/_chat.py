"""Chat models that record their completions, and one that replays them.

The boundary is the :class:`~actors.models.ChatModel` protocol the planner,
writer and entailment judge call: a completion is recorded as the client
assembled it (after its retries), with the pieces it streamed, so a replay
streams the same ``answer.delta`` events. Requests are matched without their
timeout and with :data:`~._format.VOLATILE_PATTERNS` masked (the planner tells
the model how many seconds are left, which a replay cannot repeat).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from actors.models import ChatError, ChatModel, ChatRequest, ChatResult, RawToolCall, Usage

from ._format import mask_volatile
from ._tape import Tape

__all__ = ["RecordingChatModel", "ReplayChatModel", "chat_key"]


def chat_key(role: str, model: str, request: ChatRequest) -> dict[str, Any]:
    """A completion request as matched on replay (JSON data, volatile text masked).

    The timeout and the delta callback are left out: neither changes the answer.
    """
    r = request
    key = {"role": role, "model": model, "messages": [dict(m) for m in r.messages],
           "tools": [dict(t) for t in r.tools] if r.tools else None,
           "tool_choice": r.tool_choice, "temperature": r.temperature,
           "max_tokens": r.max_tokens,
           "response_format": dict(r.response_format) if r.response_format is not None else None,
           "stream": r.stream}
    data: dict[str, Any] = json.loads(json.dumps(key, default=str))
    data["messages"] = mask_volatile(data["messages"])
    return data


def _result_json(result: ChatResult) -> dict[str, Any]:
    return {"content": result.content,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments_json": c.arguments_json}
                           for c in result.tool_calls],
            "usage": {"prompt": result.usage.prompt, "completion": result.usage.completion,
                      "total": result.usage.total, "estimated": result.usage.estimated},
            "finish_reason": result.finish_reason, "model": result.model}


def _result(data: Mapping[str, Any]) -> ChatResult:
    usage = data.get("usage") or {}
    finish = data.get("finish_reason")
    return ChatResult(
        content=str(data.get("content") or ""),
        tool_calls=tuple(RawToolCall(id=str(c["id"]), name=str(c["name"]),
                                     arguments_json=str(c["arguments_json"]))
                         for c in data.get("tool_calls") or ()),
        usage=Usage(int(usage.get("prompt", 0)), int(usage.get("completion", 0)),
                    int(usage.get("total", 0)), bool(usage.get("estimated", False))),
        finish_reason=str(finish) if finish is not None else None,
        model=str(data.get("model") or ""))


class RecordingChatModel:
    """A chat model whose every completion (or typed error) goes on the cassette."""

    def __init__(self, inner: ChatModel, cassette: Tape, *, role: str = "chat") -> None:
        self.inner = inner
        self.model = inner.model
        self.name = str(getattr(inner, "name", inner.model))
        self.role = role
        self._cassette = cassette

    async def complete(self, request: ChatRequest) -> ChatResult:
        key = chat_key(self.role, self.model, request)
        on_delta = request.on_delta
        deltas: list[str] = []

        def tap(piece: str) -> None:
            deltas.append(piece)
            if on_delta is not None:
                on_delta(piece)

        return await self._cassette.tape(
            "chat", key, self.inner.complete(replace(request, on_delta=tap)), _result_json,
            deltas=deltas)


class ReplayChatModel:
    """Answers completions from the cassette only (the model name is the recorded one)."""

    def __init__(self, cassette: Tape, *, model: str, role: str = "chat") -> None:
        self.model = model
        self.name = model
        self.role = role
        self._cassette = cassette

    async def complete(self, request: ChatRequest) -> ChatResult:
        key = chat_key(self.role, self.model, request)
        on_delta = request.on_delta
        got = await self._cassette.take("chat", key)
        if on_delta is not None:  # what streamed, also before a failure or a cut
            for piece in got.deltas:
                on_delta(piece)
        return _result(await self._cassette.outcome(got, ChatError))
