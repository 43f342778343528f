"""Async subscribers: bounded buffers, overflow policy, isolation of slow sinks."""

from __future__ import annotations

import asyncio

from streams import (
    AnswerDelta,
    AsyncSubscriber,
    BudgetTick,
    Event,
    EvidenceChunk,
    EvidenceRegistered,
    OverflowPolicy,
    RunFinished,
    RunStream,
    SearchRequested,
)


async def test_fast_sink_receives_every_event_in_order_then_finishes() -> None:
    stream = RunStream("r")
    got: list[int] = []

    async def sink(e: Event) -> None:
        got.append(e.seq)

    sub = AsyncSubscriber(sink, name="ws").attach(stream)
    for _ in range(50):
        stream.publish(SearchRequested(query="q"))
    stream.publish(RunFinished(outcome="answered"))
    await asyncio.wait_for(sub.wait(), 5)
    assert got == list(range(1, 52))
    assert sub.statistics().delivered == 51 and sub.detached_reason is None


async def test_stalled_sink_never_blocks_publish_and_memory_stays_bounded() -> None:
    stream = RunStream("r")
    gate = asyncio.Event()
    fast: list[int] = []

    async def stalled(e: Event) -> None:
        await gate.wait()

    async def quick(e: Event) -> None:
        fast.append(e.seq)

    slow = AsyncSubscriber(stalled, name="slow-socket", maxsize=100).attach(stream)
    quick_sub = AsyncSubscriber(quick, name="logger", maxsize=100_000).attach(stream)
    for i in range(5_000):  # progress ticks: coalesced, never a reason to detach
        stream.publish(BudgetTick(steps=i))
    await asyncio.sleep(0)
    stats = slow.statistics()
    assert stats.depth <= 100 and stats.high_water <= 100
    assert stats.coalesced >= 4_800
    assert slow.detached_reason is None
    stream.publish(EvidenceRegistered(chunks=(EvidenceChunk(id="c1", text="t"),)))
    for _ in range(200):  # normal events: the slow subscriber must be cut off, not block
        stream.publish(SearchRequested(query="q"))
    stream.publish(RunFinished(outcome="answered"))
    await asyncio.wait_for(quick_sub.wait(), 5)
    assert fast == list(range(1, stream.last_seq + 1))  # a roomy subscriber misses nothing
    assert quick_sub.detached_reason is None
    assert slow.detached_reason is not None and "buffer full" in slow.detached_reason
    assert any(name == "slow-socket" for name, _ in stream.detached)
    gate.set()
    await slow.aclose()


async def test_terminal_event_is_delivered_or_the_subscriber_is_told_why() -> None:
    stream = RunStream("r")
    gate = asyncio.Event()
    got: list[str] = []

    async def slow(e: Event) -> None:
        await gate.wait()
        got.append(e.type)

    roomy_got: list[str] = []

    async def roomy_slow(e: Event) -> None:
        await gate.wait()
        roomy_got.append(e.type)

    sub = AsyncSubscriber(slow, name="tab", maxsize=4).attach(stream)
    roomy = AsyncSubscriber(roomy_slow, name="roomy", maxsize=8).attach(stream)
    for i in range(4):
        stream.publish(AnswerDelta(text=str(i)))
    await asyncio.sleep(0)  # the consumers take one event into the sink
    stream.publish(AnswerDelta(text="x"))
    stream.publish(RunFinished(outcome="answered"))
    gate.set()
    await asyncio.wait_for(sub.wait(), 5)
    await asyncio.wait_for(roomy.wait(), 5)
    # room left: the terminal event arrives, last, after everything before it
    assert roomy.detached_reason is None
    assert roomy_got == ["answer.delta"] * 5 + ["run.finished"]
    # a full buffer: the subscriber is cut off and told which terminal event it missed
    assert sub.detached_reason is not None
    assert "could not deliver run.finished" in sub.detached_reason
    assert "run.finished" not in got
    assert any(name == "tab" for name, _ in stream.detached)


async def test_progress_events_are_dropped_before_normal_ones() -> None:
    stream = RunStream("r")
    gate = asyncio.Event()
    got: list[str] = []

    async def slow(e: Event) -> None:
        await gate.wait()
        got.append(e.type)

    sub = AsyncSubscriber(slow, name="ui", maxsize=3).attach(stream)
    stream.publish(BudgetTick())
    await asyncio.sleep(0)  # in the sink
    stream.publish(BudgetTick())
    stream.publish(SearchRequested(query="a"))
    stream.publish(BudgetTick())
    stream.publish(SearchRequested(query="b"))  # full: a buffered tick makes room
    stream.publish(RunFinished(outcome="answered"))  # full: the last tick makes room
    gate.set()
    await asyncio.wait_for(sub.wait(), 5)
    assert sub.detached_reason is None
    assert got == ["budget.tick", "search.requested", "search.requested", "run.finished"]
    assert sub.statistics().dropped == 2


async def test_drop_normal_policy_keeps_essential_events() -> None:
    stream = RunStream("r")
    gate = asyncio.Event()
    got: list[int] = []

    async def slow(e: Event) -> None:
        await gate.wait()
        got.append(e.seq)

    sub = AsyncSubscriber(slow, name="lossy", maxsize=5,
                          policy=OverflowPolicy.DROP_NORMAL).attach(stream)
    for _ in range(20):
        stream.publish(SearchRequested(query="q"))
    last = stream.publish(RunFinished(outcome="answered"))
    gate.set()
    await asyncio.wait_for(sub.wait(), 5)
    assert sub.detached_reason is None
    assert got[-1] == last.seq and len(got) <= 6
    assert got == sorted(got)


async def test_a_sink_that_raises_is_detached_with_its_error() -> None:
    stream = RunStream("r")

    async def broken(e: Event) -> None:
        raise ConnectionResetError("peer went away")

    sub = AsyncSubscriber(broken, name="ws-42").attach(stream)
    stream.publish(SearchRequested(query="q"))
    await asyncio.wait_for(sub.wait(), 5)
    assert sub.detached_reason is not None and "ConnectionResetError" in sub.detached_reason
    assert stream.history()[-1].type == "subscriber.detached"
    stream.publish(SearchRequested(query="after"))  # the run goes on


async def test_attach_from_seq_replays_then_continues_live() -> None:
    stream = RunStream("r")
    for _ in range(5):
        stream.publish(SearchRequested(query="q"))
    got: list[int] = []

    async def sink(e: Event) -> None:
        got.append(e.seq)

    sub = AsyncSubscriber(sink, name="resume").attach(stream, after_seq=3)
    stream.publish(SearchRequested(query="q"))
    stream.publish(RunFinished(outcome="answered"))
    await asyncio.wait_for(sub.wait(), 5)
    assert got == [4, 5, 6, 7]


async def test_publishing_from_another_thread_reaches_the_async_sink() -> None:
    stream = RunStream("r")
    got: list[int] = []

    async def sink(e: Event) -> None:
        got.append(e.seq)

    sub = AsyncSubscriber(sink, name="x").attach(stream)

    def from_thread() -> None:
        for _ in range(100):
            stream.publish(SearchRequested(query="q"))
        stream.publish(RunFinished(outcome="answered"))

    await asyncio.to_thread(from_thread)
    await asyncio.wait_for(sub.wait(), 5)
    assert got == list(range(1, 102))


async def test_aclose_leaves_no_task_behind() -> None:
    stream = RunStream("r")

    async def sink(e: Event) -> None:
        await asyncio.sleep(10)

    before = asyncio.all_tasks()
    sub = AsyncSubscriber(sink, name="x").attach(stream)
    stream.publish(SearchRequested(query="q"))
    await asyncio.sleep(0)
    await sub.aclose()
    assert asyncio.all_tasks() == before
    assert stream.observer_count == 0
