"""HTTP routes for background tasks (:mod:`reactive_rag.tasks`), mounted by ``create_app``.

Routes: ``POST /v1/tasks`` ``{"collection", "doc_id"}`` -> 201 with the task;
``GET /v1/tasks/{task_id}``; ``GET /v1/tasks/{task_id}/events`` as SSE
(``id: <attempt>.<seq>``; ``Last-Event-ID`` of the same attempt resumes after
that event, one of an earlier attempt, i.e. before a restart, replays the
current attempt from its start). The stream ends after ``task.finished``.

Tenants and collection scope are the server's (:func:`request_tenant`);
errors are the server's problems. :func:`mount_tasks` adds the routes and a
manager over the server's store and engine index, started (resuming unfinished
tasks) after the store opens and stopped before it closes. A test app may
instead set ``app[TASK_MANAGER]`` itself (with ``AUTH_KEY`` and the problem
middleware), add ``task_routes`` and append ``tasks_context`` to its
``cleanup_ctx``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from reactive_rag.store import BackgroundTask
from reactive_rag.tasks import DocumentNotFound, TaskFinished, TaskManager, UnknownTask
from streams import Event, RunStream, follow

from ._exceptions import Problem
from ._handoff import wire_handoff
from ._problems import make_problem
from ._requests import ENGINE_KEY, STORE_KEY, json_body, request_tenant
from ._sse import format_event

__all__ = [
    "FOLLOW_BUFFER",
    "TASK_MANAGER",
    "TASK_MAX_BODY",
    "mount_tasks",
    "task_openapi_paths",
    "task_routes",
    "task_view",
    "tasks_context",
]

TASK_MANAGER = web.AppKey("task_manager", TaskManager)
"""The application's task manager (required by the routes)."""

TASK_MAX_BODY = 16 * 1024
"""The largest ``POST /v1/tasks`` body taken (bytes)."""

task_routes = web.RouteTableDef()


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


def _task_not_found() -> Problem:
    return make_problem(404, "task_not_found", "no such task")


@task_routes.post("/v1/tasks")
async def create_task(request: web.Request) -> web.Response:
    """Start a whole-document summary in the background."""
    tenant = request_tenant(request)
    body = await json_body(request, TASK_MAX_BODY, check_media_type=False)
    if not isinstance(body, dict) or set(body) - {"collection", "doc_id"} or not all(
            isinstance(body.get(k), str) and body[k] for k in ("collection", "doc_id")):
        raise make_problem(422, "validation_failed",
                           "expected {\"collection\": str, \"doc_id\": str} and nothing else")
    if not tenant.allows(body["collection"]):
        # Same answer whether the collection exists or not.
        raise make_problem(403, "collection_forbidden",
                           f"you may not read collection {body['collection']!r}")
    manager = request.app[TASK_MANAGER]
    try:
        task = await manager.submit_summary(body["collection"], body["doc_id"],
                                            tenant=tenant.name)
    except (DocumentNotFound, ValueError) as exc:
        raise make_problem(404, "document_not_found", str(exc)) from None
    return web.json_response(task_view(task), status=201)


@task_routes.get("/v1/tasks/{task_id}")
async def get_task(request: web.Request) -> web.Response:
    """The task's status, progress and (once done) result."""
    tenant = request_tenant(request)
    try:
        task = await request.app[TASK_MANAGER].get(request.match_info["task_id"], tenant.name)
    except UnknownTask:
        raise _task_not_found() from None
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
    tenant = request_tenant(request)
    manager = request.app[TASK_MANAGER]
    task_id = request.match_info["task_id"]
    try:
        task = await manager.get(task_id, tenant.name)
    except UnknownTask:
        raise _task_not_found() from None
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
            await response.write(format_event(final, event_id="0.1"))
        else:
            attempt = manager.attempt(task_id)
            async for event in _follow(stream, _resume_after(request, attempt)):
                await response.write(format_event(event, event_id=f"{attempt}.{event.seq}"))
        await response.write_eof()
    return response


def _final_status(task: BackgroundTask) -> Any:
    return task.status.value if task.status.final else "failed"


FOLLOW_BUFFER = 256
"""Task events one client may hold; past that it re-reads them from the stream's history."""


async def _follow(stream: RunStream, after: int) -> AsyncIterator[Event]:
    """The task's events after ``after`` until ``task.finished``, through a bounded bridge.

    A client slower than the task falls behind at most ``FOLLOW_BUFFER``
    events; then it is fed from the stream's history (kept in memory for the
    task's life) from where it stood, so memory stays bounded and nothing is lost.
    """
    async for event in follow(stream, after, until=lambda e: isinstance(e, TaskFinished),
                              buffer=FOLLOW_BUFFER):
        yield event


async def tasks_context(app: web.Application) -> AsyncIterator[None]:
    """``cleanup_ctx`` for an app that set ``app[TASK_MANAGER]``: start it, stop it at exit."""
    manager = app[TASK_MANAGER]
    await manager.start()
    yield
    await manager.aclose()


def mount_tasks(app: web.Application) -> None:
    """Add the task routes to the server's application, with a manager built at start-up.

    The manager runs over the server's store and engine index; it starts
    (resuming unfinished tasks) once the store is open and stops before it closes.
    """
    app.add_routes(task_routes)

    async def start(app: web.Application) -> None:
        # on_startup handlers run after every cleanup_ctx has started (the store is open).
        manager = TaskManager(app[STORE_KEY], app[ENGINE_KEY].index)
        app[TASK_MANAGER] = manager
        await manager.start()
        wire_handoff(app, manager)  # runs hand whole-document questions to it

    async def stop(app: web.Application) -> None:
        # on_shutdown runs before cleanup, so workers stop before the store closes.
        manager = app.get(TASK_MANAGER)
        wire_handoff(app, None)
        if manager is not None:
            await manager.aclose()

    app.on_startup.append(start)
    app.on_shutdown.append(stop)


def task_openapi_paths() -> dict[str, Any]:
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
