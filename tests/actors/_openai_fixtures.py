"""A local server speaking the OpenAI chat-completions streaming protocol, scriptable per test.

Each request pops the next scripted reply: an event stream (chunks may be split
any way, stall mid-way, omit usage or ``[DONE]``), a plain status with a body
(429 + ``Retry-After``, 500, 401, an HTML error page), a non-streaming JSON
body, or a hang before the headers. Every request body is recorded so tests can
check what the client (or a policy) actually sent.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

__all__ = [
    "FakeOpenAI",
    "Hang",
    "JsonBody",
    "Status",
    "Stream",
    "chunk",
    "content_chunks",
    "fake_openai",
    "history_problem",
    "stream_reply",
    "tool_call_chunks",
    "usage_chunk",
]


@dataclass
class Stream:
    """An SSE reply: each event is a chunk dict (sent as JSON) or a raw ``data:`` payload."""

    events: Sequence[dict[str, Any] | str]
    done: bool = True
    stall_after: int | None = None  # send this many events, then go silent until closed
    content_type: str = "text/event-stream"


@dataclass
class Status:
    """A non-200 (or odd 200) reply with a fixed body."""

    status: int
    body: str = ""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class JsonBody:
    """A non-streaming chat completion (a server that ignores ``stream: true``)."""

    body: dict[str, Any]


@dataclass
class Hang:
    """Send nothing at all (not even headers) until the server closes."""


Reply = Stream | Status | JsonBody | Hang


def chunk(delta: dict[str, Any], finish: str | None = None, model: str = "fake") -> dict[str, Any]:
    """One ``chat.completion.chunk`` with a single choice."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def usage_chunk(prompt: int, completion: int) -> dict[str, Any]:
    """The final chunk ``stream_options.include_usage`` asks for (empty choices)."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "fake",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def content_chunks(text: str, piece: int = 4) -> list[dict[str, Any]]:
    """``text`` as content deltas of ``piece`` characters (the first also carries the role)."""
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": text[i : i + piece]}) for i in range(0, len(text), piece)]
    return out


def tool_call_chunks(
    calls: Sequence[tuple[str, str, str]], piece: int = 3, interleave: bool = False
) -> list[dict[str, Any]]:
    """Tool calls ``(id, name, arguments_json)`` split the way OpenAI streams them.

    The first piece of each call carries ``index``, ``id``, ``type`` and ``name``;
    later pieces carry only ``index`` and a slice of ``arguments``. With
    ``interleave`` the pieces of different calls alternate.
    """
    per_call: list[list[dict[str, Any]]] = []
    for index, (call_id, name, args) in enumerate(calls):
        pieces = [
            {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
        ]
        pieces += [
            {"index": index, "function": {"arguments": args[i : i + piece]}}
            for i in range(0, len(args), piece)
        ]
        per_call.append(pieces)
    ordered: list[dict[str, Any]] = []
    if interleave:
        for step in range(max((len(p) for p in per_call), default=0)):
            ordered += [p[step] for p in per_call if step < len(p)]
    else:
        for pieces in per_call:
            ordered += pieces
    return [chunk({"tool_calls": [p]}) for p in ordered]


def stream_reply(
    content: str = "",
    tool_calls: Sequence[tuple[str, str, str]] = (),
    usage: tuple[int, int] | None = (20, 10),
    finish: str | None = None,
    piece: int = 3,
) -> Stream:
    """A complete, well-formed stream: content, tool calls, finish chunk, usage, ``[DONE]``."""
    events: list[dict[str, Any] | str] = []
    events += content_chunks(content, piece) if content else [chunk({"role": "assistant"})]
    events += tool_call_chunks(tool_calls, piece)
    events.append(chunk({}, finish=finish or ("tool_calls" if tool_calls else "stop")))
    if usage is not None:
        events.append(usage_chunk(*usage))
    return Stream(events)


class FakeOpenAI:
    """The scriptable server; ``base_url`` ends in ``/v1`` like OpenAI's."""

    def __init__(self, check_history: bool = True) -> None:
        self.check_history = check_history
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.request_seen = asyncio.Event()
        self._release = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self._server = TestServer(app, host="127.0.0.1")

    @property
    def base_url(self) -> str:
        return str(self._server.make_url("/v1"))

    def script(self, *replies: Reply) -> None:
        """Queue replies for the next requests, in order."""
        self.replies.extend(replies)

    @property
    def messages(self) -> list[list[dict[str, Any]]]:
        """The ``messages`` of every request received, in order."""
        return [r["messages"] for r in self.requests]

    async def start(self) -> None:
        await self._server.start_server()

    async def close(self) -> None:
        self._release.set()
        await self._server.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(await request.json())
        self.headers.append(dict(request.headers))
        self.request_seen.set()
        problem = history_problem(self.requests[-1].get("messages"))
        if self.check_history and problem:
            return web.json_response({"error": {"message": problem}}, status=400)
        if not self.replies:
            return web.json_response({"error": {"message": "no scripted reply"}}, status=500)
        reply = self.replies.popleft()
        if isinstance(reply, Hang):
            await self._release.wait()
            return web.Response(status=503)
        if isinstance(reply, Status):
            return web.Response(
                status=reply.status,
                text=reply.body,
                content_type=reply.content_type,
                headers=reply.headers,
            )
        if isinstance(reply, JsonBody):
            return web.json_response(reply.body)
        response = web.StreamResponse(headers={"Content-Type": reply.content_type})
        await response.prepare(request)
        for sent, event in enumerate(reply.events):
            if reply.stall_after is not None and sent >= reply.stall_after:
                await self._release.wait()
                return response
            data = event if isinstance(event, str) else json.dumps(event)
            with suppress(ConnectionResetError):
                await response.write(f"data: {data}\n\n".encode())
        if reply.stall_after is not None and reply.stall_after >= len(reply.events):
            await self._release.wait()
            return response
        if reply.done:
            with suppress(ConnectionResetError):
                await response.write(b"data: [DONE]\n\n")
        return response


def history_problem(messages: Any) -> str:
    """Why OpenAI would refuse this conversation with a 400, or ``""`` if it is valid.

    Every assistant ``tool_calls`` entry must be answered by a ``tool`` message
    right after it (before any other message), tool messages may appear only
    there, and past tool-call arguments must be JSON objects.
    """
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty list"
    open_ids: set[str] = set()
    for n, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in open_ids:
                return f"messages[{n}]: tool message answers no open tool call"
            open_ids.discard(message["tool_call_id"])
            continue
        if open_ids:
            return f"messages[{n}]: tool calls {sorted(open_ids)} were not answered"
        if role not in ("system", "user", "assistant"):
            return f"messages[{n}]: unknown role {role!r}"
        for tool_call in message.get("tool_calls") or []:
            try:
                args = json.loads(tool_call["function"]["arguments"])
            except (KeyError, TypeError, ValueError):
                return f"messages[{n}]: tool call arguments are not JSON"
            if not isinstance(args, dict):
                return f"messages[{n}]: tool call arguments are not an object"
            open_ids.add(tool_call["id"])
    if open_ids:
        return f"tool calls {sorted(open_ids)} were not answered"
    return ""


@asynccontextmanager
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    """Start a :class:`FakeOpenAI` on 127.0.0.1 and close it afterwards."""
    server = FakeOpenAI()
    await server.start()
    try:
        yield server
    finally:
        await server.close()
