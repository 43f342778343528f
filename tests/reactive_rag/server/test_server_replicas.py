"""``reactive-rag serve`` with ``[replicas]``: POST /v1/runs runs on engine replicas on Ray.

A real server on 127.0.0.1, a real local Ray and the test Redis: the run
executes in a replica (its stored owner is the replica's), the server streams
it from the store over SSE with ``Last-Event-ID`` resume, lists it, cancels
it where it runs, and holds the tenant's slot until the replica's run ended;
a run a replica refuses is a 422, a run no replica can take a 503. Then
``reactive-rag serve`` itself, on PostgreSQL, up to a clean SIGTERM. A config
whose store replicas cannot share, or without Ray, is refused when loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis.asyncio as aioredis
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from actors.models import HashingEmbedder
from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.server import (
    MANAGER_KEY,
    STORE_KEY,
    ConfigError,
    ServerConfig,
    TenantConfig,
    create_app,
    hash_token,
)
from reactive_rag.server._dispatch import ReplicaDispatcher
from reactive_rag.store import RedisRunStore, StoreClosed
from streams import RunFinished

from ..._eventually import eventually
from ...actors._web_fixtures import Result, fake_web
from .._corpus import DOCS
from .._replica_fixtures import demo_engine, demo_index
from .._server_fixtures import read_sse
from .._store_fixtures import (
    NEEDS_POSTGRES,
    NEEDS_REDIS,
    POSTGRES_URL,
    REDIS_URL,
    drop_pg_schema,
    pg_schema,
)

REPO = Path(__file__).resolve().parents[3]
LIGHTHOUSE = Result(url="https://lighthouses.example/zephyr-point",
                    title="Zephyr Point lighthouse",
                    snippet="The Zephyr Point lighthouse was built in 1871 by the engineer "
                            "Ada Quill on the northern cape.")
WEB_QUESTION = "Who built the Zephyr Point lighthouse?"


@asynccontextmanager
async def replica_server(tmp_path: Path, prefix: str, *, count: int = 2,
                         replica_root: Path | None = None,
                         tenants: dict[str, TenantConfig] | None = None, **replicas: Any,
                         ) -> AsyncIterator[tuple[TestClient[Any, Any], ReplicaDispatcher]]:
    """A server whose new runs go to engine replicas (one run at a time for the tenant).

    ``replica_root``: the index the replicas open (default: the server's);
    ``tenants``: the tenants table (default: the open tenant);
    ``replicas``: more ``[replicas]`` keys.
    """
    assert REDIS_URL is not None
    root = tmp_path / "idx"
    demo_index(root)
    config = ServerConfig(
        store=REDIS_URL, index_root=root, default_collections=("demo",),
        open_tenant=TenantConfig(max_concurrent_runs=1), tenants=tenants or {},
        replicas={"count": count, "num_cpus": 0.1, "max_restarts": 0, **replicas})
    server_index = CorpusIndex(root, HashingEmbedder())
    app = create_app(config, engine=Engine(server_index),
                     store=RedisRunStore(REDIS_URL, prefix=prefix),
                     replica_engine=functools.partial(demo_engine, str(replica_root or root)))
    try:
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            dispatcher = client.app[MANAGER_KEY].remote
            assert dispatcher is not None
            assert isinstance(dispatcher.dispatcher, ReplicaDispatcher)
            yield client, dispatcher.dispatcher
    finally:
        server_index.close()


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    """A Redis key prefix of the test's own, its keys deleted after the test."""
    name = f"test-{uuid.uuid4().hex}:"
    yield name
    assert REDIS_URL is not None
    async with contextlib.aclosing(aioredis.Redis.from_url(REDIS_URL)) as keys:
        stale = [key async for key in keys.scan_iter(match=f"{name}*")]
        if stale:
            await keys.delete(*stale)


@pytest.mark.slow
@NEEDS_REDIS
async def test_posted_runs_execute_on_replicas_and_stream_resume_list_and_cancel_from_the_server(
    ray: Any, tmp_path: Path, prefix: str,
) -> None:
    assert REDIS_URL is not None
    keys = aioredis.Redis.from_url(REDIS_URL)
    async with contextlib.aclosing(keys), replica_server(tmp_path, prefix) as (client,
                                                                              dispatcher):
        manager = client.app[MANAGER_KEY]
        remote = manager.remote
        assert remote is not None
        owners = dispatcher.replicas.owners
        assert len(owners) == 2

        async def stored_owner(run_id: str) -> str:
            raw = await keys.hget(f"{prefix}run:{run_id}", "owner")
            return raw.decode() if isinstance(raw, bytes) else str(raw or "")

        # 1. a run POSTed to the server executes on a replica, not in the server
        resp = await client.post("/v1/runs", json={"question": "Who founded Bayer and when?"})
        assert resp.status == 201, await resp.text()
        answered = (await resp.json())["run_id"]
        assert answered not in manager.active  # no handle here: it runs elsewhere
        assert await stored_owner(answered) in owners
        async with client.get(f"/v1/runs/{answered}/events") as sse:
            assert sse.status == 200
            full = await read_sse(sse)
        assert full.seqs == list(range(1, len(full.seqs) + 1))
        assert full.events[-1].event == "run.finished"
        assert full.events[-1].data["outcome"] == "answered"
        # 2. resume: a reconnect with Last-Event-ID gets exactly the rest
        async with client.get(f"/v1/runs/{answered}/events",
                              headers={"Last-Event-ID": "3"}) as sse:
            resumed = await read_sse(sse)
        assert resumed.seqs == full.seqs[3:]
        assert [m.data for m in resumed.events] == [m.data for m in full.events[3:]]
        # 3. the run is listed and readable like any run
        listed = await (await client.get("/v1/runs")).json()
        assert {r["run_id"]: r["status"] for r in listed["runs"]} == {answered: "finished"}
        body = await (await client.get(f"/v1/runs/{answered}")).json()
        assert body["outcome"] == "answered" and "Bayer" in body["answer"]

        # 4. the tenant's slot is held until the replica's run ended, then given back
        async def released() -> bool:
            return remote.where(answered) is None

        await eventually(released, interval_s=0.05)
        resp = await client.post("/v1/runs", json={"question": "hang until cancelled"})
        assert resp.status == 201, await resp.text()
        hanging = (await resp.json())["run_id"]
        hanging_owner = await stored_owner(hanging)
        assert hanging_owner in owners and hanging_owner != await stored_owner(answered)
        refused = await client.post("/v1/runs", json={"question": "Who isolated aspirin?"})
        assert refused.status == 429  # max_concurrent_runs = 1, and the hanging run holds it

        # 5. cancel through the API ends the run where it runs; its end streams from here
        cancel = await client.post(f"/v1/runs/{hanging}/cancel")
        assert (cancel.status, (await cancel.json())["cancelled"]) == (202, True)
        async with client.get(f"/v1/runs/{hanging}/events") as sse:
            ended = await read_sse(sse)
        finished = ended.events[-1]
        assert finished.event == "run.finished" and finished.data["outcome"] == "cancelled"
        assert "cancelled by the client" in finished.data["reason"]

        async def freed() -> bool:
            return remote.where(hanging) is None

        await eventually(freed, interval_s=0.05)
        again = await client.post("/v1/runs", json={"question": "Who isolated aspirin?"})
        assert again.status == 201, await again.text()
        cancel = await client.post(f"/v1/runs/{uuid.uuid4().hex}/cancel")
        assert cancel.status == 404  # nobody's run: not found, not "cancelled"
        again_id = (await again.json())["run_id"]

        async def again_released() -> bool:
            return remote.where(again_id) is None

        await eventually(again_released, interval_s=0.05)
        # 6. a conversation turn needs the live handle: it runs in the server itself
        session = await (await client.post("/v1/sessions")).json()
        turn = await client.post(f"/v1/sessions/{session['session_id']}/runs",
                                 json={"question": "Who founded Bayer?"})
        assert turn.status == 201, await turn.text()
        turn_id = (await turn.json())["run_id"]
        assert await stored_owner(turn_id) == client.app[STORE_KEY].owner
        async with client.get(f"/v1/runs/{turn_id}/events") as sse:
            assert (await read_sse(sse)).events[-1].data["outcome"] == "answered"

        async def turn_released() -> bool:
            return not manager.active

        await eventually(turn_released, interval_s=0.05)
        # 7. a replica's run still going at shutdown ends cancelled, stored
        resp = await client.post("/v1/runs", json={"question": "hang at shutdown"})
        assert resp.status == 201, await resp.text()
        going = (await resp.json())["run_id"]
        assert remote.where(going) in owners
    assert dispatcher.replicas.ray_handles == []  # the server closed its replicas
    reader = RedisRunStore(REDIS_URL, prefix=prefix, read_only=True)
    await reader.open()
    try:
        record = await reader.get_run(going)
        assert (record.status, record.outcome) == ("finished", "cancelled")
        last = [e async for e in reader.events(going)][-1]
        assert isinstance(last, RunFinished) and "server shutting down" in last.reason
    finally:
        await reader.close()


@pytest.mark.slow
@NEEDS_REDIS
async def test_a_run_its_replica_refuses_is_a_422_with_the_engines_own_message(
    ray: Any, tmp_path: Path, prefix: str,
) -> None:
    # the replicas' index lacks the server's "demo" collection (an index path not shared)
    elsewhere = CorpusIndex(tmp_path / "elsewhere", HashingEmbedder())
    elsewhere.index_documents("other", DOCS)
    elsewhere.close()
    async with replica_server(tmp_path, prefix, count=1,
                              replica_root=tmp_path / "elsewhere") as (client, _):
        for _attempt in range(2):  # the tenant's one slot is given back each time
            resp = await client.post("/v1/runs", json={"question": "Who founded Bayer?"})
            assert resp.status == 422, await resp.text()
            problem = await resp.json()
            assert problem["code"] == "run_config"
            assert problem["detail"].startswith("unknown collection(s)")
            assert "Traceback" not in problem["detail"] and "ray" not in problem["detail"]
        listed = await (await client.get("/v1/runs")).json()
        assert listed["runs"] == []  # nothing was stored


@pytest.mark.slow
@NEEDS_REDIS
async def test_with_every_replica_dead_a_run_is_a_503_to_retry_and_its_slot_is_given_back(
    ray: Any, tmp_path: Path, prefix: str,
) -> None:
    async with replica_server(tmp_path, prefix, count=1) as (client, dispatcher):
        ray.kill(dispatcher.replicas.ray_handles[0], no_restart=True)
        for _attempt in range(2):  # 503 both times, never 429: the one slot came back
            resp = await client.post("/v1/runs", json={"question": "Who founded Bayer?"})
            assert resp.status == 503, await resp.text()
            assert resp.headers["Retry-After"] == "1"
            assert (await resp.json())["code"] == "replicas_unavailable"


@pytest.mark.parametrize("store", ["", "runs.db", "sqlite:///:memory:"])
def test_replicas_with_a_store_replicas_cannot_share_are_refused(store: str) -> None:
    with pytest.raises(ConfigError, match=r"\[replicas\] needs a store every replica can "
                                          r"reach: a redis:// or postgresql:// URL"):
        ServerConfig.load(env={}, store=store or None, replicas={"count": 2})


def test_replicas_without_ray_installed_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what find_spec sees of a missing package
    with pytest.raises(ConfigError, match=r"\[replicas\] needs Ray: pip install "
                                          r"'reactive-rag\[ray\]'"):
        ServerConfig.load(env={}, store="redis://127.0.0.1:6379/0", replicas={})


def test_replicas_refuse_unknown_keys() -> None:
    pytest.importorskip("ray")
    with pytest.raises(ConfigError, match=r"replicas\.cpus: Extra inputs are not permitted"):
        ServerConfig.load(env={}, store="redis://127.0.0.1:6379/0", replicas={"cpus": 1})


@pytest.mark.slow
@NEEDS_REDIS
async def test_a_search_tenant_searches_the_web_from_its_replica_and_an_offline_one_does_not(
    ray: Any, tmp_path: Path, prefix: str,
) -> None:
    tokens = {"web": "web-token-1", "offline": "offline-token-2"}
    async with fake_web() as web_api:
        web_api.results["searxng"] = [LIGHTHOUSE]
        search = {"max_results": 5, "providers": {"searxng": {
            "base_url": web_api.url("searxng"), "timeout_s": 5}}}
        tenants = {
            "web": TenantConfig(token_sha256=(hash_token(tokens["web"]),),
                                collections=("demo",), search=search),
            "offline": TenantConfig(token_sha256=(hash_token(tokens["offline"]),),
                                    collections=("demo",)),
        }
        async with replica_server(tmp_path, prefix, count=1,
                                  tenants=tenants) as (client, _):
            reads = {}
            for tenant, token in tokens.items():
                headers = {"Authorization": f"Bearer {token}"}
                resp = await client.post("/v1/runs", json={"question": WEB_QUESTION},
                                         headers=headers)
                assert resp.status == 201, await resp.text()
                run_id = (await resp.json())["run_id"]
                assert run_id not in client.app[MANAGER_KEY].active  # on the replica
                async with client.get(f"/v1/runs/{run_id}/events", headers=headers) as sse:
                    reads[tenant] = await read_sse(sse)
            asked = web_api.requests["searxng"]
    web, offline = reads["web"], reads["offline"]

    def urls(read: Any) -> set[str]:
        return {c["url"] for m in read.events if m.event == "evidence.registered"
                for c in m.data["chunks"]}

    assert asked >= 1  # the replica's engine for "web" called the provider
    assert LIGHTHOUSE.url in urls(web)
    assert web.events[-1].data["outcome"] == "answered"
    assert any("Ada Quill" in c["quote"] for c in web.events[-1].data["claims"])
    offline_searches = [m.data for m in offline.events if m.event == "search.completed"]
    assert offline_searches and not any("searxng" in e["providers"] for e in offline_searches)
    assert not any(u.startswith("https://") for u in urls(offline))


@pytest.mark.slow
@NEEDS_REDIS
async def test_replicas_the_cluster_cannot_place_stop_the_start_up_with_a_clear_error(
    ray: Any, tmp_path: Path, prefix: str,
) -> None:
    assert REDIS_URL is not None
    config = ServerConfig(store=REDIS_URL, index_root=tmp_path / "idx",
                          replicas={"count": 2, "num_cpus": 64, "start_timeout_s": 1.0})
    server_index = CorpusIndex(tmp_path / "idx", HashingEmbedder())
    store = RedisRunStore(REDIS_URL, prefix=prefix)
    runner = web.AppRunner(create_app(config, engine=Engine(server_index), store=store,
                                      replica_engine=functools.partial(demo_engine, "idx")))
    try:
        with pytest.raises(ConfigError, match=r"^\[replicas\] 2 engine replica\(s\) did not "
                           r"start in 1 s \(does the cluster have 2 x 64 CPUs free\?\)"):
            await runner.setup()
    finally:
        await runner.cleanup()
        server_index.close()
    with pytest.raises(StoreClosed):  # start-up closed what it had opened
        await store.list_runs("default")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _get(url: str, **headers: str) -> bytes:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as r:
        body: bytes = r.read()
        return body


def _pg_rows(sql: str, *args: str) -> list[tuple[Any, ...]]:
    assert POSTGRES_URL is not None
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        return conn.execute(sql.encode(), args).fetchall()


@pytest.mark.slow
@NEEDS_POSTGRES
def test_serve_with_replicas_on_postgresql_answers_on_a_replica_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    """The user's way: ``reactive-rag serve --config`` with ``[replicas]`` and nothing injected
    (the default engine in each replica, the PostgreSQL store, a Ray the server starts)."""
    if os.environ.get("REACTIVE_RAG_REQUIRE_RAY") != "1":
        pytest.importorskip("ray", reason="Ray is not installed (pip install 'reactive-rag[ray]')")
    assert POSTGRES_URL is not None
    root = tmp_path / "idx"
    index = CorpusIndex(root)  # the default embedder, as the replicas open it
    index.index_documents("demo", DOCS)
    index.close()
    schema = pg_schema(uuid.uuid4().hex)
    store = POSTGRES_URL + ("&" if "?" in POSTGRES_URL else "?") + f"schema={schema}"
    port = _free_port()
    config = tmp_path / "server.toml"
    config.write_text(f'store = "{store}"\nindex_root = "{root}"\nport = {port}\n'
                      'default_collections = ["demo"]\nbuild_default_corpus = false\n\n'
                      '[replicas]\ncount = 2\nnum_cpus = 0.5\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REACTIVE_RAG_", "RAY_"))}
    env.update(REACTIVE_RAG_HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO),
               RAY_USAGE_STATS_ENABLED="0")
    log = tmp_path / "serve.log"
    base = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, "-m", "reactive_rag", "serve", "--config",
                                   str(config)], cwd=REPO, env=env, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the server did not get ready"
            try:
                _get(f"{base}/readyz")
                break
            except OSError:
                time.sleep(0.5)
        request = urllib.request.Request(
            f"{base}/v1/runs", data=json.dumps({"question": "Who founded Bayer and when?"})
            .encode(), headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=60) as resp:
            run_id = json.loads(resp.read())["run_id"]
        sse = _get(f"{base}/v1/runs/{run_id}/events").decode()
        assert "event: run.finished" in sse and '"outcome":"answered"' in sse.replace(" ", "")
        rest = _get(f"{base}/v1/runs/{run_id}/events", **{"Last-Event-ID": "5"}).decode()
        ids = [int(line[3:]) for line in rest.splitlines() if line.startswith("id:")]
        assert ids and ids[0] == 6
        (owner,), = _pg_rows(f'SELECT owner FROM "{schema}".runs WHERE run_id = %s', run_id)
        assert owner.startswith("replica")  # recorded by a replica, not by the server
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=90) == 0, log.read_text()
        assert "SIGTERM received" not in log.read_text()  # our shutdown, not Ray's exit
        assert _pg_rows(f'SELECT owner FROM "{schema}".owners') == []  # every store closed
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        asyncio.run(drop_pg_schema(schema))


@pytest.mark.slow
@NEEDS_POSTGRES
def test_serve_with_a_ray_address_nothing_answers_at_stops_in_one_line(tmp_path: Path) -> None:
    if os.environ.get("REACTIVE_RAG_REQUIRE_RAY") != "1":
        pytest.importorskip("ray", reason="Ray is not installed (pip install 'reactive-rag[ray]')")
    assert POSTGRES_URL is not None
    schema = pg_schema(uuid.uuid4().hex)
    store = POSTGRES_URL + ("&" if "?" in POSTGRES_URL else "?") + f"schema={schema}"
    nobody = _free_port()  # bound, then closed: nothing listens there
    config = tmp_path / "server.toml"
    config.write_text(f'store = "{store}"\nport = {_free_port()}\n'
                      'build_default_corpus = false\n\n'
                      f'[replicas]\naddress = "127.0.0.1:{nobody}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REACTIVE_RAG_", "RAY_"))}
    env.update(REACTIVE_RAG_HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO), COLUMNS="400")
    try:
        done = subprocess.run([sys.executable, "-m", "reactive_rag", "serve", "--config",
                               str(config)], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=110)
        assert done.returncode == 2, done.stderr
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert errors == [f"error: [replicas] address: no Ray cluster answers at "
                          f"127.0.0.1:{nobody}: Connection refused"], done.stderr
        assert "Traceback" not in done.stderr
        assert _pg_rows(f'SELECT owner FROM "{schema}".owners') == []  # the store was closed
    finally:
        asyncio.run(drop_pg_schema(schema))


@pytest.mark.slow
def test_serve_refuses_replicas_on_sqlite_in_one_line_before_it_listens(tmp_path: Path) -> None:
    config = tmp_path / "server.toml"
    config.write_text(f'store = "{tmp_path / "runs.db"}"\n\n[replicas]\ncount = 2\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("REACTIVE_RAG_")}
    env.update(REACTIVE_RAG_HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO),
               COLUMNS="400")  # (rich folds a message at the terminal's width)
    done = subprocess.run([sys.executable, "-m", "reactive_rag", "serve", "--port", "0",
                           "--config", str(config)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=110)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: invalid server config")
    assert "[replicas] needs a store every replica can reach" in lines[0]
    assert not (tmp_path / "runs.db").exists()  # nothing was opened
