"""The pure run state machine: situations built as states, outcomes, budgets, loops."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reactive_rag.run import Budget, Finish, IllegalTransition, Phase, RunState, initial_state, step
from streams import (
    ActorFailed,
    AnswerDrafted,
    AnswerRequested,
    AnswerVerified,
    BudgetExhausted,
    Claim,
    ClaimError,
    ErrorInfo,
    Event,
    EvidenceChunk,
    EvidenceRegistered,
    Hit,
    LoopDetected,
    PlanDecided,
    PlanRequested,
    ReadRequested,
    RerankCompleted,
    RerankFailed,
    RerankRequested,
    RunFallback,
    RunStarted,
    SearchCompleted,
    SearchFailed,
    SearchRequested,
    ToolCall,
    ToolRejected,
    VerifyFailed,
)


def chunk(cid: str, score: float = 1.0) -> EvidenceChunk:
    return EvidenceChunk(id=cid, text=f"text of {cid}", doc_id=cid.split("#")[0], score=score)


def hit(cid: str) -> Hit:
    return Hit(url=f"doc://{cid}", title=cid, content=f"text of {cid}", chunk_id=cid, doc_id=cid)


def search(cid: str, query: str) -> ToolCall:
    return ToolCall(id=cid, tool="search", args={"query": query})


def of(commands: list, cls: type) -> list:  # type: ignore[type-arg]
    return [c for c in commands if isinstance(c, cls)]


def started(mode: str = "agent", budget: Budget | None = None) -> tuple[RunState, list]:  # type: ignore[type-arg]
    state = initial_state(budget=budget)
    return step(state, RunStarted(question="Who wrote the report?", mode=mode, ts=100.0))


def run_search(state: RunState, call_id: str, ids: list[str], ts: float = 101.0,
               kept: list[str] | None = None) -> tuple[RunState, list]:  # type: ignore[type-arg]
    state, cmds = step(state, SearchCompleted(call_id=call_id, query="q",
                                              hits=tuple(hit(i) for i in ids), ts=ts))
    assert of(cmds, RerankRequested)
    keep = ids if kept is None else kept
    return step(state, RerankCompleted(call_id=call_id, query="q",
                                       chunks=tuple(chunk(i) for i in keep), ts=ts))


def answer_flow(state: RunState, ts: float = 110.0) -> tuple[RunState, list]:  # type: ignore[type-arg]
    """From SELECTING: final rerank keeps everything, draft verifies."""
    assert state.phase is Phase.SELECTING
    ids = list(state.evidence)
    state, cmds = step(state, RerankCompleted(call_id="final", query="q",
                                              chunks=tuple(chunk(i) for i in ids), ts=ts))
    request = of(cmds, AnswerRequested)[0]
    claims = (Claim(statement="s", source_id=ids[0], quote="text"),)
    state, _ = step(state, AnswerDrafted(text="s [1]", claims=claims, attempt=request.attempt,
                                         ts=ts))
    return step(state, AnswerVerified(text="s [1]", claims=claims, attempt=request.attempt, ts=ts))


def test_agent_happy_path_ends_answered_with_verified_claims() -> None:
    state, cmds = started()
    assert state.phase is Phase.PLANNING and of(cmds, PlanRequested)[0].round == 1
    state, cmds = step(state, PlanDecided(action="search", calls=(search("c1", "report author"),),
                                          ts=100.5))
    req = of(cmds, SearchRequested)[0]
    assert req.call_id == "c1" and req.query == "report author" and state.tool_calls == 1
    state, cmds = run_search(state, "c1", ["d1#0", "d2#0"])
    assert [c.id for c in of(cmds, EvidenceRegistered)[0].chunks] == ["d1#0", "d2#0"]
    assert of(cmds, PlanRequested)[0].round == 2
    state, cmds = step(state, PlanDecided(action="answer", ts=102.0))
    final = of(cmds, RerankRequested)[0]
    assert final.call_id == "final" and final.query == "Who wrote the report?"
    state, cmds = answer_flow(state)
    finish = of(cmds, Finish)[0]
    assert finish.outcome == "answered" and finish.claims and state.phase is Phase.DONE


def test_eight_tool_calls_done_with_evidence_and_a_search_queued_finalizes() -> None:
    from reactive_rag.run import InFlight

    state = replace(
        initial_state("q", budget=Budget(max_tool_calls=8)), phase=Phase.ACTING,
        started_ts=100.0, now=120.0, tool_calls=8, steps=3,
        evidence={"d1#0": chunk("d1#0")},
        in_flight=(InFlight(call=search("c8", "eighth")),),
        queue=(search("c9", "one more"),),
    )
    stale = SearchFailed(call_id="zzz", query="x", error=ErrorInfo(kind="X", message="y"),
                         ts=121.0)
    assert step(state, stale)[1] == []  # a reply to no call in flight changes nothing
    state, cmds = run_search(state, "c8", ["d2#0"], ts=122.0)
    exhausted = of(cmds, BudgetExhausted)[0]
    assert exhausted.resource == "tool_calls" and exhausted.used == 8
    assert not of(cmds, SearchRequested) and state.phase is Phase.SELECTING
    assert set(state.evidence) == {"d1#0", "d2#0"}
    state, cmds = answer_flow(state)
    finish = of(cmds, Finish)[0]
    assert finish.outcome == "answered_from_evidence" and "tool calls" in finish.reason


def test_duplicate_ids_and_signatures_are_refused_and_reported_to_the_planner() -> None:
    state, _ = started()
    state, _ = step(state, PlanDecided(action="search", calls=(search("c1", "Alpha  beta"),),
                                       ts=101))
    state, cmds = run_search(state, "c1", ["d1#0"])
    calls = (search("c1", "other"), search("c2", "alpha BETA"), search("c3", "gamma"))
    state, cmds = step(state, PlanDecided(action="search", calls=calls, ts=102))
    rejected = of(cmds, ToolRejected)
    assert [r.call_id for r in rejected] == ["c1", "c2"]
    assert "duplicate call id" in rejected[0].reason
    assert of(cmds, LoopDetected)[0].kind == "duplicate"
    assert of(cmds, SearchRequested)[0].call_id == "c3"
    state, cmds = run_search(state, "c3", ["d3#0"])
    feedback = of(cmds, PlanRequested)[0].feedback
    assert {(f.kind, f.call_id) for f in feedback} >= {("rejected", "c1"), ("duplicate", "c2")}


def test_reads_are_limited_once_evidence_is_held_and_unknown_ids_refused() -> None:
    state, _ = started(budget=Budget(max_consecutive_reads=2))
    state, _ = step(state, PlanDecided(action="search", calls=(search("s", "q"),), ts=101))
    state, _ = run_search(state, "s", ["d1#0", "d1#1", "d1#2"])
    reads = (*(ToolCall(id=f"r{i}", tool="read", args={"chunk_id": f"d1#{i}"})
               for i in range(3)),
             ToolCall(id="r9", tool="read", args={"chunk_id": "made-up#7"}))
    state, cmds = step(state, PlanDecided(action="read", calls=reads, ts=102))
    assert [r.chunk_id for r in of(cmds, ReadRequested)] == ["d1#0", "d1#1"]
    rejected = {r.call_id: r.reason for r in of(cmds, ToolRejected)}
    assert "at most 2 reads in a row" in rejected["r2"]
    assert "unknown chunk id" in rejected["r9"]
    assert of(cmds, LoopDetected)[0].kind == "read_limit"


def test_empty_results_are_data_the_planner_is_told_to_rewrite() -> None:
    state, _ = started()
    state, _ = step(state, PlanDecided(action="search", calls=(search("s", "zzz qqq"),), ts=101))
    state, cmds = step(state, SearchCompleted(call_id="s", query="zzz qqq", ts=101))
    assert of(cmds, LoopDetected)[0].kind == "empty"
    plan = of(cmds, PlanRequested)[0]
    assert [(f.kind, f.query) for f in plan.feedback] == [("empty", "zzz qqq")]
    assert "rewrite" in plan.feedback[0].detail
    assert plan.queries[0].query == "zzz qqq" and plan.queries[0].hits == 0


def test_saturated_rounds_end_the_search_phase() -> None:
    state, _ = started(budget=Budget(saturation_rounds=2))
    state, _ = step(state, PlanDecided(action="search", calls=(search("a", "one"),), ts=101))
    state, cmds = run_search(state, "a", ["d1#0", "d2#0"])
    for i, q in enumerate(["two", "three"]):
        state, cmds = step(state, PlanDecided(action="search", calls=(search(f"b{i}", q),),
                                              ts=102))
        state, cmds = run_search(state, f"b{i}", ["d1#0", "d2#0"])
    loops = of(cmds, LoopDetected)
    assert loops and loops[0].kind == "saturation"
    assert state.phase is Phase.SELECTING


def test_deadline_in_event_time_finalizes_from_evidence() -> None:
    state, _ = started(budget=Budget(wall_s=10))
    state, cmds = step(state, PlanDecided(action="search", calls=(search("a", "one"),
                                                                  search("b", "two")), ts=101))
    assert len(of(cmds, SearchRequested)) == 2  # one plan step: both in flight at once
    state, cmds = run_search(state, "a", ["d1#0"], ts=105)
    assert not of(cmds, BudgetExhausted)  # still within the deadline, b still out
    state, cmds = step(state, SearchCompleted(call_id="b", query="two", hits=(hit("d2#0"),),
                                              ts=111))
    assert of(cmds, BudgetExhausted)[0].resource == "wall_clock"
    assert state.phase is Phase.SELECTING and state.write_mode == "finalize"


def test_runtime_deadline_event_is_not_announced_twice() -> None:
    state, _ = started()
    state = replace(state, evidence={"d#0": chunk("d#0")})
    state, cmds = step(state, BudgetExhausted(resource="wall_clock", actor="runtime", ts=150))
    assert not of(cmds, BudgetExhausted) and state.phase is Phase.SELECTING


def test_budget_gone_with_no_evidence_says_so_plainly() -> None:
    state, _ = started(budget=Budget(max_steps=1))
    state, _ = step(state, PlanDecided(action="search", calls=(search("a", "one"),), ts=101))
    state, cmds = step(state, SearchCompleted(call_id="a", query="one", ts=102))
    finish = of(cmds, Finish)[0]
    assert finish.outcome == "no_evidence" and "steps budget ran out" in finish.reason


def test_everything_under_the_floor_is_no_evidence() -> None:
    state, _ = started()
    state = replace(state, evidence={"d#0": chunk("d#0")})
    state, _ = step(state, PlanDecided(action="answer", ts=101))
    state, cmds = step(state, RerankCompleted(call_id="final", query="q", below_floor=1, ts=102))
    finish = of(cmds, Finish)[0]
    assert finish.outcome == "no_evidence" and "relevance floor" in finish.reason


def test_a_failed_verification_goes_back_once_then_degrades() -> None:
    state, _ = started()
    state = replace(state, evidence={"d#0": chunk("d#0")})
    state, _ = step(state, PlanDecided(action="answer", ts=101))
    state, cmds = step(state, RerankCompleted(call_id="final", query="q",
                                              chunks=(chunk("d#0"),), ts=102))
    claims = (Claim(statement="s", source_id="d#0", quote="invented"),)
    errors = (ClaimError(index=0, source_id="d#0", reason="quote not found in d#0"),)
    state, _ = step(state, AnswerDrafted(text="s", claims=claims, attempt=1, ts=103))
    state, cmds = step(state, VerifyFailed(errors=errors, attempt=1, ts=104))
    repair = of(cmds, AnswerRequested)[0]
    assert repair.mode == "repair" and repair.attempt == 2 and repair.errors == errors
    assert repair.evidence_ids == ("d#0",)
    state, _ = step(state, AnswerDrafted(text="s", claims=claims, attempt=2, ts=105))
    state, cmds = step(state, VerifyFailed(errors=errors, attempt=2, ts=106))
    finish = of(cmds, Finish)[0]
    assert finish.outcome == "degraded" and "quote not found" in finish.reason


def test_a_crashed_planner_falls_back_to_one_shot_rag_and_says_so() -> None:
    state, _ = started()
    failure = ActorFailed(request_type="plan.requested",
                          error=ErrorInfo(kind="ChatTimeout", message="model hung"), ts=101)
    state, cmds = step(state, failure)
    assert of(cmds, RunFallback)[0].to_mode == "rag"
    assert of(cmds, SearchRequested)[0].query == "Who wrote the report?"
    assert state.mode == "rag" and state.fell_back


def test_rag_mode_searches_once_reranks_and_answers() -> None:
    state, cmds = started(mode="rag")
    assert of(cmds, SearchRequested)[0].query == "Who wrote the report?"
    assert not of(cmds, PlanRequested)
    state, cmds = run_search(state, "rag-1", ["d1#0", "d2#0"])
    assert of(cmds, RerankRequested)[0].call_id == "final"
    state, cmds = answer_flow(state)
    assert of(cmds, Finish)[0].outcome == "answered"


def test_reranker_failure_keeps_results_unranked() -> None:
    state, _ = started()
    state, _ = step(state, PlanDecided(action="search", calls=(search("a", "one"),), ts=101))
    state, _ = step(state, SearchCompleted(call_id="a", query="one",
                                           hits=(hit("d1#0"), hit("d2#0")), ts=102))
    state, cmds = step(state, RerankFailed(call_id="a", query="one",
                                           error=ErrorInfo(kind="OSError", message="x"), ts=103))
    assert len(of(cmds, EvidenceRegistered)[0].chunks) == 2
    assert any(f.kind == "failed" and f.tool == "rerank" and "reranker failed" in f.detail
               for f in of(cmds, PlanRequested)[0].feedback)


def test_token_budget_counts_what_the_server_reports() -> None:
    state, _ = started(budget=Budget(max_tokens=1000))
    state = replace(state, evidence={"d#0": chunk("d#0")})
    state, cmds = step(state, PlanDecided(action="search", calls=(search("a", "x"),),
                                          tokens=1200, ts=101))
    assert of(cmds, BudgetExhausted)[0].resource == "tokens"
    assert not of(cmds, SearchRequested)


def test_terminal_states_never_change_and_illegal_events_are_refused() -> None:
    state, _ = started()
    with pytest.raises(IllegalTransition, match="starts once"):
        step(state, RunStarted(question="again"))
    with pytest.raises(IllegalTransition, match=r"before run\.started"):
        step(initial_state(), PlanDecided(action="answer"))
    done = replace(state, phase=Phase.DONE, outcome="answered")
    for event in (PlanDecided(action="answer"), BudgetExhausted(resource="steps"),
                  AnswerVerified(text="x", claims=())):
        assert step(done, event) == (done, [])


def test_unrelated_events_leave_the_state_alone() -> None:
    state, _ = started()
    same, cmds = step(state, EvidenceRegistered(chunks=(chunk("x#0"),), ts=100.0))
    assert cmds == [] and same.evidence == state.evidence


def test_budget_overrides_are_checked() -> None:
    assert Budget().with_overrides({"max_tool_calls": 3}).max_tool_calls == 3
    with pytest.raises(ValueError, match="unknown budget field"):
        Budget().with_overrides({"max_toolcalls": 3})
    with pytest.raises(ValueError, match="must be positive"):
        Budget(wall_s=0)


def _unused(event: Event) -> None:  # keep imports honest for type checkers
    _ = event


def test_when_every_search_failed_the_run_fails_instead_of_claiming_no_evidence() -> None:
    state, _ = started(mode="rag")
    state, cmds = step(state, SearchFailed(call_id="rag-1", query="q", ts=101.0,
                                           error=ErrorInfo(kind="index_closed",
                                                           message="the index is closed")))
    finish = of(cmds, Finish)[0]
    assert finish.outcome == "failed"
    assert "index_closed" in finish.reason and "the index is closed" in finish.reason


def test_a_search_that_ran_and_found_nothing_is_no_evidence() -> None:
    state, _ = started(mode="rag")
    state, cmds = step(state, SearchCompleted(call_id="rag-1", query="q", hits=(), ts=101.0))
    assert of(cmds, Finish)[0].outcome == "no_evidence"
