"""The durability contract: clients see only committed events; a store that stops
writing ends the run ``failed`` for every client and is repaired when it returns."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from reactive_rag.store import Recorder, RunMeta, SqliteRunStore, StoreError, StoreUnavailable
from reactive_rag.store._recorder import public_reason
from streams import Event, EventBridge, RunFinished, RunStarted, RunStream, SearchRequested

from ..._eventually import eventually


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


class GatedStore(SqliteRunStore):
    """A real SQLite store whose appends wait for a gate, or fail while it is 'down'."""

    def __init__(self, path: Path, **kwargs: object) -> None:
        super().__init__(path, **kwargs)  # type: ignore[arg-type]
        self.gate = asyncio.Event()
        self.gate.set()
        self.down = False
        self.attempts = 0

    async def append(self, run_id: str, events: Sequence[Event]) -> int:
        self.attempts += 1
        await self.gate.wait()
        if self.down:
            raise StoreUnavailable("SQLite: database or disk is full")
        return await super().append(run_id, events)


async def test_a_live_client_never_sees_an_event_before_it_is_committed(
    tmp_path: Path,
) -> None:
    async with GatedStore(tmp_path / "runs.db", poll_interval_s=0.005) as store:
        stream = RunStream("r1")
        async with Recorder(store, stream, meta("r1"), flush_interval_s=0.001) as recorder:
            stream.publish(RunStarted(question="why?"))
            await recorder.flush()
            attached = store.attach("r1", 0)
            assert (await anext(attached)).seq == 1
            store.gate.clear()  # the next commit hangs
            stream.publish(SearchRequested(query="a"))
            pending = asyncio.ensure_future(anext(attached))
            await asyncio.sleep(0.1)
            assert not pending.done()  # published, not committed: not shown
            assert (await store.get_run("r1")).last_seq == 1
            store.gate.set()
            event = await asyncio.wait_for(pending, 10)
            assert (event.seq, (await store.get_run("r1")).last_seq) == (2, 2)
            stream.publish(RunFinished(outcome="answered"))
            rest = [e async for e in attached]
            assert [e.seq for e in rest] == [3]


async def test_a_store_that_stays_down_fails_the_run_for_every_client_then_is_repaired(
    tmp_path: Path,
) -> None:
    reasons: list[str] = []
    async with GatedStore(tmp_path / "runs.db", poll_interval_s=0.005) as store:
        stream = RunStream("r1")
        recorder = await Recorder(store, stream, meta("r1"), retry_window_s=0.3,
                                  retry_max_s=0.05, on_give_up=reasons.append).start()
        stream.publish(RunStarted(question="why?"))
        stream.publish(SearchRequested(query="a"))
        await recorder.flush()
        seen, live = follow(store.attach("r1", 0))
        await eventually(lambda: len(seen) == 2, "the follower to have the stored events")
        store.down = True
        stream.publish(SearchRequested(query="b"))  # never stored: the store is down
        got = await asyncio.wait_for(live, 10)
        assert [e.seq for e in got] == [1, 2, 3]
        end = got[-1]
        assert isinstance(end, RunFinished) and end.outcome == "failed"
        assert "stopped taking this run's events" in end.reason and "disk is full" in end.reason
        assert len(reasons) == 1 and recorder.given_up is not None
        # A client arriving while the store is still down gets the same ending.
        late = await asyncio.wait_for(collect(store.attach("r1", 2)), 10)
        assert [(e.seq, e.type) for e in late] == [(3, "run.finished")]
        with pytest.raises(StoreError, match=r"stopped|unavailable"):
            await recorder.aclose()
        assert (await store.get_run("r1")).status == "running"  # not yet: store is down
        store.down = False  # the store returns: the ending is stored, same seq, same event
        for _ in range(400):
            if recorder.repaired:
                break
            await asyncio.sleep(0.01)
        run = await store.get_run("r1")
        assert (run.status, run.outcome, run.last_seq) == ("finished", "failed", 3)
        stored = [e async for e in store.events("r1")]
        assert stored[-1] == end


async def max_pages(store: SqliteRunStore, pages: int) -> None:
    """Cap the file at ``pages`` for every connection that writes it (a per-connection
    pragma: the writer thread's, and the inline one appends use on the loop)."""
    assert store._writer is not None
    await store._writer.call(
        lambda conn: conn.execute(f"PRAGMA max_page_count = {pages}").fetchone())
    if store._inline is not None and store._inline._conn is not None:
        store._inline._conn.execute(f"PRAGMA max_page_count = {pages}").fetchone()


async def test_disk_full_under_sqlite_ends_the_run_failed_not_running(tmp_path: Path) -> None:
    """A real SQLITE_FULL: the database may not grow past a few pages."""
    db = tmp_path / "runs.db"
    async with SqliteRunStore(db, poll_interval_s=0.005) as store:
        stream = RunStream("r1")
        recorder = await Recorder(store, stream, meta("r1"), retry_window_s=0.3,
                                  retry_max_s=0.05).start()
        stream.publish(RunStarted(question="why?"))
        await recorder.flush()
        pages = await store._writer.call(
            lambda conn: conn.execute("PRAGMA page_count").fetchone()[0])
        await max_pages(store, pages)
        for i in range(400):
            stream.publish(SearchRequested(query=f"a long query that fills pages {i}" * 20))
        got = await asyncio.wait_for(collect(store.attach("r1", 0)), 10)
        end = got[-1]
        assert isinstance(end, RunFinished) and end.outcome == "failed"
        assert "full" in end.reason
        assert [e.seq for e in got] == list(range(1, end.seq + 1))  # no gap before the end
        with pytest.raises(StoreError):
            await recorder.aclose()
        await max_pages(store, 1073741823)  # space again: the ending is stored
        for _ in range(400):
            if recorder.repaired:
                break
            await asyncio.sleep(0.01)
        run = await store.get_run("r1")
        assert (run.status, run.outcome, run.last_seq) == ("finished", "failed", end.seq)
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)


async def test_an_attacher_that_falls_behind_reads_the_store_and_misses_nothing(
    tmp_path: Path,
) -> None:
    async with SqliteRunStore(tmp_path / "runs.db", poll_interval_s=0.005) as store:
        store.live_buffer = 8  # a tiny live buffer: it overflows at once
        stream = RunStream("r1", keep_history=False)
        async with Recorder(store, stream, meta("r1"), batch_size=64) as recorder:
            stream.publish(RunStarted(question="why?"))
            await recorder.flush()
            attached = store.attach("r1", 0)
            assert (await anext(attached)).seq == 1
            waiting = asyncio.ensure_future(anext(attached))  # subscribed, then not read
            await asyncio.sleep(0.01)
            for i in range(2000):
                stream.publish(SearchRequested(query=f"q{i}"))
            stream.publish(RunFinished(outcome="answered"))
            await recorder.flush()
            got = [await waiting] + [e async for e in attached]
        assert [e.seq for e in got] == list(range(2, 2003))


async def test_the_bridge_is_bounded_and_says_so() -> None:
    bridge: EventBridge[int] = EventBridge(3)
    assert [bridge.push(i) for i in range(5)] == [True, True, True, False, False]
    assert bridge.overflowed and len(bridge) == 3
    bridge.close()
    assert [await bridge.get(), *bridge.take(10), await bridge.get()] == [0, 1, 2, None]


async def test_a_recorder_whose_buffer_fills_gives_up_instead_of_growing(
    tmp_path: Path,
) -> None:
    reasons: list[str] = []
    async with GatedStore(tmp_path / "runs.db") as store:
        stream = RunStream("r1", keep_history=False)
        recorder = await Recorder(store, stream, meta("r1"), max_buffer=50, retry_max_s=0.02,
                                  on_give_up=reasons.append).start()
        store.down = True
        for i in range(200):  # more than the buffer holds while the store is down
            stream.publish(SearchRequested(query=f"q{i}"))
        assert recorder.statistics().queued <= 51
        for _ in range(300):
            if reasons:
                break
            await asyncio.sleep(0.01)
        assert reasons and "50 events waited" in reasons[0]
        await recorder.abort()


@pytest.mark.parametrize(("raw", "shown"), [
    ("Redis: Error 111 connecting to 127.0.0.1:35257. Connect call failed "
     "('127.0.0.1', 35257).",
     "Redis: Error 111 connecting to <address>. Connect call failed <address>."),
    ("Redis: Error -2 connecting to redis.internal:6379.",
     "Redis: Error -2 connecting to <address>."),
    ("Redis: Error 111 connecting to [::1]:6379.", "Redis: Error 111 connecting to <address>."),
    ('SQLite: unable to open "/var/lib/rr/runs.db"', 'SQLite: unable to open "<address>"'),
    ("SQLite: database or disk is full", "SQLite: database or disk is full"),
])
def test_a_failed_runs_reason_never_shows_where_the_store_lives(raw: str, shown: str) -> None:
    assert public_reason(f"the run store was unavailable for 15 s: {raw}") == \
        f"the run store was unavailable for 15 s: {shown}"
