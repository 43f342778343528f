"""Where the server's new runs execute when not in its own process.

The run manager hands a :class:`RunOrder` to a :class:`RunDispatcher`; the
dispatcher starts the run elsewhere (:class:`ReplicaDispatcher`: on the least
loaded of a few engine replicas on Ray), where it is recorded to the shared
store. The server keeps no handle of such a run: clients stream it from the
store like any run, and :class:`RemoteRuns` only tracks it to hold its
tenant's slot, cancel it where it runs, and wait for it at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from reactive_rag.engine import Engine, EngineConfig, Mode
from reactive_rag.index import CorpusIndex
from reactive_rag.run import RunContext
from reactive_rag.store import RunStore

from ._config import SHARED_STORES, ServerConfig
from ._exceptions import ConfigError

if TYPE_CHECKING:
    from reactive_rag.engine import EngineReplicas, StoreFactory, TenantEngineFactory

__all__ = [
    "EngineFactory",
    "RemoteRuns",
    "ReplicaDispatcher",
    "RunDispatcher",
    "RunOrder",
    "replica_engine",
    "replica_store_factory",
    "replica_tenants",
]

log = logging.getLogger("reactive_rag.server")

EngineFactory = Callable[[], Engine]


@dataclass(frozen=True, slots=True)
class RunOrder:
    """A new run as the manager accepted it (its slot is taken, its id chosen)."""

    run_id: str
    tenant: str
    question: str
    mode: Mode
    collections: tuple[str, ...]
    budget: Mapping[str, Any]
    context: RunContext | None = None


class RunDispatcher(Protocol):
    """Starts runs outside this process; each records its run to the shared store."""

    async def start(self) -> None:
        """Get ready to take runs (before the server listens)."""

    async def dispatch(self, order: RunOrder) -> str:
        """Start the run once it is created in the store; where it runs (an owner id)."""

    async def cancel(self, run_id: str, reason: str) -> bool:
        """Cancel it where it runs; False if it is not running there."""

    async def wait(self, run_id: str) -> None:
        """Until the run ended and its last event is stored (or its executor died)."""

    async def aclose(self) -> None:
        """Stop taking runs; the runs still going end ``cancelled``."""


def replica_engine(index_root: str | None) -> Engine:
    """A replica's engine (built in its Ray worker): the server's default, offline engine."""
    return Engine.from_config(EngineConfig(), index=CorpusIndex(index_root))


def replica_tenants(config: ServerConfig) -> dict[str, TenantEngineFactory]:
    """The tenants whose runs need an engine of their own in each replica, and its recipe.

    A tenant with ``[search]`` or ``[chat]`` (every tenant, with an
    ``[entailment]`` judge) gets ``Engine.from_config`` of the server config
    in the worker, as the server builds it in process; its API keys are read
    from the worker's environment (a local Ray's workers inherit the server's).
    """
    table = config.model_dump(mode="json", include={"tenants", "open_tenant", "entailment"},
                              exclude_none=True)
    return {name: functools.partial(Engine.from_config, table, tenant=name)
            for name, tenant in config.effective_tenants.items()
            if tenant.search is not None or tenant.chat is not None
            or config.entailment is not None}


def replica_store_factory(config: ServerConfig, store: RunStore) -> StoreFactory:
    """How a replica opens the server's store under an owner id of its own.

    Raises:
        ConfigError: the store is not one other processes and nodes can share.
    """
    kind = type(store).__name__
    if kind == "RedisRunStore":  # (by name: the store modules are imported on first use)
        from reactive_rag.store import RedisRunStore

        assert isinstance(store, RedisRunStore)
        return functools.partial(RedisRunStore, store.url, prefix=store.prefix,
                                 lease_ttl_s=store.lease_ttl_s)
    target = config.store_target()
    if kind == "PostgresRunStore" and target.startswith(SHARED_STORES):
        from reactive_rag.store import PostgresRunStore

        return functools.partial(PostgresRunStore, target, lease_ttl_s=store.lease_ttl_s)
    raise ConfigError(f"[replicas] needs a store every replica can reach (Redis or "
                      f"PostgreSQL), not a {kind}")


class ReplicaDispatcher:
    """Runs on :class:`~reactive_rag.EngineReplicas`; starts Ray first if no one did.

    Args:
        replicas: the pool (not started yet).
        address: Ray address for ``init_ray`` (``None``: ``$RAY_ADDRESS`` or local).
    """

    def __init__(self, replicas: EngineReplicas, address: str | None = None) -> None:
        self.replicas = replicas
        self.address = address
        self._started_ray = False

    @classmethod
    def for_config(cls, config: ServerConfig, store: RunStore,
                   engine_factory: EngineFactory | None = None) -> ReplicaDispatcher:
        """The dispatcher ``[replicas]`` describes (``engine_factory``: default
        :func:`replica_engine` over ``index_root``).

        Raises:
            ConfigError: no ``[replicas]``, Ray missing, or a store replicas cannot share.
        """
        from actors import RayNotInstalled, RayOptions
        from reactive_rag.engine import EngineReplicas

        cfg = config.replicas
        if cfg is None:
            raise ConfigError("the server config has no [replicas] table")
        stores = replica_store_factory(config, store)
        root = None if config.index_root is None else str(config.index_root)
        factory = engine_factory or functools.partial(replica_engine, root)
        options = RayOptions(num_cpus=cfg.num_cpus, num_gpus=cfg.num_gpus,
                             max_restarts=cfg.max_restarts, start_timeout_s=cfg.start_timeout_s)
        try:
            pool = EngineReplicas(factory, stores, replicas=cfg.count, options=options,
                                  tenants=replica_tenants(config))
        except RayNotInstalled as exc:
            raise ConfigError(str(exc)) from exc
        return cls(pool, cfg.address or None)

    async def start(self) -> None:
        """Join (or start) Ray and start the replicas.

        Raises:
            ConfigError: nothing answers at the Ray address, a replica's engine
                or store did not open, or the replicas did not start in
                ``start_timeout_s`` (the cluster lacks the CPUs they reserve?).
        """
        from actors import RayUnreachable, init_ray, ray_module

        ray = ray_module()
        if not ray.is_initialized():
            try:
                init_ray(self.address)  # blocks a few seconds, before the server listens
            except RayUnreachable as exc:
                raise ConfigError(f"[replicas] address: {exc}") from exc
            self._started_ray = True
        o = self.replicas.options
        try:
            await self.replicas.start()
        except TimeoutError as exc:
            raise ConfigError(f"[replicas] {o.replicas} engine replica(s) did not start in "
                              f"{o.start_timeout_s:g} s (does the cluster have "
                              f"{o.replicas} x {o.num_cpus:g} CPUs free?)") from exc
        except ray.exceptions.RayError as exc:
            cause = getattr(exc, "cause", None) or exc
            first = (str(cause).strip().splitlines() or [""])[0]
            raise ConfigError(f"[replicas] an engine replica did not start: "
                              f"{type(cause).__name__}: {first}") from exc
        log.info("new runs go to %d engine replica(s) on Ray: %s", len(self.replicas.owners),
                 ", ".join(self.replicas.owners))

    async def dispatch(self, order: RunOrder) -> str:
        run = await self.replicas.start_run(
            order.question, tenant=order.tenant, run_id=order.run_id, mode=order.mode,
            collections=order.collections, budget=dict(order.budget), context=order.context)
        return run.owner

    async def cancel(self, run_id: str, reason: str) -> bool:
        return await self.replicas.cancel(run_id, reason)

    async def wait(self, run_id: str) -> None:
        await self.replicas.wait(run_id)

    async def aclose(self) -> None:
        await self.replicas.aclose()
        if self._started_ray:
            from actors import ray_module

            ray_module().shutdown()


@dataclass(slots=True)
class RemoteRun:
    """A run this server dispatched: where it runs, and the task waiting for its end."""

    tenant: str
    where: str
    watcher: asyncio.Task[None]


class RemoteRuns:
    """The runs this server sent to a dispatcher, until each has ended.

    Args:
        dispatcher: where they run.
        release: gives the run's tenant slot back when it ended (called once per run).
    """

    def __init__(self, dispatcher: RunDispatcher, release: Callable[[str], None]) -> None:
        self.dispatcher = dispatcher
        self._release = release
        self._runs: dict[str, RemoteRun] = {}
        self._cancels: set[asyncio.Task[bool]] = set()

    def where(self, run_id: str) -> str | None:
        """The owner id of the executor running ``run_id`` (None: not running from here)."""
        run = self._runs.get(run_id)
        return None if run is None else run.where

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._runs

    async def start(self, order: RunOrder) -> str:
        """Dispatch the run and watch for its end; the run id (the slot is released on error)."""
        try:
            where = await self.dispatcher.dispatch(order)
        except BaseException:
            self._release(order.tenant)
            raise
        watcher = asyncio.get_running_loop().create_task(
            self._watch(order.run_id, order.tenant), name=f"watch-remote:{order.run_id}")
        self._runs[order.run_id] = RemoteRun(order.tenant, where, watcher)
        return order.run_id

    async def _watch(self, run_id: str, tenant: str) -> None:
        try:
            await self.dispatcher.wait(run_id)
        except Exception as exc:  # its executor died: the store's lease sweep interrupts it
            first_line = (str(exc).strip().splitlines() or [""])[0]
            log.warning("run %s: lost its engine replica: %s: %s", run_id,
                        type(exc).__name__, first_line)
        finally:
            self._runs.pop(run_id, None)
            self._release(tenant)

    def cancel(self, run_id: str, reason: str) -> bool:
        """Send the cancel to where the run executes; False if it is not running from here.

        Returns at once (the run's ``run.finished`` reaches the store when its
        executor has stopped it), like a cancel of a run in this process.
        """
        if run_id not in self._runs:
            return False
        task = asyncio.get_running_loop().create_task(
            self._cancel(run_id, reason), name=f"cancel-remote:{run_id}")
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)
        return True

    async def _cancel(self, run_id: str, reason: str) -> bool:
        try:
            done = await self.dispatcher.cancel(run_id, reason)
        except Exception as exc:
            log.warning("run %s: the cancel did not reach its replica: %s", run_id, exc)
            return False
        if not done:
            log.info("run %s had already ended on its replica when cancelled", run_id)
        return done

    async def wait_all(self) -> None:
        """Until every run dispatched from here has ended (and every cancel was sent)."""
        pending = [*self._cancels, *(r.watcher for r in self._runs.values())]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    async def aclose(self, reason: str) -> None:
        """Cancel the runs still going, wait for their ends, then close the dispatcher."""
        for run_id in list(self._runs):
            self.cancel(run_id, reason)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(30):
                await self.wait_all()
        left = [run.watcher for run in self._runs.values()]
        for watcher in left:
            watcher.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        await self.dispatcher.aclose()
