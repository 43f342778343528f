"""Cancel requests in the PostgreSQL store (:class:`~reactive_rag.store.CancelRequests`).

:class:`PostgresCancelTable` is a mixin of :class:`~reactive_rag.store.PostgresRunStore`:
the ``cancel_requests`` table (:func:`cancels_schema`, part of the store's schema
since version 2) holds one row per requested run, naming the owner that was
running it. Recording locks the run's row first (``FOR SHARE``), so a run that
ends or changes owner at that moment is seen as it is after that change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from psycopg import AsyncConnection

from .._cancel_requests import CancelRequest
from .._exceptions import RunNotFound

__all__ = ["PostgresCancelTable", "cancels_schema"]

_T = TypeVar("_T")
Conn = AsyncConnection[Any]


def cancels_schema(schema: str) -> str:
    """The ``cancel_requests`` table and its index in ``schema`` (``CREATE ... IF NOT EXISTS``)."""
    return f"""
CREATE TABLE IF NOT EXISTS "{schema}".cancel_requests (
    run_id text COLLATE "C" PRIMARY KEY,
    owner  text NOT NULL,
    reason text NOT NULL
);
CREATE INDEX IF NOT EXISTS cancel_requests_by_owner ON "{schema}".cancel_requests (owner);
"""


class PostgresCancelTable:
    """Records and hands out cancel requests (mixed into ``PostgresRunStore``)."""

    if TYPE_CHECKING:  # provided by PostgresRunStore / StoreBase
        schema: str
        owner: str
        read_only: bool
        _runs: str

        def _writable(self) -> None: ...

        def _check_open(self) -> None: ...

        async def _write(self, fn: Callable[[Conn], Awaitable[_T]]) -> _T: ...

        async def _autocommit(self, fn: Callable[[Conn], Awaitable[_T]]) -> _T: ...

    @property
    def _cancels(self) -> str:
        return f'"{self.schema}".cancel_requests'

    async def request_cancel(self, run_id: str, tenant: str | None, reason: str) -> bool:
        """Record a cancel for the run's owner (one transaction); False unless running."""
        self._writable()

        async def do(conn: Conn) -> bool:
            cur = await conn.execute(
                f"SELECT tenant, status, owner FROM {self._runs} WHERE run_id = %s FOR SHARE",
                (run_id,))
            row = await cur.fetchone()
            if row is None or (tenant is not None and row[0] != tenant):
                raise RunNotFound(run_id)
            if row[1] != "running":
                return False
            # requests left for runs that ended before their owner took them
            await conn.execute(
                f"DELETE FROM {self._cancels} c WHERE NOT EXISTS (SELECT 1 FROM {self._runs} r"
                " WHERE r.run_id = c.run_id AND r.status = 'running')")
            await conn.execute(
                f"INSERT INTO {self._cancels} (run_id, owner, reason) VALUES (%s, %s, %s)"
                " ON CONFLICT (run_id) DO UPDATE SET owner = EXCLUDED.owner,"
                " reason = EXCLUDED.reason", (run_id, row[2], reason))
            return True

        return await self._write(do)

    async def take_cancel_requests(self) -> list[CancelRequest]:
        """Remove and return this owner's requests (one statement)."""
        self._check_open()
        if self.read_only:
            return []
        owner = self.owner

        async def do(conn: Conn) -> list[CancelRequest]:
            cur = await conn.execute(
                f"DELETE FROM {self._cancels} WHERE owner = %s RETURNING run_id, reason",
                (owner,))
            return [CancelRequest(str(r[0]), str(r[1])) for r in await cur.fetchall()]

        return await self._autocommit(do)
