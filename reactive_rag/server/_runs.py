"""The run manager: starts runs for tenants, records them, enforces rate limits.

A run belongs to the manager, not to the request that started it: clients
attach and leave, and the run goes on until it finishes, is cancelled or its
budget ends it. Every run gets a store :class:`~reactive_rag.store.Recorder`
before anyone can watch it, so what a client sees is always what is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._engine import Engine, Mode, RunHandle
from ..store import Recorder, RunMeta, RunStore
from ._auth import Tenant
from ._exceptions import RateLimited

__all__ = ["ActiveRun", "RunManager"]

log = logging.getLogger("reactive_rag.server")


@dataclass(slots=True)
class ActiveRun:
    """A run going on in this process (``engine``: the one that started it)."""

    tenant: str
    handle: RunHandle
    recorder: Recorder | None = None
    watcher: asyncio.Task[None] | None = None
    engine: Engine | None = None


@dataclass(slots=True)
class _TenantUsage:
    running: int = 0
    started: deque[float] = field(default_factory=deque)


class RunManager:
    """Starts, tracks and cancels the runs of every tenant.

    Args:
        engine: starts the runs of every tenant without an engine of its own.
        store: where every event goes.
        clock: monotonic seconds (injectable for rate-limit tests).
        engines: tenant name -> its own engine (its web search, its chat model).
    """

    def __init__(self, engine: Engine, store: RunStore, *,
                 clock: Callable[[], float] = time.monotonic,
                 engines: Mapping[str, Engine] | None = None) -> None:
        self.engine = engine
        self.engines = dict(engines or {})
        self.store = store
        self._clock = clock
        self._active: dict[str, ActiveRun] = {}
        self._usage: dict[str, _TenantUsage] = {}
        self._closing = False

    def engine_for(self, tenant: str) -> Engine:
        """The engine that runs ``tenant``'s questions."""
        return self.engines.get(tenant, self.engine)

    @property
    def active(self) -> Mapping[str, ActiveRun]:
        """Runs going on in this process, by id."""
        return dict(self._active)

    def live_stream(self, run_id: str) -> Any:
        """The in-memory stream of a run going on here (None: follow the store)."""
        active = self._active.get(run_id)
        return None if active is None else active.handle.stream

    def _reserve(self, tenant: Tenant) -> None:
        """Take a concurrency slot and a per-minute token, or raise RateLimited."""
        usage = self._usage.setdefault(tenant.name, _TenantUsage())
        cfg = tenant.config
        if usage.running >= cfg.max_concurrent_runs:
            raise RateLimited("too_many_concurrent_runs",
                              f"at most {cfg.max_concurrent_runs} runs at a time", 1)
        now = self._clock()
        while usage.started and usage.started[0] <= now - 60.0:
            usage.started.popleft()
        if len(usage.started) >= cfg.runs_per_minute:
            wait = math.ceil(usage.started[0] + 60.0 - now)
            raise RateLimited("too_many_runs_per_minute",
                              f"at most {cfg.runs_per_minute} runs per minute", wait)
        usage.running += 1
        usage.started.append(now)

    def _release(self, tenant: str) -> None:
        usage = self._usage.get(tenant)
        if usage is not None and usage.running > 0:
            usage.running -= 1

    async def start(self, tenant: Tenant, question: str, *, mode: Mode,
                    collections: tuple[str, ...], budget: Mapping[str, Any]) -> str:
        """Start a run and return its id once it is recorded in the store.

        Raises:
            RateLimited: the tenant is at its concurrency or per-minute limit.
            RunConfigError: the engine refused the options (nothing started).
            StoreError: the run could not be created in the store (the run is cancelled).
        """
        if self._closing:
            raise RateLimited("too_many_concurrent_runs", "the server is shutting down", 5)
        self._reserve(tenant)
        run_id = uuid.uuid4().hex
        engine = self.engine_for(tenant.name)
        try:
            handle = engine.start(question, mode=mode, collections=collections,
                                  budget=dict(budget), run_id=run_id)
        except BaseException:
            self._release(tenant.name)
            raise
        active = ActiveRun(tenant.name, handle, engine=engine)
        self._active[run_id] = active
        # The run task has not run yet (no await since engine.start): the
        # recorder subscribes before the first event is published, and takes
        # anything earlier from the stream's history anyway.
        recorder = Recorder(self.store, handle.stream,
                            RunMeta(run_id=run_id, tenant=tenant.name, question=question,
                                    mode=mode))
        try:
            await recorder.start()
        except BaseException:
            handle.cancel("the run could not be recorded")
            with contextlib.suppress(Exception):
                await handle.wait()
            self._active.pop(run_id, None)
            engine.forget(run_id)
            self._release(tenant.name)
            raise
        active.recorder = recorder
        active.watcher = asyncio.get_running_loop().create_task(
            self._watch(run_id, active), name=f"watch:{run_id}")
        return run_id

    async def _watch(self, run_id: str, active: ActiveRun) -> None:
        """Wait for the run, make its log durable, then forget it here."""
        try:
            with contextlib.suppress(Exception):
                await active.handle.wait()
            if active.recorder is not None:
                try:
                    await active.recorder.aclose()
                except Exception:
                    log.exception("run %s: events could not all be stored", run_id)
        finally:
            self._active.pop(run_id, None)
            (active.engine or self.engine).forget(run_id)
            self._release(active.tenant)

    async def settle(self, run_id: str, timeout_s: float = 5.0) -> None:
        """If the run here has ended, wait until its end is stored.

        A client that saw ``run.finished`` on the live stream and asks for the
        run at once must not read a stale ``running`` status from the store.
        """
        active = self._active.get(run_id)
        if active is None or active.watcher is None or active.handle.stream.finished is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(active.watcher), timeout_s)

    async def settle_finished(self, tenant: str, timeout_s: float = 5.0) -> None:
        """:meth:`settle` every run of ``tenant`` here that has ended (before a listing)."""
        ended = [run_id for run_id, a in self._active.items()
                 if a.tenant == tenant and a.handle.stream.finished is not None]
        for run_id in ended:
            await self.settle(run_id, timeout_s)

    def cancel(self, run_id: str, reason: str = "cancelled by the client") -> bool:
        """Cancel a run going on here; False if it is not (already finished, or elsewhere)."""
        active = self._active.get(run_id)
        if active is None:
            return False
        return active.handle.cancel(reason)

    async def wait_all(self) -> None:
        """Wait until every run going on here is finished and stored."""
        watchers = [a.watcher for a in self._active.values() if a.watcher is not None]
        if watchers:
            await asyncio.gather(*watchers, return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel the runs still going (they end ``cancelled``, stored) and wait for them."""
        self._closing = True
        for active in list(self._active.values()):
            active.handle.cancel("server shutting down")
        await self.wait_all()
