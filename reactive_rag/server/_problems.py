"""JSON problem responses (RFC 9457) and the middleware that turns every error into one.

Every error a client sees has the same shape, ``{type, title, status, code,
detail}``, with a stable ``code``. Unexpected exceptions become a bare 500
``internal`` problem: the traceback goes to the log, never to the client, so
no other tenant's ids or server internals can leak through an error body.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ..run import RunConfigError
from ..store import InvalidCursor, RunNotFound, StoreClosed, StoreError, StoreUnavailable
from ._exceptions import Problem

__all__ = ["PROBLEM_CODES", "problem_middleware", "problem_response", "run_not_found"]

log = logging.getLogger("reactive_rag.server")

PROBLEM_CONTENT_TYPE = "application/problem+json"

PROBLEM_CODES: dict[str, str] = {
    "unauthorized": "A valid bearer token is required",
    "run_not_found": "No such run",
    "collection_forbidden": "Collection not allowed",
    "invalid_json": "The request body is not valid JSON",
    "invalid_body": "The request body could not be read (a corrupt compression)",
    "validation_failed": "The request is invalid",
    "body_too_large": "The request body is too large",
    "unsupported_media_type": "The request body must be application/json",
    "invalid_parameter": "A query parameter or header is invalid",
    "invalid_cursor": "The page cursor is invalid",
    "run_config": "The run cannot be started with these options",
    "too_many_concurrent_runs": "Too many requests",
    "too_many_runs_per_minute": "Too many requests",
    "route_not_found": "No such route",
    "method_not_allowed": "Method not allowed",
    "store_unavailable": "The run store is unavailable",
    "not_ready": "The service is not ready",
    "internal": "Internal server error",
}
"""Every ``code`` the API answers with, and its fixed title."""


def problem_response(problem: Problem) -> web.Response:
    """The JSON body and headers of ``problem``."""
    body: dict[str, Any] = {
        "type": f"urn:reactive-rag:problem:{problem.code}",
        "title": problem.title,
        "status": problem.status,
        "code": problem.code,
        "detail": problem.detail,
    }
    if problem.field is not None:
        body["field"] = problem.field
    return web.Response(status=problem.status, text=json.dumps(body),
                        content_type=PROBLEM_CONTENT_TYPE, headers=problem.headers)


def make_problem(status: int, code: str, detail: str = "", **kwargs: Any) -> Problem:
    """A :class:`Problem` with the standard title of ``code``."""
    return Problem(status, code, PROBLEM_CODES[code], detail, **kwargs)


def run_not_found() -> Problem:
    """The one answer for a missing run and for another tenant's run (ids never leak)."""
    return make_problem(404, "run_not_found", "no run with this id is visible to you")


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def problem_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer every error as a JSON problem with a stable code."""
    try:
        return await handler(request)
    except Problem as problem:
        return problem_response(problem)
    except RunNotFound:
        return problem_response(run_not_found())
    except InvalidCursor:
        return problem_response(make_problem(422, "invalid_cursor", field="cursor"))
    except RunConfigError as exc:
        return problem_response(make_problem(422, "run_config", _safe(str(exc))))
    except (StoreUnavailable, StoreClosed):
        return problem_response(make_problem(503, "store_unavailable",
                                             headers={"Retry-After": "1"}))
    except web.HTTPException as exc:
        if exc.status == 404:
            return problem_response(make_problem(404, "route_not_found"))
        if exc.status == 405:
            return problem_response(make_problem(405, "method_not_allowed",
                                                 headers={"Allow": exc.headers.get("Allow", "")}))
        if exc.status == 413:
            return problem_response(make_problem(413, "body_too_large"))
        if exc.status < 400:
            raise
        return problem_response(Problem(exc.status, "http_error", exc.reason, exc.reason))
    except StoreError:
        log.exception("store error on %s %s", request.method, request.path)
        return problem_response(make_problem(500, "internal"))
    except Exception:
        log.exception("unexpected error on %s %s", request.method, request.path)
        return problem_response(make_problem(500, "internal"))


def _safe(text: str) -> str:
    """Keep a config error's message but cap it, so a huge input is not echoed back."""
    return text if len(text) <= 300 else text[:297] + "..."
