"""HTTP routes for background tasks, mounted by the server.

The server mounts them with :func:`setup_routes` (its hook): the routes, the
tenant and collection checks of ``reactive_rag.server``, and a manager over the
server's store and index, started (resuming unfinished tasks) after the store
opens and stopped before it closes. Any other aiohttp app mounts them with::

    app[TASK_MANAGER] = TaskManager(store, index)
    app[TASK_TENANT] = lambda request: tenant_name      # optional; default "local"
    app[TASK_ALLOWS] = lambda request, collection: ...  # optional; default: all
    app.add_routes(task_routes)
    app.cleanup_ctx.append(tasks_context)  # resumes unfinished tasks, stops on exit

Routes: ``POST /v1/tasks`` ``{"collection", "doc_id"}`` -> 201 with the task;
``GET /v1/tasks/{task_id}``; ``GET /v1/tasks/{task_id}/events`` as SSE
(``id: <attempt>.<seq>``; ``Last-Event-ID`` of the same attempt resumes after
that event, one of an earlier attempt, i.e. before a restart, replays the
current attempt from its start). The stream ends after ``task.finished``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web

from streams import Event, EventBridge, RunStream, encode_json

from ..store import BackgroundTask
from ._events import TaskFinished
from ._exceptions import DocumentNotFound, UnknownTask
from ._manager import TaskManager

__all__ = [
    "TASK_ALLOWS",
    "TASK_MANAGER",
    "TASK_PROBLEM_CODES",
    "TASK_TENANT",
    "openapi_paths",
    "setup_routes",
    "task_routes",
    "task_view",
    "tasks_context",
]

TASK_MANAGER = web.AppKey("task_manager", TaskManager)
"""The application's task manager (required by the routes)."""

TenantResolver = Callable[[web.Request], str]

TASK_TENANT: web.AppKey[TenantResolver] = web.AppKey("task_tenant")

CollectionCheck = Callable[[web.Request, str], bool]

TASK_ALLOWS: web.AppKey[CollectionCheck] = web.AppKey("task_allows")
"""Whether the caller may read a collection; without it every collection is allowed."""
"""Who is asking (may raise the server's 401); without it every caller is ``"local"``."""

_MAX_BODY = 16 * 1024

task_routes = web.RouteTableDef()


TASK_PROBLEM_CODES: dict[str, str] = {
    "invalid_json": "The request body is not valid JSON",
    "validation_failed": "The request is invalid",
    "body_too_large": "The request body is too large",
    "collection_forbidden": "Collection not allowed",
    "document_not_found": "No such document",
    "task_not_found": "No such task",
}
"""Every ``code`` the task routes answer with (same shapes and titles as the server's)."""


def _problem(status: int, code: str, detail: str) -> web.Response:
    body = {"type": f"urn:reactive-rag:problem:{code}", "title": TASK_PROBLEM_CODES[code],
            "status": status, "code": code, "detail": detail}
    return web.json_response(body, status=status, content_type="application/problem+json")


def _tenant(request: web.Request) -> str:
    resolve = request.app.get(TASK_TENANT)
    return "local" if resolve is None else resolve(request)


def task_view(task: BackgroundTask) -> dict[str, Any]:
    """A task as the API shows it (partial work stays private)."""
    done = task.status.value == "done"
    return {
        "task_id": task.task_id, "kind": task.kind, "status": task.status.value,
        "progress": task.progress, "doc_id": task.doc_id,
        "collection": task.params.get("collection"), "run_id": task.run_id,
        "result": task.result if done else None, "error": task.error,
        "created_at": task.created_at, "updated_at": task.updated_at,
        "links": {"self": f"/v1/tasks/{task.task_id}",
                  "events": f"/v1/tasks/{task.task_id}/events"},
    }


@task_routes.post("/v1/tasks")
async def create_task(request: web.Request) -> web.Response:
    """Start a whole-document summary in the background."""
    tenant = _tenant(request)
    if request.content_length is not None and request.content_length > _MAX_BODY:
        return _problem(413, "body_too_large", f"the body may be at most {_MAX_BODY} bytes")
    try:
        body = json.loads(await request.read())
    except (ValueError, RecursionError):  # a deeply nested body is just not JSON we take
        return _problem(400, "invalid_json", "the body is not JSON")
    if not isinstance(body, dict) or set(body) - {"collection", "doc_id"} or not all(
            isinstance(body.get(k), str) and body[k] for k in ("collection", "doc_id")):
        return _problem(422, "validation_failed",
                        "expected {\"collection\": str, \"doc_id\": str} and nothing else")
    allows = request.app.get(TASK_ALLOWS)
    if allows is not None and not allows(request, body["collection"]):
        # Same answer whether the collection exists or not.
        return _problem(403, "collection_forbidden",
                        f"you may not read collection {body['collection']!r}")
    manager = request.app[TASK_MANAGER]
    try:
        task = await manager.submit_summary(body["collection"], body["doc_id"], tenant=tenant)
    except (DocumentNotFound, ValueError) as exc:
        return _problem(404, "document_not_found", str(exc))
    return web.json_response(task_view(task), status=201)


@task_routes.get("/v1/tasks/{task_id}")
async def get_task(request: web.Request) -> web.Response:
    """The task's status, progress and (once done) result."""
    try:
        task = await request.app[TASK_MANAGER].get(request.match_info["task_id"],
                                                   _tenant(request))
    except UnknownTask:
        return _problem(404, "task_not_found", "no such task")
    return web.json_response(task_view(task))


def _resume_after(request: web.Request, attempt: int) -> int:
    raw = request.headers.get("Last-Event-ID") or request.query.get("after") or ""
    got, _, seq = raw.partition(".")
    if got.isdigit() and seq.isdigit() and int(got) == attempt:
        return int(seq)
    return 0


@task_routes.get("/v1/tasks/{task_id}/events")
async def task_events(request: web.Request) -> web.StreamResponse:
    """The task's events as server-sent events, until ``task.finished``."""
    manager = request.app[TASK_MANAGER]
    task_id = request.match_info["task_id"]
    try:
        task = await manager.get(task_id, _tenant(request))
    except UnknownTask:
        return _problem(404, "task_not_found", "no such task")
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
    await response.prepare(request)
    stream = manager.stream(task_id)
    with contextlib.suppress(ConnectionError):
        if stream is None or task.status.final:
            # Not running here (or over): the stored outcome is the whole story.
            final = TaskFinished(task_id=task_id, status=_final_status(task),
                                 result=task.result if task.status.value == "done" else None,
                                 error=task.error or "")
            await response.write(_frame("0.1", final))
        else:
            attempt = manager.attempt(task_id)
            async for event in _follow(stream, _resume_after(request, attempt)):
                await response.write(_frame(f"{attempt}.{event.seq}", event))
        await response.write_eof()
    return response


def _final_status(task: BackgroundTask) -> Any:
    return task.status.value if task.status.final else "failed"


def _frame(event_id: str, event: Event) -> bytes:
    return f"id: {event_id}\nevent: {event.type}\ndata: {encode_json(event)}\n\n".encode()


FOLLOW_BUFFER = 256
"""Task events one client may hold; past that it re-reads them from the stream's history."""


async def _follow(stream: RunStream, after: int) -> AsyncIterator[Event]:
    """The task's events after ``after`` until ``task.finished``, through a bounded bridge.

    A client slower than the task falls behind at most ``FOLLOW_BUFFER``
    events; then it is fed from the stream's history (kept in memory for the
    task's life) from where it stood, so memory stays bounded and nothing is lost.
    """
    cursor = after
    while True:
        bridge: EventBridge[Event] = EventBridge(FOLLOW_BUFFER)

        def push(event: Event, bridge: EventBridge[Event] = bridge) -> None:
            bridge.push(event)  # a refusal closes the bridge: caught up below

        def close(_exc: Exception | None = None,
                  bridge: EventBridge[Event] = bridge) -> None:
            bridge.close()

        subscription = stream.replay(cursor).subscribe(push, close, close)
        try:
            while True:
                event = await bridge.get()
                if event is None:
                    break
                if event.seq <= cursor:
                    continue
                yield event
                cursor = event.seq
                if isinstance(event, TaskFinished):
                    return
        finally:
            subscription.dispose()
        if not bridge.overflowed:
            return  # the stream completed without a task.finished


async def tasks_context(app: web.Application) -> AsyncIterator[None]:
    """``cleanup_ctx``: resume unfinished tasks at start-up, stop the workers at shutdown."""
    manager = app[TASK_MANAGER]
    await manager.start()
    yield
    await manager.aclose()


def setup_routes(app: web.Application) -> None:
    """Mount the task routes on the ``reactive_rag.server`` application (its extras hook).

    Tenants and collection scope come from the server's authentication; the
    manager is built at start-up over the server's store and engine index.
    """
    from ..server import ENGINE_KEY, STORE_KEY, request_tenant

    app[TASK_TENANT] = lambda request: request_tenant(request).name
    app[TASK_ALLOWS] = lambda request, collection: request_tenant(request).allows(collection)
    app.add_routes(task_routes)

    async def start(app: web.Application) -> None:
        # on_startup handlers run after every cleanup_ctx has started (the store is open).
        manager = TaskManager(app[STORE_KEY], app[ENGINE_KEY].index)
        app[TASK_MANAGER] = manager
        await manager.start()

    async def stop(app: web.Application) -> None:
        # on_shutdown runs before cleanup, so workers stop before the store closes.
        manager = app.get(TASK_MANAGER)
        if manager is not None:
            await manager.aclose()

    app.on_startup.append(start)
    app.on_shutdown.append(stop)


def openapi_paths() -> dict[str, Any]:
    """OpenAPI 3.1 path items of the task routes, for the server's document to merge."""
    problem = {"$ref": "#/components/schemas/Problem"}
    www_authenticate = {"WWW-Authenticate": {"required": True, "schema": {"type": "string"}}}
    problems: dict[str, Any] = {str(status): {"description": why, "content": {
        "application/problem+json": {"schema": problem}}}
        for status, why in (("401", "no valid token"), ("404", "no such task"))}
    problems["401"]["headers"] = www_authenticate
    task = {"type": "object", "required": ["task_id", "kind", "status", "progress", "links"],
            "properties": {
                "task_id": {"type": "string"}, "kind": {"type": "string"},
                "status": {"enum": ["pending", "running", "done", "failed", "cancelled"]},
                "progress": {"type": "number", "minimum": 0, "maximum": 1},
                "doc_id": {"type": ["string", "null"]},
                "collection": {"type": ["string", "null"]},
                "run_id": {"type": ["string", "null"]},
                "result": {"description": "the summary once done: {collection, doc_id, chunks,"
                                          " sentences: [{text, chunk_id, score}], text}"},
                "error": {"type": ["string", "null"]},
                "created_at": {"type": "number"}, "updated_at": {"type": "number"},
                "links": {"type": "object", "properties": {
                    "self": {"type": "string"}, "events": {"type": "string"}}}}}
    event = {  # one SSE message: schemathesis and OpenAPI 3.1 read `schema` per event
        "type": "object", "required": ["id", "event", "data"],
        "properties": {
            "id": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+$"},
            "event": {"type": "string", "pattern": "^task\\.[a-z_]+$"},
            "data": {"type": "string", "contentMediaType": "application/json",
                     "contentSchema": {
                         "type": "object", "required": ["type", "seq", "task_id"],
                         "properties": {"type": {"type": "string"},
                                        "seq": {"type": "integer", "minimum": 0},
                                        "task_id": {"type": "string"}}}}}}
    task_id = [{"name": "task_id", "in": "path", "required": True,
                "schema": {"type": "string"}}]
    return {
        "/v1/tasks": {"post": {
            "summary": "Summarise a whole document in the background",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "additionalProperties": False,
                "required": ["collection", "doc_id"],
                "properties": {"collection": {"type": "string", "minLength": 1},
                               "doc_id": {"type": "string", "minLength": 1}}}}}},
            "responses": {
                "201": {"description": "the task, pending",
                        "content": {"application/json": {"schema": task}}},
                **{k: {"description": v, "content": {
                    "application/problem+json": {"schema": problem}}}
                   for k, v in (("400", "invalid JSON"), ("401", "no valid token"),
                                ("403", "collection not allowed"), ("404", "no such document"),
                                ("413", "body too large"), ("422", "invalid body"))},
                "401": problems["401"],
            }}},
        "/v1/tasks/{task_id}": {"get": {
            "summary": "A task's status, progress and result",
            "parameters": task_id,
            "responses": {"200": {"description": "the task",
                                  "content": {"application/json": {"schema": task}}},
                          **problems}}},
        "/v1/tasks/{task_id}/events": {"get": {
            "summary": "The task's events as server-sent events (ids `<attempt>.<seq>`)",
            "parameters": [*task_id, {"name": "Last-Event-ID", "in": "header",
                                      "required": False, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "task.started, task.progress..., "
                                                 "task.finished",
                                  "content": {"text/event-stream": {"schema": event}}},
                          **problems}}},
    }
