"""The shared overflow policy: what a slow consumer may lose, and what it never loses."""

from __future__ import annotations

import pytest

from streams import (
    AnswerDelta,
    BudgetTick,
    EventBuffer,
    OverflowPolicy,
    RunFinished,
    SearchRequested,
)


def drain(buffer: EventBuffer) -> list[str]:
    return [buffer.popleft().type for _ in range(len(buffer))]


def test_progress_is_coalesced_and_never_a_reason_to_detach() -> None:
    buffer = EventBuffer(2)
    assert all(buffer.push(BudgetTick(steps=i)) for i in range(10))
    assert len(buffer) == 2 and buffer.coalesced == 8 and buffer.high_water == 2


def test_a_normal_event_pushes_out_progress_then_is_refused_under_detach() -> None:
    buffer = EventBuffer(2)
    buffer.push(BudgetTick())
    buffer.push(SearchRequested(query="a"))
    assert buffer.push(SearchRequested(query="b"))  # the tick made room
    assert buffer.dropped == 1
    assert not buffer.push(SearchRequested(query="c"))  # no gap allowed: detach
    assert drain(buffer) == ["search.requested", "search.requested"]


def test_drop_normal_makes_room_for_essential_events_but_never_drops_them() -> None:
    buffer = EventBuffer(2, OverflowPolicy.DROP_NORMAL)
    buffer.push(SearchRequested(query="a"))
    buffer.push(AnswerDelta(text="x"))
    assert buffer.push(RunFinished(outcome="answered"))  # the oldest normal event went
    assert drain(buffer) == ["answer.delta", "run.finished"]
    full = EventBuffer(1, OverflowPolicy.DROP_NORMAL)
    full.push(AnswerDelta(text="x"))
    assert not full.push(RunFinished(outcome="answered"))


def test_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        EventBuffer(0)
