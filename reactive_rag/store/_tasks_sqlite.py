"""The background-task table of the SQLite store (:class:`~reactive_rag.store.TaskStore`).

:class:`SqliteTaskTable` is a mixin of :class:`~reactive_rag.store.SqliteRunStore`:
the ``tasks`` table (:data:`TASKS_SCHEMA`, part of the store's schema) in the
store's file, written on its writer thread and read on its reader thread.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ._exceptions import TaskAlreadyFinished, TaskExists, TaskNotFound
from ._protocol import BackgroundTask, TaskStatus, TaskUpdate
from ._sql_rows import TASK_COLUMNS, task_from_row
from ._sqlite_common import transaction

__all__ = ["TASKS_SCHEMA", "SqliteTaskTable"]

_T = TypeVar("_T")

TASKS_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id    TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    run_id     TEXT,
    doc_id     TEXT,
    status     TEXT NOT NULL,
    progress   REAL NOT NULL,
    params     TEXT NOT NULL,
    result     TEXT,
    error      TEXT,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_unfinished ON tasks (created_us)
    WHERE status IN ('pending', 'running');
"""
"""The ``tasks`` table and its index (``CREATE ... IF NOT EXISTS``)."""

class SqliteTaskTable:
    """Background tasks in the store's SQLite file (mixed into ``SqliteRunStore``)."""

    if TYPE_CHECKING:  # provided by SqliteRunStore / StoreBase
        def _writable(self) -> None: ...

        def _now_us(self) -> int: ...

        async def _write(self, fn: Callable[[sqlite3.Connection], _T]) -> _T: ...

        async def _read(self, fn: Callable[[sqlite3.Connection], _T]) -> _T: ...

    async def create_task(self, task: BackgroundTask) -> BackgroundTask:
        """Persist a new task; ``created_at``/``updated_at`` are set here."""
        self._writable()
        if not task.task_id or not task.tenant or not task.kind:
            raise ValueError("a task needs a non-empty task_id, tenant and kind")
        now = self._now_us()
        params = json.dumps(task.params)
        result = None if task.result is None else json.dumps(task.result)

        def do(conn: sqlite3.Connection) -> BackgroundTask:
            try:
                conn.execute(
                    f"INSERT INTO tasks ({TASK_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (task.task_id, task.tenant, task.kind, task.run_id, task.doc_id,
                     task.status.value, task.progress, params, result, task.error, now, now),
                )
            except sqlite3.IntegrityError as exc:
                raise TaskExists(f"task {task.task_id!r} already exists") from exc
            row = conn.execute(
                f"SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = ?", (task.task_id,)
            ).fetchone()
            return task_from_row(row)

        return await self._write(do)

    async def update_task(self, task_id: str, update: TaskUpdate) -> BackgroundTask:
        """Apply ``update``; a task in a final status raises TaskAlreadyFinished."""
        self._writable()
        now = self._now_us()
        result = None if update.result is None else json.dumps(update.result)

        def do(conn: sqlite3.Connection) -> BackgroundTask:
            def update_row() -> BackgroundTask:
                row = conn.execute(
                    "SELECT status FROM tasks WHERE task_id = ?", (task_id,)
                ).fetchone()
                if row is None:
                    raise TaskNotFound(task_id)
                if TaskStatus(row[0]).final:
                    raise TaskAlreadyFinished(f"task {task_id!r} is already {row[0]}")
                conn.execute(
                    "UPDATE tasks SET status = COALESCE(?, status),"
                    " progress = COALESCE(?, progress), result = COALESCE(?, result),"
                    " error = COALESCE(?, error), updated_us = ? WHERE task_id = ?",
                    (None if update.status is None else update.status.value, update.progress,
                     result, update.error, now, task_id),
                )
                return task_from_row(conn.execute(
                    f"SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = ?", (task_id,)
                ).fetchone())

            return transaction(conn, update_row)

        return await self._write(do)

    async def get_task(self, task_id: str, tenant: str | None = None) -> BackgroundTask:
        """One task, scoped to ``tenant``."""

        def do(conn: sqlite3.Connection) -> BackgroundTask:
            row = conn.execute(
                f"SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = ?", (task_id,)
            ).fetchone()
            if row is None or (tenant is not None and row[1] != tenant):
                raise TaskNotFound(task_id)
            return task_from_row(row)

        return await self._read(do)

    async def list_unfinished_tasks(self) -> list[BackgroundTask]:
        """Pending and running tasks, oldest first."""

        def do(conn: sqlite3.Connection) -> list[BackgroundTask]:
            rows = conn.execute(
                f"SELECT {TASK_COLUMNS} FROM tasks WHERE status IN ('pending', 'running')"
                " ORDER BY created_us, task_id"
            ).fetchall()
            return [task_from_row(row) for row in rows]

        return await self._read(do)
