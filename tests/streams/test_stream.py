"""The run stream: ordering, seq, isolation of failing subscribers, replay."""

from __future__ import annotations

import threading

import pytest
from pydantic import ValidationError
from reactivex import operators as ops

from streams import (
    BudgetTick,
    Event,
    RunFinished,
    RunStarted,
    RunStream,
    SearchCompleted,
    SearchRequested,
    StreamClosed,
    SubscriberDetached,
)


def test_publish_stamps_run_id_seq_and_time() -> None:
    stream = RunStream("run-1", clock=lambda: 123.5)
    first = stream.publish(RunStarted(question="q"))
    second = stream.publish(SearchRequested(query="q"), actor="planner", cause=1)
    assert (first.run_id, first.seq, first.ts) == ("run-1", 1, 123.5)
    assert (second.seq, second.actor, second.cause) == (2, "planner", 1)


def test_seq_is_gap_free_and_ordered_under_concurrent_threads() -> None:
    stream = RunStream("run-1")
    seen: list[int] = []
    stream.events.subscribe(lambda e: seen.append(e.seq))
    start = threading.Barrier(8)

    def publisher() -> None:
        start.wait()
        for _ in range(500):
            stream.publish(BudgetTick())

    threads = [threading.Thread(target=publisher) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == list(range(1, 4001))


def test_publish_from_inside_a_subscriber_keeps_every_subscriber_in_order() -> None:
    stream = RunStream("run-1")
    first_seen: list[int] = []
    second_seen: list[int] = []

    def reacting(event: Event) -> None:
        first_seen.append(event.seq)
        if isinstance(event, SearchRequested):
            stream.publish(SearchCompleted(query=event.query), cause=event.seq)

    stream.events.subscribe(reacting)
    stream.events.subscribe(lambda e: second_seen.append(e.seq))
    stream.publish(SearchRequested(query="a"))
    stream.publish(SearchRequested(query="b"))
    assert first_seen == [1, 2, 3, 4]
    assert second_seen == [1, 2, 3, 4]


def test_a_raising_subscriber_is_detached_and_the_others_go_on() -> None:
    stream = RunStream("run-1")
    healthy: list[str] = []

    def broken(event: Event) -> None:
        if event.seq == 2:
            raise RuntimeError("bug in a user's logger")

    stream.subscribe(broken, name="logger")
    stream.events.subscribe(lambda e: healthy.append(e.type))
    for _ in range(3):
        stream.publish(SearchRequested(query="q"))
    assert healthy == ["search.requested", "search.requested", "subscriber.detached",
                       "search.requested"]
    detached = [e for e in stream.history() if isinstance(e, SubscriberDetached)]
    assert detached[0].subscriber == "logger"
    assert "RuntimeError: bug in a user's logger" in detached[0].reason
    assert stream.detached == [("logger", detached[0].reason)]


def test_a_raw_observer_that_raises_is_isolated_too() -> None:
    stream = RunStream("run-1")
    errors: list[Exception] = []
    good: list[int] = []

    def bad(event: Event) -> None:
        raise ValueError("nope")

    stream.events.subscribe(bad, errors.append)
    stream.events.subscribe(lambda e: good.append(e.seq))
    stream.publish(RunStarted(question="q"))
    stream.publish(RunStarted(question="q"))
    assert good == [1, 2, 3]  # 2 is the subscriber.detached report
    assert len(errors) == 1 and isinstance(errors[0], ValueError)


def test_a_raising_operator_on_a_named_subscription_detaches_only_it() -> None:
    stream = RunStream("run-1")
    got: list[int] = []

    def explode(e: Event) -> Event:
        raise KeyError("op")

    stream.subscribe(got.append, name="piped", operators=[ops.map(explode)])  # type: ignore[arg-type]
    stream.publish(RunStarted(question="q"))
    stream.publish(RunStarted(question="q"))
    assert got == []
    assert [name for name, _ in stream.detached] == ["piped"]


def test_run_finished_is_last_and_completes_subscribers() -> None:
    stream = RunStream("run-1")
    completed = threading.Event()
    stream.events.subscribe(on_completed=completed.set)
    stream.publish(RunFinished(outcome="answered"))
    assert completed.is_set()
    with pytest.raises(StreamClosed, match="already finished"):
        stream.publish(SearchRequested(query="late"))
    assert stream.try_publish(SearchRequested(query="late")) is None
    assert [e.type for e in stream] == ["run.finished"]
    assert stream.finished is not None and stream.finished.outcome == "answered"


def test_replay_from_any_seq_then_live_has_no_gap_and_no_duplicate() -> None:
    stream = RunStream("run-1")
    for _ in range(10):
        stream.publish(BudgetTick())
    for after in (0, 3, 10):
        got: list[int] = []
        stream.replay(after).subscribe(lambda e, got=got: got.append(e.seq))
        stream.publish(BudgetTick())
        assert got == list(range(after + 1, stream.last_seq + 1))


def test_replay_subscribed_while_dispatching_sees_everything_once() -> None:
    stream = RunStream("run-1")
    late: list[int] = []

    def attach_midway(event: Event) -> None:
        if event.seq == 5:
            stream.publish(BudgetTick())  # queued behind the current delivery
            stream.replay(2).subscribe(late.append_seq)  # type: ignore[attr-defined]

    class _Late(list[int]):
        def append_seq(self, e: Event) -> None:
            self.append(e.seq)

    late = _Late()
    stream.events.subscribe(attach_midway)
    for _ in range(8):
        stream.publish(BudgetTick())
    assert late == list(range(3, stream.last_seq + 1))


def test_replay_of_a_finished_run_completes() -> None:
    stream = RunStream("run-1")
    stream.publish(RunStarted(question="q"))
    stream.publish(RunFinished(outcome="no_evidence"))
    got: list[str] = []
    done: list[bool] = []
    stream.replay(0).subscribe(lambda e: got.append(e.type), on_completed=lambda: done.append(True))
    assert got == ["run.started", "run.finished"] and done == [True]


def test_empty_run_id_is_refused() -> None:
    with pytest.raises(ValueError):
        RunStream("")


def test_publish_returns_a_stamped_copy_and_leaves_the_event_untouched() -> None:
    stream = RunStream("run-1", clock=lambda: 7.0)
    event = SearchRequested(query="q", cause=4)
    first = stream.publish(event, actor="planner")
    second = stream.publish(event)
    assert (event.seq, event.run_id, event.actor, event.cause) == (0, "", "", 4)
    assert (first.seq, first.actor, first.cause) == (1, "planner", 4)
    assert (second.seq, second.actor, second.cause) == (2, "", 4)
    # the copy is a real model: it validates, compares and copies like one
    assert SearchRequested.model_validate(first.model_dump()) == first
    assert first.model_copy(update={"query": "r"}).query == "r"
    assert {"run_id", "seq", "ts", "actor", "query", "cause"} <= first.model_fields_set


def test_an_owned_event_is_stamped_itself_and_stays_a_frozen_valid_model() -> None:
    stream = RunStream("run-1", clock=lambda: 7.0)
    stream.publish(SearchRequested(query="first"))
    event = SearchRequested(query="q")
    stamped = stream.try_publish(event, actor="planner", cause=1, owned=True)
    assert stamped is event  # no copy: the caller handed it over
    assert (event.run_id, event.seq, event.ts, event.actor, event.cause) == ("run-1", 2, 7.0,
                                                                            "planner", 1)
    assert {"run_id", "seq", "ts", "actor", "cause", "query"} <= event.model_fields_set
    with pytest.raises(ValidationError):
        event.seq = 9  # type: ignore[misc]  # still frozen for everyone else
    assert SearchRequested.model_validate(event.model_dump()) == event
    assert stream.history()[-1] is event


def test_a_subscriber_arriving_after_the_end_sees_the_stream_complete() -> None:
    stream = RunStream("run-1")
    stream.publish(RunFinished(outcome="answered"))
    seen: list[Event] = []
    completed = threading.Event()
    stream.events.subscribe(seen.append, on_completed=completed.set)
    assert completed.is_set() and seen == []
    assert stream.observer_count == 0


def test_taps_are_released_when_the_run_finishes() -> None:
    stream = RunStream("run-1")
    got: list[str] = []
    tap = stream.tap(["search.requested"], lambda e: got.append(e.type), name="t")
    stream.publish(SearchRequested(query="a"))
    stream.publish(RunFinished(outcome="answered"))
    assert got == ["search.requested"]
    assert stream._taps == {}  # the stream no longer holds the callback (or what it refers to)
    tap.dispose()  # disposing after the end is harmless


def test_a_disposed_tap_gets_nothing_more_even_mid_dispatch() -> None:
    stream = RunStream("run-1")
    got: list[str] = []
    second: list[object] = []

    def first(e: Event) -> None:
        second[0].dispose()  # type: ignore[attr-defined]

    stream.tap(["search.requested"], first, name="first")
    second.append(stream.tap(["search.requested"], lambda e: got.append(e.type), name="second"))
    stream.publish(SearchRequested(query="a"))
    stream.publish(SearchRequested(query="b"))
    assert got == []
