"""``reactive-rag serve`` whose run store cannot be opened says so in one line and exits 2:
no traceback for a path that cannot hold the store, a read-only folder, an unreachable
Redis or PostgreSQL, or a full disk. (A taken port: ``test_cli_runs_replay``.)

The CLI cases run ``serve`` as a real subprocess, as an operator does. A full disk needs
a filesystem that fills, which an unprivileged test cannot mount: that case injects the
``OSError(ENOSPC)`` a full disk raises into the real app start-up, and the SQLite
read-only and cannot-open mappings are checked on errors a real SQLite raises.
"""

from __future__ import annotations

import errno
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web

from reactive_rag.engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.server import ServerConfig, StartError, create_app
from reactive_rag.server._start_errors import start_error
from reactive_rag.store import SqliteRunStore

REPO = Path(__file__).resolve().parents[3]


def serve_cli(home: Path, store: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REACTIVE_RAG_")}
    env.update(REACTIVE_RAG_HOME=str(home), PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "reactive_rag", "serve", "--port", "0",
                           "--store", store], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=110)


def assert_one_line(done: subprocess.CompletedProcess[str], *says: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot open the run store "), lines
    for words in says:
        assert words in lines[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.slow
def test_a_file_where_the_store_folder_should_be_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("not a folder")
    store = tmp_path / "blocker" / "runs.db"
    assert_one_line(serve_cli(tmp_path / "home", str(store)), str(store), "--store")


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through a read-only mode")
def test_a_read_only_store_folder_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert_one_line(serve_cli(tmp_path / "home", str(folder / "runs.db")), str(folder))
    finally:
        folder.chmod(0o755)


@pytest.mark.slow
@pytest.mark.parametrize("url", ["redis://127.0.0.1:{port}/0",
                                 "postgresql://u:p@127.0.0.1:{port}/db"])
def test_an_unreachable_store_server_is_one_line(tmp_path: Path, url: str) -> None:
    target = url.format(port=free_port())  # nothing listens there
    done = serve_cli(tmp_path / "home", target)
    assert_one_line(done, "127.0.0.1")
    assert ":p@" not in done.stderr  # the password stays out of the line


class _FullDisk(SqliteRunStore):
    """A store on a disk with no space left: opening it fails as the OS says so."""

    async def open(self) -> list[str]:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))


async def test_a_full_disk_at_start_up_is_a_start_error_naming_it(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    config = ServerConfig(store=str(tmp_path / "runs.db"), default_collections=("demo",))
    app = create_app(config, engine=Engine(server_index),
                     store=_FullDisk(tmp_path / "runs.db"))
    runner = web.AppRunner(app)
    try:
        with pytest.raises(StartError, match=r"runs\.db: the disk is full .*free space"):
            await runner.setup()
    finally:
        await runner.cleanup()


def test_real_sqlite_read_only_and_cannot_open_errors_say_what_to_do(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    sqlite3.connect(db).close()
    ro = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as read_only:
        ro.execute("CREATE TABLE t (x)")
    ro.close()
    with pytest.raises(sqlite3.OperationalError) as cannot_open:
        sqlite3.connect(tmp_path / "missing" / "runs.db")

    said = start_error(read_only.value, str(db))
    assert said is not None and "read-only" in str(said) and "--store" in str(said)
    said = start_error(cannot_open.value, "x.db")
    assert said is not None and "cannot be opened" in str(said)


def test_a_bug_at_start_up_is_not_dressed_as_a_store_error() -> None:
    assert start_error(KeyError("oops"), "runs.db") is None
