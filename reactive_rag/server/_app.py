"""The aiohttp application: routes, typed app state, lifecycle.

``create_app(config)`` builds an application whose store, engine and run
manager are opened by a ``cleanup_ctx`` and closed in reverse order; runs
still going at shutdown are cancelled (and stored as ``cancelled``), and open
WebSockets are closed with 1001 first.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any, cast

from aiohttp import WSCloseCode, web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.web_request import BaseRequest
from pydantic import ValidationError

from actors.models import OpenAIChatClient
from streams import Event, RunFinished, RunStarted

from .._engine import Engine, RunResult
from ..agent import ChatEntailment
from ..index import STDLIB_COLLECTION, CorpusIndex
from ..store import RunRecord, RunStore, SqliteRunStore
from ._auth import Authenticator, Tenant
from ._config import ServerConfig
from ._feed import EventFeed
from ._models import RunRequest
from ._openapi import openapi_document
from ._problems import make_problem, problem_middleware, run_not_found
from ._runs import RunManager
from ._sse import serve_sse
from ._ws import serve_ws

__all__ = [
    "AUTH_KEY",
    "CONFIG_KEY",
    "ENGINE_KEY",
    "MANAGER_KEY",
    "STORE_KEY",
    "TENANT_KEY",
    "RedactingAccessLogger",
    "create_app",
    "make_store",
    "request_tenant",
]

log = logging.getLogger("reactive_rag.server")

CONFIG_KEY = web.AppKey("config", ServerConfig)
STORE_KEY = web.AppKey("store", RunStore)
ENGINE_KEY = web.AppKey("engine", Engine)
MANAGER_KEY = web.AppKey("manager", RunManager)
AUTH_KEY = web.AppKey("auth", Authenticator)
WEBSOCKETS_KEY = web.AppKey("websockets", set[web.WebSocketResponse])
INTERRUPTED_KEY = web.AppKey("interrupted", list[str])
CORPUS_TASK_KEY = web.AppKey("corpus_task", asyncio.Task[bool])
OPENAPI_EXTRA_KEY = web.AppKey("openapi_extra", tuple[dict[str, Any], tuple[str, ...]])
TENANT_KEY = web.RequestKey("tenant", Tenant)
"""Where :func:`request_tenant` caches the caller on the request."""

WEB_DIR = Path(__file__).resolve().parent.parent / "web"

routes = web.RouteTableDef()


class RedactingAccessLogger(AbstractAccessLogger):
    """Access log lines with any ``access_token`` query value replaced by ``***``.

    Browsers pass the bearer token in the query of SSE/WebSocket URLs; it
    must never end up in a log file.
    """

    def log(self, request: BaseRequest, response: web.StreamResponse, time: float) -> None:
        query = "&".join(f"{k}=***" if k == "access_token" else f"{k}={v}"
                         for k, v in request.query.items())
        target = request.path + (f"?{query}" if query else "")
        self.logger.info('%s "%s %s" %s %s %.3fs', request.remote, request.method, target,
                         response.status, response.body_length, time)


def make_store(target: str) -> RunStore:
    """A store for a config ``store`` value: a path, ``sqlite:///path`` or ``redis://...``."""
    if target.startswith(("redis://", "rediss://", "unix://")):
        from ..store import RedisRunStore

        return RedisRunStore(target)
    path = target.removeprefix("sqlite://")
    path = path.removeprefix("/") if path.startswith("//") else path
    Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return SqliteRunStore(Path(path).expanduser())


def request_tenant(request: web.Request) -> Tenant:
    """The authenticated caller of ``request`` (401 problem if none)."""
    if TENANT_KEY in request:
        return request[TENANT_KEY]
    tenant = request.app[AUTH_KEY].authenticate(request)
    request[TENANT_KEY] = tenant
    return tenant


# --- runs -----------------------------------------------------------------------------------


@routes.post("/v1/runs")
async def start_run(request: web.Request) -> web.Response:
    tenant = request_tenant(request)
    config = request.app[CONFIG_KEY]
    body = await _json_body(request, config.max_body_bytes)
    try:
        run = RunRequest.model_validate(body)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        raise make_problem(422, "validation_failed", f"{where or 'body'}: {err['msg']}"[:300],
                           field=where or None) from None
    collections = _scoped_collections(request, tenant, run.collections)
    manager = request.app[MANAGER_KEY]
    run_id = await manager.start(tenant, run.question, mode=run.mode, collections=collections,
                                 budget=run.budget)
    return web.json_response({"run_id": run_id, "links": _links(run_id)}, status=201,
                             headers={"Location": f"/v1/runs/{run_id}"})


def _scoped_collections(request: web.Request, tenant: Tenant,
                        requested: list[str] | None) -> tuple[str, ...]:
    """The request's collections, all of which the tenant may use and that exist."""
    config = request.app[CONFIG_KEY]
    index = request.app[ENGINE_KEY].index
    if requested is None:
        chosen = tuple(c for c in config.default_collections if tenant.allows(c))
        if not chosen:
            raise make_problem(422, "validation_failed", "collections: name at least one "
                               "collection you may search", field="collections")
    else:
        chosen = tuple(dict.fromkeys(requested))
        if not chosen:
            raise make_problem(422, "validation_failed", "collections: empty",
                               field="collections")
    for name in chosen:
        if not tenant.allows(name):  # same answer whether it exists or not
            raise make_problem(403, "collection_forbidden",
                               f"you may not search collection {name!r}", field="collections")
    for name in chosen:
        if not index.exists(name):
            building = request.app.get(CORPUS_TASK_KEY)
            if building is not None and not building.done():
                raise make_problem(503, "not_ready", "the default corpus is being indexed",
                                   headers={"Retry-After": "5"})
            raise make_problem(422, "run_config", f"collection {name!r} is not indexed",
                               field="collections")
    return chosen


@routes.get("/v1/runs")
async def list_runs(request: web.Request) -> web.Response:
    tenant = request_tenant(request)
    limit = _int_param(request, "limit", default=50, low=1, high=200)
    cursor = request.query.get("cursor") or None
    if cursor is not None and len(cursor) > 200:
        raise make_problem(422, "invalid_cursor", field="cursor")
    await request.app[MANAGER_KEY].settle_finished(tenant.name)
    page = await request.app[STORE_KEY].list_runs(tenant.name, limit=limit, before=cursor)
    return web.json_response({
        "runs": [_summary(r) for r in page.runs],
        "next_cursor": page.next_before,
    })


@routes.get("/v1/runs/{run_id}")
async def get_run(request: web.Request) -> web.Response:
    tenant = request_tenant(request)
    run_id = _run_id(request)
    store = request.app[STORE_KEY]
    await store.get_run(run_id, tenant.name)  # 404 before anything else
    await request.app[MANAGER_KEY].settle(run_id)
    record = await store.get_run(run_id, tenant.name)
    body = _summary(record)
    body.update(answer="", reason="", citations=[], collections=[])
    replay = cast(AsyncGenerator[Event, None], store.events(run_id, tenant=tenant.name))
    async with contextlib.aclosing(replay) as stored:
        events = [event async for event in stored]
    if events and isinstance(events[0], RunStarted):
        body["collections"] = list(events[0].collections)
    if events and isinstance(events[-1], RunFinished):
        result = RunResult.from_events(events)
        body.update(answer=result.answer, reason=result.reason,
                    citations=[c.to_json() for c in result.citations])
    return web.json_response(body)


@routes.post("/v1/runs/{run_id}/cancel")
async def cancel_run(request: web.Request) -> web.Response:
    tenant = request_tenant(request)
    run_id = _run_id(request)
    await request.app[STORE_KEY].get_run(run_id, tenant.name)  # 404 for others' runs
    cancelled = request.app[MANAGER_KEY].cancel(run_id)
    return web.json_response({"run_id": run_id, "cancelled": cancelled}, status=202)


@routes.get("/v1/runs/{run_id}/events")
async def run_events(request: web.Request) -> web.StreamResponse:
    config = request.app[CONFIG_KEY]
    feed = await _open_feed(request)
    async with feed:
        return await serve_sse(request, feed, keepalive_s=config.keepalive_s,
                               write_timeout_s=config.write_timeout_s)


@routes.get("/v1/runs/{run_id}/ws")
async def run_ws(request: web.Request) -> web.StreamResponse:
    config = request.app[CONFIG_KEY]
    run_id = _run_id(request)
    feed = await _open_feed(request)
    ws = web.WebSocketResponse(heartbeat=config.keepalive_s, max_msg_size=4096)
    async with feed:
        await ws.prepare(request)
        sockets = request.app[WEBSOCKETS_KEY]
        sockets.add(ws)
        try:
            await serve_ws(request, ws, feed, write_timeout_s=config.write_timeout_s,
                           cancel=lambda: request.app[MANAGER_KEY].cancel(run_id))
        finally:
            sockets.discard(ws)
    return ws


async def _open_feed(request: web.Request) -> EventFeed:
    """The requested run's events after ``?after=``; 404 before anything is sent if not visible."""
    tenant = request_tenant(request)
    run_id = _run_id(request)
    after = _after(request)
    store = request.app[STORE_KEY]
    await store.get_run(run_id, tenant.name)
    live = request.app[MANAGER_KEY].live_stream(run_id)
    source: AsyncIterator[Event] = store.attach(run_id, after, live, tenant=tenant.name)
    return EventFeed(source, maxsize=request.app[CONFIG_KEY].sse_buffer)


# --- service --------------------------------------------------------------------------------


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    try:
        await request.app[STORE_KEY].list_runs("-readiness-probe-", limit=1)
        await asyncio.to_thread(request.app[ENGINE_KEY].index.collections)
        building = request.app.get(CORPUS_TASK_KEY)
        if building is not None and not building.done():
            raise RuntimeError("the default corpus is still being indexed")
    except Exception as exc:
        log.warning("not ready: %s: %s", type(exc).__name__, exc)
        raise make_problem(503, "not_ready", "the run store or the index is not usable",
                           headers={"Retry-After": "1"}) from None
    return web.json_response({"status": "ready"})


@routes.get("/v1/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    extra = request.app.get(OPENAPI_EXTRA_KEY)
    if extra is None:
        return web.json_response(openapi_document())
    return web.json_response(openapi_document(extra_paths=extra[0], extra_codes=extra[1]))


# --- helpers --------------------------------------------------------------------------------


def _links(run_id: str) -> dict[str, str]:
    base = f"/v1/runs/{run_id}"
    return {"self": base, "events": f"{base}/events", "ws": f"{base}/ws",
            "cancel": f"{base}/cancel"}


def _summary(record: RunRecord) -> dict[str, Any]:
    return {
        "run_id": record.run_id,
        "status": record.status,
        "outcome": record.outcome,
        "question": record.question,
        "mode": record.mode,
        "created": record.created_at,
        "updated": record.updated_at,
        "last_seq": record.last_seq,
        "links": _links(record.run_id),
    }


def _run_id(request: web.Request) -> str:
    run_id = request.match_info["run_id"]
    if not run_id or len(run_id) > 64 or not run_id.isascii() or not run_id.isalnum():
        raise run_not_found()  # a malformed id is just another id that does not exist
    return run_id


def _int_param(request: web.Request, name: str, *, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or not low <= int(raw) <= high:
        raise make_problem(422, "invalid_parameter",
                           f"{name} must be an integer from {low} to {high}", field=name)
    return int(raw)


def _after(request: web.Request) -> int:
    header = request.headers.get("Last-Event-ID")
    raw = header if header is not None and header.strip() else request.query.get("after")
    name = "Last-Event-ID" if header is not None and header.strip() else "after"
    if raw is None or raw == "":
        return 0
    raw = raw.strip()
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 15:
        raise make_problem(422, "invalid_parameter",
                           f"{name} must be a non-negative integer (an event seq)", field=name)
    return int(raw)


async def _json_body(request: web.Request, limit: int) -> Any:
    if request.content_length is not None and request.content_length > limit:
        raise make_problem(413, "body_too_large", f"at most {limit} bytes")
    ctype = request.headers.get("Content-Type", "application/json")
    if ctype.split(";")[0].strip().lower() not in ("application/json", ""):
        raise make_problem(415, "unsupported_media_type")
    data = bytearray()
    async for chunk in request.content.iter_chunked(16384):
        data.extend(chunk)
        if len(data) > limit:
            raise make_problem(413, "body_too_large", f"at most {limit} bytes")
    try:
        return json.loads(bytes(data))
    except (ValueError, RecursionError):
        raise make_problem(400, "invalid_json") from None


# --- the application ------------------------------------------------------------------------


def create_app(config: ServerConfig | None = None, *, engine: Engine | None = None,
               store: RunStore | None = None) -> web.Application:
    """The HTTP service.

    Args:
        config: settings (default: ``ServerConfig()``, open single-tenant mode).
        engine: runs questions (default: one over ``config.index_root``); a
            given engine is not closed with the app.
        store: the run store (default: from ``config.store``); the app opens
            it on start-up (marking crashed runs ``interrupted``) and closes it.
    """
    config = config or ServerConfig()
    app = web.Application(middlewares=[problem_middleware],
                          client_max_size=config.max_body_bytes)
    app[CONFIG_KEY] = config
    app[AUTH_KEY] = Authenticator(config.effective_tenants, open_mode=config.open_mode)
    app[WEBSOCKETS_KEY] = set()
    app[INTERRUPTED_KEY] = []
    app.add_routes(routes)
    _mount_extras(app)
    app.cleanup_ctx.append(_lifecycle(config, engine, store))
    app.on_shutdown.append(_close_websockets)
    return app


def _lifecycle(config: ServerConfig, engine: Engine | None, store: RunStore | None) -> Any:
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        run_store = store if store is not None else make_store(config.store_target())
        interrupted = await run_store.open()
        app[INTERRUPTED_KEY] = list(interrupted)
        if interrupted:
            log.warning("marked %d run(s) left unfinished by a crash as interrupted",
                        len(interrupted))
        own_engine = engine is None
        judge = _entailment_client(config) if own_engine else None
        run_engine = engine if engine is not None else Engine(
            CorpusIndex(config.index_root),
            entailment=ChatEntailment(judge, timeout_s=config.entailment.timeout_s)
            if judge is not None and config.entailment is not None else None)
        manager = RunManager(run_engine, run_store)
        app[STORE_KEY] = run_store
        app[ENGINE_KEY] = run_engine
        app[MANAGER_KEY] = manager
        if own_engine and config.build_default_corpus and \
                STDLIB_COLLECTION in config.default_collections and \
                not run_engine.index.exists(STDLIB_COLLECTION):
            log.info("indexing the standard-library docs in the background (first start only)")
            app[CORPUS_TASK_KEY] = asyncio.get_running_loop().create_task(
                asyncio.to_thread(run_engine.ensure_stdlib_corpus), name="default-corpus")
        elif own_engine:
            # load the embedding model off the event loop before the first run needs it
            await asyncio.to_thread(run_engine.warm_up)
        if config.open_mode:
            log.warning("no tenants configured: one open 'default' tenant without "
                        "authentication, listening on 127.0.0.1 only")
        try:
            yield
        finally:
            building = app.get(CORPUS_TASK_KEY)
            if building is not None:  # a thread cannot be cancelled: let it finish
                with contextlib.suppress(Exception):
                    await building
            await manager.aclose()
            if own_engine:
                await run_engine.aclose()
            if judge is not None:
                await judge.aclose()
            await run_store.close()

    return ctx


def _entailment_client(config: ServerConfig) -> OpenAIChatClient | None:
    """The chat client of the ``[entailment]`` judge, if one is configured."""
    judged = config.entailment
    if judged is None:
        return None
    return OpenAIChatClient(judged.url, model=judged.model,
                            api_key=os.environ.get(judged.api_key_env) or None)


async def _close_websockets(app: web.Application) -> None:
    sockets = app[WEBSOCKETS_KEY]
    for ws in tuple(sockets):
        with contextlib.suppress(Exception):
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutting down")


def _mount_extras(app: web.Application) -> None:
    """The web page (static files) and the background-task routes, when installed."""
    try:
        web_page: Any = importlib.import_module("reactive_rag.web")
    except ImportError:
        web_page = None
    if web_page is not None and callable(getattr(web_page, "add_web_routes", None)):
        web_page.add_web_routes(app)
    elif (WEB_DIR / "index.html").is_file():
        index_html = WEB_DIR / "index.html"

        async def page(request: web.Request) -> web.FileResponse:
            return web.FileResponse(index_html)

        app.router.add_get("/", page)
        app.router.add_static("/web/", WEB_DIR, append_version=False)
    try:
        tasks: Any = importlib.import_module("reactive_rag.tasks")
    except ImportError:
        return
    setup = getattr(tasks, "setup_routes", None)
    if callable(setup):
        setup(app)
    elif isinstance(getattr(tasks, "routes", None), web.RouteTableDef):
        app.add_routes(tasks.routes)
    else:
        return
    paths = getattr(tasks, "openapi_paths", None)
    codes = getattr(tasks, "TASK_PROBLEM_CODES", {})
    app[OPENAPI_EXTRA_KEY] = (dict(paths()) if callable(paths) else {}, tuple(codes))
