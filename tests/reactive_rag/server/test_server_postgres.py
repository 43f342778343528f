"""``reactive-rag serve`` on a PostgreSQL store: replicas share it, and a killed one is recovered.

Each test has a schema of its own on the test server (``?schema=`` in the store
URL, as a deployment would write it in ``server.toml``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.server import ServerConfig, create_app
from reactive_rag.server._app import STORE_KEY
from reactive_rag.store import PostgresRunStore
from tests._eventually import eventually

from .._server_child import OWNER
from .._server_fixtures import QUESTION, GatedPlanner, read_sse, start_run
from .._store_fixtures import NEEDS_POSTGRES, POSTGRES_URL, drop_pg_schema

REPO = Path(__file__).resolve().parents[3]

pytestmark = NEEDS_POSTGRES


@pytest.fixture
async def store_url() -> AsyncIterator[str]:
    assert POSTGRES_URL is not None
    schema = f"test_srv_{uuid.uuid4().hex[:16]}"
    yield POSTGRES_URL + ("&" if "?" in POSTGRES_URL else "?") + f"schema={schema}"
    await drop_pg_schema(schema)


@asynccontextmanager
async def replica(index: CorpusIndex, store: str, owner: str,
                  planner: Any = None) -> AsyncIterator[TestClient[Any, Any]]:
    """One server process's app, its store named only by the config's URL."""
    config = ServerConfig(store=store, default_collections=("demo",), owner=owner)
    app = create_app(config, engine=Engine(index, planner=planner))
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


async def test_a_replica_streams_a_run_another_replica_is_writing(
        server_index: CorpusIndex, store_url: str) -> None:
    GatedPlanner.gate = asyncio.Event()  # holds the run open until the follower is there
    try:
        async with replica(server_index, store_url, "api-1", GatedPlanner) as a, \
                replica(server_index, store_url, "api-2") as b:
            assert isinstance(a.app[STORE_KEY], PostgresRunStore)
            run_id = await start_run(a)
            resp = await b.get(f"/v1/runs/{run_id}/events")  # B only has the store
            assert resp.status == 200
            # The follower is there: B streams what A stored while the gate holds the run.
            head = await asyncio.wait_for(read_sse(resp, limit=1), 60)
            assert head.seqs == [1]
            GatedPlanner.gate.set()
            sse = await asyncio.wait_for(read_sse(resp), 60)  # the rest, live
            seqs = head.seqs + sse.seqs
            assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > 3
            assert sse.events[-1].event == "run.finished"
            assert sse.events[-1].data["outcome"] == "answered"
            got = await (await b.get(f"/v1/runs/{run_id}")).json()
            assert (got["status"], got["outcome"]) == ("finished", "answered")
            listed = await (await b.get("/v1/runs")).json()
            assert [r["run_id"] for r in listed["runs"]] == [run_id]
            for client in (a, b):
                assert (await client.get("/readyz")).status == 200
    finally:
        GatedPlanner.gate = None


def _http(port: int, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method="POST" if body is not None else "GET",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return dict(json.loads(resp.read()))


async def test_a_killed_server_process_leaves_its_run_to_be_interrupted_on_restart(
        tmp_path: Path, server_index: CorpusIndex, store_url: str) -> None:
    port_file = tmp_path / "port"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.reactive_rag._server_child", str(server_index.root),
        store_url, str(port_file), cwd=REPO, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        await eventually(lambda: port_file.exists() or proc.returncode is not None,
                         "the child server to start")
        assert proc.returncode is None, "child server ended"
        port = int(port_file.read_text())
        started = await asyncio.to_thread(_http, port, "/v1/runs", {"question": QUESTION})
        run_id = str(started["run_id"])
        view: dict[str, Any] = {}

        async def stored_a_few() -> bool:  # kill it mid-run: a few events stored
            view.update(await asyncio.to_thread(_http, port, f"/v1/runs/{run_id}"))
            return bool(view["status"] != "running" or view["last_seq"] >= 3)

        await eventually(stored_a_few, "a few events of the run stored")
        killed_mid_run = view["status"] == "running"
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.communicate()
    # A restart with the same configured owner interrupts its crashed run at once.
    async with PostgresRunStore(store_url, owner=OWNER) as store:
        record = await store.get_run(run_id)
        assert record.status == ("interrupted" if killed_mid_run else "finished")
        events = [e async for e in store.events(run_id)]
        assert [e.seq for e in events] == list(range(1, record.last_seq + 1))
        assert [e.type for e in events].count("run.finished") == 1
        assert events[-1].type == "run.finished"
        assert await store.mark_interrupted() == []
