"""Errors of the remote client.

Hierarchy::

    ClientError
    ├── RemoteError(ClientError)                    the server answered a JSON problem
    │   ├── Unauthorized(RemoteError, PermissionError)   401: missing or wrong token
    │   ├── Forbidden(RemoteError, PermissionError)      403: e.g. a collection not allowed
    │   ├── NotFound(RemoteError, LookupError)           404: no such run (or not yours)
    │   ├── InvalidRequest(RemoteError, ValueError)      422: the server refused the options
    │   ├── RateLimited(RemoteError)                     429, with ``retry_after``
    │   └── Unavailable(RemoteError)                     503, with ``retry_after``
    ├── StreamGap(ClientError)                      an event stream skipped a seq
    ├── ProtocolError(ClientError)                  the server sent what is not the API
    └── ServerUnreachable(ClientError, ConnectionError)  no answer after the retries allowed

Each :class:`RemoteError` carries the problem's fields (``status``, ``code``, ``title``,
``detail``, ``field``) and ``retry_after`` (seconds, from ``Retry-After``), so a caller
switches on the stable ``code`` rather than on text. aiohttp's own errors are translated
where they enter (``raise ServerUnreachable(...) from exc``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ClientError",
    "Forbidden",
    "InvalidRequest",
    "NotFound",
    "ProtocolError",
    "RateLimited",
    "RemoteError",
    "ServerUnreachable",
    "StreamGap",
    "Unauthorized",
    "Unavailable",
    "problem_error",
    "retry_after_s",
]


class ClientError(Exception):
    """Base of every error the remote client raises."""


class RemoteError(ClientError):
    """The server answered with an RFC 7807 problem (``{type, title, status, code, detail}``).

    Args:
        status: the HTTP status.
        code: the problem's stable code (``run_not_found``, ``too_many_concurrent_runs``...).
        title: the fixed title of ``code``.
        detail: what went wrong for this request.
        field: the request field at fault, when the server named one.
        retry_after: seconds to wait before trying again (``Retry-After``), when sent.
    """

    def __init__(self, status: int, code: str, title: str = "", detail: str = "", *,
                 field: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(f"{status} {code}: {detail or title}")
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail or title
        self.field = field
        self.retry_after = retry_after


class Unauthorized(RemoteError, PermissionError):
    """401: the token is missing, malformed or not one the server knows."""


class Forbidden(RemoteError, PermissionError):
    """403: the tenant may not do this (e.g. search that collection)."""


class NotFound(RemoteError, LookupError):
    """404: no such run, or one another tenant owns (the server answers both alike)."""


class InvalidRequest(RemoteError, ValueError):
    """422: the server refused the request's options (question, mode, budget, collections)."""


class RateLimited(RemoteError):
    """429: the tenant is at its concurrency or per-minute limit; see ``retry_after``."""


class Unavailable(RemoteError):
    """503: the server cannot serve this now (store down, corpus building); see ``retry_after``."""


class StreamGap(ClientError):
    """An event stream went from ``last`` to ``got`` with seqs missing in between.

    A run's seqs are gap-free, so this means events were lost on the way; the
    consumer is told rather than handed a log with a hole in it.
    """

    def __init__(self, run_id: str, last: int, got: int) -> None:
        super().__init__(f"run {run_id}: event seq {got} came after {last}; "
                         f"{got - last - 1} event(s) missing")
        self.run_id = run_id
        self.last = last
        self.got = got


class ProtocolError(ClientError):
    """The server's answer is not what the API sends (not a run, not an event, not SSE)."""


class ServerUnreachable(ClientError, ConnectionError):
    """The server could not be reached, or kept dropping the connection, past the retries."""


_BY_STATUS: dict[int, type[RemoteError]] = {
    401: Unauthorized, 403: Forbidden, 404: NotFound, 422: InvalidRequest,
    429: RateLimited, 503: Unavailable,
}


def problem_error(status: int, body: Any, headers: Mapping[str, str]) -> RemoteError:
    """The typed error for an error answer (a problem body, or anything else the server sent)."""
    problem: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    code = problem.get("code")
    title = problem.get("title")
    detail = problem.get("detail")
    field = problem.get("field")
    cls = _BY_STATUS.get(status, RemoteError)
    return cls(status, code if isinstance(code, str) else f"http_{status}",
               title if isinstance(title, str) else "",
               detail if isinstance(detail, str) else "",
               field=field if isinstance(field, str) else None,
               retry_after=retry_after_s(headers.get("Retry-After")))


def retry_after_s(raw: str | None) -> float | None:
    """``Retry-After`` in seconds (the delta-seconds form; an HTTP date is not used here)."""
    if raw is None:
        return None
    raw = raw.strip()
    if raw.isascii() and raw.isdigit() and len(raw) <= 9:
        return float(raw)
    return None
