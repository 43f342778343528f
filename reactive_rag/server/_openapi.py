"""The OpenAPI 3.1 document of the service, served at ``/v1/openapi.json``.

Written by hand next to the routes (a test checks that every route of the app
is documented and every documented path is routed); the request body schema
comes from the pydantic model the handler validates with, so the two cannot
drift apart. ``tests/reactive_rag/server/test_openapi_conformance.py`` runs schemathesis
(every check) against a real server process with it: what a route answers,
status by status, header by header and SSE event by event, is what this says.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, get_args

from streams import Outcome, RequestKind

from ._config import SESSION_TTL_CAP_S
from ._models import _BUDGET_MAX, BUDGET_FIELDS, RunRequest
from ._problems import PROBLEM_CODES
from ._usage_routes import USAGE_SCHEMA

__all__ = ["openapi_document"]


def _problem(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description, "content": {
        "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}}
    if headers:
        response["headers"] = headers
    return response


def _json(description: str, ref: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description, "content": {
        "application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}}}
    if headers:
        response["headers"] = headers
    return response


def _header(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "required": True, "schema": schema}


def _ci(word: str) -> str:
    """A regex matching ``word`` in any case (JSON Schema patterns have no flags)."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in word)


_RETRY_AFTER = {"Retry-After": _header("seconds to wait before trying again",
                                       {"type": "string", "pattern": "^[0-9]+$"})}
_WWW_AUTHENTICATE = {"WWW-Authenticate": _header("the scheme to authenticate with",
                                                 {"type": "string"})}
_MAX_SEQ = 10**15 - 1
"""``after`` and ``Last-Event-ID`` take at most 15 digits."""

_RUN_ID = {"name": "run_id", "in": "path", "required": True,
           "description": "a run id (any other string is a run that does not exist: 404)",
           "schema": {"type": "string", "pattern": "^[A-Za-z0-9]{1,64}$"}}
_SESSION_ID = {"name": "session_id", "in": "path", "required": True,
               "description": "a session id (any other string is a session that does not "
                              "exist: 404)",
               "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,128}$"}}
_SESSION_404 = _problem("no session with this id is visible to you (missing, expired, or "
                        "another tenant's: `session_not_found`)")
_AFTER = {"name": "after", "in": "query", "required": False,
          "description": "resume after this event seq (Last-Event-ID wins when both are sent; "
                         "both must be valid)",
          "schema": {"type": "integer", "minimum": 0, "maximum": _MAX_SEQ}}
_LAST_EVENT_ID = {"name": "Last-Event-ID", "in": "header", "required": False,
                  "description": "resume after this event seq (sent by browsers on reconnect)",
                  "schema": {"type": "string", "pattern": "^[0-9]{1,15}$"}}
_WS_HANDSHAKE = [
    {"name": "Upgrade", "in": "header", "required": True,
     "schema": {"type": "string", "pattern": f"^{_ci('websocket')}$"}},
    {"name": "Connection", "in": "header", "required": True,
     "description": "a comma-separated list holding the token `upgrade`",
     "schema": {"type": "string",
                "pattern": f"^(?:[^,]*,)*[ \\t]*{_ci('upgrade')}[ \\t]*(?:,[^,]*)*$"}},
    {"name": "Sec-WebSocket-Version", "in": "header", "required": True,
     "schema": {"enum": ["13", "8", "7"]}},
    {"name": "Sec-WebSocket-Key", "in": "header", "required": True,
     "description": "16 random bytes, base64",
     "schema": {"type": "string", "pattern": "^[A-Za-z0-9+/]{21}[AQgw]==$"}},
]
_ERRORS = {"401": _problem("missing or wrong bearer token", _WWW_AUTHENTICATE),
           "404": _problem("no run with this id is visible to you")}
_WHITESPACE = "".join(f"\\u{ord(c):04x}" for c in map(chr, range(0x3001)) if c.isspace())
_QUESTION_PATTERN = f"^[^\\u0000]*[^\\u0000{_WHITESPACE}][^\\u0000]*$"
"""Not blank (Python's ``str.isspace`` whitespace, exactly) and no NUL character."""


def openapi_document(extra_paths: dict[str, Any] | None = None,
                     extra_codes: tuple[str, ...] = (), *,
                     open_mode: bool = False) -> dict[str, Any]:
    """The whole document, with the paths and problem codes of mounted extras (tasks).

    ``open_mode``: the server has no tenants, so nothing needs a token and
    nothing answers 401; the document says so.
    """
    doc = copy.deepcopy(_base_document())
    for path, item in copy.deepcopy(extra_paths or {}).items():
        doc["paths"].setdefault(path, {}).update(item)  # an extra may add a method to a path
    if extra_codes:
        code = doc["components"]["schemas"]["Problem"]["properties"]["code"]
        code["enum"] = sorted({*code["enum"], *extra_codes})
    if open_mode:
        doc["security"] = []
        doc["info"]["description"] += (" This server runs in open mode (no tenants): no "
                                       "request needs a token.")
        for item in doc["paths"].values():
            for operation in item.values():
                operation.get("responses", {}).pop("401", None)
    return doc


@functools.cache
def _base_document() -> dict[str, Any]:
    request_schema = _run_request_schema()
    links = {"type": "object", "required": ["self", "events", "ws", "cancel"],
             "properties": {k: {"type": "string"} for k in ("self", "events", "ws", "cancel")}}
    run_summary = {
        "type": "object",
        "required": ["run_id", "status", "outcome", "question", "mode", "created", "updated",
                     "last_seq", "links"],
        "properties": {
            "run_id": {"type": "string"},
            "status": {"enum": ["running", "finished", "interrupted"]},
            "outcome": {"enum": [*get_args(Outcome), None],
                        "description": "how the run ended (null while it runs); `partial`: "
                                       "the answer covers only part of the question and says "
                                       "what is missing"},
            "question": {"type": "string"},
            "mode": {"type": "string"},
            "created": {"type": "number", "description": "Unix seconds"},
            "updated": {"type": "number", "description": "Unix seconds"},
            "last_seq": {"type": "integer", "minimum": 0},
            "links": {"$ref": "#/components/schemas/RunLinks"},
        },
    }
    run_detail = {
        "allOf": [{"$ref": "#/components/schemas/RunSummary"}, {
            "type": "object",
            "properties": {
                "answer": {"type": "string"},
                "reason": {"type": "string"},
                "collections": {"type": "array", "items": {"type": "string"}},
                "citations": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "number": {"type": "integer"}, "statement": {"type": "string"},
                        "quote": {"type": "string"}, "source_id": {"type": "string"},
                        "title": {"type": ["string", "null"]},
                        "url": {"type": ["string", "null"]}}}},
                "usage": {**USAGE_SCHEMA, "description": "what the run used (so far, while "
                                                         "it runs) and its estimated cost"},
                "task": {"description": "a `handed_off` run's background task (else null): "
                                        "follow it at `link` (GET /v1/tasks/{task_id})",
                         "oneOf": [{"type": "null"}, {
                             "type": "object", "required": ["task_id", "kind", "link"],
                             "properties": {k: {"type": "string"} for k in (
                                 "task_id", "kind", "link", "collection", "doc_id")}}]},
            },
        }],
    }
    problem = {
        "type": "object",
        "required": ["type", "title", "status", "code", "detail"],
        "properties": {
            "type": {"type": "string", "pattern": "^urn:reactive-rag:problem:[a-z_]+$"},
            "title": {"type": "string"},
            "status": {"type": "integer", "minimum": 400, "maximum": 599},
            "code": {"enum": sorted(PROBLEM_CODES)},
            "detail": {"type": "string"}, "field": {"type": "string"},
        },
    }
    cursor = "^[0-9]{16}:[A-Za-z0-9]{1,64}$"
    return {
        "openapi": "3.1.0",
        "info": {"title": "reactive-rag", "version": "1",
                 "description": "Start agent runs, stream their events (SSE / WebSocket) "
                                "with resume, cancel them, list them. Every error is a JSON "
                                "problem (`application/problem+json`), also a request "
                                "rejected as invalid HTTP (400 `bad_request`) or with a "
                                "request line or headers over the size limit (431 "
                                "`headers_too_large`)."},
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "access_token": {"type": "apiKey", "in": "query", "name": "access_token",
                                 "description": "the same token, for browsers' EventSource "
                                                "and WebSocket (which cannot send headers)"},
            },
            "schemas": {
                "RunRequest": request_schema,
                "RunLinks": links,
                "RunCreated": {"type": "object", "required": ["run_id", "links"],
                               "properties": {"run_id": {"type": "string"},
                                              "links": {"$ref": "#/components/schemas/RunLinks"}}},
                "RunResumed": {"type": "object", "required": ["run_id", "resumed", "links"],
                               "properties": {"run_id": {"type": "string"},
                                              "resumed": {"const": True},
                                              "links": {"$ref": "#/components/schemas/RunLinks"}}},
                "RunSummary": run_summary,
                "RunDetail": run_detail,
                "RunPage": {"type": "object", "required": ["runs", "next_cursor"],
                            "properties": {
                                "runs": {"type": "array",
                                         "items": {"$ref": "#/components/schemas/RunSummary"}},
                                "next_cursor": {"anyOf": [{"type": "string", "pattern": cursor},
                                                          {"type": "null"}]}}},
                "CancelResult": {
                    "type": "object", "required": ["run_id", "cancelled", "accepted"],
                    "properties": {
                        "run_id": {"type": "string"},
                        "cancelled": {"type": "boolean",
                                      "description": "this server cancelled the run now"},
                        "accepted": {"type": "boolean", "description": (
                            "the cancel will be acted on: done here, or recorded for the "
                            "replica running the run (which cancels it within 1 s); false: "
                            "the run had already ended")}}},
                "Status": {"type": "object", "required": ["status"],
                           "properties": {"status": {"type": "string"}}},
                **_session_schemas(),
                "Event": EVENT_ENVELOPE,
                **_event_replies_schemas(),
                "RunStreamEvent": _run_stream_event(),
                "Problem": problem,
            },
        },
        "security": [{"bearer": []}, {"access_token": []}],
        "paths": {
            "/v1/runs": {
                "post": {
                    "operationId": "startRun", "summary": "Start a run",
                    "requestBody": {"required": True, "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/RunRequest"}}}},
                    "responses": {
                        "201": _json("the run was started", "RunCreated", {
                            "Location": _header("the run's URL", {"type": "string"})}),
                        "400": _problem("the body is not JSON, or cannot be read"),
                        "401": _ERRORS["401"],
                        "403": _problem("a collection the tenant may not search"),
                        "413": _problem("the body is too large"),
                        "415": _problem("the body is not application/json"),
                        "422": _problem("invalid fields or run options"),
                        "429": _problem("rate limited", _RETRY_AFTER),
                        "503": _problem("the run store is unavailable (`store_unavailable`), "
                                        "the default corpus is still being indexed "
                                        "(`not_ready`), or no engine replica could take "
                                        "the run (`replicas_unavailable`)", _RETRY_AFTER),
                    },
                },
                "get": {
                    "operationId": "listRuns", "summary": "The tenant's runs, newest first",
                    "parameters": [
                        {"name": "limit", "in": "query", "required": False,
                         "schema": {"type": "integer", "minimum": 1, "maximum": 200}},
                        {"name": "cursor", "in": "query", "required": False,
                         "description": "`next_cursor` of the previous page",
                         "schema": {"type": "string", "pattern": cursor}},
                    ],
                    "responses": {"200": _json("one page of runs", "RunPage"),
                                  "401": _ERRORS["401"],
                                  "422": _problem("invalid limit or cursor")},
                },
            },
            "/v1/runs/{run_id}": {
                "get": {
                    "operationId": "getRun", "summary": "A run's state and, once finished, "
                                                        "its answer and citations",
                    "parameters": [_RUN_ID],
                    "responses": {"200": _json("the run", "RunDetail"), **_ERRORS},
                },
            },
            "/v1/runs/{run_id}/events": {
                "get": {
                    "operationId": "runEvents",
                    "summary": "The run's events as Server-Sent Events (id = seq), "
                               "ending after run.finished",
                    "parameters": [_RUN_ID, _AFTER, _LAST_EVENT_ID],
                    "responses": {
                        "200": {"description": "an event stream: `retry: 1000`, then one "
                                               "message per event (`id` its seq, `event` its "
                                               "type, `data` its JSON), `: keep-alive` "
                                               "comments while idle, and a last `detached` "
                                               "message if the client fell too far behind",
                                "content": {"text/event-stream": {"schema": {
                                    "$ref": "#/components/schemas/RunStreamEvent"}}}},
                        **_ERRORS, "422": _problem("invalid after / Last-Event-ID"),
                    },
                },
            },
            "/v1/runs/{run_id}/ws": {
                "get": {
                    "operationId": "runWebSocket",
                    "summary": "The run's events over a WebSocket (JSON text messages); "
                               'send {"cancel": true} to cancel',
                    "parameters": [_RUN_ID, _AFTER, _LAST_EVENT_ID, *_WS_HANDSHAKE],
                    "responses": {
                        "101": {"description": "switching to WebSocket: one JSON text message "
                                               "per event, closed with 1000 after "
                                               "run.finished",
                                "headers": {
                                    "Upgrade": _header("the new protocol",
                                                       {"const": "websocket"}),
                                    "Connection": _header("upgrade", {"const": "upgrade"}),
                                    "Sec-WebSocket-Accept": _header(
                                        "the handshake's answer",
                                        {"type": "string",
                                         "pattern": "^[A-Za-z0-9+/]{27}=$"})}},
                        "400": _problem("not a WebSocket handshake (`websocket_required`)"),
                        **_ERRORS, "422": _problem("invalid after / Last-Event-ID"),
                    },
                },
            },
            "/v1/runs/{run_id}/cancel": {
                "post": {
                    "operationId": "cancelRun",
                    "summary": "Cancel a run (kept if the run has not started yet)",
                    "parameters": [_RUN_ID],
                    "responses": {"202": _json("whether this request cancelled the run",
                                               "CancelResult"), **_ERRORS},
                },
            },
            "/v1/runs/{run_id}/resume": {
                "post": {
                    "operationId": "resumeRun",
                    "summary": "Resume an interrupted run (one a crashed or stopped server "
                               "left unfinished) from its stored events",
                    "parameters": [_RUN_ID],
                    "responses": {
                        "202": _json("the run goes on; follow its events", "RunResumed"),
                        **_ERRORS,
                        "409": _problem("the run is not interrupted (`run_not_resumable`)"),
                        "422": _problem("the engine cannot go on from this run's stored "
                                        "events (`run_config`)"),
                        "429": _problem("rate limited, as for starting a run", _RETRY_AFTER),
                        "503": _problem("the run store is unavailable", _RETRY_AFTER),
                    },
                },
            },
            **_session_paths(),
            "/v1/openapi.json": {
                "get": {"operationId": "openapi", "summary": "This document", "security": [],
                        "responses": {"200": {"description": "OpenAPI 3.1 document",
                                              "content": {"application/json": {"schema": {
                                                  "type": "object",
                                                  "required": ["openapi", "info", "paths"]}}}}}},
            },
            "/v1/events/replies": {
                "get": {"operationId": "eventReplies",
                        "summary": "Which events answer each request event type, and which "
                                   "actor answers it, as the event classes declare them (what "
                                   "the page's swimlanes read); no tenant data",
                        "security": [],
                        "responses": {"200": _json("the request -> reply table",
                                                   "EventReplies")}},
            },
            "/healthz": {
                "get": {"operationId": "healthz", "summary": "The process is up",
                        "security": [],
                        "responses": {"200": _json("alive", "Status")}},
            },
            "/metrics": {
                "get": {"operationId": "metrics",
                        "summary": "Run metrics in the Prometheus text format (runs by outcome, "
                                   "run and tool-call latency, provider health, subscriber "
                                   "detaches, mailbox depths); unauthenticated like /readyz, "
                                   "no tenant data", "security": [],
                        "responses": {"200": {"description": "Prometheus text exposition",
                                              "content": {"text/plain": {"schema": {
                                                  "type": "string"}}}}}},
            },
            "/readyz": {
                "get": {"operationId": "readyz",
                        "summary": "The store is open and the index readable", "security": [],
                        "responses": {"200": _json("ready", "Status"),
                                      "503": _problem("not ready", _RETRY_AFTER)}},
            },
        },
    }


def _event_replies_schemas() -> dict[str, Any]:
    names = {"type": "array", "items": {"type": "string"}}
    request = {
        "type": "object",
        "required": ["type", "handled_by", "replies", "failures", "operation", "kind"],
        "additionalProperties": False,
        "properties": {
            "type": {"type": "string", "description": "the request's event type"},
            "handled_by": {"type": "string", "description": "the actor that answers it"},
            "replies": {**names, "minItems": 1,
                        "description": "the event types that answer it (their `cause` is "
                                       "its `seq`); `actor.failed` may answer any request"},
            "failures": {**names, "description": "the replies that say it failed"},
            "operation": {"type": "string", "description": "what it asks for, in a word"},
            "kind": {"enum": list(get_args(RequestKind))},
        },
    }
    return {
        "RequestInfo": request,
        "EventReplies": {"type": "object", "required": ["requests"], "properties": {
            "requests": {"type": "object", "description": "request event type -> what it "
                                                          "declares",
                         "additionalProperties": {"$ref": "#/components/schemas/RequestInfo"}}}},
    }


def _session_schemas() -> dict[str, Any]:
    """The bodies of the conversation-session routes."""
    links = {"type": "object", "required": ["self", "runs"],
             "properties": {k: {"type": "string"} for k in ("self", "runs")}}
    unix = {"type": "number", "description": "Unix seconds"}
    question = {"type": "string", "description": "as asked"}
    standalone = {"type": "string", "description": "the question read against the earlier "
                                                   "turns (what the run was asked)"}
    turn = {"type": "object",
            "required": ["run_id", "question", "standalone", "outcome", "answer"],
            "properties": {"run_id": {"type": "string"}, "question": question,
                           "standalone": standalone, "outcome": {"type": "string"},
                           "answer": {"type": "string"}}}
    return {
        "SessionRequest": {
            "title": "SessionRequest", "type": "object", "additionalProperties": False,
            "properties": {"ttl_s": {
                "anyOf": [{"type": "number", "minimum": 1, "maximum": SESSION_TTL_CAP_S},
                          {"type": "null"}],
                "description": "seconds the session lives after its last use (default: "
                               "the server's `session_ttl_s`; cut to its "
                               "`session_max_ttl_s`)"}}},
        "SessionLinks": links,
        "SessionCreated": {
            "type": "object", "required": ["session_id", "links", "expires"],
            "properties": {"session_id": {"type": "string"},
                           "links": {"$ref": "#/components/schemas/SessionLinks"},
                           "expires": unix}},
        "SessionRunCreated": {
            "type": "object",
            "required": ["run_id", "session_id", "question", "standalone", "links"],
            "properties": {"run_id": {"type": "string"}, "session_id": {"type": "string"},
                           "question": question, "standalone": standalone,
                           "links": {"$ref": "#/components/schemas/RunLinks"}}},
        "SessionTurn": turn,
        "SessionDetail": {
            "type": "object",
            "required": ["session_id", "created", "updated", "expires", "turns", "summary",
                         "busy"],
            "properties": {
                "session_id": {"type": "string"},
                "created": unix,
                "updated": {**unix, "description": "Unix seconds: when the last turn was "
                                                   "saved (or the session created)"},
                "expires": {**unix, "description": "Unix seconds: when the session ends "
                                                   "unless it is used again"},
                "turns": {"type": "array", "items": {"$ref": "#/components/schemas/SessionTurn"},
                          "description": "every finished turn, oldest first"},
                "summary": {"type": "string", "description": "the older turns folded (empty "
                                                            "while the history is short)"},
                "busy": {"type": "boolean", "description": "a run of this session is going"}}},
    }


def _session_paths() -> dict[str, Any]:
    """The conversation-session routes."""
    body_errors = {"400": _problem("the body is not JSON, or cannot be read"),
                   "401": _ERRORS["401"],
                   "413": _problem("the body is too large"),
                   "415": _problem("the body is not application/json")}
    return {
        "/v1/sessions": {
            "post": {
                "operationId": "createSession",
                "summary": "Start a conversation: its runs read follow-up questions against "
                           "the earlier turns",
                "requestBody": {"required": False, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/SessionRequest"}}}},
                "responses": {
                    "201": {**_json("the session was created", "SessionCreated", {
                        "Location": _header("the session's URL", {"type": "string"})}),
                        "links": {name: {"operationId": op, "parameters": {
                            "session_id": "$response.body#/session_id"}}
                            for name, op in (("GetSession", "getSession"),
                                             ("AskInSession", "startSessionRun"),
                                             ("DeleteSession", "deleteSession"))}},
                    **body_errors,
                    "422": _problem("invalid fields"),
                    "503": _problem("the run store is unavailable", _RETRY_AFTER),
                },
            },
        },
        "/v1/sessions/{session_id}": {
            "get": {
                "operationId": "getSession",
                "summary": "A session's turns and summary (this use extends its life)",
                "parameters": [_SESSION_ID],
                "responses": {"200": _json("the session", "SessionDetail"),
                              "401": _ERRORS["401"], "404": _SESSION_404},
            },
            "delete": {
                "operationId": "deleteSession",
                "summary": "End a session now (a run of it still going goes on)",
                "parameters": [_SESSION_ID],
                "responses": {"204": {"description": "the session was deleted"},
                              "401": _ERRORS["401"], "404": _SESSION_404},
            },
        },
        "/v1/sessions/{session_id}/runs": {
            "post": {
                "operationId": "startSessionRun",
                "summary": "Ask the session's next question: the run answers it read against "
                           "the earlier turns (one run at a time per session)",
                "parameters": [_SESSION_ID],
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/RunRequest"}}}},
                "responses": {
                    "201": _json("the run was started; follow it at its links", "SessionRunCreated",
                                 {"Location": _header("the run's URL", {"type": "string"})}),
                    **body_errors,
                    "403": _problem("a collection the tenant may not search"),
                    "404": _SESSION_404,
                    "409": _problem("the session's previous run is still going "
                                    "(`session_busy`)"),
                    "422": _problem("invalid fields or run options"),
                    "429": _problem("rate limited", _RETRY_AFTER),
                    "503": _problem("the run store is unavailable (`store_unavailable`) "
                                    "or the default corpus is still being indexed "
                                    "(`not_ready`)", _RETRY_AFTER),
                },
            },
        },
    }


def _run_request_schema() -> dict[str, Any]:
    """``RunRequest``'s JSON schema with the checks its validators make written out.

    pydantic's schema cannot show what the field validators check (a question
    that is not blank and has no NUL; the known budget fields, each an integer
    or a number in (0, 1e6], ``saturation_overlap`` at most 1); nor that the
    handler refuses an empty ``collections`` list.
    """
    schema = RunRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    props = schema["properties"]
    props["question"]["pattern"] = _QUESTION_PATTERN
    for option in props["collections"]["anyOf"]:
        if option.get("type") == "array":
            option["minItems"] = 1
    budget: dict[str, Any] = {}
    for name, kind in sorted(BUDGET_FIELDS.items()):
        if kind is bool:
            budget[name] = {"type": "boolean"}
        elif kind is int:
            budget[name] = {"type": "integer", "minimum": 1, "maximum": _BUDGET_MAX}
        else:
            budget[name] = {"type": "number", "exclusiveMinimum": 0,
                            "maximum": 1 if name == "saturation_overlap" else _BUDGET_MAX}
    props["budget"] = {"title": "Budget", "type": "object", "additionalProperties": False,
                       "description": "limits of this run that differ from the defaults; "
                                      "one over the tenant's cap is refused (422 "
                                      "budget_over_cap), a capped one left out gets its "
                                      "default clipped to the cap",
                       "properties": budget}
    return schema


EVENT_ENVELOPE: dict[str, Any] = {
    "type": "object",
    "description": "an event as JSON: the envelope every event has, and the fields of its "
                   "type (see `streams`' event classes)",
    "required": ["type", "v", "run_id", "seq", "ts", "actor", "cause"],
    "properties": {
        "type": {"type": "string", "minLength": 1}, "v": {"type": "integer", "minimum": 1},
        "run_id": {"type": "string"}, "seq": {"type": "integer", "minimum": 0},
        "ts": {"type": "number"}, "actor": {"type": "string"},
        "cause": {"type": ["integer", "null"]},
    },
}
"""What every event's JSON holds (SSE ``data``, WebSocket messages, stored events)."""

_EVENT_NAME = "^[a-z][a-z0-9_]*(?:\\.[a-z0-9_]+)+$"


def _run_stream_event() -> dict[str, Any]:
    """One message of a run's SSE stream: an event, or the last one of a detached client."""
    return {"oneOf": [
        {"type": "object", "required": ["id", "event", "data"],
         "properties": {
             "id": {"type": "string", "pattern": "^[1-9][0-9]*$"},
             "event": {"type": "string", "pattern": _EVENT_NAME},
             "data": {"type": "string", "contentMediaType": "application/json",
                      "contentSchema": {"$ref": "#/components/schemas/Event"}},
             "retry": {"type": "integer"}}},
        {"type": "object", "required": ["event", "data"],
         "description": "the client could not keep up; the stream ends after this",
         "properties": {
             "event": {"const": "detached"},
             "data": {"type": "string", "contentMediaType": "application/json",
                      "contentSchema": {"type": "object", "required": ["reason"],
                                        "properties": {"reason": {"type": "string"}}}}}},
    ]}
