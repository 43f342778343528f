"""The application's typed state and the request helpers every route module shares.

``_app`` (runs, service routes, lifecycle), ``_sessions`` and ``_tasks`` all
import this module and none of them imports another, so the server's modules
form no import cycle.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from reactive_rag.engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.store import ServerStore

from ._auth import Authenticator, Tenant
from ._config import ServerConfig
from ._problems import make_problem

__all__ = [
    "AUTH_KEY",
    "CONFIG_KEY",
    "CORPUS_TASK_KEY",
    "ENGINE_KEY",
    "STORE_KEY",
    "TENANT_KEY",
    "json_body",
    "request_tenant",
    "resolve_collections",
    "run_links",
    "scoped_collections",
]

CONFIG_KEY = web.AppKey("config", ServerConfig)
STORE_KEY = web.AppKey("store", ServerStore)
ENGINE_KEY = web.AppKey("engine", Engine)
AUTH_KEY = web.AppKey("auth", Authenticator)
CORPUS_TASK_KEY = web.AppKey("corpus_task", asyncio.Task[bool])
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
