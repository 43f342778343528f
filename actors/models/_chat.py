"""Client for OpenAI-compatible ``POST /chat/completions`` servers (OpenAI, vLLM, Ollama,
llama.cpp), streaming, with tool calls.

Why hand-rolled over aiohttp rather than the ``openai`` SDK: the run needs typed
errors that say whether content was already streamed (a retry after that would
contradict what the user saw), a per-call deadline that shrinks with the run's
budget, and no extra dependency tree. The wire protocol is small: server-sent
events whose ``data:`` lines are JSON chunks, tool calls split across chunks by
``index`` (``id``/``name`` in the first piece, ``arguments`` concatenated), a
final chunk with ``usage`` when ``stream_options.include_usage`` is set, and
``data: [DONE]``.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, Self
from urllib.parse import urlsplit

import aiohttp
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from ._chat_exceptions import (
    ChatAuthError,
    ChatBadResponse,
    ChatConnectionError,
    ChatError,
    ChatRateLimited,
    ChatRequestError,
    ChatServerError,
    ChatTimeout,
)

__all__ = [
    "ChatMessage",
    "ChatModel",
    "ChatResult",
    "DeltaCallback",
    "OpenAIChatClient",
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


class ChatModel(Protocol):
    """What the chat planner and writer need from a chat model (a seam for other clients)."""

    model: str

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
        on_delta: DeltaCallback | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        response_format: Mapping[str, Any] | None = None,
        stream: bool = True,
    ) -> ChatResult:
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


class OpenAIChatClient:
    """Streaming chat completions with tool calling from an OpenAI-compatible server.

    Each :meth:`complete` call has one deadline (``timeout_s``, per call: the run
    passes ``min(30 s, what it has left)``) covering connect, retries and the
    whole stream. 429, 5xx, connection errors and timeouts are retried with
    exponential backoff (honouring ``Retry-After``) only while nothing has been
    streamed, and only if the wait fits before the deadline. A stream that stalls
    longer than ``stall_timeout_s`` between reads raises :class:`ChatTimeout`.

    Args:
        base_url: server root, e.g. ``http://127.0.0.1:8080/v1`` (see :func:`chat_url`).
        model: model name sent with each request.
        api_key: sent as ``Authorization: Bearer``; ``None`` sends no header.
        timeout_s: default per-call deadline when a call passes none.
        max_retries: retries after the first attempt (0 disables retrying).
        connect_timeout_s: cap on establishing the connection.
        stall_timeout_s: cap on the silence between two reads (``None``: the deadline only).
        backoff_s, max_backoff_s: exponential backoff base and cap (``Retry-After`` may exceed it).
        include_usage: ask for a final usage chunk (``stream_options``); some old servers reject it.
        extra_body: merged into every request body (e.g. ``{"seed": 1}``).
        session: a shared ``aiohttp.ClientSession`` (left open by :meth:`aclose`).
        sleep: how to wait between retries (tests pass a recorder).
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        max_retries: int = 2,
        connect_timeout_s: float = 10.0,
        stall_timeout_s: float | None = None,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        include_usage: bool = True,
        extra_body: Mapping[str, Any] | None = None,
        session: aiohttp.ClientSession | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if timeout_s <= 0 or max_retries < 0 or connect_timeout_s <= 0:
            raise ValueError("timeout_s > 0, connect_timeout_s > 0 and max_retries >= 0")
        if stall_timeout_s is not None and stall_timeout_s <= 0:
            raise ValueError("stall_timeout_s must be positive or None")
        self.url = chat_url(base_url)
        self.model = model
        self.name = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._api_key = api_key
        self._connect_timeout_s = connect_timeout_s
        self._stall_timeout_s = stall_timeout_s
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._include_usage = include_usage
        self._extra_body = dict(extra_body or {})
        self._session = session
        self._own_session = session is None
        self._sleep = sleep

    async def aclose(self) -> None:
        """Close the session this client created (a passed-in session is left open)."""
        if self._session is not None and self._own_session:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
        on_delta: DeltaCallback | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        response_format: Mapping[str, Any] | None = None,
        stream: bool = True,
    ) -> ChatResult:
        """Stream one completion and return it assembled.

        Args:
            messages: the conversation in the OpenAI shape.
            tools: function tools the model may call (see :func:`function_tool`).
            tool_choice: ``"auto"``, ``"required"``, ``"none"`` or a specific function.
            timeout_s: this call's whole deadline (default: the client's ``timeout_s``).
            on_delta: called with each content piece as it arrives.
            temperature, max_tokens, response_format: passed through when given.
            stream: ask for an event stream (default). ``False`` asks for one JSON
                body, for servers that cannot stream some requests (llama-cpp-python
                cannot stream tool calls with ``tool_choice="auto"``); ``on_delta``
                then gets the whole content at once.

        Raises:
            ChatError: a typed subclass; :class:`ChatTimeout` is also a ``TimeoutError``.
        """
        budget = self.timeout_s if timeout_s is None else timeout_s
        if budget <= 0:
            raise ChatTimeout(f"{self.url}: no time left for a model call")
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "stream": stream,
        }
        if stream and self._include_usage:
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = [dict(t) for t in tools]
        if tool_choice is not None:
            body["tool_choice"] = tool_choice if isinstance(tool_choice, str) else dict(tool_choice)
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if response_format is not None:
            body["response_format"] = dict(response_format)
        body.update(self._extra_body)
        prompt_chars = len(json.dumps(body["messages"])) + len(json.dumps(body.get("tools", [])))

        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget

        def stop(state: RetryCallState) -> bool:
            if state.attempt_number > self.max_retries:
                return True
            # a wait that would not leave time for another attempt is not worth it
            return loop.time() + (state.upcoming_sleep or 0.0) >= deadline

        retrying = AsyncRetrying(
            retry=retry_if_exception(lambda exc: isinstance(exc, ChatError) and exc.retryable),
            wait=self._wait,
            stop=stop,
            sleep=self._sleep,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                return await self._attempt(body, deadline, on_delta, prompt_chars)
        raise AssertionError("unreachable: tenacity returns or re-raises")  # pragma: no cover

    # --- one HTTP attempt -----------------------------------------------------------

    def _wait(self, state: RetryCallState) -> float:
        delay = min(self._max_backoff_s, self._backoff_s * (2 ** (state.attempt_number - 1)))
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, ChatRateLimited) and exc.retry_after is not None:
            delay = max(delay, float(exc.retry_after))
        return float(delay)

    def _shared(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
            self._own_session = True
        return self._session

    async def _attempt(
        self,
        body: Mapping[str, Any],
        deadline: float,
        on_delta: DeltaCallback | None,
        prompt_chars: int,
    ) -> ChatResult:
        loop = asyncio.get_running_loop()
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise ChatTimeout(f"{self.url}: the call's deadline passed before a retry")
        accept = "text/event-stream" if body.get("stream") else "application/json"
        headers = {"Content-Type": "application/json", "Accept": accept}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        timeout = aiohttp.ClientTimeout(
            total=None,
            sock_connect=min(self._connect_timeout_s, remaining),
            sock_read=self._stall_timeout_s,
        )
        acc = _Accumulator(self.url, on_delta)
        try:
            async with asyncio.timeout_at(deadline):
                async with self._shared().post(
                    self.url, json=body, headers=headers, timeout=timeout
                ) as resp:
                    if resp.status != 200:
                        raw = await resp.content.read(2000)
                        raise _status_error(self.url, resp.status, raw, resp.headers)
                    ctype = resp.headers.get("Content-Type", "").lower()
                    if "json" in ctype:
                        acc.feed_json(await resp.read())
                    elif "html" in ctype:
                        raw = await resp.content.read(2000)
                        raise ChatBadResponse(
                            f"{self.url}: expected an event stream, got an HTML page: "
                            f"{_snippet(raw)}",
                            status=200,
                        )
                    else:
                        await _read_sse(resp, acc)
        except ChatError:
            raise
        except TimeoutError as exc:
            what = "the stream stalled" if acc.started else "no answer"
            raise ChatTimeout(
                f"{self.url}: {what} within the timeout",
                partial=acc.content(),
                streamed=acc.started,
            ) from exc
        except aiohttp.ClientError as exc:
            raise ChatConnectionError(
                f"{self.url}: {type(exc).__name__}: {exc}",
                partial=acc.content(),
                streamed=acc.started,
            ) from exc
        return acc.result(prompt_chars)


async def _read_sse(resp: aiohttp.ClientResponse, acc: _Accumulator) -> None:
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


class _Accumulator:
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
            raise self._bad(f"malformed JSON in the stream: {_snippet(data.encode())}") from exc
        if not isinstance(chunk, dict):
            raise self._bad(f"stream chunk is not an object: {_snippet(data.encode())}")
        self.started = True
        self._check_error(chunk)
        self.model = str(chunk.get("model") or self.model)
        self._take_usage(chunk.get("usage"))
        choices = chunk.get("choices")
        if choices is None:
            if "usage" in chunk:
                return False
            raise self._bad(f"stream chunk without choices: {_snippet(data.encode())}")
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
            raise self._bad(f"malformed JSON body: {_snippet(raw)}") from exc
        if not isinstance(body, dict):
            raise self._bad(f"body is not an object: {_snippet(raw)}")
        self._check_error(body)
        self.model = str(body.get("model") or "")
        self._take_usage(body.get("usage"))
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._bad(f"response without choices: {_snippet(raw)}")
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


def _snippet(raw: bytes, limit: int = 200) -> str:
    text = " ".join(raw.decode("utf-8", "replace").split())
    return text[:limit] + ("..." if len(text) > limit else "")


def _status_error(
    url: str, status: int, raw: bytes, headers: Mapping[str, str]
) -> ChatError:
    detail = _snippet(raw)
    try:
        body: Any = json.loads(raw)
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            detail = str(body["error"].get("message", detail))
    except ValueError:
        pass
    msg = f"{url}: HTTP {status}: {detail}" if detail else f"{url}: HTTP {status}"
    if status in (401, 403):
        return ChatAuthError(msg, status=status)
    if status == 429:
        return ChatRateLimited(msg, status=status, retry_after=_retry_after(headers))
    if status >= 500:
        return ChatServerError(msg, status=status)
    if status == 408:
        return ChatTimeout(msg, status=status)
    return ChatRequestError(msg, status=status)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: rare for model servers; fall back to backoff
    return max(0.0, seconds) if math.isfinite(seconds) else None
