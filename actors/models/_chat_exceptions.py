"""Errors of the OpenAI-compatible chat client.

Hierarchy::

    ModelError                                   (actors.models._exceptions)
    └── ChatError (RuntimeError)                 a chat completion could not be obtained
        ├── ChatAuthError (PermissionError)      401/403: wrong or missing API key
        ├── ChatRateLimited                      429: retryable, carries ``retry_after``
        ├── ChatServerError                      5xx, or an error object inside the stream
        ├── ChatRequestError (ValueError)        other 4xx: the request itself is wrong
        ├── ChatConnectionError (ConnectionError) the server could not be reached
        ├── ChatTimeout (TimeoutError)           connect/read/total timeout, or a stalled stream
        └── ChatBadResponse (ValueError)         malformed SSE/JSON, missing ``choices``

Every error carries ``status`` (HTTP status if known), ``partial`` (content
already streamed when it happened), ``streamed`` (whether any stream event had
arrived) and ``retryable``. An error raised after
content was streamed is never retryable: the caller has already shown that
content, and a second answer would contradict it.
"""

from __future__ import annotations

from ._exceptions import ModelError

__all__ = [
    "ChatAuthError",
    "ChatBadResponse",
    "ChatConnectionError",
    "ChatError",
    "ChatRateLimited",
    "ChatRequestError",
    "ChatServerError",
    "ChatTimeout",
]


class ChatError(ModelError, RuntimeError):
    """A chat completion could not be obtained from the server."""

    retryable_kind: bool = False

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        partial: str = "",
        streamed: bool | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after  # seconds, when a 429 or 503 said when to come back
        self.partial = partial
        self.streamed = bool(partial) if streamed is None else streamed
        # Trying again may help only for a retryable kind, and only if nothing streamed yet.
        self.retryable = self.retryable_kind and not self.streamed
        self.timeout_s: float | None = None  # the call's deadline, when it ran out of it


class ChatAuthError(ChatError, PermissionError):
    """The server refused the credentials (401/403)."""


class ChatRateLimited(ChatError):
    """The server asked us to slow down (429); ``retry_after`` in seconds if it said."""

    retryable_kind = True

    def __init__(
        self,
        message: str,
        *,
        status: int | None = 429,
        partial: str = "",
        streamed: bool | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status=status, partial=partial, streamed=streamed,
                         retry_after=retry_after)


class ChatServerError(ChatError):
    """The server failed (5xx, or it reported an error inside the stream); a 503 may say
    when to come back (``retry_after``, seconds)."""

    retryable_kind = True


class ChatRequestError(ChatError, ValueError):
    """The server rejected the request (4xx other than auth and rate limit)."""


class ChatConnectionError(ChatError, ConnectionError):
    """The server could not be reached or dropped the connection."""

    retryable_kind = True


class ChatTimeout(ChatError, TimeoutError):
    """No complete answer in time: connect, first byte, a stalled stream, or the total."""

    retryable_kind = True


class ChatBadResponse(ChatError, ValueError):
    """The server answered with something that is not a chat completion."""
