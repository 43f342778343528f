"""Errors of the model adapters (embedders, cross-encoders).

Hierarchy::

    ModelError
    ├── ModelNotAvailable (FileNotFoundError)   weights/tokenizer missing; says how to install
    └── EmbeddingError (RuntimeError)           a remote embedding server failed
        ├── EmbeddingAuthError (PermissionError)      401/403: wrong or missing API key
        ├── EmbeddingRateLimited                      429: retryable, carries ``retry_after``
        ├── EmbeddingServerError                      5xx: retryable
        ├── EmbeddingRequestError (ValueError)        other 4xx: the request itself is wrong
        ├── EmbeddingResponseError (ValueError)       malformed body (not JSON, wrong shape)
        ├── EmbeddingConnectionError (ConnectionError) could not reach the server
        └── EmbeddingTimeout (TimeoutError)           the server did not answer in time

Each error has a ``retryable`` attribute (read by ``actors.error_info``).
"""

from __future__ import annotations

__all__ = [
    "EmbeddingAuthError",
    "EmbeddingConnectionError",
    "EmbeddingError",
    "EmbeddingRateLimited",
    "EmbeddingRequestError",
    "EmbeddingResponseError",
    "EmbeddingServerError",
    "EmbeddingTimeout",
    "ModelError",
    "ModelNotAvailable",
]


class ModelError(Exception):
    """Root of every error raised by ``actors.models``."""

    retryable: bool = False


class ModelNotAvailable(ModelError, FileNotFoundError):
    """A model file (weights, tokenizer) is not installed; never downloaded at run time."""


class EmbeddingError(ModelError, RuntimeError):
    """A remote embedding server could not embed the texts."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after  # seconds, when a 429 or 503 said when to come back


class EmbeddingAuthError(EmbeddingError, PermissionError):
    """The server refused the credentials (401/403)."""


class EmbeddingRateLimited(EmbeddingError):
    """The server asked us to slow down (429)."""

    retryable = True

    def __init__(
        self, message: str, *, status: int | None = 429, retry_after: float | None = None
    ) -> None:
        super().__init__(message, status=status, retry_after=retry_after)


class EmbeddingServerError(EmbeddingError):
    """The server failed (5xx); trying again later may help (a 503 may say when:
    ``retry_after``, seconds)."""

    retryable = True


class EmbeddingRequestError(EmbeddingError, ValueError):
    """The server rejected the request (4xx other than auth and rate limit)."""


class EmbeddingResponseError(EmbeddingError, ValueError):
    """The server answered 200 with a body that is not a valid embeddings response."""


class EmbeddingConnectionError(EmbeddingError, ConnectionError):
    """The server could not be reached."""

    retryable = True


class EmbeddingTimeout(EmbeddingError, TimeoutError):
    """The server did not answer within the timeout."""

    retryable = True
