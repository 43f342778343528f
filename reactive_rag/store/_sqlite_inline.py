"""Appending a run's events on the event loop's own thread, without waiting.

An append is a few inserts and one commit that, with ``synchronous=NORMAL`` in
WAL mode, does not touch the disk's cache flush: 0.1-1 ms. Handed to the
store's writer thread instead, it costs a round trip through the loop and,
worse, the thread must win the interpreter lock back from the loop's CPU-bound
runs after each sqlite call (up to a 5 ms switch interval each): with ten runs
computing, a commit took 30-80 ms to come back, and every client saw each
event that much later.

So appends run here, on one connection only this thread uses, that never
waits and never checkpoints:

* ``busy_timeout`` is 0: while another connection holds the write lock (the
  store's writer thread, another process on the same file), the append is
  declined at once and goes to the writer thread, which waits the lock out;
* ``wal_autocheckpoint`` is 0: every ``checkpoint_every`` appends the writer
  thread is asked for a ``PASSIVE`` checkpoint (it syncs the file; writers
  go on meanwhile), so the loop never waits for a disk flush.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

__all__ = ["DECLINED", "Declined", "InlineWriter"]

log = logging.getLogger("reactive_rag.store")

_T = TypeVar("_T")

_BUSY_CODES = frozenset((5, 6))  # SQLITE_BUSY, SQLITE_LOCKED (and their extended codes' base)


class Declined:
    """The write lock was taken: do it on the writer thread instead."""


DECLINED = Declined()


class InlineWriter:
    """A write connection for the thread that opened it (the store's event loop).

    Args:
        path: the store's file (already in WAL mode).
        synchronous: the store's ``synchronous`` pragma.
        checkpoint: asks the writer thread for a passive checkpoint (returns at once).
        checkpoint_every: appends between two such requests.
    """

    def __init__(self, path: Path, *, synchronous: str, checkpoint: Callable[[], None],
                 checkpoint_every: int = 256) -> None:
        # check_same_thread=False only so that close() works from any thread;
        # run() is used from the opening thread alone (see here()).
        conn = sqlite3.connect(path, isolation_level=None, timeout=0, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout = 0")
            conn.execute("PRAGMA wal_autocheckpoint = 0")
            conn.execute(f"PRAGMA synchronous = {synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            conn.close()
            raise
        self._conn: sqlite3.Connection | None = conn
        self._thread = threading.get_ident()
        self._checkpoint = checkpoint
        self._every = max(1, checkpoint_every)
        self._appends = 0  # writes done here, for the checkpoint cadence

    def here(self) -> bool:
        """True on the thread this connection belongs to (and while it is open)."""
        return self._conn is not None and threading.get_ident() == self._thread

    def run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T | Declined:
        """``fn(conn)`` now, or :data:`DECLINED` if the write lock is taken.

        Raises:
            sqlite3.DatabaseError: anything else (the caller translates it).
        """
        assert self._conn is not None and self.here()
        try:
            result = fn(self._conn)
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF in _BUSY_CODES:
                return DECLINED
            raise
        self._appends += 1
        if self._appends % self._every == 0:
            self._checkpoint()
        return result

    def close(self) -> None:
        """Close the connection (idempotent)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error as exc:  # pragma: no cover - closing a healthy connection
                log.warning("closing the store's inline writer failed: %s", exc)
