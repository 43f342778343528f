"""Deleting runs from the PostgreSQL store (DELETE of one run, and the retention sweep).

:class:`PostgresRunDeleter` is a mixin of :class:`~reactive_rag.store.PostgresRunStore`:
each delete is one transaction that locks the run rows first (``FOR UPDATE``,
as appends and reopens do), so a run that is ``running`` is never deleted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from psycopg import AsyncConnection

from .._exceptions import RunNotFound, RunStillRunning

__all__ = ["PostgresRunDeleter"]

_T = TypeVar("_T")
Conn = AsyncConnection[Any]


class PostgresRunDeleter:
    """Deletes ended runs and their events (mixed into ``PostgresRunStore``)."""

    if TYPE_CHECKING:  # provided by PostgresRunStore / StoreBase
        _runs: str
        _events: str

        def _writable(self) -> None: ...

        async def _write(self, fn: Callable[[Conn], Awaitable[_T]]) -> _T: ...

    async def _delete_locked(self, conn: Conn, run_ids: list[str]) -> None:
        await conn.execute(f"DELETE FROM {self._events} WHERE run_id = ANY(%s)", (run_ids,))
        await conn.execute(f"DELETE FROM {self._runs} WHERE run_id = ANY(%s)", (run_ids,))

    async def delete_run(self, run_id: str, tenant: str | None = None) -> None:
        """Delete an ended run and its events (one transaction)."""
        self._writable()

        async def do(conn: Conn) -> None:
            cur = await conn.execute(
                f"SELECT tenant, status FROM {self._runs} WHERE run_id = %s FOR UPDATE",
                (run_id,))
            row = await cur.fetchone()
            if row is None or (tenant is not None and row[0] != tenant):
                raise RunNotFound(run_id)
            if row[1] == "running":
                raise RunStillRunning(run_id)
            await self._delete_locked(conn, [run_id])

        await self._write(do)

    async def delete_runs_before(self, tenant: str, before_ts: float, *,
                                 limit: int = 100) -> list[str]:
        """Delete up to ``limit`` ended runs of ``tenant`` last changed before ``before_ts``."""
        self._writable()
        if limit < 1:
            raise ValueError("limit must be >= 1")
        cutoff = int(before_ts * 1_000_000)

        async def do(conn: Conn) -> list[str]:
            # updated >= created: the (tenant, created_us) index bounds the scan;
            # SKIP LOCKED: a run another transaction holds is left for the next sweep
            cur = await conn.execute(
                f"SELECT run_id FROM {self._runs} WHERE tenant = %s AND created_us < %s"
                " AND updated_us < %s AND status <> 'running'"
                " ORDER BY updated_us, run_id LIMIT %s FOR UPDATE SKIP LOCKED",
                (tenant, cutoff, cutoff, limit))
            ids = [str(row[0]) for row in await cur.fetchall()]
            if ids:
                await self._delete_locked(conn, ids)
            return ids

        return await self._write(do)
