"""``reactive-rag serve`` researches too: a tenant's ``[search]`` and ``[chat]`` tables.

Tenants are configured in TOML exactly as an operator writes them, loaded with
``ServerConfig.load`` and served by ``create_app``; the web is the local fake of
the search APIs, the chat model the local fake OpenAI server. Start-up refusals
are checked on the loader and app factory and on the real ``reactive-rag serve``.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import TCPConnector
from aiohttp.test_utils import TestClient, TestServer

from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.server import ConfigError, ServerConfig, create_app, hash_token
from tests.actors._openai_fixtures import FakeOpenAI, JsonBody, fake_openai
from tests.actors._web_fixtures import Result, fake_web

from .._server_fixtures import SseRead, read_sse

REPO = Path(__file__).resolve().parents[3]
TOKENS = {"web": "web-token-1", "chat": "chat-token-2", "offline": "offline-token-3"}
LIGHTHOUSE = Result(url="https://lighthouses.example/zephyr-point",
                    title="Zephyr Point lighthouse",
                    snippet="The Zephyr Point lighthouse was built in 1871 by the engineer "
                            "Ada Quill on the northern cape.")
WEB_QUESTION = "Who built the Zephyr Point lighthouse?"


def _tenant(name: str, body: str = "") -> str:
    return (f'[tenants.{name}]\ntoken_sha256 = ["{hash_token(TOKENS[name])}"]\n'
            f'collections = ["demo"]\n{body}')


@asynccontextmanager
async def _serve(tmp_path: Path, index: CorpusIndex, toml: str,
                 env: Mapping[str, str]) -> AsyncIterator[TestClient[Any, Any]]:
    """The server of a TOML config, on 127.0.0.1, over the test index."""
    path = tmp_path / "server.toml"
    path.write_text(f'default_collections = ["demo"]\nstore = "{tmp_path / "runs.db"}"\n'
                    + toml)
    config = ServerConfig.load(path, env=env)
    app = create_app(config, engine=Engine(index), env=env)
    async with TestClient(TestServer(app, host="127.0.0.1"),
                          connector=TCPConnector(limit=0)) as client:
        yield client


async def _run(client: TestClient[Any, Any], tenant: str, question: str) -> SseRead:
    headers = {"Authorization": f"Bearer {TOKENS[tenant]}"}
    resp = await client.post("/v1/runs", json={"question": question}, headers=headers)
    assert resp.status == 201, await resp.text()
    run_id = (await resp.json())["run_id"]
    async with client.get(f"/v1/runs/{run_id}/events", headers=headers) as events:
        read = await read_sse(events)
    assert read.events[-1].event == "run.finished"
    return read


def _of(read: SseRead, event_type: str) -> list[dict[str, Any]]:
    return [m.data for m in read.events if m.event == event_type]


def _evidence_urls(read: SseRead) -> set[str]:
    return {c["url"] for e in _of(read, "evidence.registered") for c in e["chunks"]}


async def test_a_searxng_tenant_cites_the_web_and_an_offline_tenant_never_reaches_it(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with fake_web() as web_api:
        web_api.results["searxng"] = [LIGHTHOUSE]
        toml = _tenant("web", f"""
[tenants.web.search]
max_results = 5
[tenants.web.search.providers.searxng]
base_url = "{web_api.url('searxng')}"
timeout_s = 5
""") + _tenant("offline")
        async with _serve(tmp_path, server_index, toml, env={}) as client:
            web_run = await _run(client, "web", WEB_QUESTION)
            asked = web_api.requests["searxng"]
            offline_run = await _run(client, "offline", WEB_QUESTION)
        gc.collect()  # an unclosed provider session would warn (an error here)
    completed = _of(web_run, "search.completed")
    assert any("searxng" in e["providers"] for e in completed)
    assert LIGHTHOUSE.url in _evidence_urls(web_run)
    finished = _of(web_run, "run.finished")[-1]
    assert finished["outcome"] == "answered", finished["reason"]
    assert any("Ada Quill" in c["quote"] for c in finished["claims"])
    assert asked >= 1
    # the other tenant of the same server stays on its local collections
    assert web_api.requests["searxng"] == asked
    assert not any("searxng" in e["providers"] for e in _of(offline_run, "search.completed"))
    assert not any(u.startswith("https://") for u in _evidence_urls(offline_run))
    assert not _of(offline_run, "scrape.requested")


def _completion(call_id: str, tool: str, args: dict[str, Any]) -> JsonBody:
    """A non-streamed chat completion calling one tool (llama-cpp-python's shape)."""
    return JsonBody({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "planner-model",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": tool, "arguments": json.dumps(args)}}]}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 6, "total_tokens": 46},
    })


async def test_a_chat_tenant_plans_with_its_model_and_an_offline_tenant_does_not(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with fake_openai() as model:
        model.check_history = False  # llama-cpp-python quirks: results come back as user text
        model.script(_completion("c1", "search", {"query": "Bayer founded Barmen"}),
                     *[_completion(f"a{i}", "answer", {}) for i in range(4)])
        toml = _tenant("chat", f"""
[tenants.chat.chat]
url = "{model.base_url}"
model = "planner-model"
api_key_env = "CHAT_TENANT_KEY"
quirks = "llama-cpp-python"
roles = ["planner"]
timeout_s = 10
""") + _tenant("offline")
        env = {"CHAT_TENANT_KEY": "sk-chat-tenant"}
        async with _serve(tmp_path, server_index, toml, env=env) as client:
            chat_run = await _run(client, "chat", "Who founded Bayer and when?")
            seen = len(model.requests)
            offline_run = await _run(client, "offline", "Who founded Bayer and when?")
        gc.collect()
    _check_planned_by(model, seen)
    queries = [e["query"] for e in _of(chat_run, "search.requested")]
    assert "Bayer founded Barmen" in queries  # the model's tool call, run by the server
    finished = _of(chat_run, "run.finished")[-1]
    assert finished["outcome"] == "answered", finished["reason"]
    assert any("1863" in c["quote"] for c in finished["claims"])  # extractive writer
    assert len(model.requests) == seen  # the offline tenant never called the model
    assert _of(offline_run, "run.finished")[-1]["outcome"] == "answered"


def _check_planned_by(model: FakeOpenAI, seen: int) -> None:
    assert seen >= 2
    assert {r["model"] for r in model.requests} == {"planner-model"}
    assert all(r["stream"] is False for r in model.requests)  # quirks reached the planner
    assert all(h.get("Authorization") == "Bearer sk-chat-tenant" for h in model.headers)
    assert all(r.get("tools") for r in model.requests)  # planner turns only: writer offline


SEARXNG = '[tenants.acme.search.providers.searxng]\nbase_url = "http://127.0.0.1:9"\n'


@pytest.mark.parametrize(("body", "env", "message"), [
    ('[tenants.acme.search.providers.bing]\nbase_url = "http://127.0.0.1:9"\n', {},
     r"tenant 'acme' \[search\]: unknown provider kind 'bing'"),
    ('[tenants.acme.search]\norder = ["brave"]\n' + SEARXNG, {},
     r"tenants\.acme\.search.*order/fallback name unconfigured providers: \['brave'\]"),
    ('[tenants.acme.search.providers.brave]\napi_key_env = "ACME_BRAVE_KEY"\n', {},
     r"tenant 'acme' \[search\]: brave: api key environment variable ACME_BRAVE_KEY is not set"),
    ('[tenants.acme.search.providers.brave]\napi_key_env = "ACME_BRAVE_KEY"\n',
     {"ACME_BRAVE_KEY": "  "}, r"ACME_BRAVE_KEY is not set"),
    ("[tenants.acme.search.providers.searxng]\ntimeout_s = 3\n", {},
     r"tenant 'acme' \[search\]: searxng: no base_url configured"),
    ("[tenants.acme.search]\nmax_results = 4\n", {},
     r"tenant 'acme' \[search\]: the tenant configured no search provider"),
    ('[tenants.acme.chat]\nurl = "127.0.0.1:8000/v1"\n', {},
     r"tenants\.acme\.chat\.url: .*not an http\(s\) URL with a host"),
    ('[tenants.acme.chat]\nurl = "http://127.0.0.1:80000/v1"\n', {},
     r"tenants\.acme\.chat\.url: .*not a valid URL"),
    ('[tenants.acme.chat]\nurl = "http://me:sk-secret@127.0.0.1:8000/v1"\n', {},
     r"tenants\.acme\.chat\.url: .*credentials never go in the url"),
    ('[tenants.acme.chat]\nurl = "http://127.0.0.1:8000/v1"\napi_key_env = "ACME_CHAT_KEY"\n',
     {}, r"tenant 'acme' \[chat\]: api key environment variable ACME_CHAT_KEY is not set"),
    ('[tenants.acme.chat]\nurl = "http://127.0.0.1:8000/v1"\napi_key = "sk-secret"\n', {},
     r"tenants\.acme\.chat: .*name that variable in api_key_env"),
    ('[tenants.acme.chat]\nurl = "http://127.0.0.1:8000/v1"\nroles = ["judge"]\n', {},
     r"tenants\.acme\.chat\.roles"),
    ('[open_tenant.search.providers.nope]\nbase_url = "http://127.0.0.1:9"\n', {},
     r"tenant 'default' \[search\]: unknown provider kind 'nope'"),
])
def test_a_tenant_that_cannot_research_is_refused_before_anything_starts(
        tmp_path: Path, body: str, env: dict[str, str], message: str) -> None:
    path = tmp_path / "server.toml"
    tenant = "" if body.startswith("[open_tenant") else \
        f'[tenants.acme]\ntoken_sha256 = ["{hash_token("a")}"]\n'
    path.write_text(f'store = "{tmp_path / "runs.db"}"\n{tenant}{body}')
    with pytest.raises(ConfigError, match=message):
        create_app(ServerConfig.load(path, env=env), env=env)
    assert not (tmp_path / "runs.db").exists()


def test_a_working_research_config_builds_and_names_no_key(tmp_path: Path) -> None:
    path = tmp_path / "server.toml"
    path.write_text(f"""
[tenants.acme]
token_sha256 = ["{hash_token('a')}"]
[tenants.acme.search]
compression = "rag"
[tenants.acme.search.providers.brave]
api_key_env = "ACME_BRAVE_KEY"
[tenants.acme.chat]
url = "http://127.0.0.1:8000"
roles = ["writer", "writer"]
[tenants.plain]
token_sha256 = ["{hash_token('b')}"]
""")
    env = {"ACME_BRAVE_KEY": "brave-secret"}
    config = ServerConfig.load(path, env=env)
    acme = config.tenants["acme"]
    assert acme.chat is not None and acme.chat.roles == ("writer",)
    assert acme.chat.api_key_env is None and acme.chat.quirks == "none"
    assert config.tenants["plain"].search is None and config.tenants["plain"].chat is None
    assert "brave-secret" not in repr(config)
    create_app(config, env=env)  # builds; nothing opened until the app starts


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize(("body", "message"), [
    ('[tenants.acme.search.providers.bing]\nbase_url = "http://127.0.0.1:9"\n',
     "tenant 'acme' [search]: unknown provider kind 'bing'"),
    ('[tenants.acme.search.providers.tavily]\napi_key_env = "ACME_TAVILY_KEY"\n',
     "tenant 'acme' [search]: tavily: api key environment variable ACME_TAVILY_KEY is not set"),
    ('[tenants.acme.chat]\nurl = "localhost:8000/v1"\n',
     "invalid server config at tenants.acme.chat.url"),
])
def test_reactive_rag_serve_refuses_at_start_up_with_exit_2(
        tmp_path: Path, body: str, message: str) -> None:
    config = tmp_path / "server.toml"
    config.write_text(f'[tenants.acme]\ntoken_sha256 = ["{hash_token("a")}"]\n{body}')
    store = tmp_path / "store" / "runs.db"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACME_")}
    env.update(REACTIVE_RAG_HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO), COLUMNS="300")
    done = subprocess.run(
        [sys.executable, "-m", "reactive_rag", "serve", "--config", str(config),
         "--store", str(store), "--port", str(port)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "error:" in done.stderr and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not store.parent.exists()  # no store opened
    assert "Running on" not in done.stdout + done.stderr  # never listened
