"""The one HTTP core of the actors' clients: status to a typed failure, bounded retries.

The search adapters (:mod:`actors.providers`), the chat client and the
embeddings client (:mod:`actors.models`) each keep their own exception types
(users catch them), but they read HTTP signalling with the same rules and retry
with the same loop:

* :func:`classify` turns a status (and a content type that should not be HTML)
  into a :class:`HttpFailure`: its :class:`FailureKind`, the status, whether
  asking again can help, and ``Retry-After`` in seconds (delta-seconds or an
  HTTP date, see :func:`parse_retry_after`). Each client maps the kind to its
  exception class with one table.
* :func:`error_detail` is the short, human text of an error body (the JSON
  ``error.message`` when the server sent one).
* :class:`HttpSession` is the session a client borrows (the caller's, left
  open) or owns (made on first use, made again if it was closed, closed by
  the client's ``aclose``).
* :func:`retry_call` runs an attempt under ``tenacity``: only errors the
  caller calls retryable, at most ``retries`` more times, exponential backoff
  (optionally full jitter), ``Retry-After`` honoured (it may exceed the backoff
  cap), and never a wait that would end past the deadline.

Nothing here imports the rest of :mod:`actors`, so every client can import it.
"""

from __future__ import annotations

import asyncio
import email.utils
import enum
import json
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random_exponential,
)
from tenacity.stop import stop_base

__all__ = [
    "FailureKind",
    "HttpFailure",
    "HttpSession",
    "classify",
    "error_detail",
    "looks_like_html",
    "parse_retry_after",
    "retry_call",
]

_T = TypeVar("_T")


class HttpSession:
    """The aiohttp session of one client: the caller's, or one it makes and closes.

    A session passed in is used as is and never closed here (its owner shares
    it); without one, or once a passed one was closed, ``factory`` makes one on
    first use (inside the loop: aiohttp's cookie jars need it), closed by
    :meth:`aclose`.
    """

    def __init__(self, session: aiohttp.ClientSession | None = None,
                 factory: Callable[[], aiohttp.ClientSession] = aiohttp.ClientSession) -> None:
        self._session = session
        self._owned = session is None
        self._factory = factory

    def get(self) -> aiohttp.ClientSession:
        """The open session, made now if there is none (or it was closed)."""
        if self._session is None or self._session.closed:
            self._session = self._factory()
            self._owned = True
        return self._session

    async def aclose(self) -> None:
        """Close the session if it is this client's own (a passed-in one is left open)."""
        if self._owned and self._session is not None:
            await self._session.close()
            self._session = None


class FailureKind(enum.Enum):
    """What an HTTP answer says went wrong; ``retryable`` kinds may succeed later."""

    AUTH = "auth"  # 401/403: wrong or missing credentials
    QUOTA = "quota"  # 402 (and API-specific codes): the account's limit is used up
    RATE_LIMITED = "rate_limited"  # 429: slow down, maybe with Retry-After
    SERVER = "server"  # 5xx: the server failed
    TIMEOUT = "timeout"  # 408: the server gave up waiting for us
    REQUEST = "request"  # other 4xx: the request itself is wrong
    BAD_RESPONSE = "bad_response"  # 2xx, but not what was asked for (an HTML page)

    @property
    def retryable(self) -> bool:
        return self in (FailureKind.RATE_LIMITED, FailureKind.SERVER, FailureKind.TIMEOUT)


@dataclass(frozen=True, slots=True)
class HttpFailure:
    """A classified failed answer: kind, status, and ``Retry-After`` seconds if told."""

    kind: FailureKind
    status: int
    retry_after: float | None = None

    @property
    def retryable(self) -> bool:
        return self.kind.retryable


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP-date), else ``None``."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def looks_like_html(content_type: str, body: bytes = b"") -> bool:
    """Whether an answer is a web page (a login wall, captcha, proxy error) not data."""
    if "html" in content_type.lower():
        return True
    head = body.lstrip()[:64].lower()
    return head.startswith((b"<!doctype", b"<html", b"<"))


def classify(
    status: int,
    headers: Mapping[str, str] | None = None,
    *,
    content_type: str | None = None,
    quota_statuses: frozenset[int] = frozenset({402}),
) -> HttpFailure | None:
    """The failure an answer signals, or ``None`` for a usable 2xx.

    Args:
        status: the HTTP status.
        headers: the answer's headers (``Retry-After`` is read for 429 and 503).
        content_type: when given, a 2xx HTML page is a ``BAD_RESPONSE``.
        quota_statuses: statuses that mean the quota is used up (APIs add theirs).
    """
    if 200 <= status < 300:
        if content_type is not None and looks_like_html(content_type):
            return HttpFailure(FailureKind.BAD_RESPONSE, status)
        return None
    retry_after = parse_retry_after((headers or {}).get("Retry-After"))
    if status in (401, 403):
        return HttpFailure(FailureKind.AUTH, status)
    if status in quota_statuses:
        return HttpFailure(FailureKind.QUOTA, status)
    if status == 429:
        return HttpFailure(FailureKind.RATE_LIMITED, status, retry_after)
    if status >= 500:
        return HttpFailure(FailureKind.SERVER, status, retry_after)
    if status == 408:
        return HttpFailure(FailureKind.TIMEOUT, status)
    return HttpFailure(FailureKind.REQUEST, status)


def error_detail(raw: bytes | str, limit: int = 300, *, ellipsis: str = "…") -> str:
    """A one-line excerpt of an error body; a JSON ``error.message`` wins when present."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    try:
        body: Any = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = body["error"].get("message")
        if message is not None:
            text = str(message)
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[: limit - len(ellipsis)] + ellipsis


def _retry_after_of(exc: BaseException | None) -> float | None:
    value = getattr(exc, "retry_after", None)
    return float(value) if isinstance(value, (int, float)) else None


async def retry_call(
    attempt: Callable[[], Awaitable[_T]],
    *,
    retryable: Callable[[BaseException], bool],
    retries: int,
    deadline: float | None = None,
    backoff_s: float = 0.5,
    max_backoff_s: float = 8.0,
    jitter: bool = False,
    retry_after_cap_s: float | None = None,
    max_retry_after_s: float | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> _T:
    """Run ``attempt`` until it succeeds, a non-retryable error, or no retry fits.

    Args:
        attempt: one try (a fresh awaitable per call).
        retryable: which errors are worth another try (others are raised at once).
        retries: tries after the first (0 disables retrying).
        deadline: ``loop.time()`` after which no try starts; a wait ending at or
            past it is not taken and the last error is raised instead.
        backoff_s, max_backoff_s: the exponential backoff base and cap of one wait.
        jitter: full jitter (a random wait up to the backoff) instead of the backoff.
        retry_after_cap_s: the longest ``Retry-After`` honoured (``None``: any; a
            ``Retry-After`` may make a wait longer than ``max_backoff_s``).
        max_retry_after_s: a ``Retry-After`` longer than this is not waited for at
            all (the error goes to the caller, who may ask someone else).
        sleep: the wait (tests pass a recorder).

    Raises:
        BaseException: the last error, unchanged.
    """
    loop = asyncio.get_running_loop()
    backoff = (
        wait_random_exponential(multiplier=backoff_s, max=max_backoff_s)
        if jitter
        else wait_exponential(multiplier=backoff_s, min=0, max=max_backoff_s)
    )

    def wait(state: RetryCallState) -> float:
        delay = float(backoff(state))
        exc = state.outcome.exception() if state.outcome is not None else None
        after = _retry_after_of(exc)
        if after is not None:
            if retry_after_cap_s is not None:
                after = min(after, retry_after_cap_s)
            delay = max(delay, after)
        return delay

    class _StopAtDeadline(stop_base):
        def __call__(self, state: RetryCallState) -> bool:
            exc = state.outcome.exception() if state.outcome is not None else None
            after = _retry_after_of(exc)
            if max_retry_after_s is not None and after is not None and after > max_retry_after_s:
                return True
            return deadline is not None and loop.time() + (state.upcoming_sleep or 0.0) >= deadline

    retrying = AsyncRetrying(
        retry=retry_if_exception(retryable),
        stop=stop_after_attempt(retries + 1) | _StopAtDeadline(),
        wait=wait,
        sleep=sleep,
        reraise=True,
    )
    async for one in retrying:
        with one:
            return await attempt()
    raise AssertionError("unreachable: tenacity returns or re-raises")  # pragma: no cover
