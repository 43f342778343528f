"""Replay and attach: the stored tail then live events, with no gap and no duplicate."""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reactive_rag.store import AttachGap, Recorder, RunMeta, RunNotFound
from streams import Event, RunFinished, RunStarted, RunStream, SearchRequested

from ._store_fixtures import BACKENDS, NEEDS_REDIS, AnyStore, make_store, open_store

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyStore]:
    async for opened in open_store(request.param, tmp_path, poll_interval_s=0.005):
        yield opened


def meta(run_id: str) -> RunMeta:
    return RunMeta(run_id=run_id, tenant="acme", question="why?")


async def collect(events: AsyncIterator[Event]) -> list[Event]:
    async with contextlib.aclosing(events):  # type: ignore[type-var]
        return [event async for event in events]


async def test_attach_to_a_finished_run_replays_the_tail_and_ends(store: AnyStore) -> None:
    stream = RunStream("r1", keep_history=False)
    async with Recorder(store, stream, meta("r1")):
        stream.publish(RunStarted(question="why?"))
        for i in range(600):  # more than one page of the store
            stream.publish(SearchRequested(query=f"q{i}"))
        stream.publish(RunFinished(outcome="answered"))
    for after in (0, 1, 300, 601):
        got = await collect(store.attach("r1", after))
        assert [e.seq for e in got] == list(range(after + 1, 603))
    assert await collect(store.attach("r1", 602)) == []
    assert [e.seq for e in await collect(store.attach("r1", 600, stream))] == [601, 602]


@pytest.mark.parametrize(
    ("backend", "keep_history"),
    [
        ("sqlite", False),
        ("sqlite", True),  # served from the stream's memory: the store is not read
        pytest.param("redis", False, marks=NEEDS_REDIS),
    ],
    ids=["sqlite", "stream-history", "redis"],
)
async def test_1000_random_attach_points_during_publishing_see_exactly_n_plus_1_to_last(
    backend: str, keep_history: bool, tmp_path: Path
) -> None:
    async for store in open_store(backend, tmp_path, poll_interval_s=0.005):
        await _attach_points(store, keep_history)


async def _attach_points(store: AnyStore, keep_history: bool) -> None:
    rng = random.Random(1000)
    stream = RunStream("r1", keep_history=keep_history)
    recorder = await Recorder(store, stream, meta("r1"), batch_size=16,
                              flush_interval_s=0.002).start()
    attachers: list[tuple[int, asyncio.Task[list[Event]]]] = []
    total = 300
    stream.publish(RunStarted(question="why?"))
    for i in range(total):
        stream.publish(SearchRequested(query=f"q{i}"))
        # Attach points anywhere from 0 to the newest seq: some fully stored,
        # some only in the recorder's memory, some exactly at the live edge.
        while rng.random() < 0.83 and len(attachers) < 1000:
            after = rng.choice([stream.last_seq, rng.randint(0, stream.last_seq)])
            attachers.append((after, asyncio.create_task(collect(store.attach("r1", after,
                                                                               stream)))))
        if rng.random() < 0.3:
            await asyncio.sleep(0)
        if rng.random() < 0.02:
            await asyncio.sleep(0.003)  # let batches commit in between
    while len(attachers) < 1000:
        after = rng.randint(0, stream.last_seq)
        attachers.append((after, asyncio.create_task(collect(store.attach("r1", after, stream)))))
    stream.publish(RunFinished(outcome="answered"))
    last = stream.last_seq
    results = await asyncio.gather(*(task for _, task in attachers))
    await recorder.aclose()
    assert len(results) == 1000
    for (after, _), got in zip(attachers, results, strict=True):
        assert [e.seq for e in got] == list(range(after + 1, last + 1)), f"after {after}"
    assert isinstance(results[0][-1], RunFinished)


async def test_attach_without_live_follows_a_run_another_writer_is_storing(
    store: AnyStore, tmp_path: Path
) -> None:
    # The writer uses its own store object (own connections), as another process would.
    if hasattr(store, "prefix"):
        writer_store = make_store("redis", tmp_path, prefix=store.prefix)
    else:
        writer_store = make_store("sqlite", tmp_path)
    await writer_store.open()
    try:
        stream = RunStream("r1", keep_history=False)
        recorder = await Recorder(writer_store, stream, meta("r1")).start()
        stream.publish(RunStarted(question="why?"))
        await recorder.flush()
        rng = random.Random(7)
        followers = []
        for i in range(300):
            stream.publish(SearchRequested(query=f"q{i}"))
            if i % 10 == 0:
                after = rng.randint(0, stream.last_seq)
                followers.append((after, asyncio.create_task(collect(store.attach("r1", after)))))
                await asyncio.sleep(0.002)
        stream.publish(RunFinished(outcome="answered"))
        await recorder.aclose()
        for after, task in followers:
            got = await asyncio.wait_for(task, 30)
            assert [e.seq for e in got] == list(range(after + 1, 303))
    finally:
        await writer_store.close()


async def test_follower_of_a_crashed_run_ends_with_the_interrupted_event(
    store: AnyStore, tmp_path: Path
) -> None:
    await store.create_run(meta("r1"))
    stream = RunStream("r1", keep_history=False)
    recorder = await Recorder(store, stream).start()
    stream.publish(SearchRequested(query="a"))
    await recorder.flush()
    follower = asyncio.create_task(collect(store.attach("r1", 0)))
    await asyncio.sleep(0.05)
    assert not follower.done()  # still waiting for more of a running run
    await recorder.aclose()
    assert await store.mark_interrupted() == ["r1"]  # what the next start-up does
    got = await asyncio.wait_for(follower, 30)
    assert [e.seq for e in got] == [1, 2]
    assert isinstance(got[-1], RunFinished) and got[-1].outcome == "interrupted"


async def test_attach_detects_events_that_were_never_stored(tmp_path: Path) -> None:
    async for store in open_store("sqlite", tmp_path, gap_timeout_s=0.1, poll_interval_s=0.01):
        await store.create_run(meta("r1"))
        stream = RunStream("r1", keep_history=False)  # and no recorder: nothing keeps 1..3
        for i in range(3):
            stream.publish(SearchRequested(query=f"q{i}"))
        attacher = asyncio.create_task(collect(store.attach("r1", 0, stream)))
        await asyncio.sleep(0.01)
        stream.publish(SearchRequested(query="q3"))
        with pytest.raises(AttachGap, match=r"events 1\.\.[34] were never stored"):
            await attacher


async def test_attach_to_a_missing_run_fails_before_any_event(store: AnyStore) -> None:
    with pytest.raises(RunNotFound):
        await collect(store.attach("nope", 0, RunStream("nope")))
    with pytest.raises(RunNotFound):
        await collect(store.events("nope"))


async def test_attacher_that_stops_early_unsubscribes_from_the_stream(store: AnyStore) -> None:
    stream = RunStream("r1", keep_history=False)
    async with Recorder(store, stream, meta("r1")):
        stream.publish(SearchRequested(query="a"))
        events = store.attach("r1", 0, stream)
        first = await anext(events)
        assert first.seq == 1
        observers_before = stream.observer_count
        await events.aclose()  # type: ignore[attr-defined]
        assert stream.observer_count == observers_before - 1
        stream.publish(RunFinished(outcome="cancelled"))


async def test_attach_follows_a_real_child_process_writing_the_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.reactive_rag._store_child", "sqlite", str(db), "k:",
        "p-", "3", "200", "0.001", cwd=REPO, stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line.decode().split() == ["created", "p-run-0"]
        async for store in open_store("sqlite", tmp_path, poll_interval_s=0.005):
            got = await asyncio.wait_for(collect(store.attach("p-run-0", 0)), 60)
            assert [e.seq for e in got] == list(range(1, 203))
            assert isinstance(got[-1], RunFinished)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.communicate()


async def test_negative_attach_point_means_from_the_start(store: AnyStore) -> None:
    stream = RunStream("r1", keep_history=False)
    async with Recorder(store, stream, meta("r1")):
        stream.publish(SearchRequested(query="a"))
        stream.publish(RunFinished(outcome="answered"))
    assert [e.seq for e in await collect(store.attach("r1", -5, stream))] == [1, 2]
    assert [e.seq for e in await collect(store.events("r1", -5))] == [1, 2]
