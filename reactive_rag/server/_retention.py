"""Retention and export of stored runs: ``DELETE /v1/runs/{id}``, ``GET /v1/runs/{id}/export``
and the sweeper that deletes each tenant's ended runs once they are older than its period.

A run that is still running is never deleted: ``DELETE`` answers 409
``run_still_running`` (cancel it first, then delete it once it ended), and the
sweeper skips it. The store decides, atomically with appends and resumes, on
every backend, so a run going on on another replica is safe too. Deleting is
final: the id then reads as a run that never existed, everywhere.

An export is the run's stored events as NDJSON, one event per line in the
JSON codec of SSE and ``reactive-rag replay --json`` (:func:`streams.encode_json`),
streamed page by page from the store; ``reactive-rag replay --from-file`` reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import Any, Self, cast

from aiohttp import web

from reactive_rag.store import RunStillRunning, RunStore, StoreError
from streams import Event, encode_json

from ._periodic import repeat
from ._problems import make_problem
from ._requests import MANAGER_KEY, STORE_KEY, request_tenant, run_id_param
from ._retention_config import DAY_S, RetentionConfig

__all__ = [
    "EXPORT_CONTENT_TYPE",
    "RetentionSweeper",
    "retention_openapi_paths",
    "retention_routes",
]

log = logging.getLogger("reactive_rag.server")

EXPORT_CONTENT_TYPE = "application/x-ndjson"

_WRITE_BYTES = 64 * 1024
"""An export is written in pieces of about this size (never the whole run at once)."""

retention_routes = web.RouteTableDef()
"""``DELETE /v1/runs/{id}`` and ``GET /v1/runs/{id}/export``; ``create_app`` mounts them."""


@retention_routes.delete("/v1/runs/{run_id}")
async def delete_run(request: web.Request) -> web.Response:
    """Delete an ended run of the caller's (204); a running one is refused with 409."""
    tenant = request_tenant(request)
    run_id = run_id_param(request)
    store = request.app[STORE_KEY]
    await store.get_run(run_id, tenant.name)  # 404 for a missing or another tenant's run
    await request.app[MANAGER_KEY].settle(run_id)  # just ended here: its end is stored
    try:
        await store.delete_run(run_id, tenant.name)
    except RunStillRunning:
        raise make_problem(409, "run_still_running", "the run is still running: cancel it "
                           f"(POST /v1/runs/{run_id}/cancel), then delete it once it "
                           "ended") from None
    log.info("run %s of tenant %s deleted", run_id, tenant.name)
    return web.Response(status=204)


@retention_routes.get("/v1/runs/{run_id}/export")
async def export_run(request: web.Request) -> web.StreamResponse:
    """The run's stored events as NDJSON, streamed (what is stored now, for a live run)."""
    tenant = request_tenant(request)
    run_id = run_id_param(request)
    store = request.app[STORE_KEY]
    await store.get_run(run_id, tenant.name)
    await request.app[MANAGER_KEY].settle(run_id)
    response = web.StreamResponse(headers={
        "Content-Type": EXPORT_CONTENT_TYPE,
        "Content-Disposition": f'attachment; filename="{run_id}.ndjson"'})
    events = cast(AsyncGenerator[Event, None], store.events(run_id, tenant=tenant.name))
    async with contextlib.aclosing(events):
        first = await anext(events, None)  # a store that fails now is still a problem answer
        await response.prepare(request)
        try:
            pending: list[str] = []
            size = 0
            if first is not None:
                pending.append(encode_json(first) + "\n")
                size = len(pending[0])
            async for event in events:
                line = encode_json(event) + "\n"
                pending.append(line)
                size += len(line)
                if size >= _WRITE_BYTES:
                    await response.write("".join(pending).encode())
                    pending, size = [], 0
            await response.write("".join(pending).encode())
        except (StoreError, ValueError, ConnectionError) as exc:
            # Headers are gone: cut the connection so the client sees an incomplete
            # body, never a short export that looks whole (or it left: nothing to say).
            log.warning("export of run %s cut: %s: %s", run_id, type(exc).__name__, exc)
            if request.transport is not None:
                request.transport.abort()
            return response
    await response.write_eof()
    return response


class RetentionSweeper:
    """Deletes each tenant's ended runs older than its period, every ``sweep_interval_s``.

    Sweeps once at start, then every interval; a store error is logged and the
    next interval tries again (the sweeper never stops on one).

    Args:
        store: the run store (every backend implements the deletes).
        config: the ``[retention]`` table.
        tenants: the configured tenants (they get ``config.days``).
        clock: Unix time (injectable for tests).
    """

    def __init__(self, store: RunStore, config: RetentionConfig, tenants: Iterable[str], *,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.config = config
        self.periods = config.periods(tenants)
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self.sweeps = 0
        """Sweeps completed (with or without errors): a test's condition to wait on."""

    def start(self) -> Self:
        """Start sweeping in the background (nothing to do without a period); returns self."""
        if self._task is None and self.periods:
            self._task = asyncio.get_running_loop().create_task(
                repeat(self._counted_sweep, interval_s=self.config.sweep_interval_s,
                       what="retention sweep", first_now=True),
                name="retention-sweeper")
        return self

    async def sweep(self) -> list[str]:
        """One pass over every tenant with a period; the ids deleted.

        Raises:
            StoreError: the store failed (what was deleted before stays deleted).
        """
        deleted: list[str] = []
        now = self._clock()
        for tenant, period_s in sorted(self.periods.items()):
            count = 0
            while True:
                batch = await self.store.delete_runs_before(tenant, now - period_s,
                                                            limit=self.config.batch)
                deleted += batch
                count += len(batch)
                if len(batch) < self.config.batch:
                    break
                await asyncio.sleep(0)  # let requests in between batches
            if count:
                log.info("retention: deleted %d run(s) of tenant %s older than %g days",
                         count, tenant, period_s / DAY_S)
        return deleted

    async def _counted_sweep(self) -> None:
        try:
            await self.sweep()
        finally:
            self.sweeps += 1

    async def aclose(self) -> None:
        """Stop sweeping (a sweep in progress stops at its next store call)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def retention_openapi_paths() -> dict[str, Any]:
    """OpenAPI 3.1 operations of the delete and export routes, for the server's document."""
    def problem(why: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"description": why, "content": {
            "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}}
        if headers:
            out["headers"] = headers
        return out

    run_id = {"name": "run_id", "in": "path", "required": True,
              "description": "a run id (any other string is a run that does not exist: 404)",
              "schema": {"type": "string", "pattern": "^[A-Za-z0-9]{1,64}$"}}
    errors = {
        "401": problem("missing or wrong bearer token", {"WWW-Authenticate": {
            "required": True, "schema": {"type": "string"}}}),
        "404": problem("no run with this id is visible to you (`run_not_found`)"),
        "503": problem("the run store is unavailable (`store_unavailable`)", {"Retry-After": {
            "required": True, "schema": {"type": "string", "pattern": "^[0-9]+$"}}}),
    }
    return {
        "/v1/runs/{run_id}": {"delete": {
            "operationId": "deleteRun",
            "summary": "Delete an ended run: its record and its events, for good",
            "parameters": [run_id],
            "responses": {
                "204": {"description": "deleted; the id is now a run that does not exist"},
                **errors,
                "409": problem("the run is still running: cancel it first, then delete it "
                               "once it ended (`run_still_running`)"),
            },
        }},
        "/v1/runs/{run_id}/export": {"get": {
            "operationId": "exportRun",
            "summary": "The run's stored events as NDJSON (one event's JSON per line, as "
                       "SSE `data`), for `reactive-rag replay --from-file`",
            "parameters": [run_id],
            "responses": {
                "200": {"description": "one JSON event per line, in seq order; an ended run's "
                                       "last line is its run.finished (a live run's: what is "
                                       "stored so far)",
                        "headers": {"Content-Disposition": {
                            "required": True, "schema": {"type": "string"}}},
                        "content": {EXPORT_CONTENT_TYPE: {"schema": {"type": "string"}}}},
                **errors,
            },
        }},
    }
