"""Runs spread over engine replicas on Ray, each writing its runs to one shared store.

:class:`EngineReplicas` starts ``replicas`` Ray actors (spread over the
cluster's nodes), each holding an :class:`~reactive_rag.Engine` built in the
worker by a picklable factory and an open run store (Redis, or PostgreSQL)
under an owner id of its own, renewed by a :class:`~reactive_rag.store.LeaseKeeper`.
A new run goes to the replica with the fewest runs going (each replica is
asked, one hop each); the replica records every event of it to the shared
store, so any process with that store streams any run, from any ``seq``
(``store.attach(run_id, after_seq)``, what ``Last-Event-ID`` resumes from),
and a replica that dies leaves its runs to be marked interrupted by the
others' lease sweep, as for any crashed owner.

Each replica opens the corpus index from the path its factory names; on more
than one node that path must be shared (the index switches generations
atomically, so readers never see half a rebuild).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from actors import RayOptions, ray_module
from reactive_rag.run import RunConfigError
from reactive_rag.store import LeaseKeeper, Recorder, RunMeta, default_owner

if TYPE_CHECKING:
    from reactive_rag.store import RunStore

    from ._engine import Engine

__all__ = ["EngineReplica", "EngineReplicas", "ReplicaRun", "ReplicasUnavailable"]

EngineFactory = Callable[[], "Engine"]
StoreFactory = Callable[..., "RunStore"]
"""Builds the shared store in a replica, called with ``owner=`` (the id it writes as)."""
TenantEngineFactory = Callable[..., "Engine"]
"""Builds a tenant's own engine over the replica's index, called with ``index=``
(e.g. ``functools.partial(Engine.from_config, server_config, tenant=name)``)."""


class ReplicasUnavailable(RuntimeError):
    """No engine replica could take the run (all asked were dead or restarting)."""


def _first_error(answers: list[Any]) -> str:
    exc = next((a for a in answers if isinstance(a, BaseException)), None)
    text = str(exc).strip() if exc is not None else ""
    return text.splitlines()[0] if text else "no replica"


class EngineReplica:
    """One engine and one store connection inside a Ray worker (a plain class: Ray wraps it)."""

    def __init__(self, engine_factory: EngineFactory, store_factory: StoreFactory,
                 name: str, tenants: Mapping[str, TenantEngineFactory] | None = None) -> None:
        self.owner = f"{name}-{default_owner()}"
        self._engine_factory = engine_factory
        self._store_factory = store_factory
        self._tenant_factories = dict(tenants or {})
        self._tenants: dict[str, Engine] = {}
        self._engine: Engine | None = None
        self._store: RunStore | None = None
        self._lease: LeaseKeeper | None = None
        self._runs: dict[str, asyncio.Task[None]] = {}
        self._handles: dict[str, Any] = {}

    async def open(self) -> str:
        """Build the engines (loading their models off the loop), open the store; the owner id."""
        if self._engine is None:
            engine = self._engine_factory()
            tenants = {name: build(index=engine.index)
                       for name, build in self._tenant_factories.items()}
            for built in (engine, *tenants.values()):
                await asyncio.to_thread(built.warm_up)
            store = self._store_factory(owner=self.owner)
            await store.open()
            self._lease = await LeaseKeeper(store).start()
            self._engine, self._store, self._tenants = engine, store, tenants
        return self.owner

    async def start_run(self, question: str, options: Mapping[str, Any], tenant: str) -> str:
        """Start a run here and record it to the shared store; its id."""
        await self.open()
        assert self._engine is not None and self._store is not None
        engine = self._tenants.get(tenant, self._engine)  # a tenant's own, else the default
        handle = engine.start(question, **dict(options))
        recorder = Recorder(self._store, handle.stream,
                            RunMeta(handle.run_id, tenant, question,
                                    str(options.get("mode", "agent"))))
        await recorder.start()  # (events published meanwhile come from the stream's history)
        self._handles[handle.run_id] = handle
        self._runs[handle.run_id] = asyncio.get_running_loop().create_task(
            self._finish(handle, recorder), name=f"replica-run-{handle.run_id}")
        return str(handle.run_id)

    async def _finish(self, handle: Any, recorder: Recorder) -> None:
        try:
            with contextlib.suppress(Exception):
                await handle.wait()
        finally:
            await recorder.aclose()
            self._runs.pop(handle.run_id, None)
            self._handles.pop(handle.run_id, None)

    async def load(self) -> int:
        """Runs going on here (what the dispatcher balances)."""
        return len(self._runs)

    async def node(self) -> str:
        """The id of the Ray node this replica runs on."""
        return str(ray_module().get_runtime_context().get_node_id())

    async def cancel(self, run_id: str, reason: str) -> bool:
        """Cancel a run going on here; False if it is not (or no longer) here."""
        handle = self._handles.get(run_id)
        return bool(handle is not None and handle.cancel(reason))

    async def wait(self, run_id: str) -> None:
        """Until the run ended and its last event is stored."""
        task = self._runs.get(run_id)
        if task is not None:
            await asyncio.shield(task)

    async def close(self) -> None:
        """Cancel the runs going on, store their ends, close the store and the engine."""
        for handle in list(self._handles.values()):
            handle.cancel("engine replica shutting down")
        if self._runs:
            await asyncio.gather(*self._runs.values(), return_exceptions=True)
        if self._lease is not None:
            await self._lease.aclose()
        if self._store is not None:
            await self._store.close()
        for tenant_engine in self._tenants.values():  # (their searchers, chat clients)
            await tenant_engine.aclose()
        if self._engine is not None:
            await self._engine.aclose()


@dataclass(frozen=True, slots=True)
class ReplicaRun:
    """A run dispatched to a replica."""

    run_id: str
    replica: int
    owner: str


class EngineReplicas:
    """Engine replicas on Ray sharing one run store; new runs go to the least loaded.

    Args:
        engine_factory: builds a replica's engine in its worker (picklable).
        tenants: tenant name -> builds that tenant's own engine (its web search,
            its chat model) over the replica's index, in the worker (picklable);
            other tenants' runs go to the default engine.
        store_factory: builds the shared store for an owner id (picklable), e.g.
            ``functools.partial(RedisRunStore, url, prefix="rr:")`` called with ``owner=``.
        replicas: engine replicas; each reserves ``options.num_cpus``.
        options: Ray resources and restart policy; replicas are spread over nodes.
        tenant: the tenant the runs are stored under.
        probe: replicas asked for their load per new run (the next in turn and
            ``probe - 1`` at random: "power of two choices"); ``None`` asks all.
            Each ask costs the dispatcher about 0.3-0.7 ms of CPU (an awaited
            Ray call), so asking all of 200 replicas would cap it near 10 runs/s.
    """

    def __init__(self, engine_factory: EngineFactory, store_factory: StoreFactory, *,
                 replicas: int = 2, options: RayOptions | None = None,
                 tenant: str = "default", probe: int | None = 2,
                 tenants: Mapping[str, TenantEngineFactory] | None = None) -> None:
        if probe is not None and probe < 1:
            raise ValueError("probe must be >= 1 (or None: ask every replica)")
        self.probe = probe
        self._random = random.Random()
        self._engine_factory = engine_factory
        self._store_factory = store_factory
        self._tenant_factories = dict(tenants or {})
        self.options = replace(options or RayOptions(), replicas=replicas)
        self.tenant = tenant
        self._handles: list[Any] = []
        self.owners: list[str] = []
        self._where: dict[str, int] = {}
        self._rr = itertools.count()

    async def start(self) -> EngineReplicas:
        """Start the replicas and wait until each opened its engine and store."""
        if self._handles:
            return self
        ray = ray_module()
        o = self.options
        cls = ray.remote(EngineReplica).options(
            num_cpus=o.num_cpus, num_gpus=o.num_gpus, resources=dict(o.resources) or None,
            max_restarts=o.max_restarts, max_task_retries=o.max_task_retries,
            max_concurrency=o.max_concurrency, scheduling_strategy="SPREAD")
        self._handles = [cls.remote(self._engine_factory, self._store_factory, f"replica{i}",
                                    self._tenant_factories)
                         for i in range(o.replicas)]
        try:
            async with asyncio.timeout(o.start_timeout_s):
                self.owners = list(await asyncio.gather(*(h.open.remote()
                                                          for h in self._handles)))
        except BaseException:  # none serves yet: end them now (a close would wait for them)
            handles, self._handles = self._handles, []
            for h in handles:
                ray.kill(h, no_restart=True)
            raise
        return self

    async def start_run(self, question: str, *, tenant: str | None = None,
                        **options: Any) -> ReplicaRun:
        """Start a run on the least loaded of the replicas asked (see ``probe``).

        ``tenant``: the tenant it is stored under (default: the pool's);
        ``options`` go to ``Engine.start`` (``run_id=`` names the run).

        Raises:
            RunConfigError: the replica's engine refused the options (as
                ``Engine.start`` would here, without the worker's traceback).
            ReplicasUnavailable: no replica asked answered, or the chosen one died.
        """
        if not self._handles:
            await self.start()
        n = len(self._handles)
        first = next(self._rr) % n  # ties go round robin
        asked = [(first + i) % n for i in range(n)]
        if self.probe is not None and self.probe < n:
            asked = [first, *self._random.sample([i for i in asked if i != first],
                                                 self.probe - 1)]
        ray = ray_module()
        answers = await asyncio.gather(*(self._handles[i].load.remote() for i in asked),
                                       return_exceptions=True)
        alive = [(load, i) for load, i in zip(answers, asked, strict=True)
                 if not isinstance(load, BaseException)]
        if not alive:  # the probed replicas are dead or restarting: try every other one
            others = [i for i in range(n) if i not in asked]
            answers = await asyncio.gather(*(self._handles[i].load.remote() for i in others),
                                           return_exceptions=True)
            alive = [(load, i) for load, i in zip(answers, others, strict=True)
                     if not isinstance(load, BaseException)]
        if not alive:
            raise ReplicasUnavailable(f"none of the {n} engine replicas answered: "
                                      f"{_first_error(answers)}")
        best = min(alive, key=lambda pair: pair[0])[1]  # (min keeps the first of a tie)
        try:
            run_id = await self._handles[best].start_run.remote(question, options,
                                                                 tenant or self.tenant)
        except ray.exceptions.RayActorError as exc:
            raise ReplicasUnavailable(f"engine replica {best} died starting the run: "
                                      f"{exc}") from exc
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, RunConfigError):  # the engine's own, plain message
                raise exc.cause from None
            raise
        self._where[run_id] = best
        return ReplicaRun(run_id, best, self.owners[best])

    @property
    def ray_handles(self) -> list[Any]:
        """The replicas' Ray actor handles (for monitors, tests, ``ray.kill``)."""
        return list(self._handles)

    async def loads(self) -> list[int]:
        """Runs going on in each replica."""
        return list(await asyncio.gather(*(h.load.remote() for h in self._handles)))

    async def nodes(self) -> list[str]:
        """The Ray node id each replica runs on (how they spread over the cluster)."""
        return list(await asyncio.gather(*(h.node.remote() for h in self._handles)))

    async def wait(self, run_id: str) -> None:
        """Until the run ended on its replica and its last event is stored.

        The pool forgets the run once it ended (a later :meth:`cancel` is
        False, a later ``wait`` returns at once).
        """
        where = self._where.get(run_id)
        if where is None:
            return
        await self._handles[where].wait.remote(run_id)
        self._where.pop(run_id, None)

    async def cancel(self, run_id: str, reason: str = "cancelled by the user") -> bool:
        """Cancel a run on the replica it went to."""
        where = self._where.get(run_id)
        if where is None:
            return False
        return bool(await self._handles[where].cancel.remote(run_id, reason))

    async def aclose(self) -> None:
        """Close every replica (its runs are cancelled and their ends stored), end the actors."""
        handles, self._handles = self._handles, []
        if not handles:
            return
        ray = ray_module()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(30):
                await asyncio.gather(*(h.close.remote() for h in handles),
                                     return_exceptions=True)
        for h in handles:
            ray.kill(h, no_restart=True)

    async def __aenter__(self) -> EngineReplicas:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
