"""The event stream's AsyncAPI 3 document, generated from the event models (GET /asyncapi.json).

Integrators used to hand-code the stream from the README's table; this document is
built from the same pydantic classes the server encodes with, so it cannot list a
type, a field or an enum value the wire does not carry (``docs/asyncapi.json`` is a
generated copy, and a test fails when it falls behind the models). It describes the
server, as AsyncAPI 3 does an application: the server *sends* a run's events on the
SSE and WebSocket channels and *receives* a WebSocket client's cancel.
"""

from __future__ import annotations

import functools
import inspect
import json
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from aiohttp import web
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, models_json_schema
from pydantic_core import core_schema

from streams import EVENT_TYPES, Event

__all__ = [
    "ASYNCAPI_VERSION",
    "SSE_CHANNEL",
    "WS_CHANNEL",
    "asyncapi_document",
    "asyncapi_json",
    "asyncapi_openapi_paths",
    "asyncapi_routes",
    "run_event_types",
]

ASYNCAPI_VERSION = "3.0.0"
SSE_CHANNEL = "runEvents"
"""The key of the SSE channel (``/v1/runs/{run_id}/events``) in ``channels``."""
WS_CHANNEL = "runSocket"
"""The key of the WebSocket channel (``/v1/runs/{run_id}/ws``) in ``channels``."""

_SCHEMAS = "#/components/schemas/"
_MAX_SEQ = 10**15 - 1  # ``after`` and ``Last-Event-ID`` take at most 15 digits

asyncapi_routes = web.RouteTableDef()


def run_event_types() -> dict[str, type[Event]]:
    """The run stream's event classes by ``type``, sorted: the ones :mod:`streams` defines.

    Background tasks' ``task.*`` events travel on another stream, and a plugin's
    events (:func:`streams.register_event`) are its own to describe.
    """
    home = Event.__module__.partition(".")[0]
    return {name: cls for name, cls in sorted(EVENT_TYPES.items())
            if cls.__module__.partition(".")[0] == home}


class _WireSchema(GenerateJsonSchema):
    """Serialization schemas where every field is required: ``encode_json`` writes them all."""

    def field_is_required(
        self,
        field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        if self.mode == "serialization" and field["type"] != "typed-dict-field":
            return field.get("serialization_exclude_if") is None
        return super().field_is_required(field, total)


_ENVELOPE: dict[str, dict[str, Any]] = {
    "type": {"description": "the event type; the SSE `event:` field and the message name"},
    "v": {"description": "the schema version of this event type (a newer `v` than a "
                         "client knows is a newer payload)"},
    "run_id": {"description": "the run this event belongs to", "minLength": 1},
    "seq": {"description": "position in the run's log: from 1, strictly increasing and "
                           "gap-free per run; the SSE `id:`", "minimum": 1},
    "ts": {"description": "when the run's stream published it (Unix seconds)"},
    "actor": {"description": "the actor that published it (`controller`, `planner`, "
                           "`searcher`, ...; empty when none did)"},
    "cause": {"description": "the seq of the event this one answers (a request's reply), "
                             "else null"},
}
"""The envelope every event schema carries, described once (the models leave it bare)."""
_STAMPED = ("run_id", "seq", "ts")
"""Envelope fields the stream stamps on every event it publishes."""


def _payload_schemas(types: dict[str, type[Event]]) -> tuple[dict[str, str], dict[str, Any]]:
    """Each event type's schema name, and every schema (events and their values)."""
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (cls, "serialization") for cls in types.values()]
    refs, top = models_json_schema(models, ref_template=_SCHEMAS + "{model}",
                                   schema_generator=_WireSchema)
    schemas: dict[str, Any] = top.get("$defs", {})
    names = {name: refs[(cls, "serialization")]["$ref"].removeprefix(_SCHEMAS)
             for name, cls in types.items()}
    for event_type, name in names.items():
        properties = schemas[name]["properties"]
        for field, notes in _ENVELOPE.items():
            properties[field] = {**properties[field], **notes}
            if field in _STAMPED:  # a model's default, never what the wire carries
                properties[field].pop("default", None)
        # a stored event keeps the version it was written with; none is newer than the class
        properties["v"].update(minimum=1, maximum=types[event_type].model_fields["v"].default)
    return names, schemas


def _message(name: str, cls: type[Event], schema: str) -> dict[str, Any]:
    summary, _, rest = inspect.cleandoc(cls.__doc__ or name).partition("\n\n")
    message: dict[str, Any] = {
        "name": name,
        "title": cls.__name__,
        "summary": " ".join(summary.split()),
        "contentType": "application/json",
        "payload": {"$ref": _SCHEMAS + schema},
        "correlationId": {"$ref": "#/components/correlationIds/cause"},
        "x-priority": cls.priority.name.lower(),
    }
    if rest.strip():
        message["description"] = rest.strip()
    if cls.replies:
        message["x-replies"] = list(cls.replies)
    return message


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    """A closed object whose every property is required."""
    return {"type": "object", "required": sorted(properties), "properties": properties,
            "additionalProperties": False}


_CONTROL: dict[str, tuple[str, str, dict[str, Any]]] = {
    # message name: (schema name, summary, payload schema)
    "detached": ("SseDetached", "SSE only, sent without an `id:` as the last message: the "
                 "client could not keep up (or the event source failed) and is cut off; "
                 "reconnect with `Last-Event-ID` to go on", _object({"reason": {
                     "type": "string", "description": "why, for people"}})),
    "stream.detached": ("WsDetached", "WebSocket only: as SSE's `detached`, then the "
                        "server closes with 1013", _object({
                            "type": {"const": "stream.detached"},
                            "reason": {"type": "string", "description": "why, for people"}})),
    "cancel.result": ("CancelResult", "WebSocket only: the answer to a client's cancel",
                      _object({"type": {"const": "cancel.result"}, "cancelled": {
                          "type": "boolean",
                          "description": "true: cancelled here, or recorded for the replica "
                                         "running the run (it cancels within 1 s); false: the "
                                         "run had already ended"}})),
    "error": ("WsError", "WebSocket only: the answer to any client message but a cancel",
              _object({"type": {"const": "error"}, "code": {"const": "invalid_message"},
                       "detail": {"type": "string"}})),
    "cancel": ("CancelRequest", "WebSocket, client to server: cancel the run (closing the "
               "connection never does)", {
                   "type": "object", "required": ["cancel"],
                   "properties": {"cancel": {"const": True}}}),
}
"""The stream's own messages: not events of the run, never stored, no ``seq``."""

_SSE_CONTROL = ("detached",)
_WS_SENT = ("stream.detached", "cancel.result", "error")

_DESCRIPTION = """\
The event stream of a reactive-rag run, as `reactive-rag serve` sends it. Every message \
but the stream's own (`detached`, `stream.detached`, `cancel.result`, `error`) is an \
event of the run: its `type` is the message name, its payload the event's JSON.

- **Order.** A run's events carry `seq`, from 1, strictly increasing and gap-free per \
run, and reach a client in seq order. A client gets only events the store has committed \
(one exception: the `failed` ending of a run the store stopped taking, stored once the \
store is back).
- **Resume.** Send `Last-Event-ID: N` (browsers do on reconnect) or `?after=N` (the \
header wins when both are sent; each must be a non-negative integer of at most 15 \
digits, else 422): the stream gives every event with seq > N exactly once, with no gap \
and no duplicate. At or past the end of an ended run it gives the run's last \
`run.finished` again, never an empty stream.
- **End.** The stream ends after `run.finished`, unless its outcome is `interrupted` (the \
server died) and the run has been resumed: the log then goes on with `run.resumed` \
(`after_seq` = that seq) to a new `run.finished`, and the stream with it. A run's log \
may so hold several `run.finished`, every one but the last of outcome `interrupted`; \
resume after an `interrupted` one to follow a later resume.
- **Slow clients.** A client that falls behind a bounded buffer may miss progress \
events (`x-priority: progress`, e.g. `budget.tick`), never others: if it cannot keep up \
even so it is detached with a reason (`detached` on SSE, `stream.detached` then close \
1013 on a WebSocket). The run never waits for a client, and closing a connection never \
cancels it.
- **Scope.** Send `Authorization: Bearer <token>` (browsers may use `?access_token=`); \
a run of another tenant is a 404 problem before anything is streamed. A server with no \
tenants needs no token.

Each event payload is the event model's JSON schema (every field is always present; \
extra fields are never sent). `x-replies` names the events that answer a request \
event (their `cause` is its seq), `x-priority` what a slow client may lose. Events of \
plugins (`streams.register_event`) may appear too and are not listed."""

_SSE_DESCRIPTION = """\
Server-Sent Events (`text/event-stream`). The stream opens with `retry: 1000`; each \
event is one message `id: <seq>` / `event: <type>` / `data: <event JSON on one line>`; \
`: keep-alive` comments come while the run is idle (every `keepalive_s`, default 15 s). \
`detached` is the only message without an `id`."""

_WS_DESCRIPTION = """\
A WebSocket: each event is one JSON text message (the SSE `data`). After `run.finished` \
the server closes with 1000; a server shutting down closes with 1001. The client may \
send `{"cancel": true}` (answered by `cancel.result`); any other text message is \
answered by `error`, and binary messages are ignored. Client messages are at most \
4096 bytes. The server pings every `keepalive_s` (default 15 s)."""

_RUN_ID = {"description": "a run id (`run_id` of the 201 answer to `POST /v1/runs`)"}
_AFTER = {"type": "integer", "minimum": 0, "maximum": _MAX_SEQ,
          "description": "resume after this seq (`Last-Event-ID` wins when both are sent)"}
_ACCESS_TOKEN = {"type": "string",
                 "description": "the bearer token, for clients that cannot send headers"}
_QUERY = {"type": "object", "properties": {"after": _AFTER, "access_token": _ACCESS_TOKEN}}
_HEADERS = {"type": "object", "properties": {
    "Authorization": {"type": "string", "pattern": "^Bearer .+$"},
    "Last-Event-ID": {"type": "string", "pattern": "^[0-9]{1,15}$",
                      "description": "resume after this seq"}}}


def _servers() -> dict[str, Any]:
    security = [{"$ref": "#/components/securitySchemes/bearer"},
                {"$ref": "#/components/securitySchemes/accessToken"}]
    host = {"host": {"default": "localhost:8080",
                     "description": "host:port of a `reactive-rag serve`"}}
    return {
        "http": {"host": "{host}", "protocol": "http", "variables": host,
                 "security": security, "description": "the SSE stream (https behind TLS)"},
        "ws": {"host": "{host}", "protocol": "ws", "variables": host,
               "security": security, "description": "the WebSocket (wss behind TLS)"},
    }


def _refs(prefix: str, names: list[str]) -> dict[str, dict[str, str]]:
    return {name: {"$ref": f"{prefix}{name}"} for name in names}


def asyncapi_document() -> dict[str, Any]:
    """The AsyncAPI 3.0 document of a run's event stream (a fresh dict on every call)."""
    return _document(run_event_types())


def _document(types: dict[str, type[Event]]) -> dict[str, Any]:
    names, schemas = _payload_schemas(types)
    messages = {name: _message(name, cls, names[name]) for name, cls in types.items()}
    for name, (schema, summary, payload) in _CONTROL.items():
        if name in messages or schema in schemas:
            raise RuntimeError(f"event type or model {name!r}/{schema!r} clashes with a "
                               "message of the stream's own")
        schemas[schema] = payload
        messages[name] = {"name": name, "title": schema, "summary": summary,
                          "contentType": "application/json", "payload": {"$ref": _SCHEMAS + schema}}
    events = list(types)
    sse = [*events, *_SSE_CONTROL]
    ws = [*events, *_WS_SENT, "cancel"]
    channel = "#/components/messages/"
    return {
        "asyncapi": ASYNCAPI_VERSION,
        "info": {"title": "reactive-rag run events", "version": _package_version(),
                 "description": _DESCRIPTION, "license": {"name": "Apache-2.0"}},
        "defaultContentType": "application/json",
        "servers": _servers(),
        "channels": {
            SSE_CHANNEL: {
                "address": "/v1/runs/{run_id}/events", "title": "A run's events over SSE",
                "description": _SSE_DESCRIPTION, "servers": [{"$ref": "#/servers/http"}],
                "parameters": {"run_id": _RUN_ID}, "messages": _refs(channel, sse)},
            WS_CHANNEL: {
                "address": "/v1/runs/{run_id}/ws", "title": "A run's events over a WebSocket",
                "description": _WS_DESCRIPTION, "servers": [{"$ref": "#/servers/ws"}],
                "parameters": {"run_id": _RUN_ID}, "messages": _refs(channel, ws),
                "bindings": {"ws": {"method": "GET", "query": _QUERY, "headers": _HEADERS,
                                    "bindingVersion": "0.1.0"}}},
        },
        "operations": {
            "sendRunEvents": {
                "action": "send", "channel": {"$ref": f"#/channels/{SSE_CHANNEL}"},
                "summary": "The server streams a run's events from `after` to its end",
                "messages": list(_refs(f"#/channels/{SSE_CHANNEL}/messages/", sse).values()),
                "bindings": {"http": {"method": "GET", "query": _QUERY,
                                      "bindingVersion": "0.3.0"}}},
            "sendRunEventsOverWebSocket": {
                "action": "send", "channel": {"$ref": f"#/channels/{WS_CHANNEL}"},
                "summary": "The server sends a run's events from `after` to its end",
                "messages": list(_refs(f"#/channels/{WS_CHANNEL}/messages/",
                                       [*events, "stream.detached"]).values())},
            "receiveCancel": {
                "action": "receive", "channel": {"$ref": f"#/channels/{WS_CHANNEL}"},
                "summary": "The server takes a client's cancel and answers it",
                "messages": [{"$ref": f"#/channels/{WS_CHANNEL}/messages/cancel"}],
                "reply": {"channel": {"$ref": f"#/channels/{WS_CHANNEL}"}, "messages": list(
                    _refs(f"#/channels/{WS_CHANNEL}/messages/",
                          ["cancel.result", "error"]).values())}},
        },
        "components": {
            "schemas": dict(sorted(schemas.items())),
            "messages": dict(sorted(messages.items())),
            "correlationIds": {"cause": {
                "location": "$message.payload#/cause",
                "description": "a reply's `cause` is the `seq` of the request it answers"}},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "a tenant's token (none in open mode)"},
                "accessToken": {"type": "httpApiKey", "name": "access_token", "in": "query",
                                "description": "the same token as a query parameter, for "
                                               "browsers (hidden in the access log)"}},
        },
    }


def asyncapi_json() -> str:
    """:func:`asyncapi_document` as the text of ``docs/asyncapi.json``: sorted keys, two-space
    indents, a trailing newline (the same models always give the same bytes)."""
    return _text(tuple(run_event_types().items()))


@functools.lru_cache(maxsize=1)
def _text(types: tuple[tuple[str, type[Event]], ...]) -> str:
    """Built once per set of event classes: building takes tens of milliseconds."""
    return json.dumps(_document(dict(types)), indent=2, sort_keys=True,
                      ensure_ascii=False) + "\n"


def _package_version() -> str:
    try:
        return version("reactive-rag")
    except PackageNotFoundError:  # pragma: no cover - run from a bare source tree
        return "0+unknown"


def asyncapi_openapi_paths() -> dict[str, Any]:
    """``/asyncapi.json`` for the OpenAPI document (``extra_paths``)."""
    return {"/asyncapi.json": {"get": {
        "operationId": "asyncapi", "security": [],
        "summary": "The AsyncAPI 3.0 document of a run's event stream (SSE and WebSocket)",
        "responses": {"200": {"description": "AsyncAPI 3.0 document", "content": {
            "application/json": {"schema": {
                "type": "object", "required": ["asyncapi", "info", "channels"]}}}}}}}}


@asyncapi_routes.get("/asyncapi.json")
async def asyncapi(request: web.Request) -> web.Response:
    """Unauthenticated, like ``/v1/openapi.json``: it holds no tenant data."""
    return web.Response(text=asyncapi_json(), content_type="application/json")

