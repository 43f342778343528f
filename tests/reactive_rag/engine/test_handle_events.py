"""``async for event in handle``: a run's events in order, through its end, whenever one starts."""

from __future__ import annotations

import asyncio

import pytest

from reactive_rag import Engine, NoRunningLoop
from reactive_rag.index import CorpusIndex
from streams import Event, RunFinished, RunStarted

QUESTION = "Who isolated aspirin?"


@pytest.fixture
def engine(index: CorpusIndex) -> Engine:
    return Engine(index)


def _check_whole_run(events: list[Event], first_seq: int = 1) -> None:
    assert [e.seq for e in events] == list(range(first_seq, first_seq + len(events)))
    assert isinstance(events[-1], RunFinished)
    assert sum(isinstance(e, RunFinished) for e in events) == 1


async def test_a_consumer_from_the_start_sees_every_event_then_stops(engine: Engine) -> None:
    handle = engine.start(QUESTION, collections=["demo"])
    events = [event async for event in handle]
    result = await handle.wait()
    _check_whole_run(events)
    assert isinstance(events[0], RunStarted)
    assert events == list(result.events)  # the same log the result holds


async def test_a_consumer_that_starts_after_the_end_gets_the_whole_run(engine: Engine) -> None:
    handle = engine.start(QUESTION, collections=["demo"], mode="rag")
    result = await handle.wait()
    late = [event async for event in handle]
    assert late == list(result.events)
    _check_whole_run(late)


async def test_after_starts_in_the_middle_with_no_gap_and_no_duplicate(engine: Engine) -> None:
    handle = engine.start(QUESTION, collections=["demo"])
    result = await handle.wait()
    middle = len(result.events) // 2
    tail = [event async for event in handle.events(after=middle)]
    assert tail == list(result.events[middle:])
    _check_whole_run(tail, first_seq=middle + 1)
    assert [event async for event in handle.events(after=len(result.events))] == []


async def test_after_in_the_middle_of_a_live_run_then_follows_it_live(engine: Engine) -> None:
    handle = engine.start(QUESTION, collections=["demo"])
    seen: list[Event] = []
    async for event in handle:  # stop early, once a few events are out
        seen.append(event)
        if len(seen) == 3:
            break
    rest = [event async for event in handle.events(after=seen[-1].seq)]
    _check_whole_run(seen + rest)
    assert (seen + rest) == list((await handle.wait()).events)


async def test_two_consumers_at_once_each_get_the_whole_run(engine: Engine) -> None:
    handle = engine.start(QUESTION, collections=["demo"])

    async def collect() -> list[Event]:
        return [event async for event in handle]

    a, b = await asyncio.gather(collect(), collect())
    assert a == b == list((await handle.wait()).events)


async def test_a_negative_after_is_refused(engine: Engine) -> None:
    handle = engine.start(QUESTION, collections=["demo"])
    with pytest.raises(ValueError, match="after"):
        handle.events(after=-1)
    await handle.wait()


def test_start_without_a_running_loop_says_how_to_call_it(index: CorpusIndex) -> None:
    engine = Engine(index)
    with pytest.raises(NoRunningLoop) as caught:
        engine.start(QUESTION, collections=["demo"])
    assert isinstance(caught.value, RuntimeError)
    assert "asyncio.run(" in str(caught.value) and "async" in str(caught.value)
    assert engine.runs == {}  # nothing was started
