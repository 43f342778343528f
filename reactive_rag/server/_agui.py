"""AG-UI face: a run's events as AG-UI events (``GET /v1/runs/{run_id}/agui``).

The same run, tenant scope, feed and resume rules as ``/v1/runs/{id}/events``
(:func:`~._requests.open_feed`: the stored tail, then live events, through a
bounded buffer that detaches a client too slow to keep up); only the framing
differs. Each native event becomes zero or more AG-UI events
(:class:`~._agui_mapping.AguiMapper`), encoded by the official
``ag_ui.encoder.EventEncoder``, every one sent with ``id:`` the ``seq`` of the
native event it came from, all of one native event in one write. A client
resuming with ``Last-Event-ID: N`` (or ``?after=N``) first gets a
STATE_SNAPSHOT rebuilt from the stored events up to N (``id: N``), then every
AG-UI event of the events after N, mapped by a mapper that folded 1..N first:
exactly what a client reading from the start got after N. The stream ends
after the AG-UI event of ``run.finished`` (RUN_FINISHED or RUN_ERROR).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Sequence
from typing import Any, cast

from ag_ui.core import BaseEvent, CustomEvent
from ag_ui.encoder import EventEncoder
from aiohttp import web

from reactive_rag.store import ServerStore
from streams import Event, RunFinished

from ._agui_mapping import AguiMapper
from ._feed import EventFeed
from ._requests import (
    CONFIG_KEY,
    STORE_KEY,
    after_param,
    open_feed,
    request_tenant,
    run_id_param,
)
from ._sse import ClientGone, SseWriter, relay

__all__ = ["DETACHED", "agui_openapi_paths", "agui_routes", "serve_agui"]

agui_routes = web.RouteTableDef()

DETACHED = "detached"
"""Name of the CUSTOM event (no ``id``) sent before the stream of a detached client ends."""

_ENCODER = EventEncoder()


def _frame(seq: int | None, event: BaseEvent) -> bytes:
    """One SSE message: ``id: <seq>`` (none for ``seq`` None), then the encoder's ``data:``."""
    data = _ENCODER.encode(event)
    return (data if seq is None else f"id: {seq}\n{data}").encode()


@agui_routes.get("/v1/runs/{run_id}/agui")
async def run_agui(request: web.Request) -> web.StreamResponse:
    """The run's events as AG-UI events over SSE (resumable like ``/events``)."""
    config = request.app[CONFIG_KEY]
    feed = await open_feed(request)  # 401 / 404 / 422 before anything is sent
    run_id = run_id_param(request)
    after = after_param(request)
    mapper = AguiMapper(run_id)
    async with feed:
        if after:
            await _fold_stored(request.app[STORE_KEY], run_id, request_tenant(request).name,
                               after, mapper)
        return await serve_agui(request, feed, mapper, after=after,
                                keepalive_s=config.keepalive_s,
                                write_timeout_s=config.write_timeout_s)


async def _fold_stored(store: ServerStore, run_id: str, tenant: str, after: int,
                       mapper: AguiMapper) -> None:
    """Fold the stored events up to ``after`` into ``mapper`` (what the client holds)."""
    replay = cast(AsyncGenerator[Event, None], store.events(run_id, tenant=tenant))
    async with contextlib.aclosing(replay) as stored:
        async for event in stored:
            if event.seq > after:
                break
            mapper.map(event)


async def serve_agui(request: web.Request, feed: EventFeed, mapper: AguiMapper, *,
                     after: int = 0, keepalive_s: float,
                     write_timeout_s: float) -> web.StreamResponse:
    """Write ``feed`` as AG-UI events until the run ends, the client leaves or is detached
    (the run never waits for the client).

    ``mapper`` has folded the events up to ``after`` (the client holds them): a
    resumed stream starts with its STATE_SNAPSHOT (``id: after``).
    """
    writer = SseWriter(request, write_timeout_s=write_timeout_s,
                       headers={"Content-Type": _ENCODER.get_content_type()})
    await writer.prepare()

    def frame(events: Sequence[Event]) -> bytes:
        return b"".join(_frame(event.seq, e) for event in events
                        for e in _agui_events(mapper, event, after))

    try:
        await writer.send(b"retry: 1000\n\n")
        if after:
            await writer.send(_frame(after, mapper.snapshot()))
        await relay(feed, writer, frame, keepalive_s=keepalive_s,
                    ends=lambda e: isinstance(e, RunFinished))
    except ClientGone:  # the client left: the run goes on
        return writer.response
    if feed.detached_reason is not None:
        notice = CustomEvent(name=DETACHED, value={"reason": feed.detached_reason})
        await writer.send_last(_frame(None, notice))
    await writer.finish()
    return writer.response


def _agui_events(mapper: AguiMapper, event: Event, after: int) -> list[BaseEvent]:
    """What to send for ``event``: its mapping, or, for the ending of a run whose end the
    client already holds (the store sends it again), that ending again."""
    if event.seq > after:
        return mapper.map(event)
    terminal = mapper.terminal
    return [terminal] if isinstance(event, RunFinished) and terminal is not None else []


# --- OpenAPI --------------------------------------------------------------------------------

_AGUI_TYPES = ("RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "STEP_STARTED", "STEP_FINISHED",
               "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
               "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
               "STATE_SNAPSHOT", "STATE_DELTA", "CUSTOM")
"""Every AG-UI event type this route sends."""


def agui_openapi_paths() -> dict[str, Any]:
    """OpenAPI 3.1 path item of the AG-UI route, for the server's document to merge."""
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    message = {  # one SSE message, as schemathesis reads it
        "type": "object", "required": ["data"],
        "properties": {
            "id": {"type": "string", "pattern": "^[1-9][0-9]*$"},
            "event": {"const": "message"},
            "data": {"type": "string", "contentMediaType": "application/json",
                     "contentSchema": {
                         "type": "object", "required": ["type"],
                         "description": "an AG-UI 1.0 event "
                                        "(https://ag-ui.com/spec/1.0/schema.json)",
                         "properties": {"type": {"enum": list(_AGUI_TYPES)}}}},
            "retry": {"type": "integer"}}}
    return {"/v1/runs/{run_id}/agui": {"get": {
        "operationId": "runAgui",
        "summary": "The run's events as AG-UI events over Server-Sent Events (id = the seq of "
                   "the run event each came from), ending after RUN_FINISHED or RUN_ERROR",
        "parameters": [
            {"name": "run_id", "in": "path", "required": True,
             "description": "a run id (any other string is a run that does not exist: 404)",
             "schema": {"type": "string", "pattern": "^[A-Za-z0-9]{1,64}$"}},
            {"name": "after", "in": "query", "required": False,
             "description": "resume after this event seq (Last-Event-ID wins when both are "
                            "sent; both must be valid)",
             "schema": {"type": "integer", "minimum": 0, "maximum": 10**15 - 1}},
            {"name": "Last-Event-ID", "in": "header", "required": False,
             "description": "resume after this event seq (sent by browsers on reconnect)",
             "schema": {"type": "string", "pattern": "^[0-9]{1,15}$"}},
        ],
        "responses": {
            "200": {"description": "an event stream: `retry: 1000`, then one message per AG-UI "
                                   "event (`id` the run event's seq, `data` the event's JSON; "
                                   "a resume starts with a STATE_SNAPSHOT), `: keep-alive` "
                                   "comments while idle, and a last CUSTOM `detached` message "
                                   "if the client fell too far behind",
                    "content": {"text/event-stream": {"schema": message}}},
            "401": {"description": "missing or wrong bearer token", "content": problem,
                    "headers": {"WWW-Authenticate": {
                        "description": "the scheme to authenticate with", "required": True,
                        "schema": {"type": "string"}}}},
            "404": {"description": "no run with this id is visible to you", "content": problem},
            "422": {"description": "invalid after / Last-Event-ID", "content": problem},
        }}}}
