"""``GET /v1/usage``: a tenant's usage and estimated cost summed over a time range, and the
server's usage metrics (``[usage]`` of the config).

The sum reads the store: one page of runs per 200 runs in the range, newest
first, and each finished run's last event (its ``run.finished`` carries the
run's usage); a run whose terminal carries none (ended by crash recovery, or
stored before usage was counted) has its whole log read and counted. The cost
grows with the runs in the range; an index of usage per tenant and day is
future work.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import Any, cast

from aiohttp import web

from reactive_rag.engine import add_usage, usage_json, usage_of
from reactive_rag.observability import RunMetrics
from reactive_rag.store import RunRecord, ServerStore
from streams import Event, RunFinished, RunUsage

from ._config import ServerConfig
from ._problems import make_problem
from ._requests import CONFIG_KEY, MANAGER_KEY, STORE_KEY, request_tenant

__all__ = ["USAGE_SCHEMA", "usage_metrics", "usage_openapi_paths", "usage_routes"]

usage_routes = web.RouteTableDef()

_PAGE = 200
_UNIX = re.compile(r"^[0-9]{1,12}(\.[0-9]{1,6})?$")
_FRACTION = re.compile(r"(\.[0-9]{6})[0-9]+")  # microseconds: the rest is cut


@usage_routes.get("/v1/usage")
async def tenant_usage(request: web.Request) -> web.Response:
    """Your runs created in ``[from, to)``: how many, and their usage and cost summed."""
    tenant = request_tenant(request)
    start = _time_param(request, "from", 0.0)
    end = _time_param(request, "to", math.inf)  # (to <= from: an empty range, nothing summed)
    await request.app[MANAGER_KEY].settle_finished(tenant.name)
    store = request.app[STORE_KEY]
    usages: list[RunUsage] = []
    running = 0
    cursor: str | None = None
    while True:
        page = await store.list_runs(tenant.name, limit=_PAGE, before=cursor)
        older = False
        for record in page.runs:
            if record.created_at >= end:
                continue
            if record.created_at < start:
                older = True  # newest first: every later run is older still
                break
            usage = await _finished_usage(store, record)
            if usage is None:
                running += 1
            else:
                usages.append(usage)
        if older or page.next_before is None:
            break
        cursor = page.next_before
    prices = request.app[CONFIG_KEY].usage.prices
    return web.json_response({
        "tenant": tenant.name, "from": start, "to": None if math.isinf(end) else end,
        "runs": len(usages), "running": running,
        "usage": usage_json(add_usage(usages), prices)})


async def _finished_usage(store: ServerStore, record: RunRecord) -> RunUsage | None:
    """The usage a run's terminal carries (its log counted if it carries none);
    ``None`` while the run goes on."""
    last = await _events(store, record, after_seq=max(0, record.last_seq - 1))
    if not last or not isinstance(last[-1], RunFinished):
        return None
    if last[-1].usage is not None:
        return last[-1].usage
    return usage_of(await _events(store, record, after_seq=0))


async def _events(store: ServerStore, record: RunRecord, *, after_seq: int) -> list[Event]:
    replay = cast(AsyncGenerator[Event, None],
                  store.events(record.run_id, after_seq, tenant=record.tenant))
    async with contextlib.aclosing(replay) as stored:
        return [event async for event in stored]


def _time_param(request: web.Request, name: str, default: float) -> float:
    """Unix seconds (``1767225600``) or ISO 8601 (``2026-01-01T00:00:00Z``; no zone: UTC)."""
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        if _UNIX.match(raw):
            return float(raw)
        if len(raw) > 40:
            raise ValueError(raw)
        # RFC 3339 allows a lower-case t and z, and any number of fraction digits
        when = datetime.fromisoformat(_FRACTION.sub(r"\1", raw.upper()))
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.timestamp()  # (before 1970: negative, before every run)
    except (ValueError, OverflowError, OSError):
        raise make_problem(422, "invalid_parameter", f"{name} must be Unix seconds or an ISO "
                           "8601 date-time (e.g. 2026-01-01T00:00:00Z)", field=name) from None


def usage_metrics(app: web.Application, config: ServerConfig) -> RunMetrics:
    """The server's run metrics with its usage counters: costs by ``[usage.prices]``,
    a tenant label only when ``[usage] tenant_metrics`` is on."""
    prices = config.usage.prices

    def tenant_of(run_id: str) -> str:
        manager = app.get(MANAGER_KEY)
        return "" if manager is None else manager.tenant_of(run_id)

    return RunMetrics(tenant_of=tenant_of if config.usage.tenant_metrics else None,
                      cost=lambda usage: prices.estimate_cost(usage).total)


_COUNT = {"type": "integer", "minimum": 0}
USAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["models", "provider_calls", "pages", "page_bytes", "wall_s", "model_calls",
                 "input_tokens", "output_tokens", "cost"],
    "properties": {
        "models": {"type": "array", "description": "model calls by role and model; tokens "
                                                   "as the model server reported them",
                   "items": {"type": "object",
                             "required": ["role", "model", "calls", "input_tokens",
                                          "output_tokens"],
                             "properties": {"role": {"type": "string"},
                                            "model": {"type": "string"},
                                            "calls": _COUNT, "input_tokens": _COUNT,
                                            "output_tokens": _COUNT}}},
        "provider_calls": {"type": "object", "additionalProperties": _COUNT,
                           "description": "search calls by provider"},
        "pages": _COUNT, "page_bytes": _COUNT,
        "wall_s": {"type": "number", "minimum": 0},
        "model_calls": _COUNT, "input_tokens": _COUNT, "output_tokens": _COUNT,
        "cost": {"type": "object", "description": "estimated by the server's price table",
                 "required": ["currency", "total", "models", "providers", "unpriced"],
                 "properties": {"currency": {"type": "string"},
                                "total": {"type": "number", "minimum": 0},
                                "models": {"type": "number", "minimum": 0},
                                "providers": {"type": "number", "minimum": 0},
                                "unpriced": {"type": "array", "items": {"type": "string"},
                                             "description": "models used that have no "
                                                            "price (counted as 0)"}}},
    },
}
"""The JSON schema of a run's (or a sum's) ``usage``, as the API answers it."""


def usage_openapi_paths() -> dict[str, Any]:
    """OpenAPI 3.1 path item of ``GET /v1/usage``, for the server's document."""
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    when = {"anyOf": [{"type": "string", "pattern": _UNIX.pattern},
                      {"type": "string", "format": "date-time"}],
            "description": "Unix seconds (`1767225600`) or an ISO 8601 date-time "
                           "(`2026-01-01T00:00:00Z`; no zone: UTC); `to` at or before `from` "
                           "is an empty range"}
    return {"/v1/usage": {"get": {
        "operationId": "getUsage",
        "summary": "Your runs created in [from, to), their usage and estimated cost summed",
        "parameters": [
            {"name": "from", "in": "query", "required": False, "schema": when},
            {"name": "to", "in": "query", "required": False, "schema": when},
        ],
        "responses": {
            "200": {"description": "the sum over your finished runs (never another tenant's)",
                    "content": {"application/json": {"schema": {
                        "type": "object",
                        "required": ["tenant", "from", "to", "runs", "running", "usage"],
                        "properties": {
                            "tenant": {"type": "string"},
                            "from": {"type": "number"},
                            "to": {"type": ["number", "null"]},
                            "runs": {**_COUNT, "description": "finished runs summed"},
                            "running": {**_COUNT, "description": "runs still going (not "
                                                                 "summed)"},
                            "usage": USAGE_SCHEMA}}}}},
            "401": {"description": "missing or wrong bearer token",
                    "headers": {"WWW-Authenticate": {
                        "description": "the scheme to authenticate with", "required": True,
                        "schema": {"type": "string"}}},
                    "content": problem},
            "422": {"description": "from or to is not a time",
                    "content": problem},
        },
    }}}
