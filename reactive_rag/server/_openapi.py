"""The OpenAPI 3.1 document of the service, served at ``/v1/openapi.json``.

Written by hand next to the routes (a test checks that every route of the app
is documented and every documented path is routed); the request body schema
comes from the pydantic model the handler validates with, so the two cannot
drift apart.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, get_args

from streams import Outcome

from ._models import RunRequest
from ._problems import PROBLEM_CODES

__all__ = ["openapi_document"]


def _problem(description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/problem+json": {
                "schema": {"$ref": "#/components/schemas/Problem"}}}}


def _json(description: str, ref: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}}}


_RUN_ID = {"name": "run_id", "in": "path", "required": True,
           "schema": {"type": "string", "pattern": "^[A-Za-z0-9]{1,64}$"}}
_AFTER = {"name": "after", "in": "query", "required": False,
          "description": "resume after this event seq",
          "schema": {"type": "integer", "minimum": 0}}
_LAST_EVENT_ID = {"name": "Last-Event-ID", "in": "header", "required": False,
                  "description": "resume after this event seq (sent by browsers on reconnect)",
                  "schema": {"type": "string", "pattern": "^[0-9]{1,15}$"}}
_ERRORS = {"401": _problem("missing or wrong bearer token"),
           "404": _problem("no run with this id is visible to you")}


def openapi_document(extra_paths: dict[str, Any] | None = None,
                     extra_codes: tuple[str, ...] = ()) -> dict[str, Any]:
    """The whole document, with the paths and problem codes of mounted extras (tasks)."""
    doc = copy.deepcopy(_base_document())
    if extra_paths:
        doc["paths"].update(copy.deepcopy(extra_paths))
    if extra_codes:
        code = doc["components"]["schemas"]["Problem"]["properties"]["code"]
        code["enum"] = sorted({*code["enum"], *extra_codes})
    return doc


@functools.cache
def _base_document() -> dict[str, Any]:
    request_schema = RunRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    link_props = {k: {"type": "string"} for k in ("self", "events", "ws", "cancel")}
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
            "last_seq": {"type": "integer"},
            "links": {"type": "object", "properties": link_props},
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
            },
        }],
    }
    problem = {
        "type": "object",
        "required": ["type", "title", "status", "code", "detail"],
        "properties": {
            "type": {"type": "string"}, "title": {"type": "string"},
            "status": {"type": "integer"}, "code": {"enum": sorted(PROBLEM_CODES)},
            "detail": {"type": "string"}, "field": {"type": "string"},
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "reactive-rag", "version": "1",
                 "description": "Start agent runs, stream their events (SSE / WebSocket) "
                                "with resume, cancel them, list them."},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "RunRequest": request_schema,
                "RunCreated": {"type": "object", "required": ["run_id", "links"],
                               "properties": {"run_id": {"type": "string"},
                                              "links": {"type": "object",
                                                        "properties": link_props}}},
                "RunSummary": run_summary,
                "RunDetail": run_detail,
                "RunPage": {"type": "object", "required": ["runs", "next_cursor"],
                            "properties": {
                                "runs": {"type": "array",
                                         "items": {"$ref": "#/components/schemas/RunSummary"}},
                                "next_cursor": {"type": ["string", "null"]}}},
                "CancelResult": {"type": "object", "required": ["run_id", "cancelled"],
                                 "properties": {"run_id": {"type": "string"},
                                                "cancelled": {"type": "boolean"}}},
                "Status": {"type": "object", "properties": {"status": {"type": "string"}}},
                "Problem": problem,
            },
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/runs": {
                "post": {
                    "operationId": "startRun", "summary": "Start a run",
                    "requestBody": {"required": True, "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/RunRequest"}}}},
                    "responses": {
                        "201": _json("the run was started", "RunCreated"),
                        "400": _problem("the body is not JSON"),
                        "401": _ERRORS["401"],
                        "403": _problem("a collection the tenant may not search"),
                        "413": _problem("the body is too large"),
                        "415": _problem("the body is not application/json"),
                        "422": _problem("invalid fields or run options"),
                        "429": _problem("rate limited; see Retry-After"),
                    },
                },
                "get": {
                    "operationId": "listRuns", "summary": "The tenant's runs, newest first",
                    "parameters": [
                        {"name": "limit", "in": "query", "required": False,
                         "schema": {"type": "integer", "minimum": 1, "maximum": 200}},
                        {"name": "cursor", "in": "query", "required": False,
                         "schema": {"type": "string", "maxLength": 200}},
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
                        "200": {"description": "an event stream",
                                "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                        **_ERRORS, "422": _problem("invalid after / Last-Event-ID"),
                    },
                },
            },
            "/v1/runs/{run_id}/ws": {
                "get": {
                    "operationId": "runWebSocket",
                    "summary": "The run's events over a WebSocket (JSON text messages); "
                               'send {"cancel": true} to cancel',
                    "parameters": [_RUN_ID, _AFTER],
                    "responses": {"101": {"description": "switching to WebSocket"},
                                  **_ERRORS, "422": _problem("invalid after")},
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
            "/v1/openapi.json": {
                "get": {"operationId": "openapi", "summary": "This document", "security": [],
                        "responses": {"200": {"description": "OpenAPI 3.1 document"}}},
            },
            "/healthz": {
                "get": {"operationId": "healthz", "summary": "The process is up",
                        "security": [],
                        "responses": {"200": _json("alive", "Status")}},
            },
            "/readyz": {
                "get": {"operationId": "readyz",
                        "summary": "The store is open and the index readable", "security": [],
                        "responses": {"200": _json("ready", "Status"),
                                      "503": _problem("not ready")}},
            },
        },
    }
