"""The pure machine's hand-off: ask first, end ``handed_off`` with the task, else go on."""

from __future__ import annotations

import pytest

from reactive_rag.run import Finish, Phase, initial_state, step
from streams import (
    ActorFailed,
    BudgetExhausted,
    ErrorInfo,
    HandoffDecided,
    HandoffRequested,
    PlanDecided,
    PlanRequested,
    RunStarted,
    SearchRequested,
    TaskLink,
)

TASK = TaskLink(task_id="t1", link="/v1/tasks/t1", collection="docs", doc_id="guide.md")


def routing(mode: str = "agent"):  # type: ignore[no-untyped-def]
    state, out = step(initial_state(hands_off=True, collections=("docs",)),
                      RunStarted(question="Summarise the guide", mode=mode, ts=10.0))
    return state, out


def test_a_run_that_hands_off_asks_before_it_plans() -> None:
    state, out = routing()
    assert state.phase is Phase.ROUTING
    assert out == [HandoffRequested(collections=("docs",))]


def test_a_task_ends_the_run_handed_off_with_that_task() -> None:
    state, _ = routing()
    state, out = step(state, HandoffDecided(task=TASK, title="Guide", reason="whole", ts=11.0))
    assert state.phase is Phase.DONE and state.outcome == "handed_off"
    [finish] = out
    assert isinstance(finish, Finish) and finish.task == TASK and finish.reason == "whole"
    assert "t1" in finish.answer and "/v1/tasks/t1" in finish.answer


@pytest.mark.parametrize("reply", [
    HandoffDecided(reason="not a whole-document question", ts=11.0),
    ActorFailed(request_type="handoff.requested", error=ErrorInfo(kind="X", message="m"),
                ts=11.0),
])
def test_no_task_goes_on_as_usual(reply: HandoffDecided | ActorFailed) -> None:
    state, _ = routing()
    state, out = step(state, reply)
    assert state.phase is Phase.PLANNING and any(isinstance(c, PlanRequested) for c in out)
    state, _ = routing("rag")
    state, out = step(state, reply)
    assert any(isinstance(c, SearchRequested) for c in out)


def test_other_events_wait_while_routing_and_a_deadline_ends_it() -> None:
    state, _ = routing()
    same, out = step(state, PlanDecided(action="answer", ts=11.0))
    assert same.phase is Phase.ROUTING and out == []
    done, out = step(state, BudgetExhausted(resource="wall_clock", used=5.0, limit=5.0,
                                            actor="runtime", ts=16.0))
    assert done.phase is Phase.DONE and done.outcome == "no_evidence"


def test_without_hands_off_nothing_is_asked() -> None:
    state, out = step(initial_state(), RunStarted(question="Summarise the guide", ts=1.0))
    assert state.phase is Phase.PLANNING and not any(isinstance(c, HandoffRequested)
                                                     for c in out)


def test_the_answer_is_in_the_question_language() -> None:
    state, _ = step(initial_state(hands_off=True), RunStarted(question="请总结一下部署指南",
                                                              ts=1.0))
    _, [finish] = step(state, HandoffDecided(task=TASK, title="部署指南", ts=2.0))
    assert isinstance(finish, Finish) and "部署指南" in finish.answer and "任务 t1" in finish.answer
