"""Conversations with a model rewriter: the model reads follow-ups and folds the history,
and the offline rules stand in, saying so, when it fails."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from actors.models import HashingEmbedder, OpenAIChatClient
from reactive_rag import Engine
from reactive_rag.conversation import (
    FOLD_EVERY,
    VERBATIM,
    Conversation,
    HistorySummary,
    SessionState,
    Turn,
)
from reactive_rag.conversation._history import afold, fold
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement import Rewrite
from reactive_rag.judgement.model import ChatRewriter, RewriteError
from streams import Event, QueryRewritten, RunStarted
from tests.actors._openai_fixtures import FakeOpenAI, JsonBody, Status, fake_openai

from .._corpus import DOCS


def completion(content: dict[str, Any]) -> JsonBody:
    return JsonBody({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "rewriter",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": json.dumps(content)}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 20, "total_tokens": 60},
    })


def asked(events: Sequence[Event]) -> str:
    """The question the run was started with."""
    return next(e.question for e in events if isinstance(e, RunStarted))


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    index = CorpusIndex(tmp_path, HashingEmbedder())
    index.index_documents("demo", DOCS)
    engine = Engine(index)
    try:
        yield engine
    finally:
        await engine.aclose()


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    async with fake_openai() as fake:
        yield fake


@pytest.fixture
async def rewriter(server: FakeOpenAI) -> AsyncIterator[ChatRewriter]:
    client = OpenAIChatClient(server.base_url, model="rewriter", max_retries=0)
    try:
        yield ChatRewriter(client)
    finally:
        await client.aclose()


async def test_the_conversation_runs_the_models_reading_of_a_follow_up(
        engine: Engine, server: FakeOpenAI, rewriter: ChatRewriter) -> None:
    chat = Conversation(engine, rewriter=rewriter)
    first = await chat.ask("Who first isolated aspirin?", collections=("demo",))
    assert first.answered and not server.requests  # a first question needs no reading
    server.script(completion({"standalone": "When was Bayer founded?",
                              "references": [{"reference": "that company",
                                              "meaning": "Bayer"}]}))
    second = await chat.ask("When was that company founded?", collections=("demo",))
    rewritten = [e for e in second.events if isinstance(e, QueryRewritten)]
    assert len(rewritten) == 1 and rewritten[0].resolved == {"that company": "Bayer"}
    assert rewritten[0].turns == (first.run_id,)
    assert asked(second.events) == "When was Bayer founded?"
    assert "1863" in second.answer
    assert chat.last_prepared is not None and chat.last_prepared.by == "model"
    assert chat.last_prepared.fallback is None
    user = server.requests[0]["messages"][-1]["content"]
    assert user.startswith("Follow-up: When was that company founded?\n"
                           "Turn 1 question: Who first isolated aspirin?\nTurn 1 answer: ")
    assert [t.standalone for t in chat.turns][-1] == "When was Bayer founded?"


async def test_a_model_outage_falls_back_to_the_rules_and_says_so(
        engine: Engine, server: FakeOpenAI, rewriter: ChatRewriter) -> None:
    chat = Conversation(engine, rewriter=rewriter)
    await chat.ask("Who first isolated aspirin?", collections=("demo",))
    server.script(Status(500, '{"error": {"message": "overloaded"}}'))
    second = await chat.ask("Which company did he work for?", collections=("demo",))
    assert asked(second.events) == "Which company did Felix Hoffmann work for?"
    assert "Bayer" in second.answer
    prepared = chat.last_prepared
    assert prepared is not None and prepared.by == "rules"
    assert prepared.fallback is not None and prepared.fallback.kind == "model_failed"
    assert "HTTP 500" in prepared.fallback.message
    assert "offline rules" in prepared.fallback.message


async def test_start_refuses_to_skip_a_configured_model(engine: Engine,
                                                        rewriter: ChatRewriter) -> None:
    chat = Conversation(engine, rewriter=rewriter)
    with pytest.raises(RuntimeError, match="astart"):
        chat.start("Who first isolated aspirin?", collections=("demo",))


class ScriptedSummaries:
    """A model rewriter whose summaries are scripted (an error raises)."""

    def __init__(self, *replies: str | RewriteError) -> None:
        self.replies = list(replies)
        self.asked: list[tuple[list[str], str, int]] = []

    async def rewrite(self, question: str, history: Sequence[Turn]) -> Rewrite:
        return Rewrite(question, question)

    async def summarise(self, turns: Sequence[Turn], *, previous: str = "",
                        first: int = 1) -> str:
        self.asked.append(([t.run_id for t in turns], previous, first))
        reply = self.replies.pop(0)
        if isinstance(reply, RewriteError):
            raise reply
        return reply


def turns(n: int) -> tuple[Turn, ...]:
    return tuple(Turn(run_id=f"run{i}", question=f"Question {i}?", standalone=f"Question {i}?",
                      outcome="answered", answer=f"Answer {i}. More.") for i in range(n))


async def test_history_is_folded_by_the_model_when_configured() -> None:
    model = ScriptedSummaries("Turns 0-2 asked questions 0 to 2.",
                              "Turns 0-5 asked questions 0 to 5.")
    summary = HistorySummary()
    for n in range(1, VERBATIM + 2 * FOLD_EVERY + 1):
        summary = await afold(summary, turns(n), model)
    assert model.asked == [(["run0", "run1", "run2"], "", 1),
                           (["run3", "run4", "run5"], "Turns 0-2 asked questions 0 to 2.", 4)]
    assert summary.text == "Turns 0-5 asked questions 0 to 5." and summary.by == "model"
    assert summary.folded == 6 and summary.run_ids == tuple(f"run{i}" for i in range(6))


async def test_a_failed_model_summary_keeps_the_rule_fold_and_says_why() -> None:
    model = ScriptedSummaries(RewriteError("the followups model 'm' timed out after 15 s",
                                           kind="model_failed"))
    history = turns(VERBATIM + FOLD_EVERY)
    summary = await afold(HistorySummary(), history, model)
    assert summary.text == fold(HistorySummary(), history).text and summary.by == "rules"
    assert "timed out" in summary.fallback and "offline rules" in summary.fallback
    state = SessionState("s", "t", history, summary)
    assert SessionState.from_json(state.to_json()) == state
    old = state.to_json()  # a state saved before summaries said who wrote them
    old_summary = old["summary"]
    assert isinstance(old_summary, dict)
    del old_summary["by"], old_summary["fallback"]
    assert SessionState.from_json(old).summary.by == "rules"
