"""Deleting runs from the SQLite store (DELETE of one run, and the retention sweep).

:class:`SqliteRunDeleter` is a mixin of :class:`~reactive_rag.store.SqliteRunStore`:
each delete is one write transaction that reads the run's status first, so a
run that is ``running`` (appended to, or just reopened) is never deleted.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ._exceptions import RunNotFound, RunStillRunning
from ._sqlite_common import transaction

__all__ = ["SqliteRunDeleter"]

_T = TypeVar("_T")


def _delete_locked(conn: sqlite3.Connection, run_ids: list[str]) -> None:
    """In a write transaction: the runs' events, then their rows."""
    conn.executemany("DELETE FROM events WHERE run_id = ?", [(r,) for r in run_ids])
    conn.executemany("DELETE FROM runs WHERE run_id = ?", [(r,) for r in run_ids])


class SqliteRunDeleter:
    """Deletes ended runs and their events (mixed into ``SqliteRunStore``)."""

    if TYPE_CHECKING:  # provided by SqliteRunStore / StoreBase
        def _writable(self) -> None: ...

        async def _write(self, fn: Callable[[sqlite3.Connection], _T]) -> _T: ...

    async def delete_run(self, run_id: str, tenant: str | None = None) -> None:
        """Delete an ended run and its events (one transaction); see ``RunStore.delete_run``."""
        self._writable()

        def body(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT tenant, status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None or (tenant is not None and row[0] != tenant):
                raise RunNotFound(run_id)
            if row[1] == "running":
                raise RunStillRunning(run_id)
            _delete_locked(conn, [run_id])

        await self._write(lambda conn: transaction(conn, lambda: body(conn)))

    async def delete_runs_before(self, tenant: str, before_ts: float, *,
                                 limit: int = 100) -> list[str]:
        """Delete up to ``limit`` ended runs of ``tenant`` last changed before ``before_ts``."""
        self._writable()
        if limit < 1:
            raise ValueError("limit must be >= 1")
        cutoff = int(before_ts * 1_000_000)

        def body(conn: sqlite3.Connection) -> list[str]:
            # updated >= created: the (tenant, created_us) index bounds the scan
            rows = conn.execute(
                "SELECT run_id FROM runs WHERE tenant = ? AND created_us < ?"
                " AND updated_us < ? AND status != 'running'"
                " ORDER BY updated_us, run_id LIMIT ?",
                (tenant, cutoff, cutoff, limit)).fetchall()
            ids = [str(row[0]) for row in rows]
            _delete_locked(conn, ids)
            return ids

        return await self._write(lambda conn: transaction(conn, lambda: body(conn)))
