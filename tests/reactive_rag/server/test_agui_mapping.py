"""The AG-UI mapping on its own (no server): every outcome's ending, a run interrupted and
resumed, tool calls the run's logs pair by cause, a run cut inside its answer. Every
event goes through the official encoder and is parsed back with the official models."""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest
from ag_ui.encoder import EventEncoder

from reactive_rag.server._agui_mapping import ANSWER_STEP, AguiMapper, plan_step
from streams import (
    ActorFailed,
    AnswerDelta,
    AnswerRequested,
    AnswerVerified,
    BudgetTick,
    Claim,
    ErrorInfo,
    Event,
    EvidenceChunk,
    EvidenceRegistered,
    Hit,
    Outcome,
    PageScraped,
    PlanDecided,
    PlanRequested,
    ReadRequested,
    RunFinished,
    RunResumed,
    RunStarted,
    ScrapeRequested,
    SearchCompleted,
    SearchRequested,
    ToolCall,
)

from ._agui_client import Client, Message, parse

ENCODER = EventEncoder()


def stamp(*events: Event) -> list[Event]:
    """The events as a run's log: run id, seq 1.., a clock."""
    return [e.model_copy(update={"run_id": "r1", "seq": i, "ts": 1000.0 + i})
            for i, e in enumerate(events, 1)]


def agui(log: list[Event], mapper: AguiMapper | None = None) -> list[Message]:
    """Map ``log``, encode with the official encoder and parse back with the models."""
    mapper = mapper or AguiMapper("r1")
    out = []
    for event in log:
        for mapped in mapper.map(event):
            frame = ENCODER.encode(mapped)
            assert frame.startswith("data: ") and frame.endswith("\n\n")
            out.append(parse(json.loads(frame[6:]), event.seq))
    return out


def ended(messages: list[Message]) -> Client:
    seen = Client().apply_all(messages)
    assert seen.end is messages[-1]
    return seen


@pytest.mark.parametrize("outcome", get_args(Outcome))
def test_every_outcome_ends_the_run_the_documented_way(outcome: str) -> None:
    claim = Claim(statement="It is 42.", source_id="c1", quote="42")
    log = stamp(RunStarted(question="q"),
                EvidenceRegistered(chunks=(EvidenceChunk(id="c1", text="it is 42", title="T",
                                                         url="https://t.example"),)),
                RunFinished(outcome=outcome, reason="why", answer="It is 42. [1]",
                            claims=(claim,)))
    end = ended(agui(log)).end
    assert end is not None
    if outcome in ("failed", "interrupted"):
        assert end.type == "RUN_ERROR"
        assert (end.event.code, end.event.message) == (outcome, "why")
        return
    assert end.type == "RUN_FINISHED"
    assert end.data.get("outcome") == ({"type": "cancelled"} if outcome == "cancelled" else None)
    assert end.event.result == {
        "outcome": outcome, "answer": "It is 42. [1]", "reason": "why",
        "citations": [{"number": 1, "statement": "It is 42.", "quote": "42", "source_id": "c1",
                       "title": "T", "url": "https://t.example", "credibility": 1.0}]}


def test_an_interrupted_run_resumed_is_two_agui_runs_and_the_state_carries_over() -> None:
    chunk = EvidenceChunk(id="c1", text="Ada wrote it.")
    claim = Claim(statement="Ada wrote it.", source_id="c1", quote="Ada wrote it")
    log = stamp(
        RunStarted(question="q", options={"budget": {"max_steps": 3, "wall_s": 9.0}}),
        PlanRequested(round=1, cause=1),
        BudgetTick(steps=1, max_steps=3, deadline_s=9.0),
        PlanDecided(action="search", cause=2,
                    calls=(ToolCall(id="p1-0", tool="search", args={"query": "who"}),)),
        SearchRequested(call_id="p1-0", query="who", collections=("demo",), cause=4),
        RunFinished(outcome="interrupted", reason="the server stopped"),
        RunResumed(after_seq=6),
        SearchRequested(call_id="p1-0", query="who", collections=("demo",), cause=4),
        SearchCompleted(call_id="p1-0", query="who", cause=8,
                        hits=(Hit(url="u", title="U", chunk_id="c1"),)),
        EvidenceRegistered(chunks=(chunk,)),
        AnswerRequested(evidence_ids=("c1",)),
        AnswerDelta(text="Ada wrote it. [1]", claim_index=0),
        AnswerVerified(text="Ada wrote it. [1]", claims=(claim,)),
        RunFinished(outcome="answered", answer="Ada wrote it. [1]", claims=(claim,)))
    messages = agui(log)
    cut = next(i for i, m in enumerate(messages) if m.type == "RUN_ERROR") + 1
    first = ended(messages[:cut])
    assert first.end is not None and first.end.event.code == "interrupted"
    assert first.state == {"round": 1, "evidence_count": 0, "budget": {
        "steps": 1, "tool_calls": 0, "tokens": 0, "elapsed_s": 0.0, "max_steps": 3,
        "max_tool_calls": None, "max_tokens": None, "deadline_s": 9.0, "read_tokens": 0,
        "max_read_tokens": None}}
    assert first.calls["p1-0"].result is None  # the crash cut the search off
    again = messages[cut:]
    assert [m.type for m in again[:2]] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert again[0].event.run_id == "r1" and again[1].event.snapshot == first.state
    second = ended(again)
    # The search issued again is a call of its own, answered; the answer is the text.
    assert list(second.calls) == ["p1-0-8"] and second.calls["p1-0-8"].result is not None
    assert json.loads(second.calls["p1-0-8"].result) == {
        "hits": [{"title": "U", "url": "u", "snippet": "", "chunk_id": "c1"}]}
    assert second.text == "Ada wrote it. [1]" and second.step_log == [ANSWER_STEP]
    assert second.state is not None and second.state["evidence_count"] == 1


def test_tool_calls_are_paired_by_cause_and_a_failed_handler_is_the_calls_result() -> None:
    log = stamp(
        RunStarted(question="q"),
        SearchRequested(query="q"),  # no call id (2)
        SearchCompleted(query="q", cause=2),
        ReadRequested(call_id="r-1", chunk_id="c1", direction="both", count=2),  # 4
        ActorFailed(request_type="read.requested", cause=4,
                    error=ErrorInfo(kind="KeyError", message="c1")),
        ScrapeRequested(call_id="s-1", url="https://x.example/p"),  # 6
        PageScraped(call_id="s-1", url="https://x.example/p", title="P", cause=6,
                    chunks=(EvidenceChunk(id="x#0", text="t"),)),
        SearchCompleted(call_id="nobody", query="q", cause=99),  # answers no call here
        RunFinished(outcome="no_evidence"))
    messages = agui(log)
    seen = ended(messages)
    assert {k: (c.name, json.loads(c.args), json.loads(c.result or "null"))
            for k, c in seen.calls.items()} == {
        "search-2": ("search", {"query": "q", "collections": []}, {"hits": []}),
        "r-1": ("read", {"chunk_id": "c1", "direction": "both", "count": 2},
                {"error": {"kind": "KeyError", "message": "call failed: KeyError: c1"}}),
        "s-1": ("scrape", {"url": "https://x.example/p"},
                {"url": "https://x.example/p", "title": "P", "chunk_ids": ["x#0"]})}
    custom = [(m.id, m.event.name) for m in messages if m.type == "CUSTOM"]
    assert custom == [(5, "actor.failed"), (8, "search.completed")]


def test_a_run_ended_inside_its_answer_and_plan_closes_them_before_its_end() -> None:
    log = stamp(RunStarted(question="q"), PlanRequested(round=1), AnswerRequested(),
                AnswerDelta(text="Half"), AnswerDelta(text=""), AnswerDelta(text=" of it"),
                RunFinished(outcome="cancelled", reason="cancelled by the user"))
    messages = agui(log)
    seen = ended(messages)
    assert seen.text == "Half of it" and seen.step_log == [plan_step(1), ANSWER_STEP]
    assert [m.type for m in messages[-4:]] == [
        "TEXT_MESSAGE_END", "STEP_FINISHED", "STEP_FINISHED", "RUN_FINISHED"]
    assert all(m.id == 7 for m in messages[-4:])  # all from the run.finished


def test_a_planner_that_fails_closes_its_round() -> None:
    log = stamp(RunStarted(question="q"), PlanRequested(round=1),
                ActorFailed(request_type="plan.requested", cause=2,
                            error=ErrorInfo(kind="TimeoutError", message="", timeout_s=30)))
    messages = agui(log)
    assert [(m.id, m.type) for m in messages[2:]] == [
        (2, "STEP_STARTED"), (2, "STATE_DELTA"), (3, "STEP_FINISHED"), (3, "CUSTOM")]
    assert Client().apply_all(messages).steps == []


def test_budget_ticks_patch_only_what_changed() -> None:
    mapper = AguiMapper("r1")
    log = stamp(RunStarted(question="q"), BudgetTick(steps=1, elapsed_s=0.5),
                BudgetTick(steps=1, elapsed_s=0.5), BudgetTick(steps=1, elapsed_s=0.75))
    deltas: list[Any] = [(m.id, m.data["delta"]) for m in agui(log, mapper)
                         if m.type == "STATE_DELTA"]
    assert deltas == [
        (2, [{"op": "replace", "path": "/budget/steps", "value": 1},
             {"op": "replace", "path": "/budget/elapsed_s", "value": 0.5}]),
        (4, [{"op": "replace", "path": "/budget/elapsed_s", "value": 0.75}])]
    assert mapper.state["budget"]["elapsed_s"] == 0.75
