"""SSE delivery in bursts: what piled up goes out in one write, each event encoded once.

A plan step's parallel results settle together, so a client's buffer often
holds several events when its writer wakes; they must still arrive whole, in
order, framed exactly as one-at-a-time writes would frame them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from reactive_rag.server import EventFeed, _sse
from reactive_rag.server._sse import format_event
from streams import (
    Event,
    RunFinished,
    RunStarted,
    RunStream,
    SearchRequested,
    encode_json,
)


def _run(n: int) -> list[Event]:
    stream = RunStream("r1")
    stream.publish(RunStarted(question="q"))
    for i in range(n):
        stream.publish(SearchRequested(query=f"q{i}"))
    stream.publish(RunFinished(outcome="answered"))
    return stream.history()


async def _burst(events: list[Event], released: asyncio.Event) -> AsyncIterator[Event]:
    for event in events:
        yield event
    released.set()


async def test_a_burst_is_taken_whole_in_order_and_capped_per_batch() -> None:
    events = _run(10)  # 12 events
    released = asyncio.Event()
    async with EventFeed(_burst(events, released), maxsize=64) as feed:
        await released.wait()  # the whole burst is buffered before the writer wakes
        first = await feed.get_batch(5, limit=5)
        rest: list[Event] = []
        while batch := await feed.get_batch(5, limit=5):
            rest.extend(batch)
    assert [e.seq for e in first] == [1, 2, 3, 4, 5]
    assert [e.seq for e in first + rest] == [e.seq for e in events]
    assert feed.statistics().delivered == len(events)


async def test_get_still_yields_one_event_at_a_time_then_none() -> None:
    events = _run(2)
    released = asyncio.Event()
    async with EventFeed(_burst(events, released), maxsize=8) as feed:
        got = []
        while (event := await feed.get(5)) is not None:
            got.append(event.seq)
    assert got == [1, 2, 3, 4]


def test_an_event_is_encoded_once_for_all_its_subscribers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    encoded: list[int] = []

    def counting(event: Event) -> str:
        encoded.append(event.seq)
        return encode_json(event)

    monkeypatch.setattr(_sse, "encode_json", counting)
    event = _run(1)[1]
    first = format_event(event)
    again = format_event(event)  # a second subscriber of the same committed event
    copy = event.model_copy()  # equal, not the same object: encoded on its own
    assert first == again == format_event(copy)
    assert encoded == [2, 2]
    assert first.startswith(b"id: 2\nevent: search.requested\ndata: {")
    assert first.endswith(b"\n\n") and first.count(b"\n") == 4


def test_an_explicit_id_is_never_served_from_the_cache() -> None:
    event = _run(1)[1]
    plain = format_event(event)
    retried = format_event(event, event_id="3.2")
    assert retried.startswith(b"id: 3.2\n") and plain.startswith(b"id: 2\n")
    assert format_event(event) == plain
