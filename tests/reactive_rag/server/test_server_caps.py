"""Tenant caps and quotas on a real server: every face refuses with the cap's name and limit.

The caps of the tests are the operator's example of docs/configuration.md ("Caps and
quotas"), loaded as written. Budget caps answer 422 ``budget_over_cap``, quotas 429 with
``Retry-After``; the OpenAI-compatible endpoint and the MCP tools refuse through the same
run manager. Token quotas count what a fake OpenAI-compatible server reported.
"""

from __future__ import annotations

import gc
import json
import re
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from a2a.client import A2AClientError
from a2a.types import InvalidParamsError
from aiohttp import TCPConnector
from aiohttp.test_utils import TestClient, TestServer
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent
from openai import AsyncOpenAI

from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.mcp import mount_mcp
from reactive_rag.run import Budget
from reactive_rag.server import (
    RateLimited,
    ServerConfig,
    Tenant,
    TenantCaps,
    TenantConfig,
    create_app,
    hash_token,
)
from reactive_rag.server._caps import BUDGET_CAPS, DAY_S, HOUR_S, Quotas
from tests.actors._openai_fixtures import JsonBody, fake_openai

from .._server_fixtures import QUESTION, TOKENS, auth, read_sse, serve, start_run
from ..a2a.test_a2a_face import a2a as a2a_client
from ..a2a.test_a2a_face import ask as a2a_ask
from ..a2a.test_a2a_face import collect as a2a_collect
from ..a2a.test_a2a_face import serve as a2a_serve

Client = TestClient[Any, Any]
REPO = Path(__file__).resolve().parents[3]
GUIDE = REPO / "docs" / "configuration.md"


def _guide_section() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index("### Caps and quotas")
    end = re.search(r"\n##+ ", text[start + 1:])  # the next heading, whatever its level
    return text[start:] if end is None else text[start:start + 1 + end.start()]


def _guide_toml() -> str:
    found = re.search(r"```toml\n(.*?)```", _guide_section(), re.S)
    assert found is not None, "the Caps and quotas section has no TOML example"
    return found.group(1)


def _guide_caps() -> TenantCaps:
    """The caps of the guide's example tenant, as the server loads them."""
    return TenantCaps.model_validate(tomllib.loads(_guide_toml())["tenants"]["acme"]["caps"])


def _tenants(caps: TenantCaps, **limits: Any) -> dict[str, TenantConfig]:
    """``acme`` under ``caps``; ``beta`` with the defaults (it must never feel acme's)."""
    return {"acme": TenantConfig(token_sha256=(hash_token(TOKENS["acme"]),),
                                 collections=("demo",), caps=caps, **limits),
            "beta": TenantConfig(token_sha256=(hash_token(TOKENS["beta"]),),
                                 collections=("demo",))}


async def _post_run(client: Client, tenant: str, **body: Any) -> tuple[int, dict[str, Any],
                                                                       dict[str, str]]:
    resp = await client.post("/v1/runs", json={"question": QUESTION, **body},
                             headers=auth(tenant))
    return resp.status, await resp.json(), dict(resp.headers)


async def _started_budget(client: Client, run_id: str, tenant: str = "acme") -> dict[str, Any]:
    """The budget the run ran under, from its own ``run.started``."""
    async with client.get(f"/v1/runs/{run_id}/events", headers=auth(tenant)) as resp:
        events = (await read_sse(resp)).events
    started = next(e.data for e in events if e.event == "run.started")
    budget: dict[str, Any] = started["options"]["budget"]
    return budget


# --- the operator's config ---------------------------------------------------------------------


def test_the_guides_example_is_a_valid_server_config_and_its_table_states_the_defaults(
        tmp_path: Path) -> None:
    path = tmp_path / "server.toml"
    path.write_text(_guide_toml())
    config = ServerConfig.load(path, env={})
    acme = config.tenants["acme"]
    assert acme.caps.wall_s == 120 and acme.caps.runs_per_hour == 200
    assert acme.caps.tokens_per_day == 2_000_000
    assert acme.caps.max_pages == TenantCaps().max_pages  # a key left out keeps its default
    rows = dict(re.findall(r"^\| `(\w+)`(?: \(tenant key\))? \| (\d+) \|", _guide_section(),
                           re.M))
    defaults = {**TenantCaps().model_dump(), "max_concurrent_runs": 8, "runs_per_minute": 60}
    assert {k: int(v) for k, v in rows.items()} == defaults
    assert defaults["max_concurrent_runs"] == TenantConfig().max_concurrent_runs
    assert defaults["runs_per_minute"] == TenantConfig().runs_per_minute


def test_a_cap_that_is_not_positive_or_unknown_is_refused_at_load_time(tmp_path: Path) -> None:
    path = tmp_path / "server.toml"
    for body, where in (("wall_s = 0", "tenants.acme.caps.wall_s"),
                        ("max_spoons = 3", "tenants.acme.caps.max_spoons")):
        path.write_text(f'[tenants.acme]\ntoken_sha256 = ["{hash_token("a")}"]\n'
                        f"[tenants.acme.caps]\n{body}\n")
        with pytest.raises(ValueError, match=re.escape(where)):
            ServerConfig.load(path, env={})


def test_every_cap_names_a_numeric_budget_field_under_the_request_limit() -> None:
    defaults = Budget()
    for name in BUDGET_CAPS:
        value = getattr(defaults, name)
        assert not isinstance(value, bool) and isinstance(value, int | float), name
        cap = TenantCaps().cap_of(name)
        assert value <= cap < 1_000_000, name  # a run naming no budget is not clipped


# --- budget caps over the native API -----------------------------------------------------------


async def test_each_budget_cap_is_refused_with_its_name_and_limit_and_a_budget_at_it_runs(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    caps = _guide_caps()
    async with serve(tmp_path, server_index, tenants=_tenants(caps)) as client:
        for name in BUDGET_CAPS:
            cap = caps.cap_of(name)
            over = cap + 1 if isinstance(getattr(Budget(), name), int) else cap + 0.5
            status, problem, _ = await _post_run(client, "acme", budget={name: over})
            assert status == 422, (name, problem)
            assert problem["code"] == "budget_over_cap" and problem["field"] == f"budget.{name}"
            shown = int(over) if float(over).is_integer() else over
            assert problem["detail"] == (f"{name} {shown} is over this tenant's cap of "
                                         f"{int(cap) if float(cap).is_integer() else cap} "
                                         f"(caps.{name})")
        status, problem, _ = await _post_run(client, "acme", budget={"wall_s": 1_000_000.0})
        assert problem["detail"] == "wall_s 1000000 is over this tenant's cap of 120 (caps.wall_s)"
        listed = await (await client.get("/v1/runs", headers=auth("acme"))).json()
        assert listed["runs"] == []  # a refused budget started nothing
        at_caps = {name: caps.cap_of(name) for name in BUDGET_CAPS}
        run_id = await start_run(client, "acme", budget=at_caps)
        ran = await _started_budget(client, run_id)
        assert {name: ran[name] for name in BUDGET_CAPS} == at_caps
        # the other tenant has the default caps: the same budget is under them
        assert (await _post_run(client, "beta", budget={"wall_s": 121.0}))[0] == 201


async def test_a_budget_left_out_gets_the_defaults_clipped_to_the_caps(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    caps = TenantCaps(wall_s=60, max_tool_calls=5)
    async with serve(tmp_path, server_index, tenants=_tenants(caps)) as client:
        bare = await _started_budget(client, await start_run(client, "acme"))
        some = await _started_budget(client, await start_run(client, "acme",
                                                             budget={"max_steps": 3}))
        beta = await _started_budget(client, await start_run(client, "beta"), "beta")
    assert bare["wall_s"] == 60 and bare["max_tool_calls"] == 5
    assert bare["max_steps"] == Budget().max_steps  # a default under its cap is kept
    assert some["max_steps"] == 3 and some["wall_s"] == 60 and some["max_tool_calls"] == 5
    assert beta["wall_s"] == Budget().wall_s and beta["max_tool_calls"] == Budget().max_tool_calls


# --- run quotas --------------------------------------------------------------------------------


async def test_runs_per_hour_and_per_day_answer_429_with_retry_after_for_that_tenant_only(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    hourly = TenantCaps(runs_per_hour=2)
    async with serve(tmp_path, server_index, tenants=_tenants(hourly)) as client:
        await start_run(client, "acme")
        await start_run(client, "acme")
        status, problem, headers = await _post_run(client, "acme")
        assert status == 429 and problem["code"] == "too_many_runs_per_hour"
        assert problem["detail"].startswith("runs_per_hour: at most 2 runs per hour; ")
        assert 60 < int(headers["Retry-After"]) <= HOUR_S  # the hour's oldest run leaves
        await start_run(client, "beta")  # another tenant is not counted with acme
    daily = TenantCaps(runs_per_hour=5, runs_per_day=1)
    async with serve(tmp_path / "daily", server_index, tenants=_tenants(daily)) as client:
        await start_run(client, "acme")
        status, problem, headers = await _post_run(client, "acme")
        assert status == 429 and problem["code"] == "too_many_runs_per_day"
        assert problem["detail"].startswith("runs_per_day: at most 1 runs per day; ")
        assert HOUR_S < int(headers["Retry-After"]) <= DAY_S


class _Clock:
    """Monotonic seconds a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _tenant(caps: TenantCaps) -> Tenant:
    return Tenant("acme", TenantConfig(caps=caps, runs_per_minute=1000))


def test_a_window_frees_its_slot_when_its_oldest_start_leaves_it() -> None:
    clock = _Clock()
    quotas = Quotas(clock)
    acme = _tenant(TenantCaps(runs_per_hour=2))
    quotas.admit(acme.name, acme.config)
    clock.now += 600
    quotas.admit(acme.name, acme.config)
    for _ in range(2):
        quotas.release("acme")
    with pytest.raises(RateLimited) as refused:
        quotas.admit(acme.name, acme.config)
    assert refused.value.retry_after_s == 3000  # the first start leaves the hour then
    clock.now += 2999
    with pytest.raises(RateLimited):
        quotas.admit(acme.name, acme.config)
    clock.now += 1
    quotas.admit(acme.name, acme.config)


def test_tokens_per_day_frees_when_enough_tokens_have_left_the_day() -> None:
    clock = _Clock()
    quotas = Quotas(clock)
    acme = _tenant(TenantCaps(tokens_per_day=100))
    quotas.charge("acme", 60)
    clock.now += 3600
    quotas.charge("acme", 50)
    with pytest.raises(RateLimited) as refused:
        quotas.admit(acme.name, acme.config)
    assert refused.value.code == "too_many_tokens_per_day"
    assert "used 110 model tokens in the last 24 h, the quota is 100" in refused.value.detail
    wait = refused.value.retry_after_s  # when the 60 leave, 50 < 100 are left
    assert wait == DAY_S - 3600  # the 60 leave the day 24 h after they were used
    clock.now += wait
    quotas.admit(acme.name, acme.config)
    quotas.charge("beta", 10**9)  # another tenant's tokens are its own
    quotas.release("acme")
    quotas.admit(acme.name, acme.config)


# --- tokens per day, from a chat model's reported usage ----------------------------------------


def _completion(call_id: str, tool: str, args: dict[str, Any]) -> JsonBody:
    return JsonBody({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "planner-model",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": tool, "arguments": json.dumps(args)}}]}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 6, "total_tokens": 46},
    })


@asynccontextmanager
async def _serve_toml(tmp_path: Path, index: CorpusIndex, toml: str,
                      env: dict[str, str]) -> AsyncIterator[Client]:
    path = tmp_path / "server.toml"
    path.write_text(f'default_collections = ["demo"]\nstore = "{tmp_path / "runs.db"}"\n'
                    + toml)
    app = create_app(ServerConfig.load(path, env=env), engine=Engine(index), env=env)
    async with TestClient(TestServer(app, host="127.0.0.1"),
                          connector=TCPConnector(limit=0)) as client:
        yield client


async def test_tokens_per_day_counts_what_the_model_reported_for_that_tenant_only(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    tokens = {"chat": "chat-token-1", "offline": "offline-token-2"}
    async with fake_openai() as model:
        model.check_history = False
        model.script(_completion("c1", "search", {"query": "Bayer founded Barmen"}),
                     *[_completion(f"a{i}", "answer", {}) for i in range(4)])
        toml = (f'[tenants.chat]\ntoken_sha256 = ["{hash_token(tokens["chat"])}"]\n'
                'collections = ["demo"]\n'
                f'[tenants.chat.chat]\nurl = "{model.base_url}"\nmodel = "planner-model"\n'
                'quirks = "llama-cpp-python"\nroles = ["planner"]\ntimeout_s = 10\n'
                "[tenants.chat.caps]\ntokens_per_day = 50\n"
                f'[tenants.offline]\ntoken_sha256 = ["{hash_token(tokens["offline"])}"]\n'
                'collections = ["demo"]\n[tenants.offline.caps]\ntokens_per_day = 50\n')
        async with _serve_toml(tmp_path, server_index, toml, env={}) as client:
            chat = {"Authorization": f"Bearer {tokens['chat']}"}
            first = await client.post("/v1/runs", json={"question": QUESTION}, headers=chat)
            assert first.status == 201, await first.text()
            run_id = (await first.json())["run_id"]
            async with client.get(f"/v1/runs/{run_id}/events", headers=chat) as resp:
                events = (await read_sse(resp)).events
            calls = len(model.requests)
            refused = await client.post("/v1/runs", json={"question": QUESTION}, headers=chat)
            problem = await refused.json()
            retry_after = int(refused.headers.get("Retry-After", "0"))
            async with AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=tokens["chat"],
                                   max_retries=0) as oai:
                with pytest.raises(openai.RateLimitError) as chat_refused:
                    await oai.chat.completions.create(
                        model="reactive-rag", messages=[{"role": "user", "content": QUESTION}])
            offline = {"Authorization": f"Bearer {tokens['offline']}"}
            for _ in range(2):  # offline runs report no tokens: never over 50
                again = await client.post("/v1/runs", json={"question": QUESTION},
                                          headers=offline)
                assert again.status == 201, await again.text()
        gc.collect()
    reported = [e.data["tokens"] for e in events if e.event == "plan.decided"]
    assert calls >= 2 and sum(reported) == 46 * calls  # what the fake server said it used
    assert refused.status == 429 and problem["code"] == "too_many_tokens_per_day"
    assert problem["detail"].startswith(
        f"tokens_per_day: this tenant's runs used {46 * calls} model tokens in the last 24 h, "
        "the quota is 50; ")
    assert HOUR_S < retry_after <= DAY_S
    assert chat_refused.value.status_code == 429
    assert chat_refused.value.code == "too_many_tokens_per_day"
    assert "tokens_per_day" in chat_refused.value.message
    assert chat_refused.value.response.headers["Retry-After"]


# --- the other faces ---------------------------------------------------------------------------


async def test_the_openai_face_refuses_a_budget_over_a_cap_in_its_own_error_shape(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=_tenants(_guide_caps())) as client, \
            AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=TOKENS["acme"],
                        max_retries=0) as oai:
        with pytest.raises(openai.UnprocessableEntityError) as refused:
            await oai.chat.completions.create(
                model="reactive-rag", messages=[{"role": "user", "content": QUESTION}],
                extra_body={"budget": {"max_tool_calls": 21}})
        at_cap = await oai.chat.completions.create(
            model="reactive-rag", messages=[{"role": "user", "content": QUESTION}],
            extra_body={"budget": {"max_tool_calls": 20}})
    body = refused.value.body
    assert isinstance(body, dict)
    assert body["code"] == "budget_over_cap" and body["param"] == "budget.max_tool_calls"
    assert body["message"] == ("max_tool_calls 21 is over this tenant's cap of 20 "
                               "(caps.max_tool_calls)")
    assert at_cap.choices[0].message.content


@asynccontextmanager
async def _serve_mcp(tmp_path: Path, index: CorpusIndex,
                     tenants: dict[str, TenantConfig]) -> AsyncIterator[Client]:
    """The API and ``/mcp``, as ``reactive-rag serve`` mounts them."""
    config = ServerConfig(store=str(tmp_path / "runs.db"), tenants=tenants,
                          default_collections=("demo",))
    app = create_app(config, engine=Engine(index))
    mount_mcp(app)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


@asynccontextmanager
async def _mcp(client: Client, tenant: str) -> AsyncIterator[ClientSession]:
    async with httpx2.AsyncClient(headers=auth(tenant), timeout=60) as http, \
            streamable_http_client(str(client.make_url("/mcp")), http_client=http) as (r, w), \
            ClientSession(r, w) as session:
        await session.initialize()
        yield session


def _text(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def test_the_mcp_research_tool_is_refused_by_the_same_caps_and_quotas(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    caps = _guide_caps().model_copy(update={"runs_per_hour": 1})
    async with _serve_mcp(tmp_path, server_index, _tenants(caps)) as client, \
            _mcp(client, "acme") as session:
        over = await session.call_tool("research", {"question": QUESTION,
                                                    "budget": {"wall_s": 1e6}})
        ran = await session.call_tool("research", {"question": QUESTION,
                                                   "budget": {"wall_s": 120.0}})
        limited = await session.call_tool("research", {"question": QUESTION})
        async with _mcp(client, "beta") as other:
            theirs = await other.call_tool("research", {"question": QUESTION})
    assert over.is_error
    assert "wall_s 1000000 is over this tenant's cap of 120 (caps.wall_s)" in _text(over)
    assert not ran.is_error and ran.structured_content is not None
    assert ran.structured_content["budget"]["wall_s"] == 120
    assert limited.is_error and "runs_per_hour: at most 1 runs per hour" in _text(limited)
    assert not theirs.is_error, _text(theirs)


async def test_an_a2a_message_is_refused_by_the_same_caps_and_quotas(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    caps = _guide_caps().model_copy(update={"runs_per_hour": 1})
    async with a2a_serve(tmp_path, server_index, tenants=_tenants(caps)) as server, \
            a2a_client(server, TOKENS["acme"], streaming=False) as client:
        with pytest.raises(InvalidParamsError,
                           match=re.escape("max_steps 21 is over this tenant's cap of 20 "
                                           "(caps.max_steps)")):
            await a2a_collect(client.send_message(a2a_ask(budget={"max_steps": 21})))
        [ran] = await a2a_collect(client.send_message(a2a_ask()))
        with pytest.raises(A2AClientError, match=r"429: .*runs_per_hour: at most 1 runs per hour"):
            await a2a_collect(client.send_message(a2a_ask()))
    assert ran.task.id
