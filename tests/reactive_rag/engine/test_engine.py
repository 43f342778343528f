"""End to end through the public API: outcomes, cancellation, fallback, budgets, scope."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from reactivex import operators as ops

from reactive_rag import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement import Decision, PlannerView
from reactive_rag.judgement.offline import OfflinePlanner
from reactive_rag.run import RunConfigError
from streams import AsyncSubscriber, Event, RerankRequested, ToolCall
from tests._eventually import eventually


@pytest.fixture
def engine(index: CorpusIndex) -> Engine:
    return Engine(index)


async def test_ask_answers_with_quotes_found_in_registered_evidence(engine: Engine) -> None:
    result = await engine.ask("Who founded Bayer and when?", collections=["demo"])
    assert result.outcome == "answered", result.reason
    assert result.citations
    for cite in result.citations:
        assert cite.chunk is not None and cite.claim.quote in cite.chunk.text
    assert result.events[0].type == "run.started" and result.events[-1].type == "run.finished"
    assert [e.seq for e in result.events] == list(range(1, len(result.events) + 1))


async def test_finished_runs_leave_the_engine_table(engine: Engine) -> None:
    handle = engine.start("Who founded Bayer?", collections=["demo"])
    assert handle.run_id in engine.runs
    await handle.wait()
    await asyncio.sleep(0)
    assert handle.run_id not in engine.runs


async def test_rag_mode_searches_once(engine: Engine) -> None:
    result = await engine.ask("Who isolated aspirin?", mode="rag", collections=["demo"])
    assert result.answered and result.count("search.requested") == 1
    assert result.count("plan.requested") == 0


async def test_nothing_relevant_is_said_plainly(engine: Engine) -> None:
    result = await engine.ask("quantum chromodynamics lattice gluon", collections=["demo"])
    assert result.outcome == "no_evidence" and "nothing relevant" in result.reason
    assert result.answer == "" and not result.citations


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"collections": ["nope"]}, "unknown collection"),
    ({"collections": []}, "unknown collection"),
    ({"mode": "swarm"}, "mode must be"),
    ({"budget": {"max_tool_calls": 0}}, "must be positive"),
    ({"budget": {"tool_calls": 3}}, "unknown budget field"),
])
async def test_bad_options_are_refused_before_anything_starts(
        engine: Engine, kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(RunConfigError, match=match):
        engine.start("a question", **{"collections": ["demo"], **kwargs})  # type: ignore[arg-type]
    assert engine.runs == {}
    with pytest.raises(RunConfigError, match="empty"):
        engine.start("   ", collections=["demo"])


async def test_a_cancel_before_the_run_starts_is_not_lost(engine: Engine) -> None:
    handle = engine.start("Who founded Bayer?", collections=["demo"])
    assert handle.cancel("changed my mind")
    result = await handle.wait()
    assert result.outcome == "cancelled" and result.reason == "changed my mind"
    assert result.count("run.finished") == 1


class SlowPlanner:
    """A planner that thinks for a long time (to cancel or time out mid-call)."""

    name = "slow"

    def __init__(self) -> None:
        self.cancelled = False
        self.thinking = False

    async def decide(self, view: PlannerView) -> Decision:
        self.thinking = True
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return Decision(action="answer")


async def test_cancel_mid_model_call_interrupts_it_and_leaks_nothing(index: CorpusIndex) -> None:
    planner = SlowPlanner()
    engine = Engine(index, planner=lambda: planner)
    before = asyncio.all_tasks()
    handle = engine.start("Who founded Bayer?", collections=["demo"])
    await eventually(lambda: planner.thinking, "the planner mid-call")
    assert handle.cancel()
    result = await handle.wait()
    assert result.outcome == "cancelled" and planner.cancelled
    assert result.events[-1].type == "run.finished"
    await asyncio.sleep(0)
    assert asyncio.all_tasks() <= before | {asyncio.current_task()}


async def test_a_subscriber_leaving_does_not_stop_the_run(engine: Engine) -> None:
    handle = engine.start("Who founded Bayer?", collections=["demo"])
    seen: list[str] = []

    async def browser(event: Event) -> None:
        seen.append(event.type)

    tab = AsyncSubscriber(browser, name="tab").attach(handle.stream)
    await asyncio.sleep(0)
    await tab.aclose()  # the user closed the tab
    result = await handle.wait()
    assert result.outcome == "answered"


class CrashingPlanner:
    name = "crashing"

    async def decide(self, view: PlannerView) -> Decision:
        raise RuntimeError("planner bug")


async def test_a_crashing_planner_falls_back_to_one_shot_and_says_so(index: CorpusIndex) -> None:
    engine = Engine(index, planner=CrashingPlanner)
    result = await engine.ask("Who founded Bayer?", collections=["demo"])
    fallback = [e for e in result.events if e.type == "run.fallback"]
    assert len(fallback) == 1 and "planner failed" in fallback[0].reason  # type: ignore[attr-defined]
    assert result.outcome == "answered"


class GreedyPlanner:
    """Always wants one more search (a planner that never decides to answer)."""

    name = "greedy"

    async def decide(self, view: PlannerView) -> Decision:
        query = ["Bayer founded", "aspirin isolated", "Felix Hoffmann chemist"][view.round % 3]
        return Decision(action="search", calls=(
            ToolCall(id=f"g{view.round}", tool="search", args={"query": query}),))


async def test_tool_budget_running_out_answers_from_evidence(index: CorpusIndex) -> None:
    engine = Engine(index, planner=GreedyPlanner)
    result = await engine.ask("Who first isolated aspirin?",
                              collections=["demo"], budget={"max_tool_calls": 1})
    assert result.outcome == "answered_from_evidence", result.reason
    assert result.count("search.requested") == 1
    assert any(e.type == "budget.exhausted" for e in result.events)
    # the answer says in its text that it was cut short, not only in its outcome
    assert "budget ran out" in result.answer and "may be incomplete" in result.answer


async def test_budget_out_with_evidence_that_does_not_answer_ends_no_evidence(
        index: CorpusIndex) -> None:
    engine = Engine(index, planner=GreedyPlanner)
    result = await engine.ask("Who founded the company where aspirin was first isolated?",
                              collections=["demo"], budget={"max_tool_calls": 1})
    # one search found the aspirin passage, which names no founder: no answer is invented
    assert result.outcome == "no_evidence", result.answer
    assert "tool calls budget ran out" in result.reason
    assert result.answer == "" and not result.citations


async def test_deadline_with_nothing_found_ends_no_evidence(index: CorpusIndex) -> None:
    engine = Engine(index, planner=SlowPlanner)
    result = await engine.ask("Who founded Bayer?", collections=["demo"],
                              budget={"wall_s": 0.3, "finalize_s": 1.0})
    assert result.outcome == "no_evidence" and "wall clock" in result.reason


class ForgingPlanner:
    """Tries to read a chunk id it was never shown (a model making ids up)."""

    name = "forging"

    def __init__(self) -> None:
        self.turn = 0

    async def decide(self, view: PlannerView) -> Decision:
        self.turn += 1
        if self.turn == 1:
            return Decision(action="read", calls=(
                ToolCall(id="r1", tool="read", args={"chunk_id": "cats#0"}),
                ToolCall(id="s1", tool="search", args={"query": "Bayer founded"})))
        return Decision(action="answer")


async def test_made_up_ids_are_refused_in_code(index: CorpusIndex) -> None:
    engine = Engine(index, planner=ForgingPlanner)
    result = await engine.ask("Who founded Bayer?", collections=["demo"])
    rejected = [e for e in result.events if e.type == "tool.rejected"]
    assert rejected and "unknown chunk id" in rejected[0].reason  # type: ignore[attr-defined]
    assert result.count("read.requested") == 0 and "cats#0" not in result.evidence


def _drop_doc(doc_id: str) -> Callable[..., object]:
    def strip(e: Event) -> Event:
        if isinstance(e, RerankRequested):
            kept = tuple(c for c in e.candidates if c.doc_id != doc_id)
            return e.model_copy(update={"candidates": kept})
        return e
    return ops.map(strip)


async def test_user_operator_on_the_reranker_edge_filters_candidates(engine: Engine) -> None:
    result = await engine.ask("Who isolated aspirin at Bayer?", collections=["demo"],
                              edges={"reranker": [_drop_doc("aspirin")]})
    assert all(c.doc_id != "aspirin" for c in result.evidence.values())


def _unused(x: Sequence[Path]) -> None:
    _ = (x, OfflinePlanner)


async def test_with_no_collections_named_a_run_searches_every_indexed_one(engine: Engine) -> None:
    result = await engine.ask("Who founded Bayer and when?")
    assert result.outcome == "answered", result.reason
    assert result.citations
    assert {c.chunk.source for c in result.citations if c.chunk is not None} == {"local:demo"}


async def test_an_engine_over_an_empty_index_says_how_to_index(tmp_path: Path) -> None:
    engine = Engine(CorpusIndex(tmp_path / "empty"))
    try:
        with pytest.raises(RunConfigError, match="reactive-rag index PATH --collection NAME"):
            engine.start("Who founded Bayer?")
        assert engine.runs == {}
    finally:
        await engine.aclose()
