"""``Engine.from_config``: web search and a chat model from the CLI's and server's schemas.

The web is the local fake of the search APIs and the chat model the local fake
OpenAI server, both on 127.0.0.1; configs are TOML files as a user writes them.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest

from reactive_rag import Engine, EngineConfig, RunConfigError, load_engine_config
from reactive_rag.index import CorpusIndex
from streams import RunFinished, SearchCompleted, SearchRequested
from tests.actors._openai_fixtures import JsonBody, fake_openai
from tests.actors._web_fixtures import Result, fake_web

LIGHTHOUSE = Result(url="https://lighthouses.example/zephyr-point",
                    title="Zephyr Point lighthouse",
                    snippet="The Zephyr Point lighthouse was built in 1871 by the engineer "
                            "Ada Quill on the northern cape.")


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


async def test_a_config_file_gives_the_engine_web_search_and_a_chat_planner(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with fake_web() as web_api, fake_openai() as model:
        web_api.results["searxng"] = [LIGHTHOUSE]
        model.check_history = False  # llama-cpp-python quirks: results come back as user text
        model.script(_completion("c1", "search", {"query": "Zephyr Point lighthouse built"}),
                     *[_completion(f"a{i}", "answer", {}) for i in range(4)])
        config = tmp_path / "engine.toml"
        config.write_text(f"""
[search]
max_results = 5
[search.providers.searxng]
base_url = "{web_api.url('searxng')}"
timeout_s = 5

[chat]
url = "{model.base_url}"
model = "planner-model"
api_key_env = "MY_CHAT_KEY"
quirks = "llama-cpp-python"
roles = ["planner"]
timeout_s = 10
""")
        engine = Engine.from_config(config, index=server_index, env={"MY_CHAT_KEY": "sk-1"})
        try:
            result = await engine.start("Who built the Zephyr Point lighthouse?",
                                        collections=["demo"]).wait()
        finally:
            await engine.aclose()
        gc.collect()  # an unclosed provider or chat session would warn (an error here)
    assert result.outcome == "answered", result.reason
    queries = [e.query for e in result.events if isinstance(e, SearchRequested)]
    assert "Zephyr Point lighthouse built" in queries  # the model's tool call
    assert any("searxng" in e.providers for e in result.events
               if isinstance(e, SearchCompleted))
    assert any(c.chunk is not None and c.chunk.url == LIGHTHOUSE.url for c in result.citations)
    assert web_api.requests["searxng"] >= 1
    assert {r["model"] for r in model.requests} == {"planner-model"}
    assert all(h.get("Authorization") == "Bearer sk-1" for h in model.headers)
    assert all(r["stream"] is False for r in model.requests)  # the quirks reached the planner


def test_a_server_config_is_read_for_one_tenant(tmp_path: Path) -> None:
    path = tmp_path / "server.toml"
    path.write_text("""
port = 8080
[tenants.acme]
token_sha256 = []
[tenants.acme.search.providers.searxng]
base_url = "http://127.0.0.1:9"
[tenants.acme.chat]
url = "http://127.0.0.1:8000/v1"
model = "m"
[entailment]
url = "http://127.0.0.1:8001/v1"
""")
    config = load_engine_config(path, tenant="acme")
    assert isinstance(config, EngineConfig)
    assert config.search is not None and "searxng" in config.search.providers
    assert config.chat is not None and config.chat.model == "m"
    assert config.entailment is not None
    with pytest.raises(RunConfigError, match=r"no \[tenants\.globex\] table"):
        load_engine_config(path, tenant="globex")
    open_server = {"port": 8080, "open_tenant": {"chat": {"url": "http://127.0.0.1:8000/v1"}}}
    assert load_engine_config(open_server).chat is not None  # the one open `default` tenant


def test_without_a_config_it_reads_what_the_cli_reads_from_the_environment() -> None:
    env = {"REACTIVE_RAG_SEARXNG_URL": "http://127.0.0.1:9",
           "REACTIVE_RAG_CHAT_URL": "http://127.0.0.1:8000/v1",
           "REACTIVE_RAG_CHAT_MODEL": "qwen"}
    config = load_engine_config(None, env=env)
    assert config.search is not None and "searxng" in config.search.providers
    assert config.chat is not None and config.chat.model == "qwen"
    assert load_engine_config(None, env={}) == EngineConfig()  # offline, as `ask` is


@pytest.mark.parametrize(("body", "env", "message"), [
    ('[search.providers.bing]\nbase_url = "http://127.0.0.1:9"\n', {},
     r"\[search\]: unknown provider kind 'bing'"),
    ('[search.providers.brave]\napi_key_env = "MY_BRAVE_KEY"\n', {},
     r"\[search\]: brave: api key environment variable MY_BRAVE_KEY is not set"),
    ("[search.providers.searxng]\ntimeout_s = 3\n", {},
     r"\[search\]: searxng: no base_url configured"),
    ('[chat]\nurl = "127.0.0.1:8000/v1"\n', {}, r"chat\.url: .*not an http\(s\) URL"),
    ('[chat]\nurl = "http://127.0.0.1:8000/v1"\napi_key_env = "MY_CHAT_KEY"\n', {},
     r"\[chat\]: api key environment variable MY_CHAT_KEY is not set"),
    ('[chat]\nurl = "http://127.0.0.1:8000/v1"\napi_key = "sk-secret"\n', {},
     r"name that variable in api_key_env"),
    ("[planner]\nurl = 1\n", {}, r"invalid engine config at planner"),
    ("[search\n", {}, r"not valid TOML"),
])
def test_a_config_that_cannot_work_is_refused_before_any_network_call(
        tmp_path: Path, index: CorpusIndex, body: str, env: dict[str, str],
        message: str) -> None:
    path = tmp_path / "engine.toml"
    path.write_text(body)
    with pytest.raises(RunConfigError, match=message):
        Engine.from_config(path, index=index, env=env)


def test_a_mapping_works_like_a_file_and_options_reach_the_engine(index: CorpusIndex) -> None:
    engine = Engine.from_config({}, index=index, judge=None)
    assert engine.index is index and "sufficiency" not in engine.settings().judgement
    assert engine._web is None and engine._planner is None


async def test_an_offline_engine_from_config_still_answers(index: CorpusIndex) -> None:
    engine = Engine.from_config({}, index=index)
    result = await engine.start("Who isolated aspirin?", collections=["demo"]).wait()
    assert isinstance(result.events[-1], RunFinished) and result.outcome == "answered"
