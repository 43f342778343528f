"""The chat stream's parser: server-sent events (or one JSON body) into a ``ChatResult``.

``data:`` lines are JSON chunks; tool calls arrive split across chunks by
``index`` (``id``/``name`` in the first piece, ``arguments`` concatenated); a
final chunk carries ``usage`` when asked for; ``data: [DONE]`` ends the stream.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from ._chat_exceptions import ChatBadResponse, ChatServerError
from ._chat_types import ChatResult, DeltaCallback, RawToolCall, Usage

__all__ = ["Accumulator", "read_sse", "snippet"]


async def read_sse(resp: aiohttp.ClientResponse, acc: Accumulator) -> None:
    """Split the body into SSE lines (no line-length cap, unlike ``readline``) and feed them."""
    buf = b""
    async for piece in resp.content.iter_any():
        buf += piece
        while (cut := buf.find(b"\n")) >= 0:
            line, buf = buf[:cut], buf[cut + 1 :]
            if acc.feed_line(line.rstrip(b"\r")):
                return
    if buf and acc.feed_line(buf.rstrip(b"\r")):
        return
    if acc.feed_line(b""):
        return
    if acc.finish_reason is None:
        raise ChatBadResponse(
            f"{acc.url}: the stream ended before [DONE]",
            partial=acc.content(),
            streamed=acc.started,
        )


@dataclass(slots=True)
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class Accumulator:
    """Assembles SSE chunks (or one JSON body) into a :class:`ChatResult`."""

    def __init__(self, url: str, on_delta: DeltaCallback | None) -> None:
        self.url = url
        self.on_delta = on_delta
        self.started = False
        self.finish_reason: str | None = None
        self.model = ""
        self._parts: list[str] = []
        self._calls: dict[int, _PendingCall] = {}
        self._legacy = _PendingCall()  # the deprecated ``function_call`` delta
        self._usage: Usage | None = None
        self._data: list[str] = []

    def content(self) -> str:
        return "".join(self._parts)

    # --- SSE ------------------------------------------------------------------------

    def feed_line(self, line: bytes) -> bool:
        """Feed one SSE line; return True once ``[DONE]`` was seen."""
        if not line:
            if not self._data:
                return False
            data, self._data = "\n".join(self._data), []
            return self._event(data)
        if line.startswith(b":"):
            return False  # SSE comment (keep-alive)
        field_name, _, value = line.partition(b":")
        if field_name == b"data":
            self._data.append(value.removeprefix(b" ").decode("utf-8", "replace"))
        return False

    def _event(self, data: str) -> bool:
        if data.strip() == "[DONE]":
            return True
        try:
            chunk: Any = json.loads(data)
        except ValueError as exc:
            raise self._bad(f"malformed JSON in the stream: {snippet(data.encode())}") from exc
        if not isinstance(chunk, dict):
            raise self._bad(f"stream chunk is not an object: {snippet(data.encode())}")
        self.started = True
        self._check_error(chunk)
        self.model = str(chunk.get("model") or self.model)
        self._take_usage(chunk.get("usage"))
        choices = chunk.get("choices")
        if choices is None:
            if "usage" in chunk:
                return False
            raise self._bad(f"stream chunk without choices: {snippet(data.encode())}")
        if not isinstance(choices, list):
            raise self._bad("`choices` is not a list")
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                continue  # we ask for one choice; ignore any other
            delta = choice.get("delta")
            if delta is None:
                delta = choice.get("message") or {}
            if not isinstance(delta, dict):
                raise self._bad("`delta` is not an object")
            self._take_delta(delta)
            if choice.get("finish_reason") is not None:
                self.finish_reason = str(choice["finish_reason"])
        return False

    # --- non-streaming body (servers that ignore ``stream: true``) -------------------------

    def feed_json(self, raw: bytes) -> None:
        try:
            body: Any = json.loads(raw)
        except ValueError as exc:
            raise self._bad(f"malformed JSON body: {snippet(raw)}") from exc
        if not isinstance(body, dict):
            raise self._bad(f"body is not an object: {snippet(raw)}")
        self._check_error(body)
        self.model = str(body.get("model") or "")
        self._take_usage(body.get("usage"))
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._bad(f"response without choices: {snippet(raw)}")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise self._bad("choice without a message")
        calls = message.get("tool_calls") or []
        if isinstance(calls, list):
            # whole calls, in order: give them explicit positions
            message = {**message, "tool_calls": [
                {**c, "index": i} for i, c in enumerate(calls) if isinstance(c, dict)
            ]}
        self._take_delta(message)
        self.finish_reason = str(choices[0].get("finish_reason") or "stop")

    # --- shared ---------------------------------------------------------------------

    def _take_delta(self, delta: Mapping[str, Any]) -> None:
        text = delta.get("content")
        if isinstance(text, str) and text:
            self._parts.append(text)
            if self.on_delta is not None:
                self.on_delta(text)
        legacy = delta.get("function_call")
        if isinstance(legacy, dict):
            self._take_function(self._legacy, legacy)
        calls = delta.get("tool_calls")
        if calls is None:
            return
        if not isinstance(calls, list):
            raise self._bad("`tool_calls` is not a list")
        for raw_call in calls:
            if not isinstance(raw_call, dict):
                raise self._bad("a tool call is not an object")
            pending = self._slot(raw_call)
            call_id = raw_call.get("id")
            if isinstance(call_id, str) and call_id and not pending.id:
                pending.id = call_id
            function = raw_call.get("function") or {}
            if not isinstance(function, dict):
                raise self._bad("`function` of a tool call is not an object")
            self._take_function(pending, function)

    @staticmethod
    def _take_function(pending: _PendingCall, function: Mapping[str, Any]) -> None:
        name = function.get("name")
        if isinstance(name, str) and name and not pending.name:
            pending.name = name
        args = function.get("arguments")
        if isinstance(args, str):
            pending.arguments.append(args)
        elif args is not None:  # some servers send an object, not a string
            pending.arguments.append(json.dumps(args))

    def _slot(self, raw_call: Mapping[str, Any]) -> _PendingCall:
        index = raw_call.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            return self._calls.setdefault(index, _PendingCall())
        call_id = raw_call.get("id")
        for pending in self._calls.values():
            if call_id and pending.id == call_id:
                return pending
        if not call_id and self._calls:  # continuation of the last call
            return self._calls[max(self._calls)]
        return self._calls.setdefault(len(self._calls), _PendingCall())

    def _take_usage(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            return
        prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
        if not isinstance(prompt, int) or not isinstance(completion, int):
            return
        total = raw.get("total_tokens")
        if not isinstance(total, int):
            total = prompt + completion
        self._usage = Usage(prompt, completion, total)

    def _check_error(self, obj: Mapping[str, Any]) -> None:
        error = obj.get("error")
        if error is None:
            return
        message = error.get("message", error) if isinstance(error, dict) else error
        raise ChatServerError(
            f"{self.url}: the server reported an error: {message}",
            partial=self.content(),
            streamed=self.started,
        )

    def _bad(self, message: str) -> ChatBadResponse:
        return ChatBadResponse(
            f"{self.url}: {message}", partial=self.content(), streamed=self.started
        )

    def result(self, prompt_chars: int) -> ChatResult:
        calls = [
            RawToolCall(
                id=p.id or f"call_{index}", name=p.name, arguments_json="".join(p.arguments)
            )
            for index, p in sorted(self._calls.items())
        ]
        legacy = RawToolCall("call_0", self._legacy.name, "".join(self._legacy.arguments))
        if legacy.name and not calls:
            calls = [legacy]  # a server that only speaks the deprecated function_call
        elif (
            len(calls) == 1
            and legacy.name == calls[0].name
            and len(legacy.arguments_json) > len(calls[0].arguments_json)
            and legacy.arguments_json.endswith(calls[0].arguments_json)
        ):
            # llama-cpp-python streams the first piece of the arguments only in
            # function_call; its tool_calls copy misses it
            calls = [RawToolCall(calls[0].id, calls[0].name, legacy.arguments_json)]
        content = self.content()
        usage = self._usage
        if usage is None:
            done = len(content) + sum(len(c.name) + len(c.arguments_json) for c in calls)
            prompt, completion = math.ceil(prompt_chars / 4), math.ceil(done / 4)
            usage = Usage(prompt, completion, prompt + completion, estimated=True)
        return ChatResult(
            content=content,
            tool_calls=tuple(calls),
            usage=usage,
            finish_reason=self.finish_reason,
            model=self.model,
        )


def snippet(raw: bytes, limit: int = 200) -> str:
    text = " ".join(raw.decode("utf-8", "replace").split())
    return text[:limit] + ("..." if len(text) > limit else "")
