"""The server's errors as A2A / JSON-RPC errors, translated where they leave.

A refusal the A2A specification has a code for gets it: a run that is missing or
another tenant's is ``TaskNotFound`` (-32001, the same for both, so nothing tells
that it exists), a request the API would answer 400/413/415/422 (a bad budget, an
unindexed collection) is ``InvalidParams`` (-32602). The API's other refusals have
no A2A code; they keep their HTTP status as the JSON-RPC error code (403 a
collection the tenant may not search, 429 a rate limit or concurrency cap, 503 the
store or the engine replicas unavailable) and their problem ``code`` in ``data``
(a ``google.rpc.ErrorInfo``, as A2A 1.0 errors carry their details). Anything else
is ``InternalError`` with no detail (the traceback goes to the log). A missing or
wrong token never gets here: the transport answers it with the API's 401.
"""

from __future__ import annotations

import logging
from typing import Any

from a2a.server.jsonrpc_models import JSONRPCError
from a2a.utils.errors import A2AError, InternalError, InvalidParamsError, TaskNotFoundError

from reactive_rag.engine import ReplicasUnavailable
from reactive_rag.run import RunConfigError
from reactive_rag.server import Problem, RateLimited
from reactive_rag.store import RunNotFound, StoreClosed, StoreUnavailable

__all__ = ["rpc_error"]

log = logging.getLogger("reactive_rag.a2a")

_INVALID = frozenset({400, 413, 415, 422})
_DETAIL_MAX = 300


def _short(text: str) -> str:
    return text if len(text) <= _DETAIL_MAX else text[:_DETAIL_MAX - 3] + "..."


def _server_error(status: int, code: str, message: str, *,
                  retry_after_s: int | None = None) -> JSONRPCError:
    metadata = {"status": str(status), "code": code}
    if retry_after_s is not None:
        metadata["retryAfterSeconds"] = str(retry_after_s)
    info: dict[str, Any] = {"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                            "reason": code.upper(), "domain": "reactive-rag",
                            "metadata": metadata}
    return JSONRPCError(code=status, message=message, data=[info])


def rpc_error(exc: Exception) -> A2AError | JSONRPCError:
    """The error a JSON-RPC client gets for ``exc`` (see the module docstring)."""
    match exc:
        case A2AError() | JSONRPCError():
            return exc
        case RunNotFound():
            return TaskNotFoundError()
        case RunConfigError():
            return InvalidParamsError(message=_short(str(exc)))
        case RateLimited():
            return _server_error(exc.status, exc.code, f"{exc.title}: {exc.detail}",
                                 retry_after_s=exc.retry_after_s)
        case Problem() if exc.status == 404:
            return TaskNotFoundError()
        case Problem() if exc.status in _INVALID:
            data = {"code": exc.code, **({"field": exc.field} if exc.field else {})}
            return InvalidParamsError(message=_short(exc.detail), data=data)
        case Problem():
            return _server_error(exc.status, exc.code, f"{exc.title}: {exc.detail}")
        case StoreUnavailable() | StoreClosed():
            return _server_error(503, "store_unavailable", "The run store is unavailable")
        case ReplicasUnavailable():
            log.warning("no engine replica took a run", exc_info=exc)
            return _server_error(503, "replicas_unavailable",
                                 "No engine replica could take the run")
    log.error("unexpected error in an A2A call", exc_info=exc)
    return InternalError()
