"""``follow``: a stream's events after a seq, in order, to its end, through a bounded bridge."""

from __future__ import annotations

import asyncio

import pytest

from streams import Event, RunFinished, RunStarted, RunStream, SearchRequested, follow


def _run(n: int) -> RunStream:
    stream = RunStream("r1")
    stream.publish(RunStarted(question="q"))
    for i in range(n):
        stream.publish(SearchRequested(query=f"q{i}"))
    return stream


async def _collect(stream: RunStream, *args: int, **kwargs: object) -> list[Event]:
    return [e async for e in follow(stream, *args, **kwargs)]  # type: ignore[arg-type]


async def test_history_then_live_then_it_stops_after_run_finished() -> None:
    stream = _run(2)
    task = asyncio.create_task(_collect(stream, 1))
    await asyncio.sleep(0)
    stream.publish(SearchRequested(query="live"))
    stream.publish(RunFinished(outcome="answered"))
    got = await asyncio.wait_for(task, 10)
    assert [e.seq for e in got] == [2, 3, 4, 5] and isinstance(got[-1], RunFinished)


async def test_a_slow_consumer_behind_a_one_event_buffer_loses_and_repeats_nothing() -> None:
    stream = _run(0)
    got: list[Event] = []

    async def consume() -> None:
        async for event in follow(stream, buffer=1):
            got.append(event)
            await asyncio.sleep(0)  # slower than the publisher below

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)
    for i in range(50):
        stream.publish(SearchRequested(query=f"q{i}"))
    stream.publish(RunFinished(outcome="answered"))
    await asyncio.wait_for(task, 10)
    assert [e.seq for e in got] == list(range(1, 53))


async def test_until_ends_at_the_first_event_it_accepts() -> None:
    stream = _run(5)
    got = await asyncio.wait_for(
        _collect(stream, until=lambda e: getattr(e, "query", "") == "q2"), 10)
    assert [e.seq for e in got] == [1, 2, 3, 4]


async def test_after_the_end_of_a_finished_stream_yields_nothing() -> None:
    stream = _run(1)
    stream.publish(RunFinished(outcome="answered"))
    assert await _collect(stream, 3) == []
    assert [e.seq for e in await _collect(stream, 2)] == [3]


def test_bad_arguments_are_refused_before_anything_is_subscribed() -> None:
    stream = _run(0)
    with pytest.raises(ValueError, match="after_seq"):
        asyncio.run(_collect(stream, -1))
    with pytest.raises(ValueError, match="buffer"):
        asyncio.run(_collect(stream, buffer=0))
    assert stream.observer_count == 0
