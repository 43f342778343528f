"""LISTEN/NOTIFY for the PostgreSQL store: wake the followers of a run when a commit names it.

Every transaction that adds events to a run (or changes its status) sends
``NOTIFY <channel>, '<run id>'``; PostgreSQL delivers it only once that
transaction has committed, so a woken follower reads committed rows. One
:class:`Listener` per store holds one dedicated connection however many
followers wait, and each follower waits on an ``asyncio.Event`` of its run.

A notification is a hint, never the data: followers always re-read the table,
and still re-read every ``block_s`` without one, so a listener connection that
broke (and is re-made on the next wait) loses no event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import psycopg
from psycopg import sql

from .._background import stop_task
from ._postgres_common import translated

__all__ = ["Listener"]

log = logging.getLogger("reactive_rag.store")


class Listener:
    """One ``LISTEN`` connection and the followers waiting on it, by run id.

    Args:
        conninfo: what libpq connects to.
        channel: the store's notification channel.
        connect_timeout_s: how long making the connection may take.
    """

    def __init__(self, conninfo: str, channel: str, *, connect_timeout_s: float) -> None:
        self._conninfo = conninfo
        self._channel = channel
        self._connect_timeout_s = connect_timeout_s
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self.notifications = 0
        """Notifications received (for tests and monitors)."""

    def watch(self, run_id: str) -> asyncio.Event:
        """An event set when a commit touching ``run_id`` is notified (or the listener ends)."""
        waiter = asyncio.Event()
        self._waiters.setdefault(run_id, set()).add(waiter)
        return waiter

    def unwatch(self, run_id: str, waiter: asyncio.Event) -> None:
        """Stop waking ``waiter``."""
        waiters = self._waiters.get(run_id)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self._waiters[run_id]

    async def ensure(self) -> None:
        """Connect and ``LISTEN`` unless already listening (StoreUnavailable when it cannot)."""
        if self._task is not None and not self._task.done():
            return
        async with self._lock:
            if self._task is not None and not self._task.done():
                return
            with translated():
                conn = await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True,
                    connect_timeout=max(2, round(self._connect_timeout_s)))
                try:
                    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                except BaseException:
                    await conn.close()
                    raise
            self._task = asyncio.get_running_loop().create_task(
                self._receive(conn), name=f"pg-listen-{self._channel}")

    async def _receive(self, conn: psycopg.AsyncConnection[object]) -> None:
        try:
            async for note in conn.notifies():
                self.notifications += 1
                for waiter in self._waiters.get(note.payload, ()):
                    waiter.set()
        except psycopg.Error as exc:
            log.warning("PostgreSQL listener on %s stopped: %s", self._channel, exc)
        finally:
            # Followers re-read now (and so meet the outage, if it is one); the
            # next wait connects again.
            for waiters in self._waiters.values():
                for waiter in waiters:
                    waiter.set()
            with contextlib.suppress(psycopg.Error, OSError):
                await conn.close()

    async def aclose(self) -> None:
        """Stop listening and close the connection; idempotent."""
        task, self._task = self._task, None
        if task is None:
            return
        await stop_task(task)
