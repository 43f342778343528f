"""Opening one SQLite file from several processes at once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from actors import enable_wal


class _FlakyConnection:
    """Answers the WAL pragma with the given errors first, then with ``mode``."""

    def __init__(self, errors: list[Exception], mode: str = "wal") -> None:
        self.errors = errors
        self.mode = mode
        self.calls = 0

    def execute(self, sql: str, /) -> sqlite3.Cursor:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        db = sqlite3.connect(":memory:")
        return db.execute("SELECT ?", (self.mode,))


def test_a_locked_answer_is_retried_until_the_switch_succeeds() -> None:
    conn = _FlakyConnection([sqlite3.OperationalError("database is locked")] * 3)
    enable_wal(conn, timeout_s=5)
    assert conn.calls == 4


def test_still_locked_after_the_timeout_raises_the_lock_error() -> None:
    conn = _FlakyConnection([sqlite3.OperationalError("database is locked")] * 10_000)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        enable_wal(conn, timeout_s=0.05)
    assert conn.calls > 1


def test_other_errors_are_not_retried() -> None:
    conn = _FlakyConnection([sqlite3.OperationalError("disk I/O error")])
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        enable_wal(conn, timeout_s=5)
    assert conn.calls == 1


def test_a_database_that_cannot_use_wal_says_so() -> None:
    with pytest.raises(sqlite3.OperationalError, match=r"cannot use WAL.*memory"):
        enable_wal(sqlite3.connect(":memory:"), timeout_s=1)


_OPENER = """
import sqlite3, sys, time
from actors import enable_wal
start = float(sys.argv[2])
while time.time() < start:
    pass
db = sqlite3.connect(sys.argv[1], timeout=30)
enable_wal(db, 30)
db.execute("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY)")
db.execute("INSERT INTO t VALUES (?)", (sys.argv[3],))
db.commit()
"""


def test_processes_opening_a_new_file_at_the_same_moment_all_get_it(tmp_path: Path) -> None:
    # Without the retry, SQLite told some of them "database is locked" at once
    # (4 processes at a time failed in 4 of 20 tries here).
    import time

    root = Path(__file__).resolve().parents[2]
    for trial in range(5):
        path = tmp_path / f"t{trial}.sqlite"
        start = f"{time.time() + 1.0:.3f}"  # all released at the same instant
        procs = [subprocess.Popen([sys.executable, "-c", _OPENER, str(path), start, str(i)],
                                  cwd=root, stderr=subprocess.PIPE) for i in range(4)]
        for p in procs:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err.decode()
        db = sqlite3.connect(path)
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT count(*) FROM t").fetchone()[0] == 4
