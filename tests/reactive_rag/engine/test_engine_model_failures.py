"""A model server that fails mid-run: every failure has a reason a user can read, and a fallback.

A local OpenAI-shaped server (the real streaming protocol) plays each failure: the
planner rate-limited past the run's budget, the writer down, the sufficiency judge
and the support judge down. The run goes on with the offline part that stands in,
and its outcome says which and why; nothing ends with an empty reason or a bare
exception name.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from actors.models import OpenAIChatClient
from reactive_rag import RunResult
from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement.model import ChatPlanner, ChatSufficiency, ChatSupportJudge, ChatWriter
from streams import AnswerabilityJudged, AnswerDelta, AnswerDrafted, AnswerVerified, RunFallback
from tests.actors._openai_fixtures import FakeOpenAI, JsonBody, Status, fake_openai, stream_reply

QUESTION = "When was Bayer founded?"


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    async with fake_openai() as fake:
        yield fake


def _claims(*claims: tuple[str, str, str], answer: int | None = None) -> str:
    return json.dumps({"claims": [{"statement": s, "source_id": i, "quote": q,
                                   "answers": n == answer}
                                  for n, (s, i, q) in enumerate(claims)]})


def _json(content: str) -> JsonBody:
    return JsonBody({"id": "x", "object": "chat.completion", "model": "fake",
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": content}}],
                     "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


_GOOD = ("Bayer was founded in 1863.", "bayer#0", "Bayer was founded in Barmen in 1863")
_DOWN = Status(500, '{"error": {"message": "model crashed"}}')


async def _ask(index: CorpusIndex, server: FakeOpenAI, *, sufficiency: bool = False,
               judge: bool = False) -> RunResult:
    """One run with the chat planner and writer, and the model judges asked for."""
    client = OpenAIChatClient(server.base_url, model="fake", max_retries=0)
    engine = Engine(index, planner=lambda: ChatPlanner(client), writer=lambda: ChatWriter(client),
                    sufficiency=ChatSufficiency(client) if sufficiency else None,
                    entailment=ChatSupportJudge(client) if judge else None)
    try:
        return await engine.ask(QUESTION, collections=["demo"])
    finally:
        await client.aclose()


async def test_a_writer_outage_is_answered_by_the_offline_writer_and_said_so(
        index: CorpusIndex, server: FakeOpenAI) -> None:
    server.script(
        stream_reply(tool_calls=[("c1", "search", '{"query": "Bayer founded"}')]),
        stream_reply(tool_calls=[("c2", "answer", "{}")]),
        _DOWN,
    )
    result = await _ask(index, server)
    assert result.outcome == "answered", result.reason
    reason = result.reason
    assert "offline extractive writer" in reason and "HTTP 500" in reason
    drafted = [e for e in result.events if isinstance(e, AnswerDrafted)]
    assert drafted[0].fallback is not None and drafted[0].fallback.role == "writer"


async def test_a_planner_rate_limited_beyond_the_budget_falls_back_at_once_with_the_reason(
        index: CorpusIndex, server: FakeOpenAI) -> None:
    server.script(
        Status(429, '{"error": {"message": "slow down"}}', headers={"Retry-After": "600"}),
        stream_reply(_claims(_GOOD, answer=0)),
    )
    client = OpenAIChatClient(server.base_url, model="fake", max_retries=3)
    engine = Engine(index, planner=lambda: ChatPlanner(client), writer=lambda: ChatWriter(client))
    try:
        result = await engine.ask(QUESTION, collections=["demo"])
    finally:
        await client.aclose()
    (fallback,) = [e for e in result.events if isinstance(e, RunFallback)]
    assert fallback.error is not None and fallback.error.status == 429
    assert fallback.error.retry_after_s == 600.0 and fallback.error.role == "planner"
    assert "HTTP 429" in fallback.reason and "600 s" in fallback.reason
    assert len([r for r in server.requests if "tools" in r]) == 1, "no retry past the budget"
    assert result.outcome == "answered", result.reason
    assert "fell back to one-shot retrieval" in result.reason


async def test_the_model_judges_sufficiency_and_its_outage_lets_the_rules_stand_in(
        index: CorpusIndex, server: FakeOpenAI) -> None:
    verdict = {"verdict": "answerable", "answer_type": "when", "covered": ["Bayer", "founded"],
               "missing": [], "searches": [], "reason": "the passage gives the year",
               "conflicts": []}
    server.script(
        stream_reply(tool_calls=[("c1", "search", '{"query": "Bayer founded"}')]),
        stream_reply(tool_calls=[("c2", "answer", "{}")]),
        _json(json.dumps(verdict)),
        stream_reply(_claims(_GOOD, answer=0)),
    )
    result = await _ask(index, server, sufficiency=True)
    assert result.outcome == "answered", result.reason
    (judged,) = [e for e in result.events if isinstance(e, AnswerabilityJudged)]
    assert judged.by == "model" and judged.reason == "the passage gives the year"
    asked = [r for r in server.requests
             if (r.get("response_format") or {}).get("json_schema", {}).get("name")
             == "answerability"]
    assert len(asked) == 1 and "Question: " + QUESTION in asked[0]["messages"][-1]["content"]

    server.requests.clear()
    server.script(
        stream_reply(tool_calls=[("c1", "search", '{"query": "Bayer founded"}')]),
        stream_reply(tool_calls=[("c2", "answer", "{}")]),
        _DOWN,
        stream_reply(_claims(_GOOD, answer=0)),
    )
    result = await _ask(index, server, sufficiency=True)
    (judged,) = [e for e in result.events if isinstance(e, AnswerabilityJudged)]
    assert judged.by == "offline" and judged.fallback is not None
    assert judged.fallback.status == 500
    assert result.outcome == "answered", result.reason
    assert "sufficiency judged offline" in result.reason


async def test_a_support_judge_outage_never_fails_the_draft(
        index: CorpusIndex, server: FakeOpenAI) -> None:
    server.script(
        stream_reply(tool_calls=[("c1", "search", '{"query": "Bayer founded"}')]),
        stream_reply(tool_calls=[("c2", "answer", "{}")]),
        stream_reply(_claims(_GOOD, answer=0)),
        _DOWN,
    )
    result = await _ask(index, server, judge=True)
    assert result.outcome == "answered", result.reason
    (verified,) = [e for e in result.events if isinstance(e, AnswerVerified)]
    assert verified.judged_by == "offline" and verified.judge_fallback is not None
    assert "offline support rules" in result.reason


async def test_only_verified_claims_are_streamed_and_a_dropped_one_is_an_event(
        index: CorpusIndex, server: FakeOpenAI) -> None:
    invented = ("Bayer began in 1900.", "bayer#0", "Bayer was founded in 1900")
    twin = ("Bayer was set up in Barmen.", "bayer#0", "Bayer was founded in Barmen in 1863")
    server.script(
        stream_reply(tool_calls=[("c1", "search", '{"query": "Bayer founded"}')]),
        stream_reply(tool_calls=[("c2", "answer", "{}")]),
        stream_reply(_claims(_GOOD, twin, invented, answer=0)),
    )
    result = await _ask(index, server)
    assert result.outcome == "answered", result.reason
    deltas = "".join(e.text for e in result.events if isinstance(e, AnswerDelta))
    assert "1900" not in deltas and "1863" in deltas
    (verified,) = [e for e in result.events if isinstance(e, AnswerVerified)]
    assert [(e.index, e.kind) for e in verified.errors] == [(2, "quote_not_found")]
    assert verified.answer_index == 0


async def test_a_chinese_question_the_model_finds_answered_is_not_vetoed_by_the_rules(
        tmp_path: Path, server: FakeOpenAI) -> None:
    from actors.models import HashingEmbedder
    from reactive_rag.index import Document

    index = CorpusIndex(tmp_path / "zh", HashingEmbedder())
    text = "拜耳公司于1863年在巴门创立。公司总部位于勒沃库森。"
    index.index_documents("zh", [Document(id="bayer", title="拜耳", text=text)])
    question = "拜耳公司是哪一年创立的\uff1f"
    verdict = {"verdict": "answerable", "answer_type": "when", "covered": ["拜耳", "创立"],
               "missing": [], "searches": [], "reason": "段落给出了年份", "conflicts": []}
    claims = {"claims": [{"statement": "拜耳公司创立于1863年。", "source_id": "bayer#0",
                          "quote": "拜耳公司于1863年在巴门创立", "answers": True}]}
    server.script(
        stream_reply(tool_calls=[("c1", "search", json.dumps({"query": "拜耳 创立"}))]),
        stream_reply(tool_calls=[("c2", "answer", "{}")]),
        _json(json.dumps(verdict, ensure_ascii=False)),
        stream_reply(json.dumps(claims, ensure_ascii=False)),
        _json(json.dumps({"verdicts": [{"claim": 0, "label": "supported", "reason": ""}]})),
    )
    client = OpenAIChatClient(server.base_url, model="fake", max_retries=0)
    engine = Engine(index, planner=lambda: ChatPlanner(client), writer=lambda: ChatWriter(client),
                    sufficiency=ChatSufficiency(client), entailment=ChatSupportJudge(client))
    try:
        result = await engine.ask(question, collections=["zh"])
    finally:
        await client.aclose()
    (judged,) = [e for e in result.events if isinstance(e, AnswerabilityJudged)]
    assert judged.by == "model" and judged.verdict == "answerable"
    assert result.outcome == "answered", result.reason
    assert "1863" in result.answer
