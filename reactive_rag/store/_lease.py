"""Owner leases: who is still alive among the processes writing to one store.

Every writing store has an ``owner`` id and keeps a lease in the store that
expires ``lease_ttl_s`` after its last :meth:`~reactive_rag.store.RunStore.heartbeat`.
A run whose owner's lease has expired (or who never had one) was left running
by a process that is gone, and any other owner may mark it interrupted
(:meth:`~reactive_rag.store.RunStore.recover_expired`). :class:`LeaseKeeper`
renews the lease and sweeps in the background.

Expiry is decided with the stores' clocks, so the replicas sharing a backend
must agree on the time to well within the TTL.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Self

from ._background import stop_task
from ._exceptions import StoreError

if TYPE_CHECKING:
    from ._protocol import RunStore

__all__ = ["LeaseKeeper", "default_owner"]

log = logging.getLogger("reactive_rag.store")

OnRecovered = Callable[[list[str]], Awaitable[None] | None]


def default_owner() -> str:
    """A new owner id, unique to this call: ``<host>-<pid>-<6 random hex digits>``.

    What a store without a configured ``owner`` uses: two stores, even in one
    process, never take each other's runs for their own crashed ones.
    """
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


RETRY_PROBE_S = 0.5
"""Heartbeat interval while the store refuses writes."""


class LeaseKeeper:
    """Renews a store's lease and recovers the runs of owners whose lease expired.

    Every ``interval_s`` it calls ``store.heartbeat()`` and, if that worked,
    ``store.recover_expired()``. It never raises from the background task: a
    failed heartbeat turns :attr:`writable` False (with :attr:`reason`) until
    one succeeds again.

    Args:
        store: an open, writable store.
        interval_s: time between heartbeats; default a third of the store's
            ``lease_ttl_s``, so two heartbeats may fail before the lease expires.
        on_recovered: called (and awaited if it returns an awaitable) with the
            ids a sweep marked interrupted; its errors are logged, never raised.

    Attributes:
        writable: False after a heartbeat failed, True again once one succeeds.
            No sweep runs until a full ``lease_ttl_s`` after the last failed
            heartbeat: an outage this keeper saw also stopped the other owners'
            heartbeats, so their lapsed leases do not mean they died.
        reason: why the store is not writable, in plain words (None when writable).
        last_ok: store-clock time (Unix seconds) of the last successful heartbeat.
    """

    def __init__(
        self,
        store: RunStore,
        *,
        interval_s: float | None = None,
        on_recovered: OnRecovered | None = None,
    ) -> None:
        interval = store.lease_ttl_s / 3 if interval_s is None else interval_s
        if not interval > 0:
            raise ValueError("interval_s must be > 0")
        self.store = store
        self.interval_s = float(interval)
        self.writable = True
        self.reason: str | None = None
        self.last_ok: float | None = None
        self._on_recovered = on_recovered
        self._clock: Callable[[], float] = getattr(store, "_clock", time.time)
        self._task: asyncio.Task[None] | None = None
        self._last_failure: float | None = None
        self._stopping = False

    async def start(self) -> Self:
        """Beat and sweep once now (so :attr:`writable` is known), then every interval."""
        if self._task is None:
            self._stopping = False
            await self.tick()
            self._task = asyncio.get_running_loop().create_task(
                self._loop(), name=f"lease-keeper-{self.store.owner}")
        return self

    async def aclose(self) -> None:
        """Stop the background task; idempotent. The lease is left to the store's close."""
        task, self._task = self._task, None
        if task is None:
            return
        # The flag as well as cancel(): a cancellation landing as a backend call
        # completes can be swallowed inside the client (asyncio.wait_for on 3.11),
        # and the loop must still end.
        self._stopping = True
        await stop_task(task)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _loop(self) -> None:
        while not self._stopping:
            # While the store refuses writes, probe it often: readiness comes back soon.
            await asyncio.sleep(self.interval_s if self.writable
                                else min(self.interval_s, RETRY_PROBE_S))
            if self._stopping:
                return
            try:
                await self.tick()
            except Exception:  # never let one bad sweep end the heartbeats
                log.exception("lease keeper of owner %s: unexpected error", self.store.owner)

    async def tick(self) -> list[str]:
        """One heartbeat and, if it worked, one sweep; returns the ids recovered."""
        try:
            await self.store.heartbeat()
        except StoreError as exc:
            reason = f"the run store refused a write: {exc}"
            if self.writable or reason != self.reason:
                log.warning("lease of owner %s not renewed: %s", self.store.owner, reason)
            self.writable, self.reason = False, reason
            self._last_failure = self._clock()
            return []
        if not self.writable:
            log.warning("lease of owner %s renewed again: the run store takes writes",
                        self.store.owner)
        self.writable, self.reason, self.last_ok = True, None, self._clock()
        if self._last_failure is not None and \
                self.last_ok - self._last_failure <= self.store.lease_ttl_s:
            # We could not reach the store ourselves a moment ago: other owners'
            # leases lapsed in the same outage, and they are likely alive. Judge
            # them only once each has had a full lease to renew.
            return []
        try:
            recovered = await self.store.recover_expired()
        except StoreError as exc:
            log.warning("sweep for runs of expired owners failed: %s", exc)
            return []
        if recovered:
            log.warning("marked %d run(s) of owners whose lease expired as interrupted: %s",
                        len(recovered), ", ".join(recovered))
            if self._on_recovered is not None:
                try:
                    result = self._on_recovered(recovered)
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    log.exception("on_recovered callback failed for %s", recovered)
        return recovered
