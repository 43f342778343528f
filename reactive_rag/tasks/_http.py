"""HTTP routes for background tasks, mounted by the server.

Mount with::

    app[TASK_MANAGER] = TaskManager(store, index)
    app[TASK_TENANT] = lambda request: tenant_name   # optional; default "local"
    app.add_routes(task_routes)
    app.cleanup_ctx.append(tasks_context)            # resumes unfinished tasks, stops on exit

Routes: ``POST /v1/tasks`` ``{"collection", "doc_id"}`` -> 201 with the task;
``GET /v1/tasks/{task_id}``; ``GET /v1/tasks/{task_id}/events`` as SSE
(``id: <attempt>.<seq>``; ``Last-Event-ID`` of the same attempt resumes after
that event, one of an earlier attempt, i.e. before a restart, replays the
current attempt from its start). The stream ends after ``task.finished``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web

from streams import Event, encode_json

from ..store import BackgroundTask
from ._events import TaskFinished
from ._exceptions import DocumentNotFound, UnknownTask
from ._manager import TaskManager

__all__ = ["TASK_MANAGER", "TASK_TENANT", "task_routes", "task_view", "tasks_context"]

TASK_MANAGER = web.AppKey("task_manager", TaskManager)
"""The application's task manager (required by the routes)."""

TenantResolver = Callable[[web.Request], str]

TASK_TENANT: web.AppKey[TenantResolver] = web.AppKey("task_tenant")
"""Who is asking (may raise the server's 401); without it every caller is ``"local"``."""

_MAX_BODY = 16 * 1024

task_routes = web.RouteTableDef()


def _problem(status: int, code: str, detail: str) -> web.Response:
    return web.json_response({"type": f"/problems/{code}", "title": code.replace("_", " "),
                              "status": status, "code": code, "detail": detail},
                             status=status, content_type="application/problem+json")


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
    except ValueError:
        return _problem(400, "invalid_json", "the body is not JSON")
    if not isinstance(body, dict) or set(body) - {"collection", "doc_id"} or not all(
            isinstance(body.get(k), str) and body[k] for k in ("collection", "doc_id")):
        return _problem(422, "invalid_task",
                        "expected {\"collection\": str, \"doc_id\": str} and nothing else")
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


async def _follow(stream: Any, after: int) -> AsyncIterator[Event]:
    queue: asyncio.Queue[Event] = asyncio.Queue()
    subscription = stream.replay(after).subscribe(queue.put_nowait)
    try:
        while True:
            event = await queue.get()
            yield event
            if isinstance(event, TaskFinished):
                return
    finally:
        subscription.dispose()


async def tasks_context(app: web.Application) -> AsyncIterator[None]:
    """``cleanup_ctx``: resume unfinished tasks at start-up, stop the workers at shutdown."""
    manager = app[TASK_MANAGER]
    await manager.start()
    yield
    await manager.aclose()
