"""The application's typed state and the request helpers every route module shares.

``_app`` (runs, service routes, lifecycle), ``_sessions`` and ``_tasks`` all
import this module and none of them imports another, so the server's modules
form no import cycle.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from aiohttp import web

from reactive_rag.engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.store import ServerStore
from streams import Event

from ._auth import Authenticator, Tenant
from ._config import ServerConfig
from ._feed import EventFeed
from ._problems import make_problem, run_not_found
from ._runs import RunManager

__all__ = [
    "AUTH_KEY",
    "CONFIG_KEY",
    "CORPUS_TASK_KEY",
    "ENGINE_KEY",
    "MANAGER_KEY",
    "STORE_KEY",
    "TENANT_KEY",
    "after_param",
    "int_param",
    "json_body",
    "open_feed",
    "request_tenant",
    "resolve_collections",
    "run_id_param",
    "run_links",
    "scoped_collections",
]

CONFIG_KEY = web.AppKey("config", ServerConfig)
STORE_KEY = web.AppKey("store", ServerStore)
ENGINE_KEY = web.AppKey("engine", Engine)
AUTH_KEY = web.AppKey("auth", Authenticator)
CORPUS_TASK_KEY = web.AppKey("corpus_task", asyncio.Task[bool])
MANAGER_KEY = web.AppKey("manager", RunManager)
TENANT_KEY = web.RequestKey("tenant", Tenant)
"""Where :func:`request_tenant` caches the caller on the request."""


def request_tenant(request: web.Request) -> Tenant:
    """The authenticated caller of ``request`` (401 problem if none)."""
    if TENANT_KEY in request:
        return request[TENANT_KEY]
    tenant = request.app[AUTH_KEY].authenticate(request)
    request[TENANT_KEY] = tenant
    return tenant


def run_links(run_id: str) -> dict[str, str]:
    """The ``links`` of a run in API answers."""
    base = f"/v1/runs/{run_id}"
    return {"self": base, "events": f"{base}/events", "ws": f"{base}/ws",
            "cancel": f"{base}/cancel"}


def scoped_collections(request: web.Request, tenant: Tenant,
                       requested: list[str] | None) -> tuple[str, ...]:
    """The request's collections, all of which the tenant may use and that exist."""
    return resolve_collections(tenant, requested,
                               defaults=request.app[CONFIG_KEY].default_collections,
                               index=request.app[ENGINE_KEY].index,
                               building=request.app.get(CORPUS_TASK_KEY))


def resolve_collections(tenant: Tenant, requested: Sequence[str] | None, *,
                        defaults: Sequence[str], index: CorpusIndex,
                        building: asyncio.Task[bool] | None = None) -> tuple[str, ...]:
    """:func:`scoped_collections` without a request (the MCP tools use it too).

    Raises:
        Problem: 422 none or an unindexed one, 403 one the tenant may not search
            (the same whether it exists or not), 503 while the default corpus builds.
    """
    if requested is None:
        chosen = tuple(c for c in defaults if tenant.allows(c))
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
            if building is not None and not building.done():
                raise make_problem(503, "not_ready", "the default corpus is being indexed",
                                   headers={"Retry-After": "5"})
            raise make_problem(422, "run_config", f"collection {name!r} is not indexed",
                               field="collections")
    return chosen


async def json_body(request: web.Request, limit: int, *, check_media_type: bool = True) -> Any:
    """The request's JSON body, at most ``limit`` bytes (413/415/400 problems otherwise).

    ``check_media_type=False``: any ``Content-Type`` is read as JSON (the task
    routes have always taken that, and their document has no 415).
    """
    if request.content_length is not None and request.content_length > limit:
        raise make_problem(413, "body_too_large", f"at most {limit} bytes")
    ctype = request.headers.get("Content-Type", "application/json")
    if check_media_type and ctype.split(";")[0].strip().lower() not in ("application/json", ""):
        raise make_problem(415, "unsupported_media_type")
    data = bytearray()
    try:
        async for chunk in request.content.iter_chunked(16384):
            data.extend(chunk)
            if len(data) > limit:
                raise make_problem(413, "body_too_large", f"at most {limit} bytes")
    except web.RequestPayloadError:  # e.g. a corrupt gzip body (Content-Encoding)
        raise make_problem(400, "invalid_body",
                           "the body could not be read (corrupt or wrongly encoded)") from None

    def number(text: str) -> int | float:  # 3.0 is the integer 3 in JSON and JSON Schema
        value = float(text)
        return int(value) if value.is_integer() and abs(value) <= 2**53 else value

    try:
        return json.loads(bytes(data), parse_float=number)
    except (ValueError, RecursionError):
        raise make_problem(400, "invalid_json") from None


def run_id_param(request: web.Request) -> str:
    run_id = request.match_info["run_id"]
    if not run_id or len(run_id) > 64 or not run_id.isascii() or not run_id.isalnum():
        raise run_not_found()  # a malformed id is just another id that does not exist
    return run_id


def int_param(request: web.Request, name: str, *, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or not low <= int(raw) <= high:
        raise make_problem(422, "invalid_parameter",
                           f"{name} must be an integer from {low} to {high}", field=name)
    return int(raw)


def after_param(request: web.Request) -> int:
    """The seq to resume after: ``Last-Event-ID`` (a browser's reconnect) over ``?after=``.

    Both are checked when both are sent, so a bad one is a 422 whichever wins.
    """
    after = 0
    for name, raw in (("after", request.query.get("after")),
                      ("Last-Event-ID", request.headers.get("Last-Event-ID"))):
        if raw is None:
            continue
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 15:
            raise make_problem(422, "invalid_parameter",
                               f"{name} must be a non-negative integer (an event seq)",
                               field=name)
        after = int(raw)
    return after



async def open_feed(request: web.Request) -> EventFeed:
    """The requested run's events after ``?after=``; 404 before anything is sent if not visible."""
    tenant = request_tenant(request)
    run_id = run_id_param(request)
    after = after_param(request)
    store = request.app[STORE_KEY]
    await store.get_run(run_id, tenant.name)
    source: AsyncIterator[Event] = store.attach(run_id, after, tenant=tenant.name)
    return EventFeed(source, maxsize=request.app[CONFIG_KEY].sse_buffer)
