"""What the SQLite store's modules share: one write transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

__all__ = ["transaction"]

_T = TypeVar("_T")


def transaction(conn: sqlite3.Connection, fn: Callable[[], _T]) -> _T:
    """``fn()`` inside one ``BEGIN IMMEDIATE`` transaction (rolled back if it raises)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLITE_FULL and friends roll back by themselves
            conn.execute("ROLLBACK")
        raise
    return result
