"""Errors of search providers, typed so callers decide without parsing messages.

Hierarchy::

    ProviderError                                   root; ``provider`` names who failed
    ├── ProviderAuthError (PermissionError)         401/403, invalid key: never retried
    ├── ProviderQuotaError                          402/432/433, quota used up: never retried
    ├── ProviderRateLimited                         429; ``retry_after`` seconds when told
    ├── ProviderUnavailable (ConnectionError)       5xx or connection refused/reset
    ├── ProviderTimeout (TimeoutError)              no answer before the deadline
    ├── ProviderBadResponse (ValueError)            HTML for JSON, broken JSON, wrong schema
    ├── ProviderNotConfigured (LookupError)         no key/URL/name: refused before the network
    ├── CircuitOpen                                 breaker open: the provider was not called
    └── AllProvidersFailed                          every provider failed; ``errors`` lists them

``retryable`` says whether asking again later can help; the health layer retries
only retryable errors and :func:`actors.error_info` copies it into ``ErrorInfo``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "AllProvidersFailed",
    "CircuitOpen",
    "ProviderAuthError",
    "ProviderBadResponse",
    "ProviderError",
    "ProviderNotConfigured",
    "ProviderQuotaError",
    "ProviderRateLimited",
    "ProviderTimeout",
    "ProviderUnavailable",
]


class ProviderError(Exception):
    """Root of every search-provider error.

    Args:
        message: what happened, for people.
        provider: the provider's registered name (prefixes the message).
        status: the HTTP status that signalled it, when there was one.
    """

    retryable: bool = False
    counts_as_failure: bool = True  # whether the circuit breaker counts it

    def __init__(
        self, message: str, *, provider: str = "", status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.provider = provider
        self.status = status
        self.retry_after = retry_after  # seconds, when a 429 or 503 said when to come back
        self.detail = message
        super().__init__(f"{provider}: {message}" if provider else message)


class ProviderAuthError(ProviderError, PermissionError):
    """The provider refused our credentials (or the instance refuses the API)."""


class ProviderQuotaError(ProviderError):
    """The account's quota or spending limit is used up; retrying now cannot help."""


class ProviderRateLimited(ProviderError):
    """Too many requests; ``retry_after`` is the provider's advice in seconds (if any)."""

    retryable = True

    def __init__(
        self, message: str, *, provider: str = "", status: int | None = 429,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, provider=provider, status=status, retry_after=retry_after)


class ProviderUnavailable(ProviderError, ConnectionError):
    """The provider is down or unreachable (5xx, refused or reset connection); a 503 may
    say when to come back (``retry_after``, seconds)."""

    retryable = True


class ProviderTimeout(ProviderError, TimeoutError):
    """The provider did not answer before the deadline."""

    retryable = True


class ProviderBadResponse(ProviderError, ValueError):
    """The provider answered with something that is not its documented format."""


class ProviderNotConfigured(ProviderError, LookupError):
    """The provider is unknown or lacks its key/URL; refused before any network call."""

    counts_as_failure = False


class CircuitOpen(ProviderError):
    """The provider's circuit breaker is open; it was not called."""

    retryable = True
    counts_as_failure = False


class AllProvidersFailed(ProviderError):
    """Every provider asked for one search failed; ``errors`` holds each failure."""

    def __init__(self, errors: Sequence[BaseException]) -> None:
        self.errors = tuple(errors)
        parts = "; ".join(str(e) or type(e).__name__ for e in self.errors) or "no provider"
        super().__init__(f"all providers failed: {parts}")
        self.retryable = any(bool(getattr(e, "retryable", False)) for e in self.errors)
