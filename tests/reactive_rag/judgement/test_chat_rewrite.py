"""ChatRewriter over a local OpenAI-shaped server: follow-ups read by the model, typed failures."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from actors.models import OpenAIChatClient
from reactive_rag.conversation import SessionState, aprepare_turn
from reactive_rag.judgement import Turn
from reactive_rag.judgement.model import (
    FOLLOWUP_SCHEMA,
    SUMMARY_SCHEMA,
    ChatRewriter,
    RewriteError,
)
from reactive_rag.judgement.offline import rewrite_followup
from tests.actors._openai_fixtures import FakeOpenAI, JsonBody, Status

from ._schemas import strict_problems

PRINTER = Turn(run_id="run-printer", question="What does error E13 on my LaserJet mean?",
               standalone="What does error E13 on my LaserJet mean?", outcome="answered",
               answer="E13 on a LaserJet means a paper jam in the rear tray. False alarms "
                      "are rare.")
FOLLOW_UP = "How do I clear it?"


def completion(content: str | dict[str, Any], finish: str = "stop") -> JsonBody:
    text = content if isinstance(content, str) else json.dumps(content)
    return JsonBody({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "rewriter",
        "choices": [{"index": 0, "finish_reason": finish,
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 20, "total_tokens": 60},
    })


JAM = completion({"standalone": "How do I clear the paper jam in the LaserJet's rear tray?",
                  "references": [{"reference": "it", "meaning": "the paper jam"}]})


@pytest.fixture
async def rewriter(server: FakeOpenAI) -> AsyncIterator[ChatRewriter]:
    client = OpenAIChatClient(server.base_url, model="rewriter", max_retries=0)
    try:
        yield ChatRewriter(client, max_tokens=64)
    finally:
        await client.aclose()


def test_the_schemas_are_valid_in_openai_strict_mode() -> None:
    assert strict_problems(FOLLOWUP_SCHEMA) == []
    assert strict_problems(SUMMARY_SCHEMA) == []


async def test_it_is_read_from_the_turns_the_model_is_shown(
        server: FakeOpenAI, rewriter: ChatRewriter) -> None:
    server.script(JAM)
    rewrite = await rewriter.rewrite(FOLLOW_UP, [PRINTER])
    assert rewrite.standalone == "How do I clear the paper jam in the LaserJet's rear tray?"
    assert rewrite.resolved == {"it": "the paper jam"}
    assert rewrite.turns == ("run-printer",) and rewrite.changed
    # the rules, for comparison, do not get there
    assert "paper jam" not in rewrite_followup(FOLLOW_UP, [PRINTER]).standalone
    body = server.requests[0]
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "followup_rewrite"
    assert fmt["json_schema"]["strict"] is True
    user = body["messages"][-1]["content"].splitlines()
    assert user == ["Follow-up: How do I clear it?",
                    f"Turn 1 question: {PRINTER.standalone}",
                    f"Turn 1 answer: {PRINTER.answer}"]


async def test_a_question_the_model_leaves_alone_is_unchanged(
        server: FakeOpenAI, rewriter: ChatRewriter) -> None:
    server.script(completion({"standalone": "When was Bayer founded?", "references": []}))
    rewrite = await rewriter.rewrite("When was Bayer founded?", [PRINTER])
    assert not rewrite.changed and rewrite.resolved == {} and rewrite.turns == ()
    assert await rewriter.rewrite("Where was he born?", []) == rewrite_followup(
        "Where was he born?", [])  # a first question: nothing asked of the model
    assert len(server.requests) == 1


@pytest.mark.parametrize("reply", [
    "I think you mean the paper jam.",
    {"standalone": "", "references": []},
    {"standalone": "How do I clear the jam?", "references": "it"},
    {"standalone": "How do I clear the jam?", "references": [{"reference": "it"}]},
])
async def test_a_malformed_reply_is_a_typed_error(server: FakeOpenAI, rewriter: ChatRewriter,
                                                  reply: str | dict[str, Any]) -> None:
    server.script(completion(reply))
    with pytest.raises(RewriteError, match="malformed") as caught:
        await rewriter.rewrite(FOLLOW_UP, [PRINTER])
    assert caught.value.kind == "malformed_reply" and caught.value.model == "rewriter"


async def test_a_server_error_is_a_typed_error_with_the_status(
        server: FakeOpenAI, rewriter: ChatRewriter) -> None:
    server.script(Status(500, '{"error": {"message": "overloaded"}}'))
    with pytest.raises(RewriteError) as caught:
        await rewriter.rewrite(FOLLOW_UP, [PRINTER])
    error = caught.value
    assert error.kind == "model_failed" and error.status == 500 and error.role == "followups"
    assert "HTTP 500" in str(error) and error.info().retryable


@pytest.mark.parametrize(("reply", "kind"), [
    (completion('{"standalone": "How do I', finish="length"), "malformed_reply"),
    (Status(500, '{"error": {"message": "overloaded"}}'), "model_failed"),
])
async def test_when_the_model_fails_the_rules_read_the_follow_up_and_say_why(
        server: FakeOpenAI, rewriter: ChatRewriter, reply: JsonBody | Status,
        kind: str) -> None:
    server.script(reply, reply)
    state = SessionState("s", "t", (PRINTER,))
    prepared = await aprepare_turn(state, FOLLOW_UP, rewrite_followup, rewriter)
    assert prepared.by == "rules"
    assert prepared.standalone == rewrite_followup(FOLLOW_UP, [PRINTER]).standalone
    assert prepared.fallback is not None and prepared.fallback.kind == kind
    assert "offline rules" in prepared.fallback.message
    switched_off = await aprepare_turn(state, FOLLOW_UP, None, rewriter)
    assert switched_off.by == "as_asked" and switched_off.standalone == FOLLOW_UP
    assert switched_off.fallback is not None and "run as asked" in switched_off.fallback.message


async def test_a_reply_cut_at_max_tokens_is_asked_again_with_more_room(
        server: FakeOpenAI, rewriter: ChatRewriter) -> None:
    server.script(completion('{"standalone": "How do I clear', finish="length"), JAM)
    rewrite = await rewriter.rewrite(FOLLOW_UP, [PRINTER])
    assert rewrite.resolved == {"it": "the paper jam"}
    assert [r["max_tokens"] for r in server.requests] == [64, 128]


async def test_the_model_reads_a_follow_up_in_a_prepared_turn(
        server: FakeOpenAI, rewriter: ChatRewriter) -> None:
    server.script(JAM)
    prepared = await aprepare_turn(SessionState("s", "t", (PRINTER,)), FOLLOW_UP,
                                   rewrite_followup, rewriter)
    assert prepared.by == "model" and prepared.fallback is None
    event = prepared.context.rewritten
    assert event is not None and event.resolved == {"it": "the paper jam"}
    assert event.standalone == prepared.standalone and "paper jam" in prepared.standalone


async def test_history_is_summarised_by_the_model(server: FakeOpenAI,
                                                  rewriter: ChatRewriter) -> None:
    server.script(completion({"summary": "E13 on the LaserJet is a rear-tray paper jam."}))
    summary = await rewriter.summarise([PRINTER], previous="", first=1)
    assert summary == "E13 on the LaserJet is a rear-tray paper jam."
    body = server.requests[0]
    assert body["response_format"]["json_schema"]["name"] == "history_summary"
    assert f"Turn 1 question: {PRINTER.standalone}" in body["messages"][-1]["content"]
    server.script(completion({"summary": 3}))
    with pytest.raises(RewriteError, match="summary"):
        await rewriter.summarise([PRINTER])


async def test_the_fallback_says_which_model_failed_and_how(
        server: FakeOpenAI, rewriter: ChatRewriter) -> None:
    server.script(Status(429, '{"error": {"message": "slow down"}}',
                         headers={"Retry-After": "60"}))
    prepared = await aprepare_turn(SessionState("s", "t", (PRINTER,)), FOLLOW_UP,
                                   rewrite_followup, rewriter)
    fallback = prepared.fallback
    assert fallback is not None
    assert (fallback.role, fallback.model, fallback.status) == ("followups", "rewriter", 429)
    assert fallback.retry_after_s == 60
    assert "HTTP 429" in fallback.describe() and "offline rules" in fallback.describe()
