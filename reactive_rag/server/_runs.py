"""The run manager: starts runs for tenants, records them, enforces rate limits.

A run belongs to the manager, not to the request that started it: clients
attach and leave, and the run goes on until it finishes, is cancelled or its
budget ends it. Every run gets a store :class:`~reactive_rag.store.Recorder`
before anyone can watch it, so what a client sees is always what is stored.

Where a new run executes is the manager's ``dispatcher``: none, in this
process; a :class:`~reactive_rag.server._dispatch.RunDispatcher` (engine
replicas on Ray), elsewhere, recorded there to the shared store, while the
slots, rate limits and cancels stay here (:class:`RemoteRuns`). Resumed runs,
and those whose caller needs the live handle (``here=True``: MCP tools,
conversation turns), always run here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from reactive_rag.engine import Engine, Mode, RunHandle, RunObserver
from reactive_rag.run import RunContext
from reactive_rag.store import (
    Recorder,
    RunMeta,
    RunNotResumable,
    RunStore,
    StoreError,
    StoreUnavailable,
)
from streams import Event

from ._auth import Tenant
from ._caps import Quotas, capped_budget
from ._dispatch import RemoteRuns, RunDispatcher, RunOrder
from ._exceptions import RateLimited

__all__ = ["ActiveRun", "RunManager", "StoreHealth"]

log = logging.getLogger("reactive_rag.server")


class StoreHealth(Protocol):
    """Whether the run store takes writes (the server's lease keeper knows)."""

    @property
    def writable(self) -> bool: ...

    @property
    def reason(self) -> str | None: ...


@dataclass(slots=True)
class ActiveRun:
    """A run going on in this process (``engine``: the one that started it)."""

    tenant: str
    handle: RunHandle
    recorder: Recorder | None = None
    watcher: asyncio.Task[None] | None = None
    engine: Engine | None = None


class RunManager:
    """Starts, tracks and cancels the runs of every tenant.

    Args:
        engine: starts the runs of every tenant without an engine of its own.
        store: where every event goes.
        clock: monotonic seconds (injectable for rate-limit tests).
        engines: tenant name -> its own engine (its web search, its chat model).
        observers: called with every run started or resumed here, before its
            first event, whichever engine runs it (the server's metrics).
        dispatcher: where new runs execute instead of here (engine replicas);
            started by the app before it listens, closed by :meth:`aclose`.
    """

    def __init__(self, engine: Engine, store: RunStore, *,
                 clock: Callable[[], float] = time.monotonic,
                 engines: Mapping[str, Engine] | None = None,
                 health: StoreHealth | None = None,
                 recorder_options: Mapping[str, Any] | None = None,
                 observers: Sequence[RunObserver] = (),
                 dispatcher: RunDispatcher | None = None) -> None:
        self.engine = engine
        self._observers = tuple(observers)
        self.engines = dict(engines or {})
        self.store = store
        self.health = health
        self._recorder_options = dict(recorder_options or {})
        self._clock = clock
        self._active: dict[str, ActiveRun] = {}
        self.quotas = Quotas(clock)
        self._repairs: set[Recorder] = set()
        self._closing = False
        self.remote = None if dispatcher is None else RemoteRuns(dispatcher, self._release)

    def engine_for(self, tenant: str) -> Engine:
        """The engine that runs ``tenant``'s questions."""
        return self.engines.get(tenant, self.engine)

    @property
    def active(self) -> Mapping[str, ActiveRun]:
        """Runs going on in this process, by id."""
        return dict(self._active)

    @property
    def store_problem(self) -> str | None:
        """Why the store cannot take writes now (None: it can, as far as we know).

        The lease heartbeat may still succeed on a full disk (it rewrites one
        row in place), so a run whose store gave up counts until its ending
        is stored.
        """
        if self.health is not None and not self.health.writable:
            return self.health.reason or "the run store cannot take writes"
        recorders = [a.recorder for a in self._active.values() if a.recorder is not None]
        for recorder in (*recorders, *self._repairs):
            if recorder.given_up is not None and not recorder.repaired:
                return recorder.given_up
        return None

    def _recorder(self, handle: RunHandle, meta: RunMeta | None) -> Recorder:
        """The run's recorder: a store that stops taking writes fails the run, plainly."""

        def gave_up(reason: str) -> None:
            handle.fail(f"the run store stopped taking this run's events: {reason}")

        return Recorder(self.store, handle.stream, meta, on_give_up=gave_up,
                        **self._recorder_options)

    def _reserve(self, tenant: Tenant) -> None:
        """Take a slot under the tenant's quotas, or raise RateLimited (:mod:`._caps`)."""
        self.quotas.admit(tenant.name, tenant.config)

    def _release(self, tenant: str) -> None:
        self.quotas.release(tenant)

    async def start(self, tenant: Tenant, question: str, *, mode: Mode,
                    collections: tuple[str, ...], budget: Mapping[str, Any],
                    context: RunContext | None = None, here: bool = False) -> str:
        """Start a run and return its id once it is recorded in the store.

        ``context``: a conversation's earlier turns, passed to ``Engine.start``.
        ``here``: run it in this process even with a dispatcher (the caller
        needs its live handle in :attr:`active`).

        ``budget``: checked against the tenant's caps; the defaults over a cap
        are clipped to it.

        Raises:
            Problem: 422 ``budget_over_cap``, a budget field over the tenant's cap.
            RateLimited: the tenant is at one of its quotas (runs at once, per
                minute, hour or day, tokens per day).
            RunConfigError: the engine refused the options (nothing started).
            StoreError: the run could not be created in the store (the run is cancelled).
            ReplicasUnavailable: with a dispatcher, no engine replica took the run.
        """
        if self._closing:
            raise RateLimited("too_many_concurrent_runs", "the server is shutting down", 5)
        problem = self.store_problem
        if problem is not None:
            raise StoreUnavailable(problem)
        budget = capped_budget(tenant.config.caps, budget)
        self._reserve(tenant)
        run_id = uuid.uuid4().hex
        if self.remote is not None and not here:  # the slot is released when it ended
            return await self.remote.start(RunOrder(run_id, tenant.name, question, mode,
                                                    collections, dict(budget), context))
        engine = self.engine_for(tenant.name)
        try:
            handle = engine.start(question, mode=mode, collections=collections,
                                  budget=dict(budget), run_id=run_id, context=context)
        except BaseException:
            self._release(tenant.name)
            raise
        active = ActiveRun(tenant.name, handle, engine=engine)
        self._active[run_id] = active
        self._observe(handle)
        self.quotas.meter(tenant.name, handle.stream)
        # The run task has not run yet (no await since engine.start): the
        # recorder subscribes before the first event is published, and takes
        # anything earlier from the stream's history anyway.
        recorder = self._recorder(handle, RunMeta(run_id=run_id, tenant=tenant.name,
                                                  question=question, mode=mode))
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

    async def resume(self, tenant: Tenant, run_id: str) -> str:
        """Resume an interrupted run of ``tenant`` from its stored events; return its id.

        The engine reads and checks the stored log first (nothing changes if
        it refuses); then the store reopens the run (atomically: of two
        resumes one wins) and a recorder appends the resumed run's events
        after the stored ones. Slots, rate limits and the watcher are as for
        :meth:`start`.

        Raises:
            RunNotFound: no such run, or another tenant's.
            RunNotResumable: the run is running (here or elsewhere) or finished.
            RateLimited: the tenant is at one of its quotas, as for :meth:`start`.
            RunConfigError: the engine cannot resume this log (nothing changed).
            StoreError: the store could not reopen or record it (the run is cancelled).
        """
        if self._closing:
            raise RateLimited("too_many_concurrent_runs", "the server is shutting down", 5)
        problem = self.store_problem
        if problem is not None:
            raise StoreUnavailable(problem)
        record = await self.store.get_run(run_id, tenant.name)
        if record.status != "interrupted":
            raise RunNotResumable(run_id, record.status)
        events = await self._stored_events(run_id, tenant.name)
        if run_id in self._active or (self.remote is not None and run_id in self.remote):
            raise RunNotResumable(run_id, "running")
        self._reserve(tenant)
        engine = self.engine_for(tenant.name)
        try:
            handle = engine.resume(events)
        except BaseException:
            self._release(tenant.name)
            raise
        active = ActiveRun(tenant.name, handle, engine=engine)
        self._active[run_id] = active
        self._observe(handle)
        self.quotas.meter(tenant.name, handle.stream)
        try:
            await self.store.reopen(run_id, tenant.name)
            # No meta: the recorder goes on after the stored last seq, and takes
            # what the run published during these awaits from its history.
            recorder = self._recorder(handle, None)
            await recorder.start()
        except BaseException:
            await self._abandon(run_id, active, "the run could not be resumed in the store")
            raise
        active.recorder = recorder
        active.watcher = asyncio.get_running_loop().create_task(
            self._watch(run_id, active), name=f"watch:{run_id}")
        log.info("run %s resumed from its %d stored events", run_id, len(events))
        return run_id

    def tenant_of(self, run_id: str) -> str:
        """The tenant of a run going on here ("" if none is): the metrics' tenant label."""
        active = self._active.get(run_id)
        return "" if active is None else active.tenant

    def _observe(self, handle: RunHandle) -> None:
        """Attach the observers (no await since the engine started it: no event missed)."""
        for observe in self._observers:
            try:
                observe(handle)
            except Exception:
                log.exception("run %s: observer %r failed to attach", handle.run_id, observe)

    async def resume_all(self, run_ids: Sequence[str],
                         tenant_of: Callable[[str], Tenant]) -> list[str]:
        """Resume each of these interrupted runs (at start-up); return those resumed.

        ``tenant_of`` maps a stored run's tenant name to the tenant (raising
        ``KeyError`` for one no longer configured). A run that cannot be
        resumed is logged and stays interrupted.
        """
        resumed: list[str] = []
        for run_id in run_ids:
            try:
                record = await self.store.get_run(run_id)
                resumed.append(await self.resume(tenant_of(record.tenant), run_id))
            except Exception as exc:
                log.warning("run %s was not resumed: %s: %s", run_id, type(exc).__name__, exc)
        return resumed

    async def _stored_events(self, run_id: str, tenant: str) -> list[Event]:
        replay = cast(AsyncGenerator[Event, None], self.store.events(run_id, tenant=tenant))
        async with contextlib.aclosing(replay) as stored:
            return [event async for event in stored]

    async def _abandon(self, run_id: str, active: ActiveRun, reason: str) -> None:
        """Cancel a run that could not be recorded and forget it (its slot is released)."""
        active.handle.cancel(reason)
        with contextlib.suppress(Exception):
            await active.handle.wait()
        self._active.pop(run_id, None)
        (active.engine or self.engine).forget(run_id)
        self._release(active.tenant)

    async def _watch(self, run_id: str, active: ActiveRun) -> None:
        """Wait for the run, make its log durable, then forget it here."""
        try:
            with contextlib.suppress(Exception):
                await active.handle.wait()
            recorder = active.recorder
            if recorder is not None:
                try:
                    await recorder.aclose()
                except StoreError as exc:
                    log.warning("run %s: %s", run_id, exc)
                    if not recorder.repaired:  # its ending is stored when the store returns
                        self._repairs = {r for r in self._repairs if not r.repaired}
                        self._repairs.add(recorder)
        finally:
            self._active.pop(run_id, None)
            (active.engine or self.engine).forget(run_id)
            self._release(active.tenant)

    def _unsettled(self, run_id: str) -> asyncio.Task[None] | None:
        """The watcher of a run here that has ended but may not be stored yet."""
        active = self._active.get(run_id)
        if active is None or active.watcher is None or active.handle.stream.finished is None:
            return None
        if active.recorder is not None and active.recorder.given_up is not None:
            return None  # the store is not taking it: nothing to wait for
        return active.watcher

    async def settle(self, run_id: str, timeout_s: float = 5.0) -> None:
        """If the run here has ended, wait (at most ``timeout_s``) until its end is stored.

        A client that saw ``run.finished`` on the live stream and asks for the
        run at once must not read a stale ``running`` status from the store.
        """
        await self._settle([self._unsettled(run_id)], timeout_s)

    async def settle_finished(self, tenant: str, timeout_s: float = 2.0) -> None:
        """:meth:`settle` every ended run of ``tenant`` here, all within one ``timeout_s``."""
        await self._settle([self._unsettled(run_id) for run_id, a in self._active.items()
                            if a.tenant == tenant], timeout_s)

    async def _settle(self, watchers: list[asyncio.Task[None] | None], timeout_s: float) -> None:
        waiting = [w for w in watchers if w is not None and not w.done()]
        if not waiting or self.store_problem is not None:
            return  # a store that cannot write is not waited for: reads show what is stored
        await asyncio.wait(waiting, timeout=timeout_s)

    def cancel(self, run_id: str, reason: str = "cancelled by the client") -> bool:
        """Cancel a run going on here or dispatched from here; False if it is not
        (already finished, or started by another server)."""
        active = self._active.get(run_id)
        if active is None:
            return self.remote is not None and self.remote.cancel(run_id, reason)
        return active.handle.cancel(reason)

    async def wait_all(self) -> None:
        """Wait until every run going on here is finished and stored."""
        watchers = [a.watcher for a in self._active.values() if a.watcher is not None]
        if watchers:
            await asyncio.gather(*watchers, return_exceptions=True)
        if self.remote is not None:
            await self.remote.wait_all()

    async def aclose(self) -> None:
        """Cancel the runs still going (they end ``cancelled``, stored) and wait for them."""
        self._closing = True
        for active in list(self._active.values()):
            active.handle.cancel("server shutting down")
        if self.remote is not None:  # its runs end cancelled, then the replicas close
            await self.remote.aclose("server shutting down")
        await self.wait_all()
        for recorder in list(self._repairs):  # crash recovery ends these runs later
            await recorder.abort()
        self._repairs.clear()
