"""Crash resume with real processes: ``kill -9`` a server mid-run, restart it, resume.

Runs go through a server subprocess (``tests.reactive_rag._resume_child``,
a slow planner keeps them going) that is killed with SIGKILL; the restarted
server (same owner) finds them ``interrupted``. One is resumed over HTTP and
followed over SSE from the interrupted seq, one with ``reactive-rag resume``
in its own process, and one by a server configured to resume at start-up.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from reactive_rag.index import CorpusIndex
from reactive_rag.store import SqliteRunStore

from .._corpus import DOCS
from .._server_fixtures import QUESTION

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def default_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo corpus with the default embedder (what the CLI and a server open)."""
    root = tmp_path_factory.mktemp("resume-index")
    index = CorpusIndex(root)
    index.index_documents("demo", DOCS)
    index.close()
    return root


@contextmanager
def server(folder: Path, index_root: Path, store: Path, name: str, *, delay_s: float,
           resume: bool = False) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A server child process; killed with SIGKILL when the block is left."""
    port_file = folder / f"port-{name}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "CHILD_PLANNER_DELAY_S": str(delay_s),
           "CHILD_RESUME_INTERRUPTED": "1" if resume else "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.reactive_rag._resume_child", str(index_root),
         str(store), str(port_file)], cwd=REPO, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "server child did not start"
            time.sleep(0.02)
        yield int(port_file.read_text()), proc
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stderr:
            proc.stderr.close()


def call(port: int, path: str, body: dict[str, Any] | None = None,
         method: str | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 method=method or ("POST" if body is not None else "GET"),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def wait_for(check: Any, what: str, timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.03)


def sse_events(port: int, path: str) -> list[dict[str, Any]]:
    """Every event of an SSE response until the server ends it."""
    out: list[dict[str, Any]] = []
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as resp:
        for raw in resp:
            line = raw.decode().rstrip("\n")
            if line.startswith("data:"):
                out.append(json.loads(line[5:].strip()))
    return out


def stored(store_path: Path, run_id: str) -> tuple[str, str | None, list[Any]]:
    async def read() -> tuple[str, str | None, list[Any]]:
        async with SqliteRunStore(store_path, read_only=True) as store:
            record = await store.get_run(run_id)
            return record.status, record.outcome, [e async for e in store.events(run_id)]

    return asyncio.run(read())


def check_log(events: list[Any], *, resumes: int) -> None:
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    types = [e.type for e in events]
    assert types.count("run.resumed") == resumes and types.count("run.finished") == resumes + 1
    for i, kind in enumerate(types):
        if kind == "run.resumed":
            assert types[i - 1] == "run.finished"
            assert events[i - 1].outcome == "interrupted"
    assert events[-1].type == "run.finished" and events[-1].outcome == "answered"


def test_kill_9_mid_run_then_resume_over_http_the_cli_and_at_start_up(
        tmp_path: Path, default_index: Path) -> None:
    store = tmp_path / "runs.db"

    def status(port: int, run_id: str) -> dict[str, Any]:
        return dict(call(port, f"/v1/runs/{run_id}")[1])

    # 1. a slow server starts two runs and is killed while both are going
    with server(tmp_path, default_index, store, "first", delay_s=0.5) as (port, _):
        by_http = call(port, "/v1/runs", {"question": QUESTION})[1]["run_id"]
        by_cli = call(port, "/v1/runs", {"question": QUESTION})[1]["run_id"]
        wait_for(lambda: all(status(port, r)["last_seq"] >= 5 for r in (by_http, by_cli)),
                 "both runs to be going")
        assert status(port, by_http)["status"] == "running"
    # 2. restarted (same owner): both are interrupted; one is resumed over HTTP
    with server(tmp_path, default_index, store, "second", delay_s=0.3) as (port, _):
        for run_id in (by_http, by_cli):
            record = status(port, run_id)
            assert (record["status"], record["outcome"]) == ("interrupted", "interrupted")
        interrupted_seq = status(port, by_http)["last_seq"]
        code, body = call(port, f"/v1/runs/{by_http}/resume", {})
        assert code == 202 and body["resumed"] is True, body
        followed = sse_events(port, f"/v1/runs/{by_http}/events?after={interrupted_seq}")
        types = [e["type"] for e in followed]
        assert types[0] == "run.resumed" and followed[0]["after_seq"] == interrupted_seq
        assert types.count("run.finished") == 1 and followed[-1]["outcome"] == "answered"
        assert [e["seq"] for e in followed] == list(
            range(interrupted_seq + 1, interrupted_seq + 1 + len(followed)))
        code, body = call(port, f"/v1/runs/{by_http}/resume", {})
        assert code == 409 and body["code"] == "run_not_resumable"
        # a third run is left going when this server is killed too
        at_start_up = call(port, "/v1/runs", {"question": QUESTION})[1]["run_id"]
        wait_for(lambda: status(port, at_start_up)["last_seq"] >= 5, "the third run to go")
    check_log(stored(store, by_http)[2], resumes=1)
    # 3. the CLI resumes the second run in its own process (the third stays running)
    cli = subprocess.run(
        [sys.executable, "-m", "reactive_rag.cli._main", "resume", by_cli, "--store", str(store),
         "--root", str(default_index), "--json"], cwd=REPO, capture_output=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    assert cli.returncode == 0, cli.stderr.decode()
    result = json.loads(cli.stdout.decode().strip().splitlines()[-1])
    assert result["run_id"] == by_cli and result["outcome"] == "answered" and result["citations"]
    status_cli, outcome_cli, events_cli = stored(store, by_cli)
    assert (status_cli, outcome_cli) == ("finished", "answered")
    check_log(events_cli, resumes=1)
    again = subprocess.run(
        [sys.executable, "-m", "reactive_rag.cli._main", "resume", by_cli, "--store", str(store),
         "--root", str(default_index)], cwd=REPO, capture_output=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    said = " ".join(again.stderr.decode().split())  # (the console wraps long lines)
    assert again.returncode == 1 and "is finished: only an interrupted run" in said
    # 4. a server configured to resume at start-up carries the third run on by itself
    with server(tmp_path, default_index, store, "third", delay_s=0.05, resume=True) as (port, _):
        final = wait_for(lambda: (s := status(port, at_start_up))["status"] == "finished" and s,
                         "the third run to be resumed and finish")
        assert final["outcome"] == "answered"
    check_log(stored(store, at_start_up)[2], resumes=1)
