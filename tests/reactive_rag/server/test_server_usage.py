"""Usage per run over HTTP: GET /v1/runs/{id} and run.finished carry it, GET /v1/usage sums a
tenant's runs, /metrics counts it (by tenant only when the operator says so)."""

from __future__ import annotations

import gc
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import TCPConnector
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from reactive_rag.engine import ModelPrice, PriceTable, UsageConfig
from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.server import ConfigError, ServerConfig, create_app, hash_token
from tests.actors._openai_fixtures import JsonBody, fake_openai

from .._server_fixtures import (
    QUESTION,
    SseRead,
    auth,
    read_sse,
    serve,
    start_run,
    two_tenants,
)

CHAT_TOKEN = "chat-token-789"
PRICES = PriceTable(models={"planner-model": ModelPrice(input_per_1k=2.0, output_per_1k=8.0)},
                    providers={"local": 0.001})


async def _finish(client: TestClient[Any, Any], run_id: str, tenant: str) -> SseRead:
    async with client.get(f"/v1/runs/{run_id}/events", headers=auth(tenant)) as resp:
        read = await read_sse(resp)
    assert read.events[-1].event == "run.finished"
    return read


async def _run_detail(client: TestClient[Any, Any], run_id: str,
                      headers: Mapping[str, str]) -> dict[str, Any]:
    resp = await client.get(f"/v1/runs/{run_id}", headers=headers)
    assert resp.status == 200, await resp.text()
    body: dict[str, Any] = await resp.json()
    return body


def _completion(call_id: str, tool: str, args: dict[str, Any], prompt: int,
                completion: int) -> JsonBody:
    """A non-streamed chat completion calling one tool, reporting its token usage."""
    return JsonBody({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "planner-model",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": tool, "arguments": json.dumps(args)}}]}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    })


@asynccontextmanager
async def _chat_server(tmp_path: Path, index: CorpusIndex, base_url: str
                       ) -> AsyncIterator[TestClient[Any, Any]]:
    path = tmp_path / "server.toml"
    path.write_text(f"""default_collections = ["demo"]
store = "{tmp_path / 'runs.db'}"
[tenants.chat]
token_sha256 = ["{hash_token(CHAT_TOKEN)}"]
collections = ["demo"]
[tenants.chat.chat]
url = "{base_url}"
model = "planner-model"
api_key_env = "CHAT_TENANT_KEY"
quirks = "llama-cpp-python"
roles = ["planner"]
timeout_s = 10
[usage.prices.models."planner-model"]
input_per_1k = 2.0
output_per_1k = 8.0
[usage.prices.providers]
local = 0.001
""")
    config = ServerConfig.load(path, env={})
    assert config.usage.prices == PRICES  # the documented TOML is the table tested below
    app = create_app(config, engine=Engine(index), env={"CHAT_TENANT_KEY": "sk-chat"})
    async with TestClient(TestServer(app, host="127.0.0.1"),
                          connector=TCPConnector(limit=0)) as client:
        yield client


async def test_a_chat_runs_tokens_are_what_the_model_server_reported_and_priced(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    reported = [(40, 6), (55, 9), (61, 4), (70, 3), (80, 2)]
    async with fake_openai() as model:
        model.check_history = False  # llama-cpp-python quirks: results come back as user text
        model.script(_completion("c1", "search", {"query": "Bayer founded Barmen"},
                                 *reported[0]),
                     *[_completion(f"a{i}", "answer", {}, *reported[i]) for i in range(1, 5)])
        async with _chat_server(tmp_path, server_index, model.base_url) as client:
            headers = {"Authorization": f"Bearer {CHAT_TOKEN}"}
            resp = await client.post("/v1/runs", json={"question": QUESTION}, headers=headers)
            assert resp.status == 201, await resp.text()
            run_id = (await resp.json())["run_id"]
            async with client.get(f"/v1/runs/{run_id}/events", headers=headers) as events:
                read = await read_sse(events)
            detail = await _run_detail(client, run_id, headers)
        calls = len(model.requests)
        gc.collect()
    assert calls >= 2  # the model planned (a search, then an answer)
    sent_in = sum(p for p, _ in reported[:calls])
    sent_out = sum(c for _, c in reported[:calls])
    finished = read.events[-1].data
    assert finished["outcome"] == "answered", finished["reason"]
    assert finished["usage"]["models"] == [{"role": "planner", "model": "planner-model",
                                            "calls": calls, "input_tokens": sent_in,
                                            "output_tokens": sent_out}]
    usage = detail["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (sent_in, sent_out)
    assert usage["model_calls"] == calls
    searches = usage["provider_calls"]["local"]
    assert searches == sum(1 for m in read.events if m.event == "search.completed")
    expected = (sent_in * 2.0 + sent_out * 8.0) / 1000 + searches * 0.001
    assert usage["cost"] == {"currency": "USD", "total": pytest.approx(expected),
                             "models": pytest.approx((sent_in * 2.0 + sent_out * 8.0) / 1000),
                             "providers": pytest.approx(searches * 0.001), "unpriced": []}


async def test_usage_sums_a_tenants_runs_in_the_range_and_never_another_tenants(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    usage = UsageConfig(prices=PriceTable(providers={"local": 0.25}))
    async with serve(tmp_path, server_index, tenants=two_tenants(), usage=usage) as client:
        acme = [await start_run(client, "acme") for _ in range(2)]
        beta = await start_run(client, "beta", question="What is the vault combination?")
        for run_id in acme:
            await _finish(client, run_id, "acme")
        await _finish(client, beta, "beta")
        per_run = [(await _run_detail(client, r, auth("acme")))["usage"] for r in acme]
        beta_usage = (await _run_detail(client, beta, auth("beta")))["usage"]
        created = [(await _run_detail(client, r, auth("acme")))["created"] for r in acme]

        resp = await client.get("/v1/usage", headers=auth("acme"))
        assert resp.status == 200, await resp.text()
        body = await resp.json()
        before = await (await client.get("/v1/usage", headers=auth("acme"),
                                         params={"to": "1970-01-02T00:00:00Z"})).json()
        since_first = await (await client.get("/v1/usage", headers=auth("acme"),
                                              params={"from": str(int(min(created)))})).json()
        after_last = await (await client.get("/v1/usage", headers=auth("acme"),
                                             params={"from": str(int(max(created)) + 1)})).json()
        reversed_range = await (await client.get("/v1/usage", headers=auth("acme"), params={
            "from": "2100-01-01T00:00:00Z", "to": "1970-01-01T00:00:00Z"})).json()
    assert body["tenant"] == "acme" and body["runs"] == 2 and body["running"] == 0
    calls = sum(u["provider_calls"]["local"] for u in per_run)
    assert body["usage"]["provider_calls"] == {"local": calls}  # beta's searches not in it
    assert beta_usage["provider_calls"]["local"] >= 1
    assert body["usage"]["cost"]["total"] == pytest.approx(0.25 * calls)
    assert body["usage"]["model_calls"] == 0 and body["usage"]["input_tokens"] == 0  # offline
    assert before["runs"] == 0  # nothing was created before 2 January 1970 (ISO 8601)
    assert since_first["runs"] == 2  # unix seconds; the range includes `from`
    assert after_last["runs"] == 0 and after_last["usage"]["provider_calls"] == {}
    assert reversed_range["runs"] == 0  # `to` before `from`: an empty range, not an error


@pytest.mark.parametrize(("query", "field"), [
    ({"from": "yesterday"}, "from"),
    ({"to": "2026-13-01T00:00:00Z"}, "to"),
    ({"from": "-5"}, "from"),
    ({"to": "1e9"}, "to"),
])
async def test_a_bad_usage_range_is_a_422_naming_the_parameter(
        tmp_path: Path, server_index: CorpusIndex, query: dict[str, str], field: str) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        resp = await client.get("/v1/usage", headers=auth("acme"), params=query)
        assert resp.status == 422
        problem = await resp.json()
        unauthenticated = await client.get("/v1/usage")
    assert problem["code"] == "invalid_parameter" and problem["field"] == field
    assert unauthenticated.status == 401


def _usage_samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith("reactive_rag_usage_")}


@pytest.mark.parametrize("by_tenant", [False, True])
async def test_metrics_count_usage_by_tenant_only_when_the_operator_turns_it_on(
        tmp_path: Path, server_index: CorpusIndex, by_tenant: bool) -> None:
    usage = UsageConfig(tenant_metrics=by_tenant, prices=PriceTable(providers={"local": 0.5}))
    async with serve(tmp_path, server_index, tenants=two_tenants(), usage=usage) as client:
        run_id = await start_run(client, "acme")
        await _finish(client, run_id, "acme")
        calls = (await _run_detail(client, run_id, auth("acme")))["usage"]["provider_calls"]
        samples = _usage_samples(await (await client.get("/metrics")).text())
    tenant = {("tenant", "acme")} if by_tenant else set()
    key = frozenset({*tenant, ("provider", "local")})
    assert samples[("reactive_rag_usage_provider_calls_total", key)] == calls["local"]
    assert samples[("reactive_rag_usage_estimated_cost_total", frozenset(tenant))] == \
        pytest.approx(0.5 * calls["local"])
    labelled = {dict(labels).get("tenant") for (_, labels) in samples}
    assert labelled == ({"acme"} if by_tenant else {None})  # no tenant name unless asked


def test_the_documented_usage_config_loads_as_the_server_reads_it(tmp_path: Path) -> None:
    page = (Path(__file__).resolve().parents[3] / "docs" / "configuration.md").read_text()
    section = page.split("### Usage and cost", 1)[1]
    toml = section.split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "server.toml"
    path.write_text(toml)
    usage = ServerConfig.load(path, env={}).usage
    assert usage.tenant_metrics is False
    assert usage.prices.models["gpt-4o-mini"] == ModelPrice(input_per_1k=0.00015,
                                                            output_per_1k=0.0006)
    assert usage.prices.providers == {"brave": 0.005, "tavily": 0.008}
    path.write_text("[usage.prices.providers]\nbrave = -1\n")
    with pytest.raises(ConfigError, match=r"usage\.prices\.providers\.brave"):
        ServerConfig.load(path, env={})
