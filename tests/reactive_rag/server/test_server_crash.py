"""``kill -9`` of a real server process mid-run, twenty times: the store stays clean.

The server is a subprocess (``python -m tests.reactive_rag._server_child``);
after each kill the parent opens the store (which runs crash recovery) and
checks that unfinished runs are ``interrupted`` with their events kept and
that finished runs are intact.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from reactive_rag.index import CorpusIndex
from reactive_rag.store import SqliteRunStore

from .._server_child import OWNER
from .._server_fixtures import QUESTION

REPO = Path(__file__).resolve().parents[3]


def _wait_port(port_file: Path, proc: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + 30
    while not port_file.exists():
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "child server did not start"
        time.sleep(0.02)
    return int(port_file.read_text())


@pytest.mark.slow
def test_kill_9_mid_run_twenty_times_leaves_a_clean_store(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:  # two stores, ten kills each, side by side
        lanes = [pool.submit(_kill_lane, tmp_path / f"lane{lane}", server_index.root, 10)
                 for lane in range(2)]
        assert sum(lane.result(timeout=100) for lane in lanes) == 20


def _kill_lane(folder: Path, index_root: Path, cycles: int) -> int:
    """Start a server process, start runs, kill -9 it mid-run, check the store; repeat."""
    import urllib.request

    folder.mkdir()
    store_path = folder / "runs.db"
    finished_before: dict[str, tuple[str | None, int]] = {}
    env = {**os.environ, "CHILD_PLANNER_DELAY_S": "0.15", "PYTHONPATH": str(REPO)}

    def post(port: int, body: dict[str, Any]) -> str:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/runs",
                                     data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return str(json.loads(resp.read())["run_id"])

    def status(port: int, run_id: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/runs/{run_id}",
                                    timeout=10) as resp:
            return dict(json.loads(resp.read()))

    for cycle in range(cycles):
        port_file = folder / f"port-{cycle}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.reactive_rag._server_child", str(index_root),
             str(store_path), str(port_file)], cwd=REPO, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            port = _wait_port(port_file, proc)
            quick = post(port, {"question": QUESTION, "mode": "rag"})
            slow = [post(port, {"question": QUESTION}) for _ in range(3)]
            deadline = time.monotonic() + 20
            while status(port, quick)["status"] != "finished":
                assert time.monotonic() < deadline
                time.sleep(0.02)
            time.sleep(random.Random(cycle).random() * 0.2)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            if proc.stderr:
                proc.stderr.close()

        async def check(quick: str = quick, slow: list[str] = slow) -> None:
            # open = recovery: the killed child's lease is still alive, but a store
            # with the same configured owner knows its running runs are orphans
            async with SqliteRunStore(store_path, owner=OWNER) as store:
                quick_rec = await store.get_run(quick)
                assert quick_rec.status == "finished" and quick_rec.outcome == "answered"
                for run_id in slow:
                    rec = await store.get_run(run_id)
                    assert rec.status in ("interrupted", "finished")
                    events = [e async for e in store.events(run_id)]
                    assert [e.seq for e in events] == list(range(1, rec.last_seq + 1))
                    assert events[-1].type == "run.finished"
                    if rec.status == "interrupted":
                        assert rec.outcome == "interrupted"
                    else:
                        finished_before[run_id] = (rec.outcome, rec.last_seq)
                finished_before[quick] = (quick_rec.outcome, quick_rec.last_seq)
                for run_id, (outcome, last_seq) in finished_before.items():
                    rec = await store.get_run(run_id)
                    assert (rec.outcome, rec.last_seq) == (outcome, last_seq)
                assert not await store.mark_interrupted()

        asyncio.run(check())
    return cycles


def test_python_m_server_starts_open_on_loopback_and_stops_on_sigint(tmp_path: Path) -> None:
    import socket
    import urllib.error
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "server.toml"
    config.write_text('host = "0.0.0.0"\nbuild_default_corpus = false\n')
    env = {**os.environ, "REACTIVE_RAG_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "reactive_rag", "serve", "--port", str(port), "--config",
         str(config), "--store", str(tmp_path / "runs.db")],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, "server did not come up"
                time.sleep(0.1)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/runs?access_token=s3cr3t",
                                    timeout=5) as resp:
            assert json.loads(resp.read())["runs"] == []
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            assert json.loads(resp.read()) == {"status": "ready"}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/runs", method="POST",
                                     data=b'{"question": "q"}',
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=5)
        assert refused.value.code == 422
        assert json.loads(refused.value.read())["code"] == "run_config"
        refused.value.close()
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    log = out.decode()
    assert proc.returncode == 0, log
    assert "127.0.0.1 only" in log and "0.0.0.0 ignored" in log
    assert "access_token=***" in log and "s3cr3t" not in log
