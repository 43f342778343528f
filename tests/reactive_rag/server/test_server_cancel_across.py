"""A cancel sent to the server that does not run the run reaches the one that does.

Two real servers share one store (a SQLite file, and Redis and PostgreSQL when
the test services are up): ``api-1`` runs the run (a gated planner keeps it
going), the cancel goes to ``api-2``, which records it in the store; ``api-1``
takes it and the run ends ``cancelled``. Before, ``api-2`` answered
``{"cancelled": false}`` and the run went on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.server import ServerConfig, create_app
from reactive_rag.server._app import MANAGER_KEY
from reactive_rag.store import SqliteRunStore
from tests._eventually import eventually

from .._server_fixtures import QUESTION, GatedPlanner, read_sse, start_run
from .._store_fixtures import BACKENDS, AnyStore, drop_namespace, make_store, namespace_of

REPO = Path(__file__).resolve().parents[3]

Pair = tuple[TestClient[Any, Any], TestClient[Any, Any]]


@contextlib.asynccontextmanager
async def replica(index: CorpusIndex, tmp_path: Path, store: AnyStore,
                  planner: Any = None) -> AsyncIterator[TestClient[Any, Any]]:
    """One server on ``store`` (its owner is the store's)."""
    config = ServerConfig(store=str(tmp_path / "runs.db"), default_collections=("demo",))
    app = create_app(config, engine=Engine(index, planner=planner), store=store)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


@contextlib.asynccontextmanager
async def two_servers(backend: str, tmp_path: Path, index: CorpusIndex) -> AsyncIterator[Pair]:
    """``api-1`` (its runs wait on the gate) and ``api-2`` on one store."""
    first = make_store(backend, tmp_path, owner="api-1")
    GatedPlanner.gate = asyncio.Event()
    try:
        async with replica(index, tmp_path, first, GatedPlanner) as owner:
            second = make_store(backend, tmp_path, owner="api-2", **namespace_of(first))
            async with replica(index, tmp_path, second) as other:
                try:
                    yield owner, other
                finally:
                    await drop_namespace(first)
    finally:
        GatedPlanner.gate = None


async def outcome_of(client: TestClient[Any, Any], run_id: str) -> str:
    """The run's stored ending, read through its live event stream (waits for it)."""
    async with client.get(f"/v1/runs/{run_id}/events") as resp:
        read = await asyncio.wait_for(read_sse(resp), 60)
    assert read.events[-1].event == "run.finished"
    return str(read.events[-1].data["outcome"])


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_cancel_sent_to_the_other_server_cancels_the_run(
        backend: str, tmp_path: Path, server_index: CorpusIndex) -> None:
    async with two_servers(backend, tmp_path, server_index) as (owner, other):
        run_id = await start_run(owner)
        assert run_id in owner.app[MANAGER_KEY].active  # it runs on api-1, gated
        resp = await other.post(f"/v1/runs/{run_id}/cancel")
        assert resp.status == 202
        assert await resp.json() == {"run_id": run_id, "cancelled": False, "accepted": True}
        # The gate never opens: only the recorded cancel can end this run.
        assert await outcome_of(other, run_id) == "cancelled"
        for client in (owner, other):
            body = await (await client.get(f"/v1/runs/{run_id}")).json()
            assert (body["status"], body["outcome"]) == ("finished", "cancelled")


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_cancel_of_a_run_that_already_ended_is_not_accepted(
        backend: str, tmp_path: Path, server_index: CorpusIndex) -> None:
    async with two_servers(backend, tmp_path, server_index) as (owner, other):
        assert GatedPlanner.gate is not None
        GatedPlanner.gate.set()
        run_id = await start_run(owner)
        assert await outcome_of(other, run_id) == "answered"
        for client in (other, owner):
            resp = await client.post(f"/v1/runs/{run_id}/cancel")
            assert resp.status == 202
            assert await resp.json() == {"run_id": run_id, "cancelled": False,
                                         "accepted": False}
        body = await (await owner.get(f"/v1/runs/{run_id}")).json()
        assert body["outcome"] == "answered"  # a late cancel changes nothing


async def test_a_websocket_cancel_on_the_other_server_ends_the_run_cancelled(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with two_servers("sqlite", tmp_path, server_index) as (owner, other):
        run_id = await start_run(owner)
        async with other.ws_connect(f"/v1/runs/{run_id}/ws") as ws:
            await ws.send_str(json.dumps({"cancel": True}))
            replies: list[dict[str, Any]] = []
            events: list[dict[str, Any]] = []
            async for msg in ws:
                data = json.loads(msg.data)
                (replies if data["type"] == "cancel.result" else events).append(data)
        assert replies == [{"type": "cancel.result", "cancelled": True}]  # recorded for api-1
        assert events[-1]["type"] == "run.finished" and events[-1]["outcome"] == "cancelled"


async def test_the_owner_answers_its_own_cancel_at_once(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with two_servers("sqlite", tmp_path, server_index) as (owner, _):
        run_id = await start_run(owner)
        resp = await owner.post(f"/v1/runs/{run_id}/cancel")
        assert await resp.json() == {"run_id": run_id, "cancelled": True, "accepted": True}
        assert await outcome_of(owner, run_id) == "cancelled"


async def test_a_cancel_for_a_run_of_another_server_that_is_unknown_is_404(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with two_servers("sqlite", tmp_path, server_index) as (_, other):
        resp = await other.post(f"/v1/runs/{'0' * 32}/cancel")
        assert resp.status == 404


def _post(port: int, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method="POST",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return dict(json.loads(resp.read()))


async def test_a_cancel_reaches_a_run_in_another_server_process_on_one_sqlite_file(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    store_path, port_file = tmp_path / "runs.db", tmp_path / "port"
    proc = await asyncio.create_subprocess_exec(  # each planner step sleeps 60 s
        sys.executable, "-m", "tests.reactive_rag._server_child", str(server_index.root),
        str(store_path), str(port_file), cwd=REPO, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO), "CHILD_PLANNER_DELAY_S": "60"})
    try:
        await eventually(lambda: port_file.exists() or proc.returncode is not None,
                         "the child server to start")
        assert proc.returncode is None, "child server ended"
        port = int(port_file.read_text())
        started = await asyncio.to_thread(_post, port, "/v1/runs", {"question": QUESTION})
        run_id = str(started["run_id"])
        async with replica(server_index, tmp_path, SqliteRunStore(store_path)) as here:
            resp = await here.post(f"/v1/runs/{run_id}/cancel")
            assert await resp.json() == {"run_id": run_id, "cancelled": False,
                                         "accepted": True}
            assert await outcome_of(here, run_id) == "cancelled"
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.communicate()
