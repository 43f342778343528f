"""``/mcp`` on the API server: the SDK's Streamable HTTP client against a real server.

Two tenants as in the other server tests: ``acme`` may use ``demo``, ``beta`` also
``secret``. The tools see exactly what the API lets each tenant see.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from aiohttp.test_utils import TestClient, TestServer
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from reactive_rag import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.mcp import mount_mcp
from reactive_rag.server import ServerConfig, TenantConfig, create_app, hash_token

from .._corpus import DOCS
from .._server_fixtures import (
    QUESTION,
    SECRET,
    SECRET_DOCS,
    TOKENS,
    GatedPlanner,
    auth,
    two_tenants,
)

REPO = Path(__file__).resolve().parents[3]


@asynccontextmanager
async def serve(tmp_path: Path, index: CorpusIndex, *,
                tenants: dict[str, TenantConfig] | None = None,
                planner: Callable[[], Any] | None = None,
                ) -> AsyncIterator[TestClient[Any, Any]]:
    """A real server on 127.0.0.1 as ``reactive-rag serve`` builds it: the API and ``/mcp``."""
    config = ServerConfig(store=str(tmp_path / "runs.db"), tenants=tenants or {},
                          default_collections=("demo",))
    app = create_app(config, engine=Engine(index, planner=planner))
    mount_mcp(app)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


@asynccontextmanager
async def mcp_session(client: TestClient[Any, Any],
                      headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    url = str(client.make_url("/mcp"))
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _text(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def test_research_over_http_streams_progress_and_is_a_stored_run_of_the_tenant(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    messages: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        async with mcp_session(client, auth("acme")) as session:
            tools = {t.name for t in (await session.list_tools()).tools}
            result = await session.call_tool("research", {"question": QUESTION},
                                             progress_callback=on_progress)
        assert tools == {"research", "search", "read", "create_collection", "add_documents",
                         "delete_documents", "delete_collection", "summarize"}
        assert not result.is_error, _text(result)
        answer = result.structured_content
        assert answer is not None and "1863" in answer["answer"]
        assert answer["citations"][0]["chunk_id"].startswith("bayer#")
        assert any(m.startswith("search ") for m in messages), messages
        assert messages[-1].startswith("finished: answered"), messages
        run_id = answer["run_id"]
        mine = await client.get(f"/v1/runs/{run_id}", headers=auth("acme"))
        assert mine.status == 200
        stored = await mine.json()
        assert stored["status"] == "finished" and "1863" in stored["answer"]
        theirs = await client.get(f"/v1/runs/{run_id}", headers=auth("beta"))
        assert theirs.status == 404


async def test_a_wrong_or_missing_token_is_refused_before_the_mcp_transport(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        for extra in ({}, {"Authorization": "Bearer not-a-token"}):
            resp = await client.post("/mcp", json=hello, headers={**headers, **extra})
            assert resp.status == 401
            assert resp.headers["WWW-Authenticate"].startswith("Bearer")
            assert (await resp.json())["code"] == "unauthorized"
        refused: list[BaseException] = []
        try:  # the SDK's client does not get as far as a session
            async with mcp_session(client, {"Authorization": "Bearer not-a-token"}):
                pass
        except* MCPError as group:
            refused.extend(group.exceptions)
        assert refused


async def test_a_tenant_cannot_search_or_read_another_tenants_collection(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        async with mcp_session(client, auth("acme")) as acme:
            search = await acme.call_tool("search", {"query": "vault combination",
                                                     "collections": ["secret"]})
            read = await acme.call_tool("read", {"chunk_id": "vault#0"})
            unknown = await acme.call_tool("read", {"chunk_id": "nothing#0"})
            research = await acme.call_tool("research", {"question": "What is the vault "
                                                         "combination?",
                                                         "collections": ["secret"]})
            everywhere = await acme.call_tool("search", {"query": "vault combination"})
        async with mcp_session(client, auth("beta")) as beta:
            allowed = await beta.call_tool("read", {"chunk_id": "vault#0"})
    assert search.is_error and "you may not search collection 'secret'" in _text(search)
    assert research.is_error and "you may not search collection 'secret'" in _text(research)
    # the same answer as for an id that does not exist: nothing tells it is there
    assert read.is_error and unknown.is_error
    assert _text(read).replace("vault#0", "X") == _text(unknown).replace("nothing#0", "X")
    assert everywhere.structured_content is not None
    assert SECRET not in str(everywhere.structured_content)
    assert not allowed.is_error and allowed.structured_content is not None
    assert allowed.structured_content["chunk"]["text"] == SECRET


async def test_the_http_api_budget_rules_apply_to_research(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client, \
            mcp_session(client, auth("acme")) as session:
        small = await session.call_tool("research", {"question": QUESTION,
                                                     "budget": {"max_tool_calls": 1}})
        huge = await session.call_tool("research", {"question": QUESTION,
                                                    "budget": {"max_steps": 10**9}})
    assert not small.is_error and small.structured_content is not None
    assert small.structured_content["tool_calls"] == 1
    assert huge.is_error and "budget max_steps must be > 0 and <= 1000000" in _text(huge)


async def test_the_tenants_rate_limit_applies_to_research(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants(runs_per_minute=1)) as client, \
            mcp_session(client, auth("acme")) as session:
        first = await session.call_tool("research", {"question": QUESTION})
        second = await session.call_tool("research", {"question": QUESTION})
    assert not first.is_error
    assert second.is_error and "at most 1 runs per minute" in _text(second)


async def test_open_mode_serves_mcp_without_a_token_on_loopback(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        async with mcp_session(client, {}) as session:
            found = await session.call_tool("search", {"query": "tea"})
        assert found.structured_content is not None
        assert found.structured_content["hits"][0]["title"] == "Tea"
        forged = await client.post("/mcp", json={}, headers={
            "Host": "attacker.example", "Accept": "application/json, text/event-stream"})
        assert forged.status in (400, 403, 421)  # the SDK's DNS-rebinding check


@asynccontextmanager
async def serve_command(folder: Path, index_root: Path) -> AsyncIterator[str]:
    """``python -m reactive_rag serve`` (the ``reactive-rag serve`` path) with the two
    tenants; yields its base URL; SIGINT at the end, which must exit 0."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    tenants = "".join(
        f'[tenants.{name}]\ntoken_sha256 = ["{hash_token(TOKENS[name])}"]\n'
        f"collections = {list(cfg.collections)!r}\n".replace("'", '"')
        for name, cfg in two_tenants().items())
    config = folder / "server.toml"
    config.write_text(f'index_root = "{index_root}"\ndefault_collections = ["demo"]\n'
                      f"build_default_corpus = false\n{tenants}")
    log = folder / "server.log"
    env = {**os.environ, "REACTIVE_RAG_HOME": str(folder / "home"), "PYTHONPATH": str(REPO)}
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "reactive_rag", "serve", "--port", str(port), "--config",
            str(config), "--store", str(folder / "runs.db"), cwd=REPO, env=env, stdout=out,
            stderr=asyncio.subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx2.AsyncClient() as http:
            for _ in range(600):
                assert proc.returncode is None, log.read_text()
                with contextlib.suppress(httpx2.TransportError):
                    if (await http.get(f"{base}/healthz")).status_code == 200:
                        break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("server did not come up\n" + log.read_text())
        yield base
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, log.read_text()


@pytest.fixture(scope="module")
def served_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server tests' two collections, indexed with the embedder the server opens them with."""
    root = tmp_path_factory.mktemp("mcp-served")
    index = CorpusIndex(root)
    index.index_documents("demo", DOCS)
    index.index_documents("secret", SECRET_DOCS)
    index.close()
    return root


async def test_reactive_rag_serve_mounts_mcp_with_the_api_tenants(
        tmp_path: Path, served_root: Path) -> None:
    async with serve_command(tmp_path, served_root) as base:
        url = f"{base}/mcp"
        async with httpx2.AsyncClient(headers=auth("beta"), timeout=60) as http, \
                streamable_http_client(url, http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            found = await session.call_tool("search", {"query": "vault combination",
                                                       "collections": ["secret"]})
        async with httpx2.AsyncClient(headers=auth("acme"), timeout=60) as http, \
                streamable_http_client(url, http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            refused = await session.call_tool("search", {"query": "vault combination",
                                                         "collections": ["secret"]})
        async with httpx2.AsyncClient() as http:
            anonymous = await http.post(url, json={}, headers={
                "Accept": "application/json, text/event-stream"})
    assert found.structured_content is not None
    assert found.structured_content["hits"][0]["chunk_id"] == "vault#0"
    assert refused.is_error and "you may not search collection 'secret'" in _text(refused)
    assert anonymous.status_code == 401


async def test_a_client_that_hangs_up_mid_research_leaves_the_run_going(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    GatedPlanner.gate = asyncio.Event()
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "research", "arguments": {"question": QUESTION},
        "_meta": {"progressToken": "p1"}}}
    headers = {**auth("acme"), "Accept": "application/json, text/event-stream"}
    try:
        async with serve(tmp_path, server_index, tenants=two_tenants(),
                         planner=GatedPlanner) as client:
            resp = await client.post("/mcp", json=call, headers=headers)
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            first = b""
            while b"notifications/progress" not in first:  # run.started's notification
                first += await resp.content.readany()
            assert b"started over demo" in first
            resp.close()  # hang up while the planner is held
            page = await (await client.get("/v1/runs", headers=auth("acme"))).json()
            [run] = page["runs"]
            assert run["status"] == "running"
            GatedPlanner.gate.set()
            for _ in range(300):
                record = await (await client.get(f"/v1/runs/{run['run_id']}",
                                                 headers=auth("acme"))).json()
                if record["status"] == "finished":
                    break
                await asyncio.sleep(0.1)
            assert record["status"] == "finished" and "1863" in record["answer"]
    finally:
        GatedPlanner.gate = None
