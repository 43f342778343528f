"""The recorder: every event durable, in order, without ever holding up the run."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from reactive_rag.store import (
    Recorder,
    RunMeta,
    SqliteRunStore,
    StoreError,
    StoreUnavailable,
)
from streams import Event, EventBridge, RunFinished, RunStarted, RunStream, SearchRequested

from .._store_fixtures import BACKENDS, AnyStore, open_store


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyStore]:
    async for opened in open_store(request.param, tmp_path):
        yield opened


def meta(run_id: str) -> RunMeta:
    return RunMeta(run_id=run_id, tenant="acme", question="why?")


async def test_every_event_is_stored_in_order_and_finish_sets_outcome(store: AnyStore) -> None:
    stream = RunStream("r1", keep_history=False)
    async with Recorder(store, stream, meta("r1"), batch_size=8) as recorder:
        stream.publish(RunStarted(question="why?"))
        for i in range(100):
            stream.publish(SearchRequested(query=f"q{i}"))
            if i % 7 == 0:
                await asyncio.sleep(0)
        stream.publish(RunFinished(outcome="no_evidence", reason="nothing found"))
    stored = [event async for event in store.events("r1")]
    assert [e.seq for e in stored] == list(range(1, 103))
    assert [getattr(e, "query", None) for e in stored[1:101]] == [f"q{i}" for i in range(100)]
    run = await store.get_run("r1")
    assert (run.status, run.outcome, run.last_seq) == ("finished", "no_evidence", 102)
    stats = recorder.statistics()
    assert (stats.written, stats.queued, stats.error) == (102, 0, None)
    assert stats.batches < 102  # batched, not one transaction per event


async def test_publishing_never_waits_for_the_store(store: AnyStore) -> None:
    stream = RunStream("r1", keep_history=False)
    recorder = await Recorder(store, stream, meta("r1")).start()
    # SQLite could commit some batches right at publish time (when that cannot
    # wait): another connection holds its write lock, so it cannot.
    locker = None
    if isinstance(store, SqliteRunStore):
        locker = sqlite3.connect(store.path, isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")
    # No await between publishes: the writer cannot run, so if publish waited
    # for the store this loop could never finish.
    for i in range(5000):
        stream.publish(SearchRequested(query=f"q{i}"))
    assert recorder.statistics().queued == 5000
    assert recorder.statistics().written == 0
    if locker is not None:
        locker.execute("COMMIT")
        locker.close()
    stream.publish(RunFinished(outcome="answered"))
    await recorder.flush()
    assert (await store.get_run("r1")).last_seq == 5001
    await recorder.aclose()


async def test_late_recorder_backfills_from_stream_history(store: AnyStore) -> None:
    stream = RunStream("r1")  # keeps history
    stream.publish(RunStarted(question="why?"))
    stream.publish(SearchRequested(query="early"))
    async with Recorder(store, stream, meta("r1")):
        stream.publish(SearchRequested(query="late"))
        stream.publish(RunFinished(outcome="answered"))
    assert [e.seq async for e in store.events("r1")] == [1, 2, 3, 4]


async def test_events_published_from_other_threads_are_stored_in_order(
    store: AnyStore,
) -> None:
    stream = RunStream("r1", keep_history=False)
    async with Recorder(store, stream, meta("r1"), batch_size=32):

        def publish_many(tag: str) -> None:
            for i in range(300):
                stream.publish(SearchRequested(query=f"{tag}{i}"))

        threads = [threading.Thread(target=publish_many, args=(t,)) for t in "abc"]
        for thread in threads:
            thread.start()
        for thread in threads:
            await asyncio.to_thread(thread.join)
        stream.publish(RunFinished(outcome="answered"))
    stored = [e async for e in store.events("r1")]
    assert [e.seq for e in stored] == list(range(1, 902))
    for tag in "abc":  # each thread's own order survives
        mine = [e.query for e in stored if isinstance(e, SearchRequested) and e.query[0] == tag]
        assert mine == [f"{tag}{i}" for i in range(300)]


async def test_store_refusal_is_reported_and_the_run_goes_on(store: AnyStore) -> None:
    stream = RunStream("r1", keep_history=False)
    recorder = await Recorder(store, stream, meta("r1")).start()
    stream.publish(SearchRequested(query="a"))
    await recorder.flush()
    assert await store.finish("r1", "cancelled")  # someone else closed the run
    stream.publish(SearchRequested(query="b"))
    with pytest.raises(StoreError, match="recorder of run 'r1' failed"):
        await recorder.flush()
    stream.publish(SearchRequested(query="c"))  # the run itself is not affected
    assert stream.detached == []
    with pytest.raises(StoreError):
        await recorder.aclose()
    assert "cannot append" in (recorder.statistics().error or "")
    assert (await store.get_run("r1")).outcome == "cancelled"


class FlakyStore(SqliteRunStore):
    """A real SQLite store whose first appends fail as if the disk were busy."""

    failures = 3

    async def append(self, run_id: str, events: Sequence[Event]) -> int:
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("database is locked")
        return await super().append(run_id, events)


async def test_unavailable_store_is_retried_without_losing_events(tmp_path: Path) -> None:
    async with FlakyStore(tmp_path / "runs.db") as store:
        stream = RunStream("r1", keep_history=False)
        async with Recorder(store, stream, meta("r1"), retry_max_s=0.02) as recorder:
            for i in range(10):
                stream.publish(SearchRequested(query=f"q{i}"))
            stream.publish(RunFinished(outcome="answered"))
        assert recorder.statistics().retries == 3
        assert [e.seq async for e in store.events("r1")] == list(range(1, 12))


async def test_recorder_checks_its_arguments(tmp_path: Path) -> None:
    async with SqliteRunStore(tmp_path / "runs.db") as store:
        with pytest.raises(ValueError, match="meta is for run"):
            Recorder(store, RunStream("r1"), meta("r2"))
        with pytest.raises(ValueError, match="batch_size"):
            Recorder(store, RunStream("r1"), meta("r1"), batch_size=0)
        recorder = await Recorder(store, RunStream("r1"), meta("r1")).start()
        with pytest.raises(RuntimeError, match="already started"):
            await recorder.start()
        await recorder.aclose()


async def test_recorder_continues_an_existing_run(store: AnyStore) -> None:
    await store.create_run(meta("r1"))
    stream = RunStream("r1", keep_history=False)
    async with Recorder(store, stream):  # no meta: the run exists already
        stream.publish(SearchRequested(query="a"))
        stream.publish(RunFinished(outcome="answered"))
    assert (await store.get_run("r1")).last_seq == 2


async def test_close_gives_up_on_a_store_that_stays_down_and_says_so(tmp_path: Path) -> None:
    async with FlakyStore(tmp_path / "runs.db") as store:
        store.failures = 10**9
        stream = RunStream("r1", keep_history=False)
        recorder = await Recorder(store, stream, meta("r1"), retry_max_s=0.01).start()
        stream.publish(SearchRequested(query="a"))
        with pytest.raises(StoreError, match=r"1 event\(s\) not written"):
            await recorder.aclose(timeout_s=0.2)


async def test_a_recorder_started_while_another_thread_publishes_stores_every_event_in_order(
        store: AnyStore) -> None:
    """The recorder subscribes late, while its run publishes on another thread: history
    and live events merge into one gap-free log, handed to live clients in seq order."""
    stream = RunStream("r1")
    backlog, stop = threading.Event(), threading.Event()

    def publish() -> None:  # publishes all along the recorder's start
        i = 0
        while not stop.is_set() or i < 30_000:
            stream.publish(SearchRequested(query=f"q{i}"))
            i += 1
            if i == 20_000:
                backlog.set()

    thread = threading.Thread(target=publish)
    thread.start()
    recorder = Recorder(store, stream, meta("r1"), max_buffer=1_000_000)
    assert await asyncio.to_thread(backlog.wait, 30)
    await recorder.start()  # merges a 20,000-event history while events keep coming
    committed: EventBridge[Event] = EventBridge(1_000_000)
    recorder.subscribe_committed(committed)  # what live clients are handed, in commit order
    stop.set()
    await asyncio.to_thread(thread.join, 60)
    last = stream.publish(RunFinished(outcome="answered")).seq
    await recorder.aclose(timeout_s=60)
    handed = [e.seq for e in committed.take(1_000_000)]
    seqs = [e.seq async for e in store.events("r1")]
    assert seqs == list(range(1, last + 1))
    assert handed == sorted(handed) and handed[-1] == last
