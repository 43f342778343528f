"""Marble tests for the stream operators (virtual time, no sleeps)."""

from __future__ import annotations

import pytest
from reactivex.testing.marbles import marbles_testing

from streams import (
    BudgetExhausted,
    BudgetTick,
    RunFinished,
    RunStarted,
    SearchRequested,
    operators,
)


def tick(seq: int, **kw: object) -> BudgetTick:
    return BudgetTick(run_id="r", seq=seq, **kw)  # type: ignore[arg-type]


def search(seq: int, run_id: str = "r") -> SearchRequested:
    return SearchRequested(run_id=run_id, seq=seq, query=f"q{seq}")


FIN = RunFinished(run_id="r", seq=99, outcome="answered")


def test_of_type_keeps_only_named_types() -> None:
    values = {"a": RunStarted(run_id="r", seq=1, question="q"), "b": search(2), "c": FIN}
    with marbles_testing() as (start, _cold, hot, exp):
        #                 0123456
        source = hot("-a-b-c-|", values)
        expected = exp("---b-c-|", values)
        assert start(source.pipe(operators.of_type("search.requested", RunFinished))) == expected


def test_of_type_checks_arguments_before_subscription() -> None:
    with pytest.raises(ValueError, match="at least one"):
        operators.of_type()
    with pytest.raises(ValueError, match="unknown event type"):
        operators.of_type("no.such.event")
    with pytest.raises(ValueError, match="expected an event type"):
        operators.of_type(42)  # type: ignore[arg-type]


def test_for_run_filters_a_multiplexed_bus() -> None:
    values = {"a": search(1, "r1"), "b": search(1, "r2"), "c": search(2, "r1")}
    with marbles_testing() as (start, _cold, hot, exp):
        source = hot("-a-b-c-|", values)
        expected = exp("-a---c-|", values)
        assert start(source.pipe(operators.for_run("r1"))) == expected
    with pytest.raises(ValueError):
        operators.for_run("")


def test_until_finished_completes_after_the_terminal_event() -> None:
    values = {"a": search(1), "f": FIN, "b": search(100)}
    with marbles_testing() as (start, _cold, hot, exp):
        source = hot("-a-f-b-|", values)
        expected = exp("-a-(f,|)", values)
        assert start(source.pipe(operators.until_finished())) == expected


def _timeline(results: list) -> list[tuple[float, str, int | None]]:  # type: ignore[type-arg]
    """(virtual time, kind, seq) of each recorded notification."""
    out = []
    for r in results:
        seq = r.value.value.seq if r.value.kind == "N" else None
        out.append((r.time, r.value.kind, seq))
    return out


def test_coalesce_progress_emits_first_then_latest_per_window() -> None:
    values = {"t": tick(1), "u": tick(2), "v": tick(3), "w": tick(4)}
    with marbles_testing() as (start, _cold, hot, exp):
        # ticks at t=1,3,5; the window opened by t=1 closes at t=6 with the newest held (v)
        source = hot("-t-u-v-------w-|", values)
        expected = exp("-t----v------w-|", values)
        assert start(source.pipe(operators.coalesce_progress(5.0))) == expected


def test_coalesce_progress_flushes_held_ticks_before_a_normal_event() -> None:
    values = {"t": tick(1), "u": tick(2), "a": search(3), "b": search(4)}
    with marbles_testing() as (start, _cold, hot, _exp):
        source = hot("-t-u-a-b-|", values)
        results = start(source.pipe(operators.coalesce_progress(10.0)))
    # tick u is held, then released right before `a` (same instant) so seq order is kept
    assert _timeline(results) == [
        (201.0, "N", 1), (205.0, "N", 2), (205.0, "N", 3), (207.0, "N", 4), (209.0, "C", None)
    ]


def test_coalesce_progress_flushes_on_completion() -> None:
    values = {"t": tick(1), "u": tick(2)}
    with marbles_testing() as (start, _cold, hot, _exp):
        results = start(hot("-t-u-|", values).pipe(operators.coalesce_progress(10.0)))
    assert _timeline(results) == [(201.0, "N", 1), (205.0, "N", 2), (205.0, "C", None)]


def test_coalesce_progress_rejects_non_positive_interval() -> None:
    with pytest.raises(ValueError, match="positive"):
        operators.coalesce_progress(0)


def test_coalesce_progress_passes_an_upstream_error_on_after_what_it_let_through() -> None:
    values = {"t": tick(1), "a": search(2)}
    error = RuntimeError("provider bug")
    with marbles_testing() as (start, _cold, hot, _exp):
        source = hot("-t-a-#", values, error)
        results = start(source.pipe(operators.coalesce_progress(1.0)))
    assert _timeline(results)[:2] == [(201.0, "N", 1), (203.0, "N", 2)]
    assert [r.value.kind for r in results] == ["N", "N", "E"]
    assert results[-1].time == 205.0 and results[-1].value.exception is error


def test_budget_watch_turns_ticks_into_exhaustion_once() -> None:
    values = {"t": tick(1, tool_calls=3), "u": tick(2, tool_calls=4), "v": tick(3, tool_calls=5)}
    with marbles_testing() as (start, _cold, hot, _exp):
        source = hot("-t-u-v-|", values)
        results = start(source.pipe(operators.budget_watch(max_tool_calls=4)))
    out = [r.value.value for r in results if r.value.kind == "N"]
    assert [type(e).__name__ for e in out] == ["BudgetTick", "BudgetTick", "BudgetExhausted",
                                               "BudgetTick"]
    exhausted = out[2]
    assert isinstance(exhausted, BudgetExhausted)
    assert exhausted.resource == "tool_calls" and exhausted.cause == 2 and exhausted.limit == 4


def test_budget_watch_uses_the_ticks_own_limits() -> None:
    values = {"t": tick(1, elapsed_s=91.0, deadline_s=90.0)}
    with marbles_testing() as (start, _cold, hot, _exp):
        results = start(hot("-t-|", values).pipe(operators.budget_watch()))
    out = [r.value.value for r in results if r.value.kind == "N"]
    assert isinstance(out[1], BudgetExhausted) and out[1].resource == "wall_clock"


def test_budget_watch_rejects_bad_limits() -> None:
    with pytest.raises(ValueError, match="max_steps"):
        operators.budget_watch(max_steps=0)
