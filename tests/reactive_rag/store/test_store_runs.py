"""Runs, tenants, paging, appends and background tasks, on every store backend."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import reactive_rag.store as store_pkg
from reactive_rag.store import (
    BackgroundTask,
    InvalidCursor,
    RedisRunStore,
    RunAlreadyFinished,
    RunExists,
    RunMeta,
    RunNotFound,
    RunStore,
    SeqConflict,
    SqliteRunStore,
    StoreClosed,
    StoreCorrupt,
    StoreError,
    StoreUnavailable,
    TaskAlreadyFinished,
    TaskExists,
    TaskNotFound,
    TaskStatus,
    TaskUpdate,
)
from streams import RunStarted, SearchRequested

from .._store_fixtures import (
    BACKENDS,
    AnyStore,
    drop_namespace,
    finished,
    make_store,
    open_store,
    searches,
    stamped,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyStore]:
    async for opened in open_store(request.param, tmp_path, clock=FakeClock()):
        yield opened


def meta(run_id: str, tenant: str = "acme", question: str = "why?") -> RunMeta:
    return RunMeta(run_id=run_id, tenant=tenant, question=question, mode="agent")


def test_all_is_sorted_and_exported() -> None:
    assert store_pkg.__all__ == sorted(store_pkg.__all__)
    for name in store_pkg.__all__:
        assert hasattr(store_pkg, name), name


async def test_stores_implement_the_protocol(store: AnyStore) -> None:
    assert isinstance(store, RunStore)


async def test_created_run_is_running_and_readable(store: AnyStore) -> None:
    created = await store.create_run(meta("r1", question="what is WAL?"))
    got = await store.get_run("r1", "acme")
    assert got == created
    assert (got.status, got.outcome, got.last_seq, got.question) == (
        "running", None, 0, "what is WAL?")
    with pytest.raises(RunExists):
        await store.create_run(meta("r1"))


async def test_append_then_replay_in_order_and_finish_sets_outcome(store: AnyStore) -> None:
    await store.create_run(meta("r1"))
    events = stamped("r1", [RunStarted(question="why?"), *searches(5), finished("degraded")])
    assert await store.append("r1", events[:3]) == 3
    assert await store.append("r1", events[3:]) == 7
    replayed = [event async for event in store.events("r1")]
    assert replayed == events
    assert [event.seq async for event in store.events("r1", after_seq=4)] == [5, 6, 7]
    run = await store.get_run("r1")
    assert (run.status, run.outcome, run.last_seq) == ("finished", "degraded", 7)


async def test_append_resent_batch_is_ignored_not_duplicated(store: AnyStore) -> None:
    await store.create_run(meta("r1"))
    events = stamped("r1", searches(4))
    await store.append("r1", events[:3])
    assert await store.append("r1", events[:3]) == 3  # a retry of the same batch
    assert await store.append("r1", events[1:]) == 4  # overlap: only seq 4 is new
    assert [e.seq async for e in store.events("r1")] == [1, 2, 3, 4]


async def test_append_refuses_gaps_foreign_and_unstamped_events(store: AnyStore) -> None:
    await store.create_run(meta("r1"))
    with pytest.raises(SeqConflict):
        await store.append("r1", stamped("r1", searches(2), start=2))
    with pytest.raises(SeqConflict):
        await store.append("r1", [*stamped("r1", searches(1)), *stamped("r1", searches(1), 3)])
    with pytest.raises(ValueError, match="belongs to run"):
        await store.append("r1", stamped("other", searches(1)))
    with pytest.raises(SeqConflict, match="no seq"):
        await store.append("r1", [SearchRequested(query="x", run_id="r1")])
    with pytest.raises(SeqConflict, match="last event"):
        await store.append("r1", stamped("r1", [finished(), SearchRequested(query="x")]))
    with pytest.raises(RunNotFound):
        await store.append("nope", stamped("nope", searches(1)))
    assert [e async for e in store.events("r1")] == []  # nothing half-written


async def test_finished_run_log_is_closed_and_outcome_never_overwritten(
    store: AnyStore,
) -> None:
    await store.create_run(meta("r1"))
    await store.append("r1", stamped("r1", [*searches(1), finished("answered")]))
    with pytest.raises(RunAlreadyFinished):
        await store.append("r1", stamped("r1", searches(1), start=3))
    assert await store.finish("r1", "cancelled") is False
    assert (await store.get_run("r1")).outcome == "answered"
    await store.create_run(meta("r2"))
    assert await store.finish("r2", "cancelled") is True
    assert await store.finish("r2", "answered") is False
    assert (await store.get_run("r2")).outcome == "cancelled"
    with pytest.raises(RunNotFound):
        await store.finish("nope", "failed")


async def test_other_tenants_run_looks_exactly_like_a_missing_one(store: AnyStore) -> None:
    await store.create_run(meta("secret", tenant="globex"))
    await store.append("secret", stamped("secret", searches(2)))
    with pytest.raises(RunNotFound) as foreign:
        await store.get_run("secret", "acme")
    with pytest.raises(RunNotFound) as missing:
        await store.get_run("no-such-id", "acme")
    assert str(foreign.value) == str(missing.value).replace("no-such-id", "secret")
    assert "globex" not in str(foreign.value)
    with pytest.raises(RunNotFound):
        _ = [e async for e in store.events("secret", tenant="acme")]
    with pytest.raises(RunNotFound):
        _ = [e async for e in store.attach("secret", 0, tenant="acme")]
    assert [e.seq async for e in store.events("secret", tenant="globex")] == [1, 2]


async def test_list_runs_pages_newest_first_within_tenant(store: AnyStore) -> None:
    for i in range(7):
        await store.create_run(meta(f"a{i}", tenant="acme"))
        await store.create_run(meta(f"g{i}", tenant="globex"))
    seen: list[str] = []
    before = None
    pages = 0
    while True:
        page = await store.list_runs("acme", limit=3, before=before)
        seen += [run.run_id for run in page.runs]
        pages += 1
        if page.next_before is None:
            break
        before = page.next_before
    assert seen == [f"a{i}" for i in reversed(range(7))]
    assert pages == 3
    assert (await store.list_runs("nobody")).runs == ()
    with pytest.raises(InvalidCursor):
        await store.list_runs("acme", before="garbage")
    with pytest.raises(ValueError):
        await store.list_runs("acme", limit=0)


async def test_list_runs_breaks_timestamp_ties_by_id(tmp_path: Path) -> None:
    for backend in ("sqlite",):
        async for store in open_store(backend, tmp_path, clock=lambda: 1_700_000_000.0):
            for run_id in ("b", "a", "c"):
                await store.create_run(meta(run_id))
            first = await store.list_runs("acme", limit=2)
            rest = await store.list_runs("acme", limit=2, before=first.next_before)
            assert [r.run_id for r in (*first.runs, *rest.runs)] == ["c", "b", "a"]
            assert rest.next_before is None


async def test_closed_store_refuses_use(tmp_path: Path) -> None:
    store = make_store("sqlite", tmp_path)
    with pytest.raises(StoreClosed):
        await store.get_run("r1")
    await store.open()
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(StoreClosed):
        await store.create_run(meta("r1"))


async def test_reopen_marks_only_own_running_runs_interrupted_with_a_terminal_event(
    tmp_path: Path,
) -> None:
    first = make_store("sqlite", tmp_path, owner="server-a")
    await first.open()
    await first.create_run(meta("live"))
    await first.append("live", stamped("live", searches(3)))
    await first.create_run(meta("done"))
    await first.append("done", stamped("done", [*searches(1), finished()]))
    # A live replica beside it: server-a's lease is alive, so its run is not touched.
    other = make_store("sqlite", tmp_path, owner="server-b")
    assert await other.open() == []
    try:
        await other.create_run(meta("other-owner"))
        await first.close()  # server-a goes away with "live" still running
        async for store in open_store("sqlite", tmp_path, owner="server-a"):
            live = await store.get_run("live")
            assert (live.status, live.outcome, live.last_seq) == ("interrupted", "interrupted", 4)
            events = [e async for e in store.events("live")]
            assert [e.seq for e in events] == [1, 2, 3, 4]
            assert events[-1].type == "run.finished" and events[-1].actor == "store"
            assert (await store.get_run("done")).status == "finished"
            assert (await store.get_run("other-owner")).status == "running"  # b is alive
            with pytest.raises(RunAlreadyFinished):
                await store.append("live", stamped("live", searches(1), start=5))
    finally:
        await other.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_open_returns_interrupted_ids(backend: str, tmp_path: Path) -> None:
    prefix = f"reopen-{tmp_path.name}:"
    first = make_store(backend, tmp_path, prefix=prefix, owner="server-a")
    await first.open()
    await first.create_run(meta("r1"))
    await first.append("r1", stamped("r1", searches(2)))
    await first.close()  # as if the process died: the run is still "running"
    second = make_store(backend, tmp_path, prefix=prefix, owner="server-a")  # its restart
    assert await second.open() == ["r1"]
    try:
        run = await second.get_run("r1")
        assert (run.status, run.outcome, run.last_seq) == ("interrupted", "interrupted", 3)
        assert await second.open() == []  # already open: nothing more to recover
    finally:
        await drop_namespace(second)
        await second.close()


async def test_background_tasks_persist_update_and_stay_final(store: AnyStore) -> None:
    created = await store.create_task(BackgroundTask(
        task_id="t1", tenant="acme", kind="summarize", doc_id="doc-9",
        params={"doc_id": "doc-9", "max_words": 200},
    ))
    assert (created.status, created.progress, created.created_at > 0) == (
        TaskStatus.PENDING, 0.0, True)
    await store.create_task(BackgroundTask(task_id="t2", tenant="acme", kind="summarize"))
    with pytest.raises(TaskExists):
        await store.create_task(BackgroundTask(task_id="t1", tenant="acme", kind="x"))
    running = await store.update_task("t1", TaskUpdate(status=TaskStatus.RUNNING, progress=0.5))
    assert (running.status, running.progress, running.params["max_words"]) == (
        TaskStatus.RUNNING, 0.5, 200)
    assert [t.task_id for t in await store.list_unfinished_tasks()] == ["t1", "t2"]
    done = await store.update_task(
        "t1", TaskUpdate(status=TaskStatus.DONE, progress=1.0, result={"summary": "short"}))
    assert done.result == {"summary": "short"}
    with pytest.raises(TaskAlreadyFinished):
        await store.update_task("t1", TaskUpdate(status=TaskStatus.FAILED, error="late"))
    assert (await store.get_task("t1")).status is TaskStatus.DONE
    assert [t.task_id for t in await store.list_unfinished_tasks()] == ["t2"]
    with pytest.raises(TaskNotFound):
        await store.get_task("t1", tenant="globex")
    with pytest.raises(TaskNotFound):
        await store.update_task("nope", TaskUpdate(progress=0.1))
    with pytest.raises(ValueError):
        await store.update_task("t2", TaskUpdate(progress=1.5))


async def test_unfinished_tasks_survive_a_restart(tmp_path: Path) -> None:
    async for store in open_store("sqlite", tmp_path):
        await store.create_task(BackgroundTask(task_id="t1", tenant="acme", kind="summarize"))
        await store.update_task("t1", TaskUpdate(status=TaskStatus.RUNNING, progress=0.3))
    async for store in open_store("sqlite", tmp_path):
        (task,) = await store.list_unfinished_tasks()
        assert (task.task_id, task.status, task.progress) == ("t1", TaskStatus.RUNNING, 0.3)


async def test_unreachable_redis_is_reported_as_unavailable() -> None:
    store = RedisRunStore("redis://127.0.0.1:1/0")  # nothing listens on port 1
    with pytest.raises(StoreUnavailable):
        await store.open()
    with pytest.raises(StoreClosed):
        await store.get_run("r1")


async def test_a_file_that_is_not_a_database_is_reported_as_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_bytes(b"this is not SQLite" * 300)
    with pytest.raises(StoreCorrupt):
        await SqliteRunStore(path).open()


async def test_a_store_written_by_newer_code_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreError, match="newer than this code"):
        await SqliteRunStore(path).open()


async def test_sqlite_store_is_in_wal_mode_and_checks_clean(tmp_path: Path) -> None:
    async with SqliteRunStore(tmp_path / "runs.db") as store:
        assert await store.integrity_check() == "ok"
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()
