"""SQLite appends on the loop's own thread: no wait for the writer thread, never for a
lock, never for a disk flush; the writer thread still does what may wait."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reactive_rag.store import RunMeta, SqliteRunStore
from reactive_rag.store._sqlite import WAL_LIMIT_BYTES
from streams import Event, RunStream, SearchRequested
from tests._eventually import eventually


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteRunStore]:
    opened = SqliteRunStore(tmp_path / "runs.db")
    await opened.open()
    yield opened
    await opened.close()


def events(run_id: str, count: int, *, size: int = 10) -> list[Event]:
    stream = RunStream(run_id, keep_history=False)
    return [stream.publish(SearchRequested(query="q" * size)) for _ in range(count)]


async def block_writer_thread(store: SqliteRunStore) -> tuple[threading.Event,
                                                               asyncio.Future[None]]:
    """Occupy the store's writer thread until the returned event is set."""
    entered, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        entered.set()
        release.wait(30)

    assert store._writer is not None
    held = store._writer.submit(hold)
    assert await asyncio.to_thread(entered.wait, 10)
    return release, held


def queued_on_writer_thread(store: SqliteRunStore) -> int:
    """How many calls wait for the store's writer thread (behind the one it runs)."""
    assert store._writer is not None
    return store._writer._executor._work_queue.qsize()


async def test_an_append_commits_while_the_writer_thread_is_busy(
        store: SqliteRunStore) -> None:
    await store.create_run(RunMeta(run_id="r1", tenant="acme", question="why?"))
    release, held = await block_writer_thread(store)
    try:
        batch = events("r1", 3)
        assert await asyncio.wait_for(store.append("r1", batch), 10) == 3
        assert [e.seq async for e in store.events("r1")] == [1, 2, 3]  # committed, readable
    finally:
        release.set()
        await held


async def test_a_taken_write_lock_never_holds_the_loop(store: SqliteRunStore) -> None:
    """Another connection holds the write lock: the append waits for it on the writer
    thread while the loop keeps running, and commits once the lock is free."""
    await store.create_run(RunMeta(run_id="r1", tenant="acme", question="why?"))
    other = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.ensure_future(tick())
    try:
        append = asyncio.ensure_future(store.append("r1", events("r1", 2)))
        before = ticks
        await eventually(lambda: ticks >= before + 10, "the loop to go on running")
        assert not append.done()  # waiting for the lock, off the loop: the loop still runs
        other.execute("COMMIT")
        assert await asyncio.wait_for(append, 10) == 2
    finally:
        ticker.cancel()
        other.close()
    assert [e.seq async for e in store.events("r1")] == [1, 2]


async def test_checkpoints_keep_the_write_ahead_log_bounded(store: SqliteRunStore) -> None:
    """The inline writer never checkpoints itself: it asks the writer thread to, so the
    log does not grow with every event ever written."""
    await store.create_run(RunMeta(run_id="r1", tenant="acme", question="why?"))
    batches = events("r1", 3000, size=2000)  # one commit each: ~65 MB of log unchecked
    for event in batches:
        await store.append("r1", [event])
    await eventually(lambda: not store._checkpoints, "every checkpoint asked for to have run")
    wal = store.path.with_name(store.path.name + "-wal")
    assert wal.stat().st_size < WAL_LIMIT_BYTES + 8 * 1024 * 1024
    assert [e.seq async for e in store.events("r1")][-1] == 3000


async def test_with_synchronous_full_commits_stay_on_the_writer_thread(tmp_path: Path) -> None:
    """A store that syncs the disk on every commit never does it on the loop."""
    store = SqliteRunStore(tmp_path / "runs.db", synchronous="FULL")
    await store.open()
    try:
        await store.create_run(RunMeta(run_id="r1", tenant="acme", question="why?"))
        release, held = await block_writer_thread(store)
        append = asyncio.ensure_future(store.append("r1", events("r1", 1)))
        await eventually(lambda: queued_on_writer_thread(store) == 1,
                         "the append queued behind the writer thread")
        assert not append.done()
        release.set()
        await held
        assert await asyncio.wait_for(append, 10) == 1
    finally:
        await store.close()


async def test_an_append_from_another_thread_goes_through_the_writer_thread(
        store: SqliteRunStore) -> None:
    """The inline connection belongs to the loop that opened the store; another loop on
    another thread gets the writer thread, and both appends land."""
    await store.create_run(RunMeta(run_id="r1", tenant="acme", question="why?"))
    await store.create_run(RunMeta(run_id="r2", tenant="acme", question="why?"))
    release, held = await block_writer_thread(store)
    other = asyncio.ensure_future(
        asyncio.to_thread(asyncio.run, store.append("r2", events("r2", 4))))
    here = await asyncio.wait_for(store.append("r1", events("r1", 2)), 10)
    await eventually(lambda: queued_on_writer_thread(store) == 1,
                     "the other thread's append queued behind the (blocked) writer thread")
    assert not other.done()
    release.set()
    await held
    assert (await asyncio.wait_for(other, 10), here) == (4, 2)
    assert [e.seq async for e in store.events("r2")] == [1, 2, 3, 4]
