"""SQLite files that several processes open at once (the model cache, the run store)."""

from __future__ import annotations

import sqlite3
from typing import Protocol

from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

__all__ = ["enable_wal"]


class _Executes(Protocol):
    def execute(self, sql: str, /) -> sqlite3.Cursor: ...


def enable_wal(conn: _Executes, timeout_s: float) -> None:
    """Switch ``conn``'s database to write-ahead logging, waiting out other openers.

    Two connections switching a new file at the same moment can deadlock on the
    upgrade to an exclusive lock, and SQLite then answers one of them "database
    is locked" at once instead of waiting out its busy timeout. So a locked
    answer is retried for up to ``timeout_s``; any other error is raised as is.

    Raises:
        sqlite3.OperationalError: still locked after ``timeout_s``, or the
            database cannot use WAL (it then reports another journal mode).
    """
    retrying = Retrying(
        retry=retry_if_exception(_is_locked),
        stop=stop_after_delay(timeout_s),
        wait=wait_random_exponential(multiplier=0.005, max=0.2),
        reraise=True,
    )
    for attempt in retrying:
        with attempt:
            row = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    mode = str(row[0]).lower() if row else ""
    if mode != "wal":
        raise sqlite3.OperationalError(f"database cannot use WAL (journal mode stays {mode!r})")


def _is_locked(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
