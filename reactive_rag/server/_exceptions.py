"""Errors of the HTTP service.

Hierarchy::

    ServerError
    ├── ConfigError(ServerError, ValueError)     a bad server config file or env value
    └── Problem(ServerError)                     an error answered to a client as a JSON problem
        └── RateLimited(Problem)                 429 with ``Retry-After``

A :class:`Problem` carries a stable ``code`` that clients may switch on; its
``detail`` is written for the caller and never names another tenant's data or
server internals.
"""

from __future__ import annotations

__all__ = ["ConfigError", "Problem", "RateLimited", "ServerError"]


class ServerError(Exception):
    """Base of every error of the HTTP service."""


class ConfigError(ServerError, ValueError):
    """The server configuration is invalid."""


class Problem(ServerError):
    """An error answered to the client as ``application/problem+json``.

    Args:
        status: HTTP status.
        code: stable machine-readable code (``run_not_found``, ``rate_limited``...).
        title: short human summary, the same for every instance of ``code``.
        detail: what went wrong for this request (safe to show the caller).
        headers: extra response headers (``Retry-After``...).
        field: the offending request field, when there is one.
    """

    def __init__(
        self,
        status: int,
        code: str,
        title: str,
        detail: str = "",
        *,
        headers: dict[str, str] | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {detail or title}")
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail or title
        self.headers = dict(headers or {})
        self.field = field


class RateLimited(Problem):
    """A tenant hit a rate limit; retry after ``retry_after_s`` seconds."""

    def __init__(self, code: str, detail: str, retry_after_s: int) -> None:
        super().__init__(429, code, "Too many requests", detail,
                         headers={"Retry-After": str(max(1, retry_after_s))})
        self.retry_after_s = max(1, retry_after_s)
