"""``bench/chatqa.py`` and its scripted model (``bench/_scripted_model.py``).

The scripted server is what issue 25's figures rest on, so its behaviour is
checked through the library's real chat client: an honest model (it follows a
bridge it was shown, paraphrases, quotes verbatim, judges honestly) and each
fault mode as a client sees it. The bench itself runs end to end on two rows
of the shared HotpotQA file (skipped where that file is absent).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from actors.models import (
    ChatConnectionError,
    ChatError,
    ChatRateLimited,
    ChatRequest,
    ChatServerError,
    ChatTimeout,
    OpenAIChatClient,
    function_tool,
)
from tests._bench import bench_module

REPO = Path(__file__).resolve().parents[3]
DATA = Path(os.environ.get("REACTIVE_RAG_DATA") or REPO.parent / "shared" / "data") \
    / "hotpotqa_dev_300.jsonl"

sm: ModuleType = bench_module("_scripted_model")

# invented rows: the answer is in the bridge paragraph, which the first paragraph names
QUESTION = "Which river flows through the town where the Brindlecombe clock tower stands?"
PASSAGES = [
    sm.Passage("Brindlecombe clock tower#0", "Brindlecombe clock tower",
               "The Brindlecombe clock tower is a stone tower built in 1911. It stands in the "
               "market square of Ashwick (town), which was then a wool town."),
    sm.Passage("Ashwick (town)#0", "Ashwick (town)",
               "Ashwick is a small town in the United States. The river Quenby flows through "
               "Ashwick, and its television mast is on the hill."),
    sm.Passage("Moresk#0", "Moresk", "Moresk is a harbour town known for its slate roofs."),
]
ROW = sm.Row(QUESTION, ("Quenby",), ("Ashwick (town)", "Brindlecombe clock tower"))
TOOLS = [function_tool(name, name, {"type": "object", "properties": {
    "query": {"type": "string"}}}) for name in ("search", "read", "answer")]


def shown(*passages: Any) -> str:
    return "\n".join(f"[{n}] [{p.id}] {p.title} (score 0.80)\n{p.text}"
                     for n, p in enumerate(passages, 1))


async def serve(fault: str = "none") -> tuple[Any, Any]:
    model = sm.ScriptedModel(PASSAGES, [ROW], fault=fault)
    server = sm.ScriptedServer(model)
    await server.start()
    return model, server


@pytest.fixture
async def healthy() -> AsyncIterator[tuple[Any, OpenAIChatClient]]:
    model, server = await serve()
    client = OpenAIChatClient(server.url, model="scripted", timeout_s=5.0)
    try:
        yield model, client
    finally:
        await client.aclose()
        await server.stop()


def planner_request(*history: dict[str, Any]) -> ChatRequest:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are the planner of a research agent."},
        {"role": "user", "content": f"Question: {QUESTION}"}, *history]
    return ChatRequest(messages, tools=TOOLS, tool_choice="auto")


def searched(query: str, call_id: str, result: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": None, "tool_calls": [{
                "id": call_id, "type": "function",
                "function": {"name": "search", "arguments": json.dumps({"query": query})}}]},
            {"role": "tool", "tool_call_id": call_id, "content": result}]


def writer_request(max_tokens: int) -> ChatRequest:
    user = f"Question: {QUESTION}\n\nEvidence:\n{shown(*PASSAGES)}"
    return ChatRequest([{"role": "system", "content": sm.WRITER_SYSTEM + ". Reply with JSON."},
                        {"role": "user", "content": user}],
                       max_tokens=max_tokens, response_format={"type": "json_object"})


async def test_the_planner_searches_then_follows_the_bridge_it_was_shown_then_answers(
        healthy: tuple[Any, OpenAIChatClient]) -> None:
    _, client = healthy
    first = await client.complete(planner_request())
    assert [(c.name, json.loads(c.arguments_json)) for c in first.tool_calls] == [
        ("search", {"query": QUESTION})]
    # shown only the tower's paragraph, which names the town: it searches the town
    history = searched(QUESTION, "c1", shown(PASSAGES[0], PASSAGES[2]))
    second = await client.complete(planner_request(*history))
    assert [json.loads(c.arguments_json)["query"] for c in second.tool_calls] == ["Ashwick"]
    history += searched("Ashwick", "c2", shown(PASSAGES[1]))
    third = await client.complete(planner_request(*history))
    assert [c.name for c in third.tool_calls] == ["answer"]
    assert first.usage.prompt > 0 and not first.usage.estimated


async def test_a_gold_paragraph_no_shown_passage_names_is_never_searched(
        healthy: tuple[Any, OpenAIChatClient]) -> None:
    _, client = healthy
    history = searched(QUESTION, "c1", shown(PASSAGES[2]))  # only the unrelated paragraph
    reply = await client.complete(planner_request(*history))
    queries = [json.loads(c.arguments_json).get("query", "") for c in reply.tool_calls]
    assert queries and all("Ashwick" not in q for q in queries)
    assert QUESTION not in queries  # never the same search twice


async def test_the_writer_quotes_verbatim_paraphrases_and_marks_the_answer(
        healthy: tuple[Any, OpenAIChatClient]) -> None:
    model, client = healthy
    result = await client.complete(writer_request(max_tokens=1000))
    assert result.finish_reason == "stop"
    claims = json.loads(result.content)["claims"]
    texts = {p.id: p.text for p in PASSAGES}
    assert claims and all(c["quote"] in texts[c["source_id"]] for c in claims)
    answering = [c for c in claims if c["answers"]]
    assert len(answering) == 1 and "Quenby" in answering[0]["statement"]
    assert any(c["statement"] != c["quote"] for c in claims)
    assert any("US" in c["statement"] or "TV" in c["statement"] for c in claims)
    assert all(model.supported(c["statement"], c["quote"], c["source_id"])[0] for c in claims)


async def test_the_support_judge_is_honest(healthy: tuple[Any, OpenAIChatClient]) -> None:
    model, client = healthy
    claims = json.loads((await client.complete(writer_request(1000))).content)["claims"]
    good = claims[0]
    lines = [f"Question: {QUESTION}"]
    for i, (statement, cited, quote) in enumerate([
            (good["statement"], good["source_id"], good["quote"]),
            (good["statement"], "Moresk#0", good["quote"])]):  # a quote not in that passage
        lines += [f"Claim {i}: {statement}", f"Cites: [{cited}] x", f"Quote: {quote}",
                  "Passage: ..."]
    schema = {"type": "json_schema", "json_schema": {"name": "support", "strict": True,
                                                     "schema": {"type": "object"}}}
    reply = await client.complete(ChatRequest([{"role": "user", "content": "\n".join(lines)}],
                                              response_format=schema, stream=False))
    labels = [v["label"] for v in json.loads(reply.content)["verdicts"]]
    assert labels == ["supported", "unsupported"]
    assert [c.role for c in model.calls] == ["writer", "support"]


async def test_a_rate_limited_planner_says_when_to_come_back() -> None:
    model, server = await serve("planner_429")
    try:
        async with OpenAIChatClient(server.url, model="scripted", timeout_s=5.0) as client:
            with pytest.raises(ChatRateLimited) as caught:
                await client.complete(planner_request())
        assert caught.value.retry_after == 60.0 and caught.value.status == 429
        assert [(c.role, c.status) for c in model.calls] == [("planner", 429)]  # 60 s > deadline
    finally:
        await server.stop()


async def test_a_stalled_planner_times_out_and_a_cut_stream_is_not_retried() -> None:
    _, server = await serve("planner_stall")
    try:
        async with OpenAIChatClient(server.url, model="scripted", timeout_s=0.5,
                                    max_retries=0) as client:
            with pytest.raises(ChatTimeout):
                await client.complete(planner_request())
    finally:
        await server.stop()  # wakes the stalled handler
    model, server = await serve("planner_cut")
    try:
        async with OpenAIChatClient(server.url, model="scripted", timeout_s=5.0) as client:
            with pytest.raises(ChatError) as caught:
                await client.complete(planner_request())
        assert isinstance(caught.value, ChatConnectionError) and caught.value.streamed
        assert not caught.value.retryable and len(model.calls) == 1
    finally:
        await server.stop()


async def test_prose_first_then_tool_calls() -> None:
    _, server = await serve("planner_prose")
    try:
        async with OpenAIChatClient(server.url, model="scripted", timeout_s=5.0) as client:
            prose = await client.complete(planner_request())
            assert prose.content.startswith("I will search for") and not prose.tool_calls
            retry = await client.complete(planner_request(
                {"role": "assistant", "content": prose.content},
                {"role": "user", "content": "Call one of the tools."}))
            assert [c.name for c in retry.tool_calls] == ["search"]
    finally:
        await server.stop()


async def test_a_cut_writer_reply_is_whole_only_once_max_tokens_grows() -> None:
    _, server = await serve("writer_cut")
    try:
        async with OpenAIChatClient(server.url, model="scripted", timeout_s=5.0) as client:
            first = await client.complete(writer_request(max_tokens=300))
            same = await client.complete(writer_request(max_tokens=300))
            larger = await client.complete(writer_request(max_tokens=600))
        assert first.finish_reason == same.finish_reason == "length"
        with pytest.raises(ValueError):
            json.loads(first.content)
        assert larger.finish_reason == "stop" and json.loads(larger.content)["claims"]
    finally:
        await server.stop()


async def test_outages_are_http_500() -> None:
    for fault, request in (("writer_outage", writer_request(500)),
                           ("judge_outage", ChatRequest(
                               [{"role": "user", "content": f"Question: {QUESTION}"}],
                               response_format={"type": "json_schema", "json_schema": {
                                   "name": "support", "schema": {}}}, stream=False))):
        _, server = await serve(fault)
        try:
            async with OpenAIChatClient(server.url, model="scripted", timeout_s=5.0,
                                        max_retries=0) as client:
                with pytest.raises(ChatServerError) as caught:
                    await client.complete(request)
            assert caught.value.status == 500
        finally:
            await server.stop()


def test_paraphrase_keeps_the_answer_and_numbers() -> None:
    out = sm.paraphrase("In 1911, the United States television company (a firm) began to "
                        "air the film Quenby Days.", ["Quenby Days"])
    assert out == "The US TV company started to air the movie Quenby Days in 1911."
    assert sm.paraphrase("He was born in 1870.", subject="Ann Lee") == "Ann Lee was born in 1870."


@pytest.mark.slow
@pytest.mark.skipif(not DATA.is_file(), reason=f"no HotpotQA data at {DATA}")
def test_the_bench_runs_and_ends_with_its_json_figures(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chatqa = bench_module("chatqa")
    code = chatqa.main(["--data", str(DATA), "--split", "tune", "--n", "2", "--corpus", "rows",
                        "--root", str(tmp_path), "--fault-rows", "1",
                        "--faults", "planner_429,writer_outage", "--json"])
    assert code == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for key in ("n", "answered_rate", "answer_contains_gold", "correct_claims_dropped_rate",
                "answered_with_answer_dropped", "judge_answer_contains_gold",
                "judge_correct_claims_dropped_rate", "degraded_with_evidence",
                "faults_without_reason", "fallback_silent", "model_calls_per_run",
                "prompt_tokens_per_run", "judge_calls_per_draft"):
        assert key in figures, key
    assert figures["n"] == 2 and figures["fault_runs"] == 2
    for key in ("answered_rate", "answer_contains_gold", "correct_claims_dropped_rate",
                "judge_answer_contains_gold", "judge_correct_claims_dropped_rate"):
        assert 0.0 <= figures[key] <= 1.0, key
    assert figures["model_calls_per_run"] >= 2  # a planner turn and a write at least
    assert figures["prompt_tokens_per_run"] > 0 and figures["judge_calls_per_draft"] > 0
    assert set(figures["faults"]) == {"planner_429", "writer_outage"}
