"""JSON problem responses (RFC 9457) and the middleware that turns every error into one.

Every error a client sees has the same shape, ``{type, title, status, code,
detail}``, with a stable ``code``. Unexpected exceptions become a bare 500
``internal`` problem: the traceback goes to the log, never to the client, so
no other tenant's ids or server internals can leak through an error body.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMethod, HttpProcessingError, LineTooLong
from aiohttp.web_request import BaseRequest

from reactive_rag.engine import ReplicasUnavailable
from reactive_rag.run import RunConfigError
from reactive_rag.store import (
    InvalidCursor,
    RunNotFound,
    SessionNotFound,
    StoreClosed,
    StoreError,
    StoreUnavailable,
)

from ._exceptions import Problem
from ._redact import redact_secrets

__all__ = [
    "PROBLEM_CODES",
    "ProblemAppRunner",
    "ProblemRequestHandler",
    "ProblemServer",
    "parser_problem",
    "problem_middleware",
    "problem_response",
    "run_not_found",
    "session_not_found",
]

log = logging.getLogger("reactive_rag.server")

PROBLEM_CONTENT_TYPE = "application/problem+json"

PROBLEM_CODES: dict[str, str] = {
    "unauthorized": "A valid bearer token is required",
    "run_not_found": "No such run",
    "run_not_resumable": "The run cannot be resumed (it is not interrupted)",
    "run_still_running": "The run is still running: cancel it first",
    "session_not_found": "No such session",
    "session_busy": "The session's previous run is still going",
    "collection_forbidden": "Collection not allowed",
    "document_not_found": "No such document",
    "collection_not_found": "No such collection",
    "collection_exists": "A collection of that name exists",
    "collection_read_only": "The collection is read-only for you",
    "nothing_to_index": "No file or document could be indexed",
    "storage_quota": "The upload is over this tenant's storage quota",
    "task_not_found": "No such task",
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
    "too_many_runs_per_hour": "Too many requests",
    "too_many_runs_per_day": "Too many requests",
    "too_many_tokens_per_day": "Too many requests",
    "budget_over_cap": "The budget is over this tenant's cap",
    "route_not_found": "No such route",
    "method_not_allowed": "Method not allowed",
    "websocket_required": "This route needs a WebSocket upgrade",
    "bad_request": "The request is not valid HTTP",
    "headers_too_large": "The request line or headers are too large",
    "store_unavailable": "The run store is unavailable",
    "replicas_unavailable": "No engine replica could take the run",
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


def session_not_found() -> Problem:
    """The one answer for a missing, expired or another tenant's session (ids never leak)."""
    return make_problem(404, "session_not_found", "no session with this id is visible to you")


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
    except SessionNotFound:
        return problem_response(session_not_found())
    except InvalidCursor:
        return problem_response(make_problem(422, "invalid_cursor", field="cursor"))
    except RunConfigError as exc:
        return problem_response(make_problem(422, "run_config", _safe(str(exc))))
    except (StoreUnavailable, StoreClosed):
        return problem_response(make_problem(503, "store_unavailable",
                                             headers={"Retry-After": "1"}))
    except ReplicasUnavailable:
        log.warning("no engine replica took a run", exc_info=True)
        return problem_response(make_problem(503, "replicas_unavailable",
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


# --- rejects by aiohttp's HTTP parser -------------------------------------------------------


def parser_problem(status: int, exc: BaseException | None) -> Problem:
    """The problem for a request aiohttp rejected before any route (or middleware) saw it.

    aiohttp answers every parse error with 400; a size limit (the request line
    or one header over ``max_line_size``/``max_field_size``, more than
    ``max_headers`` fields) becomes 431 ``headers_too_large``, anything else
    400 ``bad_request``. The detail never echoes the request's bytes (they
    may hold a token).
    """
    if status == 400 and (isinstance(exc, LineTooLong) or (
            isinstance(exc, HttpProcessingError) and exc.message.startswith("Too many headers"))):
        return make_problem(431, "headers_too_large",
                            "the request line or a header field is over the size limit, "
                            "or there are too many header fields")
    if status >= 500:
        return make_problem(status, "internal")
    return make_problem(status, "bad_request", _parse_error_detail(exc))


_QUOTED = re.compile(r"(?:^|\W)b?['\"]")
"""A quotation (``'...'``, ``b'...'``) in a parser message: the request's own bytes."""


def _parse_error_detail(exc: BaseException | None) -> str:
    """What was wrong, from the parser's own words, without the bytes it quotes."""
    if isinstance(exc, BadHttpMethod):
        if exc.message.startswith("Received HTTPS"):
            return "TLS (https) was sent to a plain HTTP port"
        return "the request line has an invalid HTTP method"
    if isinstance(exc, HttpProcessingError):
        if exc.message.startswith("Pause on PRI"):
            return "HTTP/2 is not supported here: use HTTP/1.1"
        words = []
        for line in exc.message.splitlines():
            line = line.strip().rstrip(":").strip()
            if not line:
                continue
            if line.startswith(("bytearray(", "^")) or _QUOTED.search(line):
                break  # the quoted request bytes (and the caret under them) start here
            words.append(line)
        detail = ": ".join(words)
        if detail and len(detail) <= 120:
            return redact_secrets(detail)
    return "the request is not valid HTTP/1.1"


class ProblemRequestHandler(web.RequestHandler):
    """aiohttp's connection handler, answering its own rejects as JSON problems.

    aiohttp answers a request its parser rejects (bad request line, invalid
    header bytes, a line over the size limit), and an exception that escaped
    every middleware, from :meth:`handle_error` with a ``text/plain`` body and
    no route or middleware involved. This override keeps aiohttp's logging of
    the error (which :class:`~._redact.SecretRedactingFilter` rewrites) and its
    refusal once a response has started, and answers the problem instead; the
    connection is closed as before (the byte stream cannot be trusted after a
    parse error), the server goes on.
    """

    __slots__ = ()

    def handle_error(self, request: BaseRequest, status: int = 500,
                     exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        super().handle_error(request, status, exc, message)  # logs; raises if already sent
        response = problem_response(parser_problem(status, exc))
        response.force_close()
        return response


class ProblemServer(web.Server):
    """``web.Server`` whose connections are handled by :class:`ProblemRequestHandler`."""

    def __call__(self) -> web.RequestHandler:
        return ProblemRequestHandler(self, loop=self._loop, **self._kwargs)


class ProblemAppRunner(web.AppRunner):
    """``web.AppRunner`` serving with :class:`ProblemServer` (same arguments, same lifecycle).

    aiohttp has no setting for the connection handler's class: ``AppRunner``
    builds its ``web.Server`` in ``_make_server`` (the hook ``BaseRunner``
    subclasses implement) and the server builds a ``RequestHandler`` per
    connection. This runner lets aiohttp build the server as usual (startup
    signals, handler arguments, access logger) and only changes its class, so
    that the one method that differs, the per-connection factory, is ours.
    """

    __slots__ = ()

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = ProblemServer
        return server
