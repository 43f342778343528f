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

Seams: the value types live in :mod:`._chat_types`, the stream parser in
:mod:`._chat_sse`, and status mapping and retries in :mod:`actors._http_core`
(this module keeps only the client and its table of error classes).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Self

import aiohttp

from .._http_core import FailureKind, HttpSession, classify, error_detail, retry_call
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
from ._chat_sse import Accumulator, read_sse, snippet
from ._chat_types import (
    ChatMessage,
    ChatModel,
    ChatRequest,
    ChatResult,
    DeltaCallback,
    RawToolCall,
    Usage,
    chat_url,
    function_tool,
)

__all__ = [
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "ChatResult",
    "DeltaCallback",
    "OpenAIChatClient",
    "RawToolCall",
    "Usage",
    "chat_url",
    "function_tool",
]


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
        self._http = HttpSession(session)
        self._sleep = sleep

    async def aclose(self) -> None:
        """Close the session this client created (a passed-in session is left open)."""
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def complete(self, request: ChatRequest) -> ChatResult:
        """Stream one completion and return it assembled.

        ``request.timeout_s`` is this call's whole deadline (default: the client's
        ``timeout_s``); ``temperature``, ``max_tokens`` and ``response_format`` are
        sent when given, and the client's ``extra_body`` is merged over the body. With
        ``stream=False`` the server is asked for one JSON body.

        Raises:
            ChatError: a typed subclass; :class:`ChatTimeout` is also a ``TimeoutError``.
        """
        budget = self.timeout_s if request.timeout_s is None else request.timeout_s
        if budget <= 0:
            raise ChatTimeout(f"{self.url}: no time left for a model call")
        body = self._body(request)
        prompt_chars = len(json.dumps(body["messages"])) + len(json.dumps(body.get("tools", [])))
        on_delta = request.on_delta

        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget

        try:
            return await retry_call(
                lambda: self._attempt(body, deadline, on_delta, prompt_chars),
                retryable=lambda exc: isinstance(exc, ChatError) and exc.retryable,
                retries=self.max_retries,
                deadline=deadline,
                backoff_s=self._backoff_s,
                max_backoff_s=self._max_backoff_s,
                sleep=self._sleep,
            )
        except ChatTimeout as exc:  # say which deadline ran out (the call's, not a caller's)
            exc.timeout_s = budget
            raise

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (``extra_body`` merged last)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in request.messages],
            "stream": request.stream,
        }
        if request.stream and self._include_usage:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = [dict(t) for t in request.tools]
        tool_choice = request.tool_choice
        if tool_choice is not None:
            body["tool_choice"] = tool_choice if isinstance(tool_choice, str) else dict(tool_choice)
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.response_format is not None:
            body["response_format"] = dict(request.response_format)
        body.update(self._extra_body)
        return body

    # --- one HTTP attempt -----------------------------------------------------------

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
        acc = Accumulator(self.url, on_delta)
        try:
            async with asyncio.timeout_at(deadline):
                async with self._http.get().post(
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
                            f"{snippet(raw)}",
                            status=200,
                        )
                    else:
                        await read_sse(resp, acc)
        except ChatError:
            raise
        except TimeoutError as exc:
            what = "the stream stalled" if acc.started else "no answer"
            raise ChatTimeout(
                f"{self.url}: {what} within the timeout",
                partial=acc.content(),
                streamed=acc.started,
            ) from exc
        except aiohttp.ClientPayloadError as exc:
            raise ChatConnectionError(
                f"{self.url}: the reply stream was cut off before it ended",
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


_ERRORS: dict[FailureKind, type[ChatError]] = {
    FailureKind.AUTH: ChatAuthError,
    FailureKind.SERVER: ChatServerError,
    FailureKind.TIMEOUT: ChatTimeout,
}


def _status_error(
    url: str, status: int, raw: bytes, headers: Mapping[str, str]
) -> ChatError:
    detail = error_detail(raw, 200, ellipsis="...")
    msg = f"{url}: HTTP {status}: {detail}" if detail else f"{url}: HTTP {status}"
    failure = classify(status, headers, quota_statuses=frozenset())
    if failure is not None and failure.kind is FailureKind.RATE_LIMITED:
        return ChatRateLimited(msg, status=status, retry_after=failure.retry_after)
    if failure is not None and failure.kind is FailureKind.SERVER:
        return ChatServerError(msg, status=status, retry_after=failure.retry_after)
    kind = failure.kind if failure is not None else FailureKind.REQUEST
    return _ERRORS.get(kind, ChatRequestError)(msg, status=status)
