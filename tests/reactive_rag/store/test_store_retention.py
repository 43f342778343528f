"""Deleting runs, one at a time and by age, on every store backend (SQLite always; Redis and
PostgreSQL when their test servers are up): what is deleted is gone from every read and
leaves nothing behind; running runs and other tenants' runs are never touched."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from reactive_rag.store import (
    PostgresRunStore,
    RedisRunStore,
    RunMeta,
    RunNotFound,
    RunStillRunning,
    StoreReadOnly,
)
from streams import RunStarted

from .._store_fixtures import (
    BACKENDS,
    POSTGRES_URL,
    AnyStore,
    Clock,
    finished,
    make_store,
    namespace_of,
    open_store,
    searches,
    stamped,
)

DAY = 86400.0


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path,
                clock: Clock) -> AsyncIterator[AnyStore]:
    async for opened in open_store(request.param, tmp_path, clock=clock):
        yield opened


async def ended_run(store: AnyStore, run_id: str, tenant: str = "acme") -> None:
    await store.create_run(RunMeta(run_id=run_id, tenant=tenant, question="why?"))
    await store.append(run_id, stamped(run_id, [RunStarted(question="why?"), *searches(3),
                                                finished()]))


async def running_run(store: AnyStore, run_id: str, tenant: str = "acme") -> None:
    await store.create_run(RunMeta(run_id=run_id, tenant=tenant, question="why?"))
    await store.append(run_id, stamped(run_id, [RunStarted(question="why?"), *searches(2)]))


async def leftovers(store: AnyStore, run_id: str) -> list[str]:
    """Whatever the backend still holds that names ``run_id`` (keys, rows, index entries)."""
    if isinstance(store, RedisRunStore):
        client = store._redis
        found = [bytes(k).decode() async for k in client.scan_iter(match=f"{store.prefix}*")
                 if run_id in bytes(k).decode()]
        for key in [bytes(k).decode() async for k in client.scan_iter(
                match=f"{store.prefix}tenant:*")]:
            found += [f"{key} -> {bytes(m).decode()}"
                      for m in await client.zrange(key, 0, -1) if run_id in bytes(m).decode()]
        for key in [bytes(k).decode() async for k in client.scan_iter(
                match=f"{store.prefix}running:*")]:
            if await client.sismember(key, run_id):
                found.append(f"{key} -> {run_id}")
        return found
    if isinstance(store, PostgresRunStore):
        assert POSTGRES_URL is not None
        async with await psycopg.AsyncConnection.connect(POSTGRES_URL) as conn:
            found = []
            for table in ("runs", "events"):
                cur = await conn.execute(
                    f'SELECT count(*) FROM "{store.schema}".{table} WHERE run_id = %s',
                    (run_id,))
                row = await cur.fetchone()
                if row and row[0]:
                    found.append(f"{row[0]} row(s) in {table}")
            return found
    def count(conn: object) -> list[str]:
        import sqlite3
        assert isinstance(conn, sqlite3.Connection)
        return [f"{n} row(s) in {table}" for table in ("runs", "events")
                for (n,) in [conn.execute(f"SELECT count(*) FROM {table} WHERE run_id = ?",
                                          (run_id,)).fetchone()] if n]
    return await store._read(count)


async def assert_gone(store: AnyStore, run_id: str) -> None:
    with pytest.raises(RunNotFound):
        await store.get_run(run_id)
    with pytest.raises(RunNotFound):
        _ = [event async for event in store.events(run_id)]
    assert run_id not in [r.run_id for r in (await store.list_runs("acme")).runs]
    assert await store.run_ids_with_prefix(run_id) == []
    assert await leftovers(store, run_id) == []


async def test_a_deleted_run_is_gone_from_every_read_and_leaves_nothing(
        store: AnyStore) -> None:
    await ended_run(store, "r1")
    await ended_run(store, "r2")
    await store.delete_run("r1", "acme")
    await assert_gone(store, "r1")
    assert [e.seq async for e in store.events("r2")] == [1, 2, 3, 4, 5]  # the other one stays
    with pytest.raises(RunNotFound):  # a second delete finds nothing
        await store.delete_run("r1", "acme")


async def test_a_deleted_id_can_be_used_again_as_a_new_run(store: AnyStore) -> None:
    await ended_run(store, "r1")
    await store.delete_run("r1")  # an operator: no tenant scope
    await ended_run(store, "r1", tenant="beta")
    assert [e.seq async for e in store.events("r1")] == [1, 2, 3, 4, 5]
    assert (await store.get_run("r1", "beta")).status == "finished"


async def test_another_tenants_run_reads_as_missing_and_stays(store: AnyStore) -> None:
    await ended_run(store, "r1", tenant="beta")
    with pytest.raises(RunNotFound):
        await store.delete_run("r1", "acme")
    assert (await store.get_run("r1", "beta")).last_seq == 5


async def test_a_running_run_is_refused_and_kept(store: AnyStore) -> None:
    await running_run(store, "r1")
    with pytest.raises(RunStillRunning, match="cancel it"):
        await store.delete_run("r1", "acme")
    assert (await store.get_run("r1", "acme")).status == "running"
    await store.append("r1", stamped("r1", [finished()], start=4))
    await store.delete_run("r1", "acme")  # once it ended
    await assert_gone(store, "r1")


async def test_an_interrupted_run_can_be_deleted(store: AnyStore, tmp_path: Path) -> None:
    await running_run(store, "r1")
    assert await store.mark_interrupted() == ["r1"]
    await store.delete_run("r1", "acme")
    await assert_gone(store, "r1")


async def test_the_sweep_deletes_ended_runs_older_than_the_cutoff_and_keeps_the_rest(
        store: AnyStore, clock: Clock) -> None:
    await ended_run(store, "old1")
    await ended_run(store, "old2")
    await ended_run(store, "oldbeta", tenant="beta")
    await running_run(store, "oldlive")  # running for 40 days: never swept
    clock.advance(40 * DAY)
    await ended_run(store, "new")
    cutoff = clock.now - 30 * DAY
    assert sorted(await store.delete_runs_before("acme", cutoff)) == ["old1", "old2"]
    for run_id in ("old1", "old2"):
        await assert_gone(store, run_id)
    for run_id, tenant in (("new", "acme"), ("oldlive", "acme"), ("oldbeta", "beta")):
        assert (await store.get_run(run_id, tenant)).last_seq > 0
    assert await store.delete_runs_before("acme", cutoff) == []


async def test_age_is_when_the_run_last_changed_not_when_it_was_created(
        store: AnyStore, clock: Clock) -> None:
    await running_run(store, "long")
    clock.advance(40 * DAY)
    await store.append("long", stamped("long", [finished()], start=4))  # ends today
    assert await store.delete_runs_before("acme", clock.now - 30 * DAY) == []
    assert (await store.get_run("long", "acme")).status == "finished"
    assert await store.delete_runs_before("acme", clock.now + 1) == ["long"]


async def test_the_sweep_deletes_in_batches_of_limit(store: AnyStore, clock: Clock) -> None:
    for i in range(5):
        await ended_run(store, f"r{i}")
        clock.advance(1)
    batches = []
    while batch := await store.delete_runs_before("acme", clock.now, limit=2):
        batches.append(batch)
    assert batches == [["r0", "r1"], ["r2", "r3"], ["r4"]]  # oldest first
    assert (await store.list_runs("acme")).runs == ()
    with pytest.raises(ValueError):
        await store.delete_runs_before("acme", clock.now, limit=0)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_read_only_store_deletes_nothing(backend: str, tmp_path: Path) -> None:
    async for writer in open_store(backend, tmp_path):
        await ended_run(writer, "r1")
        reader = make_store(backend, tmp_path, read_only=True, **namespace_of(writer))
        await reader.open()
        try:
            with pytest.raises(StoreReadOnly):
                await reader.delete_run("r1")
            with pytest.raises(StoreReadOnly):
                await reader.delete_runs_before("acme", 2e9)
        finally:
            await reader.close()
        assert (await writer.get_run("r1")).last_seq == 5


async def test_the_servers_sweeper_deletes_old_runs_on_this_backend_and_keeps_new_ones(
        store: AnyStore, clock: Clock) -> None:
    from reactive_rag.server import RetentionConfig, RetentionSweeper

    await ended_run(store, "aged")
    await ended_run(store, "betaaged", tenant="beta")
    await running_run(store, "live")
    clock.advance(40 * DAY)
    await ended_run(store, "new")
    sweeper = RetentionSweeper(store, RetentionConfig(days=30, batch=1), ["acme", "beta"],
                               clock=clock)
    assert sorted(await sweeper.sweep()) == ["aged", "betaaged"]
    await assert_gone(store, "aged")
    assert await leftovers(store, "betaaged") == []
    assert [r.run_id for r in (await store.list_runs("acme")).runs] == ["new", "live"]
