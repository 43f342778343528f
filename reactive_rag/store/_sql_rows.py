"""Rows of the SQL stores (SQLite, PostgreSQL) as records: one column order, one decoder each.

Both SQL stores keep the same tables with the same columns (times in integer
microseconds, JSON as text, events as msgpack bytes), so a row read from either
becomes a record here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, cast

from streams import DecodeError, Event, Outcome, decode_msgpack

from ._base import make_cursor
from ._exceptions import StoreCorrupt
from ._protocol import BackgroundTask, RunRecord, RunStatus, SessionRecord, TaskStatus

__all__ = [
    "INTERRUPTED_REASON",
    "RUN_COLUMNS",
    "SESSION_COLUMNS",
    "TASK_COLUMNS",
    "decode_rows",
    "run_from_row",
    "session_from_row",
    "task_from_row",
]

INTERRUPTED_REASON = "the process writing this run ended before the run finished"
"""The reason of the ``run.finished(interrupted)`` that crash recovery stores."""

RUN_COLUMNS = "run_id, tenant, question, mode, status, outcome, created_us, updated_us, last_seq"
SESSION_COLUMNS = "session_id, tenant, data, ttl_us, created_us, updated_us, expires_us"
TASK_COLUMNS = (
    "task_id, tenant, kind, run_id, doc_id, status, progress, params, result, error,"
    " created_us, updated_us"
)


def run_from_row(row: tuple[Any, ...]) -> RunRecord:
    """A row of :data:`RUN_COLUMNS` as a record."""
    run_id, tenant, question, mode, status, outcome, created_us, updated_us, last_seq = row
    return RunRecord(
        run_id=run_id,
        tenant=tenant,
        question=question,
        mode=mode,
        status=cast(RunStatus, status),
        outcome=cast(Outcome | None, outcome),
        created_at=created_us / 1e6,
        updated_at=updated_us / 1e6,
        last_seq=int(last_seq),
        cursor=make_cursor(int(created_us), run_id),
    )


def session_from_row(row: tuple[Any, ...]) -> SessionRecord:
    """A row of :data:`SESSION_COLUMNS` as a record (StoreCorrupt if its JSON is damaged)."""
    session_id, tenant, data, ttl_us, created_us, updated_us, expires_us = row
    try:
        decoded = json.loads(data)
    except ValueError as exc:
        raise StoreCorrupt(f"session {session_id!r} data does not decode: {exc}") from exc
    return SessionRecord(
        session_id=session_id,
        tenant=tenant,
        data=decoded,
        ttl_s=ttl_us / 1e6,
        created_at=created_us / 1e6,
        updated_at=updated_us / 1e6,
        expires_at=expires_us / 1e6,
    )


def task_from_row(row: tuple[Any, ...]) -> BackgroundTask:
    """A row of :data:`TASK_COLUMNS` as a task."""
    (task_id, tenant, kind, run_id, doc_id, status, progress, params, result, error,
     created_us, updated_us) = row
    return BackgroundTask(
        task_id=task_id,
        tenant=tenant,
        kind=kind,
        run_id=run_id,
        doc_id=doc_id,
        status=TaskStatus(status),
        progress=progress,
        params=json.loads(params),
        result=None if result is None else json.loads(result),
        error=error,
        created_at=created_us / 1e6,
        updated_at=updated_us / 1e6,
    )


def decode_rows(run_id: str, rows: Iterable[tuple[int, bytes]]) -> list[Event]:
    """``(seq, msgpack)`` rows as events (StoreCorrupt names the first that does not decode)."""
    events = []
    for seq, data in rows:
        try:
            events.append(decode_msgpack(bytes(data)))
        except DecodeError as exc:
            raise StoreCorrupt(f"run {run_id!r} event seq {seq} does not decode: {exc}") from exc
    return events
