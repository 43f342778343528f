"""Cancel requests in the SQLite store (:class:`~reactive_rag.store.CancelRequests`).

:class:`SqliteCancelTable` is a mixin of :class:`~reactive_rag.store.SqliteRunStore`:
the ``cancel_requests`` table (:data:`CANCELS_SCHEMA`, created with the store's
other tables on every writable open, so no schema version changes) holds one row
per requested run, naming the owner that was running it. Recording reads the
run's status in the same write transaction, so only a ``running`` run gets one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ._cancel_requests import CancelRequest
from ._exceptions import RunNotFound
from ._sqlite_common import transaction

__all__ = ["CANCELS_SCHEMA", "SqliteCancelTable"]

_T = TypeVar("_T")

CANCELS_SCHEMA = """CREATE TABLE IF NOT EXISTS cancel_requests (
    run_id TEXT PRIMARY KEY,
    owner  TEXT NOT NULL,
    reason TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS cancel_requests_by_owner ON cancel_requests (owner);
"""
"""The ``cancel_requests`` table and its index (``CREATE ... IF NOT EXISTS``)."""


class SqliteCancelTable:
    """Records and hands out cancel requests (mixed into ``SqliteRunStore``)."""

    if TYPE_CHECKING:  # provided by SqliteRunStore / StoreBase
        owner: str
        read_only: bool

        def _writable(self) -> None: ...

        def _check_open(self) -> None: ...

        async def _write(self, fn: Callable[[sqlite3.Connection], _T]) -> _T: ...

        async def _read(self, fn: Callable[[sqlite3.Connection], _T]) -> _T: ...

    async def request_cancel(self, run_id: str, tenant: str | None, reason: str) -> bool:
        """Record a cancel for the run's owner (one transaction); False unless running."""
        self._writable()

        def body(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT tenant, status, owner FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None or (tenant is not None and row[0] != tenant):
                raise RunNotFound(run_id)
            if row[1] != "running":
                return False
            # requests left for runs that ended before their owner took them
            conn.execute("DELETE FROM cancel_requests WHERE run_id NOT IN"
                         " (SELECT run_id FROM runs WHERE status = 'running')")
            conn.execute(
                "INSERT INTO cancel_requests (run_id, owner, reason) VALUES (?, ?, ?)"
                " ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner,"
                " reason = excluded.reason", (run_id, row[2], reason))
            return True

        return await self._write(lambda conn: transaction(conn, lambda: body(conn)))

    async def take_cancel_requests(self) -> list[CancelRequest]:
        """Remove and return this owner's requests (a read first: usually no write)."""
        self._check_open()
        if self.read_only:
            return []
        owner = self.owner

        def pending(conn: sqlite3.Connection) -> bool:
            return conn.execute("SELECT 1 FROM cancel_requests WHERE owner = ? LIMIT 1",
                                (owner,)).fetchone() is not None

        def take(conn: sqlite3.Connection) -> list[CancelRequest]:
            rows = conn.execute("DELETE FROM cancel_requests WHERE owner = ?"
                                " RETURNING run_id, reason", (owner,)).fetchall()
            return [CancelRequest(str(r[0]), str(r[1])) for r in rows]

        if not await self._read(pending):
            return []
        return await self._write(take)
