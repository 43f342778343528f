"""The pure machine and its controller on a resumed run: the clock, and the fold of a log."""

from __future__ import annotations

import pytest

from reactive_rag.run import IllegalTransition, Phase, RunController, initial_state, step
from streams import (
    ActorFailed,
    BudgetTick,
    ErrorInfo,
    PlanDecided,
    PlanRequested,
    RunFinished,
    RunResumed,
    RunStarted,
    SearchRequested,
    ToolCall,
)


def test_run_resumed_moves_the_clock_past_the_downtime() -> None:
    state, _ = step(initial_state("q"), RunStarted(question="q", ts=100.0))
    assert state.phase is Phase.PLANNING
    # crashed at ts 130 (30 s used), resumed at ts 5000
    state, out = step(state, RunResumed(after_seq=3, elapsed_s=30.0, ts=5000.0))
    assert out == [] and state.phase is Phase.PLANNING
    assert state.elapsed_s == pytest.approx(30.0)
    state, _ = step(state, BudgetTick(ts=5002.5))
    assert state.elapsed_s == pytest.approx(32.5)
    with pytest.raises(IllegalTransition):
        step(initial_state("q"), RunResumed(after_seq=1, ts=1.0))


def test_the_fold_translates_a_failed_tool_and_keeps_the_commands_the_log_lacks() -> None:
    call = ToolCall(id="p1-0", tool="search", args={"query": "q"})
    log = [
        RunStarted(question="q", run_id="r", seq=1, ts=100.0),
        PlanRequested(round=1, run_id="r", seq=2, ts=100.0, actor="controller", cause=1),
        BudgetTick(run_id="r", seq=3, ts=100.0, actor="controller", cause=1),
        PlanDecided(action="search", calls=(call,), run_id="r", seq=4, ts=101.0,
                    actor="planner", cause=2),
        SearchRequested(call_id="p1-0", query="q", run_id="r", seq=5, ts=101.0,
                        actor="controller", cause=4),
        BudgetTick(run_id="r", seq=6, ts=101.0, actor="controller", cause=4),
        ActorFailed(request_type="search.requested", run_id="r", seq=7, ts=102.0,
                    actor="searcher", cause=5,
                    error=ErrorInfo(kind="Boom", message="provider down")),
        # the crash came before the controller published what the failure led to
        RunFinished(outcome="interrupted", run_id="r", seq=8, ts=500.0, actor="store"),
    ]
    controller = RunController(initial_state())
    controller.on_restore(log)
    state = controller.state
    assert state.phase is Phase.PLANNING and state.round == 2
    assert state.failed_calls == 1 and "provider down" in state.last_failure
    pending = [command for _, command in controller._pending]
    assert [type(c).__name__ for c in pending] == ["PlanRequested", "BudgetTick"]
    plan = pending[0]
    assert isinstance(plan, PlanRequested) and plan.feedback[0].kind == "failed"
    assert {cause for cause, _ in controller._pending} == {7}
