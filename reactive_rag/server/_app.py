"""The aiohttp application: routes, typed app state, lifecycle.

``create_app(config)`` builds an application whose store, engine and run
manager are opened by a ``cleanup_ctx`` and closed in reverse order; runs
still going at shutdown are cancelled (and stored as ``cancelled``), and open
WebSockets are closed with 1001 first. A tenant with ``[search]`` or ``[chat]``
gets an engine of its own over the same index; its searcher and chat client are
built (and refused, if misconfigured) by ``create_app`` itself, before anything
is opened or listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, cast

from aiohttp import WSCloseCode, web
from pydantic import ValidationError

from reactive_rag.engine import (
    Engine,
    EngineConfig,
    Research,
    RunResult,
    assemble,
    research_from,
    usage_json,
    usage_of,
)
from reactive_rag.index import STDLIB_COLLECTION, CorpusIndex, default_root
from reactive_rag.observability import RunMetrics
from reactive_rag.run import RunConfigError
from reactive_rag.store import (
    LeaseKeeper,
    RunNotResumable,
    RunRecord,
    RunStore,
    ServerStore,
    SqliteRunStore,
)
from reactive_rag.web import add_web_routes
from streams import Event, RunFinished, RunStarted

from ._agui import agui_openapi_paths, agui_routes
from ._asyncapi import asyncapi_openapi_paths, asyncapi_routes
from ._auth import Authenticator
from ._cancel_across import CancelRelay, cancel_anywhere, ws_cancel
from ._collection_writes import mount_collection_writes
from ._collections import collection_openapi_paths, collection_routes
from ._config import ServerConfig
from ._dispatch import EngineFactory, ReplicaDispatcher
from ._exceptions import ConfigError
from ._models import RunRequest
from ._openai_face import openai_openapi_paths, openai_routes
from ._openapi import openapi_document
from ._owners import owner_lookup
from ._problems import make_problem, problem_middleware
from ._redact import RedactingAccessLogger, install_log_redaction
from ._requests import (
    AUTH_KEY,
    CONFIG_KEY,
    CORPUS_TASK_KEY,
    ENGINE_KEY,
    MANAGER_KEY,
    STORE_KEY,
    TENANT_KEY,
    int_param,
    json_body,
    open_feed,
    request_tenant,
    run_id_param,
    run_links,
    scoped_collections,
)
from ._retention import RetentionSweeper, retention_openapi_paths, retention_routes
from ._runs import RunManager
from ._sessions import SESSIONS_KEY, SessionManager, session_routes
from ._sse import serve_sse
from ._start_errors import opening_store
from ._tasks import mount_tasks, task_openapi_paths
from ._tracing import close_traces, configure_traces, open_traces
from ._usage_routes import usage_metrics, usage_openapi_paths, usage_routes
from ._ws import check_handshake, serve_ws

__all__ = [
    "AUTH_KEY",
    "CONFIG_KEY",
    "ENGINE_KEY",
    "MANAGER_KEY",
    "STORE_KEY",
    "TENANT_KEY",
    "RedactingAccessLogger",
    "build_research",
    "create_app",
    "make_store",
    "request_tenant",
]

log = logging.getLogger("reactive_rag.server")

WEBSOCKETS_KEY = web.AppKey("websockets", set[web.WebSocketResponse])
INTERRUPTED_KEY = web.AppKey("interrupted", list[str])
LEASE_KEY = web.AppKey("lease", LeaseKeeper)
METRICS_KEY = web.AppKey("metrics", RunMetrics)

routes = web.RouteTableDef()


def make_store(target: str, *, read_only: bool = False, owner: str | None = None,
               lease_ttl_s: float = 15.0) -> ServerStore:
    """A store for a config ``store`` value: a path, ``sqlite:///path``, ``redis://...``
    or ``postgresql://...`` (``postgres://``; ``?schema=NAME`` picks the schema).

    ``read_only``: an operator's view beside a live server, which must not
    recover (interrupt) the server's running runs or write anything.
    ``owner``/``lease_ttl_s``: as :class:`~reactive_rag.store.StoreBase`
    (``None``: a unique owner id).

    Raises:
        ValueError: a PostgreSQL URL that cannot be parsed.
    """
    if target.startswith(("postgresql://", "postgres://")):
        from reactive_rag.store import PostgresRunStore

        return PostgresRunStore(target, read_only=read_only, owner=owner,
                                lease_ttl_s=lease_ttl_s)
    if target.startswith(("redis://", "rediss://", "unix://")):
        from reactive_rag.store import RedisRunStore

        return RedisRunStore(target, read_only=read_only, owner=owner, lease_ttl_s=lease_ttl_s)
    path = target.removeprefix("sqlite://")
    path = path.removeprefix("/") if path.startswith("//") else path
    if not read_only:
        Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return SqliteRunStore(Path(path).expanduser(), read_only=read_only, owner=owner,
                          lease_ttl_s=lease_ttl_s)


# --- runs -----------------------------------------------------------------------------------


@routes.post("/v1/runs")
async def start_run(request: web.Request) -> web.Response:
    tenant = request_tenant(request)
    config = request.app[CONFIG_KEY]
    body = await json_body(request, config.max_body_bytes)
    try:
        run = RunRequest.model_validate(body)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        raise make_problem(422, "validation_failed", f"{where or 'body'}: {err['msg']}"[:300],
                           field=where or None) from None
    collections = scoped_collections(request, tenant, run.collections)
    manager = request.app[MANAGER_KEY]
    run_id = await manager.start(tenant, run.question, mode=run.mode, collections=collections,
                                 budget=run.budget)
    return web.json_response({"run_id": run_id, "links": run_links(run_id)}, status=201,
                             headers={"Location": f"/v1/runs/{run_id}"})


@routes.get("/v1/runs")
async def list_runs(request: web.Request) -> web.Response:
    tenant = request_tenant(request)
    limit = int_param(request, "limit", default=50, low=1, high=200)
    cursor = request.query.get("cursor")
    if cursor is not None:  # only what a page gave: ``created_us:run_id``
        created, colon, last_id = cursor.partition(":")
        if not (colon and len(created) == 16 and created.isascii() and created.isdigit()
                and 0 < len(last_id) <= 64 and last_id.isascii() and last_id.isalnum()):
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
    run_id = run_id_param(request)
    store = request.app[STORE_KEY]
    await store.get_run(run_id, tenant.name)  # 404 before anything else
    await request.app[MANAGER_KEY].settle(run_id)
    record = await store.get_run(run_id, tenant.name)
    body = _summary(record)
    body.update(answer="", reason="", citations=[], collections=[], task=None)
    replay = cast(AsyncGenerator[Event, None], store.events(run_id, tenant=tenant.name))
    async with contextlib.aclosing(replay) as stored:
        events = [event async for event in stored]
    if events and isinstance(events[0], RunStarted):
        body["collections"] = list(events[0].collections)
    if events and isinstance(events[-1], RunFinished):
        result = RunResult.from_events(events)
        body.update(answer=result.answer, reason=result.reason,
                    citations=[c.to_json() for c in result.citations],
                    task=result.task.model_dump() if result.task is not None else None)
    body["usage"] = usage_json(usage_of(events), request.app[CONFIG_KEY].usage.prices)
    return web.json_response(body)


@routes.post("/v1/runs/{run_id}/cancel")
async def cancel_run(request: web.Request) -> web.Response:
    tenant = request_tenant(request)
    run_id = run_id_param(request)
    await request.app[STORE_KEY].get_run(run_id, tenant.name)  # 404 for others' runs
    answer = await cancel_anywhere(request.app[MANAGER_KEY], run_id, tenant.name)
    return web.json_response({"run_id": run_id, "cancelled": answer.cancelled,
                              "accepted": answer.accepted}, status=202)


@routes.post("/v1/runs/{run_id}/resume")
async def resume_run(request: web.Request) -> web.Response:
    """Resume an interrupted run from its stored events (it continues after them)."""
    tenant = request_tenant(request)
    run_id = run_id_param(request)
    try:
        await request.app[MANAGER_KEY].resume(tenant, run_id)
    except RunNotResumable as exc:
        raise make_problem(409, "run_not_resumable", f"the run is {exc.status}: only an "
                           "interrupted run can be resumed") from None
    return web.json_response({"run_id": run_id, "resumed": True, "links": run_links(run_id)},
                             status=202)


@routes.get("/v1/runs/{run_id}/events")
async def run_events(request: web.Request) -> web.StreamResponse:
    config = request.app[CONFIG_KEY]
    feed = await open_feed(request)
    async with feed:
        return await serve_sse(request, feed, keepalive_s=config.keepalive_s,
                               write_timeout_s=config.write_timeout_s)


@routes.get("/v1/runs/{run_id}/ws")
async def run_ws(request: web.Request) -> web.StreamResponse:
    config = request.app[CONFIG_KEY]
    run_id = run_id_param(request)
    feed = await open_feed(request)
    ws = web.WebSocketResponse(heartbeat=config.keepalive_s, max_msg_size=4096)
    async with feed:
        check_handshake(request, ws)
        await ws.prepare(request)
        sockets = request.app[WEBSOCKETS_KEY]
        sockets.add(ws)
        try:
            await serve_ws(request, ws, feed, write_timeout_s=config.write_timeout_s,
                           cancel=ws_cancel(request, run_id))
        finally:
            sockets.discard(ws)
    return ws


# --- service --------------------------------------------------------------------------------


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    problem = request.app[MANAGER_KEY].store_problem
    if problem is not None:
        log.warning("not ready: %s", problem)
        raise make_problem(503, "not_ready", "the run store cannot take writes",
                           headers={"Retry-After": "1"})
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


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    """Prometheus text format; unauthenticated like /readyz (no tenant data in it, unless
    ``[usage] tenant_metrics`` labels the usage counters by tenant)."""
    body, content_type = request.app[METRICS_KEY].exposition()
    return web.Response(body=body, headers={"Content-Type": content_type})


@routes.get("/v1/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    open_mode = request.app[CONFIG_KEY].open_mode
    return web.json_response(openapi_document(
        extra_paths={**task_openapi_paths(), **collection_openapi_paths(),
                     **openai_openapi_paths(), **agui_openapi_paths(),
                     **asyncapi_openapi_paths(), **usage_openapi_paths(),
                     **retention_openapi_paths()},
        open_mode=open_mode))


# --- helpers --------------------------------------------------------------------------------


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
        "links": run_links(record.run_id),
    }


# --- the application ------------------------------------------------------------------------


def build_research(config: ServerConfig,
                   env: Mapping[str, str] | None = None) -> dict[str, Research]:
    """Every tenant's searcher and chat client, by tenant (tenants with neither are absent).

    Called before the server starts so that a misconfigured tenant stops it at
    once, as ``reactive-rag ask --web`` does, not at its first run. Nothing
    built here has opened a connection yet (sessions open on first use). Each
    tenant's table is an :class:`~reactive_rag.engine.EngineConfig` built by the
    same :func:`~reactive_rag.engine.research_from` as the library's and the CLI's.

    Raises:
        ConfigError: a tenant's ``[search]`` names an unknown provider kind or
            one missing its key (an unset ``api_key_env``), URL or options, or
            its ``[chat]`` names an ``api_key_env`` that is not set.
    """
    built: dict[str, Research] = {}
    for name, tenant in config.effective_tenants.items():
        if tenant.search is None and tenant.chat is None:
            continue
        try:
            built[name] = research_from(EngineConfig(search=tenant.search, chat=tenant.chat,
                                                     entailment=config.entailment), env)
        except RunConfigError as exc:  # nothing built so far has opened a connection
            raise ConfigError(f"tenant {name!r} {exc}") from exc
    return built


def _tenant_engine(base: Engine, research: Research) -> Engine:
    """An engine over ``base``'s index with the tenant's searcher, chat policies and judge."""
    overrides: dict[str, Any] = {}
    if research.config.search is None:
        overrides["credibility"] = base.credibility
    return assemble(Engine, research, index=base.index, owns_parts=False, **overrides)


def create_app(config: ServerConfig | None = None, *, engine: Engine | None = None,
               store: ServerStore | None = None,
               env: Mapping[str, str] | None = None,
               replica_engine: EngineFactory | None = None) -> web.Application:
    """The HTTP service.

    Args:
        config: settings (default: ``ServerConfig()``, open single-tenant mode).
        engine: runs questions (default: one over ``config.index_root``); a
            given engine is not closed with the app. Tenants with ``[search]``
            or ``[chat]`` get their own engine over its index (offline policies
            where their ``[chat]`` does not apply, not the given engine's).
        store: the run store (default: from ``config.store``); the app opens
            it on start-up (marking crashed runs ``interrupted``) and closes it.
        env: where API-key variables are looked up (default: ``os.environ``).
        replica_engine: with ``[replicas]``, builds each replica's engine in its
            Ray worker (picklable; default: the offline engine over ``index_root``).

    Raises:
        ConfigError: a tenant's ``[search]`` or ``[chat]`` cannot be used (see
            :func:`build_research`), or ``[observability]`` names a header variable
            that is not set; nothing has been opened.
    """
    config = config or ServerConfig()
    research = build_research(config, env)
    app = web.Application(middlewares=[problem_middleware],
                          client_max_size=config.max_body_bytes)
    app[CONFIG_KEY] = config
    index_root = engine.index.root if engine is not None else config.index_root or default_root()
    app[AUTH_KEY] = Authenticator(config.effective_tenants, open_mode=config.open_mode,
                                  owner_of=owner_lookup(index_root))  # API-made collections
    app[WEBSOCKETS_KEY] = set()
    app[INTERRUPTED_KEY] = []
    app[METRICS_KEY] = usage_metrics(app, config)
    configure_traces(app, config, env)  # [observability]: refused here, before anything opens
    app.add_routes(routes)
    app.add_routes(session_routes)
    _mount_extras(app)
    install_log_redaction()
    app.cleanup_ctx.append(_lifecycle(config, engine, store, research, replica_engine))
    app.on_shutdown.append(_close_websockets)
    return app


def _lifecycle(config: ServerConfig, engine: Engine | None, store: ServerStore | None,
               research: Mapping[str, Research],
               replica_engine: EngineFactory | None = None) -> Any:
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        with opening_store(config.store_label()):  # a full disk etc.: one line (StartError)
            run_store = store if store is not None else make_store(
                config.store_target(), owner=config.owner, lease_ttl_s=config.lease_ttl_s)
        dispatcher = None if config.replicas is None else ReplicaDispatcher.for_config(
            config, run_store, replica_engine)  # (refused before the store opens)
        with opening_store(config.store_label()):
            interrupted = await run_store.open()
        app[INTERRUPTED_KEY] = list(interrupted)
        if interrupted:
            log.warning("marked %d run(s) left unfinished by a crash as interrupted",
                        len(interrupted))
        own_engine = engine is None
        run_engine = engine if engine is not None else Engine.from_config(
            EngineConfig(entailment=config.entailment), index=CorpusIndex(config.index_root))
        tenant_engines = {name: _tenant_engine(run_engine, r)
                          for name, r in research.items()}
        async def resume_recovered(run_ids: list[str]) -> None:
            """Runs a sweep found orphaned (their owner's lease expired): resume them here."""
            manager = app.get(MANAGER_KEY)
            if config.resume_interrupted and manager is not None:
                await manager.resume_all(run_ids, app[AUTH_KEY].tenant)

        keeper = await LeaseKeeper(run_store, on_recovered=resume_recovered).start()
        if dispatcher is not None:  # new runs go to engine replicas on Ray
            await _start_dispatcher(dispatcher, keeper, run_store)
        manager = RunManager(run_engine, run_store, engines=tenant_engines, health=keeper,
                             recorder_options={"retry_window_s": config.store_retry_s},
                             observers=[app[METRICS_KEY], *open_traces(app)],
                             dispatcher=dispatcher)
        app[LEASE_KEY] = keeper
        app[STORE_KEY] = run_store
        app[ENGINE_KEY] = run_engine
        app[MANAGER_KEY] = manager
        sessions = app[SESSIONS_KEY] = SessionManager.for_config(run_store, manager, config).start()
        relay = CancelRelay(manager, poll_s=config.cancels.poll_s).start()
        retention = RetentionSweeper(run_store, config.retention,
                                     config.effective_tenants).start()
        if config.resume_interrupted and interrupted:
            resumed = await manager.resume_all(interrupted, app[AUTH_KEY].tenant)
            log.info("resumed %d of %d interrupted run(s)", len(resumed), len(interrupted))
        stop_building = threading.Event()
        if own_engine and config.build_default_corpus and \
                STDLIB_COLLECTION in config.default_collections and \
                not run_engine.index.exists(STDLIB_COLLECTION):
            log.info("indexing the standard-library docs in the background (first start only)")
            app[CORPUS_TASK_KEY] = asyncio.get_running_loop().create_task(
                asyncio.to_thread(run_engine.ensure_stdlib_corpus, _stoppable(stop_building)),
                name="default-corpus")
        elif own_engine:
            # load the embedding model off the event loop before the first run needs it
            await asyncio.to_thread(run_engine.warm_up)
        if config.open_mode:
            log.warning("no tenants configured: one open 'default' tenant without "
                        "authentication, listening on 127.0.0.1 only")
        for name, tenant_research in research.items():
            log.info("tenant %s: %s", name, tenant_research.describe())
        try:
            yield
        finally:
            building = app.get(CORPUS_TASK_KEY)
            if building is not None:  # a thread cannot be cancelled: ask it to stop
                stop_building.set()  # at its next batch; what it embedded stays cached
                with contextlib.suppress(Exception):
                    await building
            await relay.aclose()
            await manager.aclose()  # every tenant's runs, whichever engine runs them
            await sessions.aclose()  # their turns saved before the store closes
            await retention.aclose()
            await close_traces(app)  # the ended runs' last spans sent to the collector
            await keeper.aclose()
            if own_engine:  # tenant engines share the index: closed only when it is ours
                for tenant_engine in tenant_engines.values():
                    await tenant_engine.aclose()
                await run_engine.aclose()
            for tenant_research in research.values():
                await tenant_research.aclose()
            await run_store.close()

    return ctx


async def _start_dispatcher(dispatcher: ReplicaDispatcher, keeper: LeaseKeeper,
                            store: RunStore) -> None:
    """Start the replicas; if they cannot start, close what start-up opened, then raise."""
    try:
        await dispatcher.start()
    except BaseException:
        with contextlib.suppress(Exception):
            await dispatcher.aclose()
        await keeper.aclose()
        await store.close()
        raise


async def _close_websockets(app: web.Application) -> None:
    sockets = app[WEBSOCKETS_KEY]
    for ws in tuple(sockets):
        with contextlib.suppress(Exception):
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutting down")


def _mount_extras(app: web.Application) -> None:
    """The web page (static files), the background-task routes and the protocol faces."""
    add_web_routes(app)
    app.add_routes(collection_routes)
    mount_tasks(app)
    mount_collection_writes(app)  # after the tasks: its writer registers a task kind
    for face in (openai_routes, agui_routes, asyncapi_routes, usage_routes, retention_routes):
        app.add_routes(face)


class CorpusBuildStopped(Exception):
    """The server is shutting down: the first-start indexing stops before it writes."""


def _stoppable(stop: threading.Event) -> Callable[[int, int, str], None]:
    """A build progress callback that ends the build once ``stop`` is set.

    Only while chunking and embedding: a build stopped there has written nothing
    (its vectors so far stay in the embedding cache, so the next start goes on
    from them); once it writes, it finishes.
    """
    def progress(done: int, total: int, stage: str) -> None:
        if stop.is_set() and stage in ("chunk", "embed"):
            raise CorpusBuildStopped("the server is shutting down")

    return progress
