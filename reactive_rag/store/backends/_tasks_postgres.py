"""The background-task table of the PostgreSQL store (:class:`~reactive_rag.store.TaskStore`).

:class:`PostgresTaskTable` is a mixin of :class:`~reactive_rag.store.PostgresRunStore`:
the ``tasks`` table (:func:`tasks_schema`, part of the store's schema), written
and read through the store's connection pool.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from psycopg import AsyncConnection

from .._exceptions import TaskAlreadyFinished, TaskExists, TaskNotFound
from .._protocol import BackgroundTask, TaskStatus, TaskUpdate
from .._sql_rows import TASK_COLUMNS, task_from_row

__all__ = ["PostgresTaskTable", "tasks_schema"]

_T = TypeVar("_T")
Conn = AsyncConnection[Any]


def tasks_schema(schema: str) -> str:
    """The ``tasks`` table and its index in ``schema`` (``CREATE ... IF NOT EXISTS``)."""
    return f"""
CREATE TABLE IF NOT EXISTS "{schema}".tasks (
    task_id    text COLLATE "C" PRIMARY KEY,
    tenant     text NOT NULL,
    kind       text NOT NULL,
    run_id     text,
    doc_id     text,
    status     text NOT NULL,
    progress   double precision NOT NULL,
    params     text NOT NULL,
    result     text,
    error      text,
    created_us bigint NOT NULL,
    updated_us bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_unfinished ON "{schema}".tasks (created_us, task_id)
    WHERE status IN ('pending', 'running');
"""


class PostgresTaskTable:
    """Background tasks in the store's schema (mixed into ``PostgresRunStore``)."""

    if TYPE_CHECKING:  # provided by PostgresRunStore / StoreBase
        schema: str

        def _writable(self) -> None: ...

        def _now_us(self) -> int: ...

        async def _write(self, fn: Callable[[Conn], Awaitable[_T]]) -> _T: ...

        async def _read(self, fn: Callable[[Conn], Awaitable[_T]]) -> _T: ...

    @property
    def _tasks(self) -> str:
        return f'"{self.schema}".tasks'

    async def create_task(self, task: BackgroundTask) -> BackgroundTask:
        """Persist a new task; ``created_at``/``updated_at`` are set here."""
        self._writable()
        if not task.task_id or not task.tenant or not task.kind:
            raise ValueError("a task needs a non-empty task_id, tenant and kind")
        now = self._now_us()
        params = json.dumps(task.params)
        result = None if task.result is None else json.dumps(task.result)

        async def do(conn: Conn) -> BackgroundTask:
            cur = await conn.execute(
                f"INSERT INTO {self._tasks} ({TASK_COLUMNS}) VALUES"
                " (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                f" ON CONFLICT (task_id) DO NOTHING RETURNING {TASK_COLUMNS}",
                (task.task_id, task.tenant, task.kind, task.run_id, task.doc_id,
                 task.status.value, task.progress, params, result, task.error, now, now),
            )
            row = await cur.fetchone()
            if row is None:
                raise TaskExists(f"task {task.task_id!r} already exists")
            return task_from_row(row)

        return await self._write(do)

    async def update_task(self, task_id: str, update: TaskUpdate) -> BackgroundTask:
        """Apply ``update``; a task in a final status raises TaskAlreadyFinished."""
        self._writable()
        now = self._now_us()
        result = None if update.result is None else json.dumps(update.result)

        async def do(conn: Conn) -> BackgroundTask:
            cur = await conn.execute(
                f"SELECT status FROM {self._tasks} WHERE task_id = %s FOR UPDATE", (task_id,))
            row = await cur.fetchone()
            if row is None:
                raise TaskNotFound(task_id)
            if TaskStatus(row[0]).final:
                raise TaskAlreadyFinished(f"task {task_id!r} is already {row[0]}")
            cur = await conn.execute(
                f"UPDATE {self._tasks} SET status = COALESCE(%s, status),"
                " progress = COALESCE(%s, progress), result = COALESCE(%s, result),"
                " error = COALESCE(%s, error), updated_us = %s WHERE task_id = %s"
                f" RETURNING {TASK_COLUMNS}",
                (None if update.status is None else update.status.value, update.progress,
                 result, update.error, now, task_id),
            )
            updated = await cur.fetchone()
            assert updated is not None  # the row is locked
            return task_from_row(updated)

        return await self._write(do)

    async def get_task(self, task_id: str, tenant: str | None = None) -> BackgroundTask:
        """One task, scoped to ``tenant``."""

        async def do(conn: Conn) -> BackgroundTask:
            cur = await conn.execute(
                f"SELECT {TASK_COLUMNS} FROM {self._tasks} WHERE task_id = %s", (task_id,))
            row = await cur.fetchone()
            if row is None or (tenant is not None and row[1] != tenant):
                raise TaskNotFound(task_id)
            return task_from_row(row)

        return await self._read(do)

    async def list_unfinished_tasks(self) -> list[BackgroundTask]:
        """Pending and running tasks, oldest first."""

        async def do(conn: Conn) -> list[BackgroundTask]:
            cur = await conn.execute(
                f"SELECT {TASK_COLUMNS} FROM {self._tasks}"
                " WHERE status IN ('pending', 'running') ORDER BY created_us, task_id")
            return [task_from_row(row) for row in await cur.fetchall()]

        return await self._read(do)
