"""One budget extension: asked by the planner near the end, granted once, refused typed."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement import Answerability, Decision, PlannerView
from reactive_rag.judgement.offline import OfflinePlanner, offline_judgement
from reactive_rag.run import Budget, RunState, initial_state, step
from streams import (
    BudgetExhausted,
    BudgetExtended,
    BudgetExtensionRefused,
    BudgetExtensionRequested,
    BudgetTick,
    EvidenceChunk,
    Hit,
    PlanDecided,
    PlanRequested,
    QueryStat,
    RerankCompleted,
    RunStarted,
    SearchCompleted,
    SearchRequested,
    ToolCall,
)


def of(commands: Sequence[object], cls: type) -> list:  # type: ignore[type-arg]
    return [c for c in commands if isinstance(c, cls)]


def chunk(cid: str, text: str = "") -> EvidenceChunk:
    return EvidenceChunk(id=cid, text=text or f"text of {cid}", doc_id=cid.split("#")[0],
                         title=cid, url=f"doc://{cid}", score=1.0)


def search(cid: str, query: str) -> ToolCall:
    return ToolCall(id=cid, tool="search", args={"query": query})


def started(budget: Budget, judge: object = None) -> RunState:
    state = initial_state(budget=budget, judgement=offline_judgement(sufficiency=judge))  # type: ignore[arg-type]
    state, _ = step(state, RunStarted(question="Who wrote the report and when?", ts=100.0))
    return state


def finish_search(state: RunState, call_id: str, ids: Sequence[str],
                  ts: float = 101.0) -> tuple[RunState, list]:  # type: ignore[type-arg]
    chunks = tuple(chunk(i) for i in ids)
    hits = tuple(Hit(url=c.url, title=c.title, content=c.text, chunk_id=c.id, doc_id=c.doc_id)
                 for c in chunks)
    state, _ = step(state, SearchCompleted(call_id=call_id, query="q", hits=hits, ts=ts))
    return step(state, RerankCompleted(call_id=call_id, query="q", chunks=chunks, ts=ts))


def ask(state: RunState, *calls: ToolCall, context_tokens: int = 100,
        ts: float = 102.0) -> tuple[RunState, list]:  # type: ignore[type-arg]
    return step(state, PlanDecided(action="search", calls=calls, extend=True,
                                   context_tokens=context_tokens, ts=ts))


def test_an_extension_near_the_end_is_granted_once_and_the_budget_grows_by_what_it_says() -> None:
    budget = Budget(max_steps=2, max_tool_calls=1, max_parallel_calls=2)
    state = started(budget)
    state, _ = step(state, PlanDecided(action="search", calls=(search("s1", "report"),),
                                       ts=100.5))
    state, cmds = finish_search(state, "s1", ["d1#0"])
    request = of(cmds, PlanRequested)[0]
    assert request.remaining_steps == 0 and request.remaining_tool_calls == 0
    assert request.can_extend
    state, cmds = ask(state, search("s2", "report author"), search("s3", "report date"))
    asked = of(cmds, BudgetExtensionRequested)[0]
    assert (asked.steps, asked.max_steps, asked.tool_calls, asked.max_tool_calls) == (2, 2, 1, 1)
    granted = of(cmds, BudgetExtended)[0]
    assert (granted.added_steps, granted.added_tool_calls, granted.added_s) == (1, 2, 0.0)
    assert (granted.max_steps, granted.max_tool_calls) == (3, 3)
    assert state.budget.max_steps == 3 and state.budget.max_tool_calls == 3 and state.extended
    assert state.budget.wall_s == budget.wall_s == granted.deadline_s  # no wall time added
    # the two searches run although the original budget had no tool call left ...
    assert [r.call_id for r in of(cmds, SearchRequested)] == ["s2", "s3"]
    assert of(cmds, BudgetTick)[-1].max_tool_calls == 3
    state, _ = finish_search(state, "s2", ["d2#0"], ts=103.0)
    state, cmds = finish_search(state, "s3", ["d3#0"], ts=103.0)
    # ... and one more model step follows, although the original budget had none left
    following = of(cmds, PlanRequested)[0]
    assert following.round == 3 and not following.can_extend
    assert not of(cmds, BudgetExhausted)
    # a second request is refused: one extension per run
    state, cmds = ask(state, search("s4", "report publisher"), ts=104.0)
    refused = of(cmds, BudgetExtensionRefused)[0]
    assert refused.reason == "already_extended" and not of(cmds, BudgetExtended)
    assert state.budget.max_steps == 3 and state.budget.max_tool_calls == 3


@pytest.mark.parametrize(("context", "granted"), [(699, True), (700, False), (950, False)])
def test_no_extension_at_or_over_seventy_percent_of_the_context_window(
        context: int, granted: bool) -> None:
    state = started(Budget(max_steps=1, context_window_tokens=1000))
    state, cmds = ask(state, search("s1", "report"), context_tokens=context)
    assert bool(of(cmds, BudgetExtended)) is granted
    if not granted:
        refused = of(cmds, BudgetExtensionRefused)[0]
        assert refused.reason == "context_full"
        assert of(cmds, BudgetExtensionRequested)[0].context_tokens == context
        assert state.budget.max_steps == 1 and not state.extended


def test_far_from_the_end_or_with_nothing_to_do_an_extension_is_refused() -> None:
    state = started(Budget())  # 12 steps, 12 tool calls: far from the end
    _, cmds = ask(state, search("s1", "report"))
    assert of(cmds, BudgetExtensionRefused)[0].reason == "not_near_end"
    state = started(Budget(max_steps=1))
    state, cmds = step(state, PlanDecided(action="answer", extend=True, ts=101.0))
    assert of(cmds, BudgetExtensionRefused)[0].reason == "no_calls" and not state.extended


def test_near_the_end_the_plan_request_carries_the_judges_coverage() -> None:
    def judge(question: str, chosen: Sequence[EvidenceChunk],
              held: Sequence[EvidenceChunk]) -> Answerability:
        ids = {c.id for c in chosen}
        covered = ("report",) + (("author",) if "d2#0" in ids else ())
        return Answerability("partial", "who", covered=covered, missing=("the date asked for",))

    state = started(Budget(max_steps=4, max_tool_calls=6, max_parallel_calls=1), judge)
    state, _ = step(state, PlanDecided(action="search", calls=(search("s1", "report"),),
                                       ts=100.5))
    state, cmds = finish_search(state, "s1", ["d1#0"])
    far = of(cmds, PlanRequested)[0]
    assert not far.can_extend and far.covered == () and far.missing == ()
    state, _ = step(state, PlanDecided(action="search", calls=(search("s2", "author"),),
                                       ts=102.0))
    state, cmds = finish_search(state, "s2", ["d2#0"], ts=103.0)
    near = of(cmds, PlanRequested)[0]
    assert near.can_extend and near.remaining_steps == 1
    assert near.covered == ("report", "author") and near.newly_covered == ("author",)
    assert near.missing == ("the date asked for",)


# --- the offline planner's rule ------------------------------------------------------------------

EVIDENCE = [chunk("report#0", "The annual report was written by Jane Smith of the Acme Board. "
                              "It names Acme Corporation as its publisher.")]


def near_end(**overrides: object) -> PlannerView:
    fields: dict[str, object] = dict(
        question="Who wrote the annual report that Acme Corporation published?", round=3,
        evidence=EVIDENCE, queries=[QueryStat(query="annual report", hits=1, new_evidence=1),
                                    QueryStat(query="Acme report author", hits=1, new_evidence=1)],
        remaining_steps=1, remaining_tool_calls=4, remaining_s=60.0, can_extend=True,
        covered=("annual report",), newly_covered=("annual report",),
        missing=("the name asked for",))
    fields.update(overrides)
    return PlannerView(**fields)  # type: ignore[arg-type]


def test_the_offline_planner_asks_only_after_a_round_that_covered_a_new_part() -> None:
    decision = OfflinePlanner().plan(near_end())
    assert decision.extend and decision.calls and decision.action != "answer"


@pytest.mark.parametrize("overrides", [
    {"newly_covered": ()},  # the last round covered nothing new
    {"missing": ()},  # nothing left to find
    {"can_extend": False},  # the run has no extension to give
    {"remaining_steps": 6, "remaining_tool_calls": 6},  # not at the end of its budget
    {"remaining_steps": 6, "remaining_s": 1.0},  # time (which no extension adds) runs out
])
def test_the_offline_planner_does_not_ask_otherwise(overrides: dict[str, object]) -> None:
    decision = OfflinePlanner().plan(near_end(**overrides))
    assert not decision.extend


def test_the_offline_planner_asks_once_per_run() -> None:
    planner = OfflinePlanner()
    assert planner.plan(near_end()).extend
    assert not planner.plan(near_end(round=4)).extend


# --- end to end ------------------------------------------------------------------------------


class _Asker:
    """Searches every round and asks for an extension whenever the view says it may."""

    name = "asker"

    async def decide(self, view: PlannerView) -> Decision:
        query = ["Bayer founded", "aspirin isolated", "Felix Hoffmann chemist",
                 "Leverkusen headquarters"][(view.round - 1) % 4]
        return Decision(action="search", extend=view.can_extend, calls=(
            ToolCall(id=f"a{view.round}", tool="search", args={"query": query}),))


async def test_a_granted_extension_lets_a_run_search_one_round_more(index: CorpusIndex) -> None:
    engine = Engine(index, planner=_Asker)
    result = await engine.ask("Who founded Bayer?", collections=["demo"],
                              budget={"max_steps": 2, "max_tool_calls": 2,
                                      "max_parallel_calls": 1, "saturation_rounds": 5})
    types = [e.type for e in result.events]
    assert types.count("budget.extended") == 1
    extended = next(e for e in result.events if isinstance(e, BudgetExtended))
    assert (extended.max_steps, extended.max_tool_calls) == (3, 3)
    assert result.count("plan.requested") == 3 and result.count("search.requested") == 3
    assert result.outcome in ("answered", "answered_from_evidence"), result.reason


def test_the_new_events_round_trip_through_both_codecs() -> None:
    from streams import KeyPoint, PointRecalled, decode_json, decode_msgpack, encode_json
    from streams import encode_msgpack as to_msgpack

    events = [
        BudgetExtensionRequested(steps=2, tool_calls=1, max_steps=2, max_tool_calls=1,
                                 context_tokens=300, context_window_tokens=8192),
        BudgetExtended(added_steps=1, added_tool_calls=4, max_steps=3, max_tool_calls=16,
                       deadline_s=90.0),
        BudgetExtensionRefused(reason="context_full", detail="over 70%"),
        PointRecalled(call_id="r1", point="k1-1", chunk_ids=("a#0",)),
        PlanRequested(round=2, compressed=True, expanded=("a#0",), can_extend=True,
                      points=(KeyPoint(id="k1-1", text="In 1863.", chunk_ids=("a#0",),
                                       round=1),), newly_covered=("x",), missing=("y",)),
        PlanDecided(action="recall", calls=(ToolCall(id="r1", tool="recall",
                                                     args={"point": "k1-1"}),),
                    context_tokens=120, extend=True),
    ]
    for event in events:
        assert decode_msgpack(to_msgpack(event)) == event
        assert decode_json(encode_json(event)) == event
