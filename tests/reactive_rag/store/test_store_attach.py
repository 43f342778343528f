"""Replay and attach: the stored tail then live events, with no gap and no duplicate."""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reactive_rag.store import Recorder, RunMeta, RunNotFound
from streams import Event, RunFinished, RunStarted, RunStream, SearchRequested
from tests._eventually import eventually

from .._store_fixtures import BACKENDS, AnyStore, backend_of, make_store, namespace_of, open_store

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyStore]:
    async for opened in open_store(request.param, tmp_path, poll_interval_s=0.005):
        yield opened


def meta(run_id: str) -> RunMeta:
    return RunMeta(run_id=run_id, tenant="acme", question="why?")


async def collect(events: AsyncIterator[Event]) -> list[Event]:
    async with contextlib.aclosing(events):  # type: ignore[type-var]
        return [event async for event in events]


def follow(events: AsyncIterator[Event]) -> tuple[list[Event], asyncio.Task[list[Event]]]:
    """Collect ``events`` in a task; the list shows what has arrived so far."""
    got: list[Event] = []

    async def run() -> list[Event]:
        async with contextlib.aclosing(events):  # type: ignore[type-var]
            async for event in events:
                got.append(event)
        return got

    return got, asyncio.create_task(run())


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
    # A client already holding the end (or a seq past it) gets the end again,
    # never an empty stream that a browser's EventSource would retry for ever.
    for after in (602, 700):
        assert [(e.seq, e.type) for e in await collect(store.attach("r1", after))] == [
            (602, "run.finished")]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_1000_random_attach_points_during_publishing_see_exactly_n_plus_1_to_last(
    backend: str, tmp_path: Path
) -> None:
    async for store in open_store(backend, tmp_path, poll_interval_s=0.005):
        await _attach_points(store)


async def _attach_points(store: AnyStore) -> None:
    rng = random.Random(1000)
    stream = RunStream("r1")
    recorder = await Recorder(store, stream, meta("r1"), batch_size=16,
                              flush_interval_s=0.002).start()
    attachers: list[tuple[int, asyncio.Task[list[Event]]]] = []
    total = 300
    stream.publish(RunStarted(question="why?"))
    for i in range(total):
        stream.publish(SearchRequested(query=f"q{i}"))
        # Attach points anywhere from 0 to the newest seq: some stored, some
        # published but not yet committed, some exactly at the live edge.
        while rng.random() < 0.83 and len(attachers) < 1000:
            after = rng.choice([stream.last_seq, rng.randint(0, stream.last_seq)])
            attachers.append((after, asyncio.create_task(collect(store.attach("r1", after)))))
        if rng.random() < 0.3:
            await asyncio.sleep(0)
        if rng.random() < 0.02:
            await recorder.flush()  # commit what is published so far, attachers running
    while len(attachers) < 1000:
        after = rng.randint(0, stream.last_seq)
        attachers.append((after, asyncio.create_task(collect(store.attach("r1", after)))))
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
    writer_store = make_store(backend_of(store), tmp_path, **namespace_of(store))
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
                await recorder.flush()  # commit what is published so far, followers running
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
    seen, follower = follow(store.attach("r1", 0))
    await eventually(lambda: len(seen) == 1, "the follower to get the stored event")
    assert not follower.done()  # still waiting for more of a running run
    await recorder.aclose()
    assert await store.mark_interrupted() == ["r1"]  # what the next start-up does
    got = await asyncio.wait_for(follower, 30)
    assert [e.seq for e in got] == [1, 2]
    assert isinstance(got[-1], RunFinished) and got[-1].outcome == "interrupted"


async def test_attach_to_a_missing_run_fails_before_any_event(store: AnyStore) -> None:
    with pytest.raises(RunNotFound):
        await collect(store.attach("nope", 0))
    with pytest.raises(RunNotFound):
        await collect(store.events("nope"))


async def test_attacher_that_stops_early_unsubscribes_from_the_recorder(
    store: AnyStore,
) -> None:
    stream = RunStream("r1", keep_history=False)
    async with Recorder(store, stream, meta("r1")) as recorder:
        stream.publish(SearchRequested(query="a"))
        await recorder.flush()
        events = store.attach("r1", 0)
        first = await anext(events)
        assert first.seq == 1
        second = asyncio.ensure_future(anext(events))
        await eventually(lambda: len(recorder._sinks) == 1,
                         "the attacher waiting on the recorder's committed events")
        second.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await second
        await events.aclose()  # type: ignore[attr-defined]
        assert recorder._sinks == []
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
    assert [e.seq for e in await collect(store.attach("r1", -5))] == [1, 2]
    assert [e.seq for e in await collect(store.events("r1", -5))] == [1, 2]


async def test_attach_goes_past_an_interruption_that_a_resume_continued(
    store: AnyStore,
) -> None:
    stream = RunStream("r1", keep_history=False)
    recorder = await Recorder(store, stream, meta("r1")).start()
    stream.publish(RunStarted(question="why?"))
    stream.publish(SearchRequested(query="a"))
    await recorder.flush()
    await recorder.abort()  # the process "dies"
    assert await store.mark_interrupted() == ["r1"]  # seq 3: run.finished(interrupted)
    await store.reopen("r1")
    seen, follower = follow(store.attach("r1", 0))
    await eventually(lambda: len(seen) == 3, "the follower to get the interruption (seq 3)")
    assert not follower.done()  # the interruption is not the end of a reopened run
    resumed = [SearchRequested(query="b", run_id="r1", seq=4, ts=1.0),
               RunFinished(outcome="answered", run_id="r1", seq=5, ts=2.0)]
    await store.append("r1", resumed)
    got = await asyncio.wait_for(follower, 30)
    assert [(e.seq, e.type) for e in got] == [
        (1, "run.started"), (2, "search.requested"), (3, "run.finished"),
        (4, "search.requested"), (5, "run.finished")]
    assert [e.seq for e in await collect(store.attach("r1", 0))] == [1, 2, 3, 4, 5]
    assert [e.seq for e in await collect(store.attach("r1", 2))] == [3, 4, 5]
