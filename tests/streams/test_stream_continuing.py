"""A stream that continues a stored log (crash resume) and the ``run.resumed`` event."""

from __future__ import annotations

import pytest

from streams import (
    EVENT_TYPES,
    Event,
    Priority,
    RunFinished,
    RunResumed,
    RunStarted,
    RunStream,
    SearchRequested,
    decode_json,
    decode_msgpack,
    encode_json,
    encode_msgpack,
)


def stored_log() -> list[Event]:
    first = RunStream("run-1", clock=lambda: 10.0)
    first.publish(RunStarted(question="q"))
    first.publish(SearchRequested(query="q"), actor="controller", cause=1)
    events = first.history()
    return [*events, RunFinished(outcome="interrupted", run_id="run-1", seq=3, ts=50.0,
                                 actor="store")]


def test_a_continuing_stream_holds_the_log_and_numbers_on_after_it() -> None:
    log = stored_log()
    stream = RunStream.continuing("run-1", log, clock=lambda: 99.0)
    assert stream.history() == log and stream.last_seq == 3
    assert stream.finished is None  # the stored interrupted terminal does not close it
    seen: list[int] = []
    stream.subscribe(lambda e: seen.append(e.seq), name="late")
    resumed = stream.publish(RunResumed(after_seq=3, reason="crash", elapsed_s=1.5))
    assert (resumed.run_id, resumed.seq, resumed.ts) == ("run-1", 4, 99.0)
    assert seen == [4]  # stored events are history, not delivered again
    end = stream.publish(RunFinished(outcome="answered"))
    assert stream.finished is end and end.seq == 5
    replayed: list[Event] = []
    stream.replay().subscribe(replayed.append)
    assert [e.seq for e in replayed] == [1, 2, 3, 4, 5]
    assert [e.seq for e in stream.history(3)] == [4, 5]


def test_a_continuing_stream_without_history_still_numbers_on() -> None:
    stream = RunStream.continuing("run-1", stored_log(), keep_history=False)
    assert stream.history() == [] and stream.publish(RunResumed(after_seq=3)).seq == 4


@pytest.mark.parametrize("bad", ["gap", "other-run"])
def test_a_log_that_is_not_one_run_from_seq_1_is_refused(bad: str) -> None:
    log = stored_log()
    if bad == "gap":
        log = [log[0], log[2]]
        match = "without a gap"
    else:
        log[1] = log[1].model_copy(update={"run_id": "run-2"})
        match = "of run 'run-2'"
    with pytest.raises(ValueError, match=match):
        RunStream.continuing("run-1", log)


def test_run_resumed_is_a_registered_essential_event_that_round_trips() -> None:
    event = RunResumed(after_seq=41, reason="resumed after a crash", attempt=2,
                       elapsed_s=12.5, run_id="r", seq=42, ts=3.0)
    assert EVENT_TYPES["run.resumed"] is RunResumed
    assert RunResumed.priority is Priority.ESSENTIAL
    assert decode_json(encode_json(event)) == event
    assert decode_msgpack(encode_msgpack(event)) == event
