"""Owner leases: replicas sharing a store leave each other's live runs alone, recover dead ones.

Two (or three) stores on one backend stand for server replicas; a shared fake
clock decides when a lease expires. ``reopen`` resumes an interrupted run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import sqlite3
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from reactive_rag.index import CorpusIndex
from reactive_rag.server import ConfigError, ServerConfig
from reactive_rag.server import make_store as server_store
from reactive_rag.server._app import STORE_KEY
from reactive_rag.store import (
    LeaseKeeper,
    PostgresRunStore,
    RedisRunStore,
    RunAlreadyFinished,
    RunMeta,
    RunNotFound,
    RunNotResumable,
    RunOwnedElsewhere,
    RunStore,
    SeqConflict,
    SqliteRunStore,
    StoreReadOnly,
    StoreUnavailable,
    default_owner,
)
from streams import Event, RunFinished

from ..._eventually import eventually
from .._server_fixtures import serve
from .._store_fixtures import (
    BACKENDS,
    AnyStore,
    Clock,
    drop_namespace,
    finished,
    make_store,
    searches,
    stamped,
)

TTL = 15.0


@pytest.fixture
def clock() -> Clock:
    return Clock()


class Replicas:
    """Stores on one backend (one file, or one Redis key prefix), opened and closed together."""

    def __init__(self, backend: str, tmp_path: Path, clock: Clock) -> None:
        self.backend = backend
        self.tmp_path = tmp_path
        self.clock = clock
        self.prefix = f"lease-{uuid.uuid4().hex}:"
        self.stores: list[AnyStore] = []

    def make(self, owner: str | None, **options: object) -> AnyStore:
        store = make_store(self.backend, self.tmp_path, prefix=self.prefix, owner=owner,
                           clock=self.clock, lease_ttl_s=TTL, **options)
        self.stores.append(store)
        return store

    async def open(self, owner: str | None, **options: object) -> AnyStore:
        store = self.make(owner, **options)
        await store.open()
        return store

    async def close(self) -> None:
        for store in reversed(self.stores):
            if store._is_open and not store.read_only:
                await drop_namespace(store)
                break
        for store in reversed(self.stores):
            await store.close()


@pytest.fixture(params=BACKENDS)
async def replicas(request: pytest.FixtureRequest, tmp_path: Path,
                   clock: Clock) -> AsyncIterator[Replicas]:
    group = Replicas(request.param, tmp_path, clock)
    try:
        yield group
    finally:
        await group.close()


def meta(run_id: str, tenant: str = "acme") -> RunMeta:
    return RunMeta(run_id=run_id, tenant=tenant, question=f"what about {run_id}?")


async def running_run(store: AnyStore, run_id: str, events: int = 2) -> None:
    await store.create_run(meta(run_id))
    if events:
        await store.append(run_id, stamped(run_id, searches(events)))


async def stored(store: AnyStore, run_id: str) -> list[Event]:
    return [event async for event in store.events(run_id)]


def terminals(events: list[Event]) -> list[RunFinished]:
    return [event for event in events if isinstance(event, RunFinished)]


async def lease_rows(store: AnyStore) -> list[str]:
    """The owners with a lease row in a SQL store, sorted."""
    if isinstance(store, PostgresRunStore):
        async def read(conn: Any) -> list[Any]:
            return await (await conn.execute(f"SELECT owner FROM {store._owners}")).fetchall()

        rows = await store._read(read)
    else:
        assert isinstance(store, SqliteRunStore)
        rows = await store._read(lambda conn: conn.execute("SELECT owner FROM owners").fetchall())
    return sorted(owner for (owner,) in rows)


# --- leases and recovery -----------------------------------------------------------------------


async def test_a_second_owner_leaves_the_live_first_owners_runs_alone(
        replicas: Replicas, clock: Clock) -> None:
    first = await replicas.open("api-1")
    await running_run(first, "r1")
    clock.advance(TTL - 1)  # old, but the lease is still alive
    second = await replicas.open("api-2")
    assert await second.recover_expired() == []
    record = await first.get_run("r1")
    assert (record.status, record.outcome, record.last_seq) == ("running", None, 2)
    assert await first.append("r1", stamped("r1", searches(1), start=3)) == 3


async def test_an_expired_lease_is_recovered_once_even_by_two_sweepers_at_once(
        replicas: Replicas, clock: Clock) -> None:
    dead = await replicas.open("api-1")
    run_ids = [f"r{i:02d}" for i in range(12)]
    for run_id in run_ids:
        await running_run(dead, run_id, events=3)
    b = await replicas.open("api-2")
    c = await replicas.open("api-3")
    clock.advance(TTL + 0.001)  # api-1 stopped heartbeating: its lease lapsed
    await b.heartbeat()
    await c.heartbeat()
    got_b, got_c = await asyncio.gather(b.recover_expired(), c.recover_expired())
    assert sorted(got_b + got_c) == run_ids  # each run exactly once, by one of them
    assert await b.recover_expired() == [] and await c.recover_expired() == []
    if isinstance(b, RedisRunStore):  # a dead owner with nothing left leaves the sweep
        owners = {raw.decode() for raw in await b._redis.smembers(b._owners_key)}
        assert owners == set()  # (api-2 and api-3 never created a run: never in it)
    else:
        assert await lease_rows(b) == ["api-2", "api-3"]  # lapsed row deleted
    for run_id in run_ids:
        record = await b.get_run(run_id)
        assert (record.status, record.outcome, record.last_seq) == (
            "interrupted", "interrupted", 4)
        events = await stored(b, run_id)
        assert [e.seq for e in events] == [1, 2, 3, 4]
        (terminal,) = terminals(events)  # written once
        assert (terminal.seq, terminal.outcome, terminal.actor) == (4, "interrupted", "store")


async def test_a_live_heartbeat_keeps_runs_safe_across_sweeps(
        replicas: Replicas, clock: Clock) -> None:
    alive = await replicas.open("api-1")
    await running_run(alive, "r1")
    sweeper = await replicas.open("api-2")
    for _ in range(6):  # 3 TTLs in all, renewed every half TTL
        clock.advance(TTL / 2)
        await alive.heartbeat()
        await sweeper.heartbeat()
        assert await sweeper.recover_expired() == []
    assert (await alive.get_run("r1")).status == "running"
    clock.advance(TTL)  # exactly TTL after its last heartbeat: expired
    assert await sweeper.recover_expired() == ["r1"]


async def test_opening_a_store_also_recovers_runs_of_expired_owners(
        replicas: Replicas, clock: Clock) -> None:
    dead = await replicas.open("api-1")
    await running_run(dead, "r1")
    clock.advance(TTL * 2)
    assert await replicas.make("api-2").open() == ["r1"]
    assert (await dead.get_run("r1")).status == "interrupted"
    assert [e.seq for e in await stored(dead, "r1")] == [1, 2, 3]


async def test_a_restart_with_the_same_configured_owner_interrupts_its_runs_at_once(
        replicas: Replicas, clock: Clock) -> None:
    crashed = await replicas.open("api-1")  # stays "open": as kill -9 leaves its lease
    await running_run(crashed, "r1")
    stranger = await replicas.open(None)
    assert (await stranger.get_run("r1")).status == "running"  # api-1's lease is alive
    clock.advance(1.0)
    restarted = replicas.make("api-1")
    assert await restarted.open() == ["r1"]  # its own: interrupted at once, lease or not
    events = await stored(restarted, "r1")
    assert [e.seq for e in events] == [1, 2, 3] and len(terminals(events)) == 1
    assert await restarted.mark_interrupted() == []


async def test_runs_of_an_owner_without_a_lease_count_as_expired(
        replicas: Replicas, clock: Clock) -> None:
    old = await replicas.open("default")  # what every store was called before leases
    await running_run(old, "r1")
    if isinstance(old, SqliteRunStore):
        await old._write(lambda conn: conn.execute("DELETE FROM owners").close())
    elif isinstance(old, PostgresRunStore):
        await old._write(lambda conn: conn.execute(f"DELETE FROM {old._owners}"))
    else:
        assert isinstance(old, RedisRunStore)  # nor in the owners set: only running:default
        await old._redis.delete(old._lease_key("default"))
        await old._redis.srem(old._owners_key, "default")
    fresh = replicas.make(None)
    assert await fresh.open() == ["r1"]
    assert await fresh.recover_expired() == []


async def test_a_read_only_store_recovers_nothing_and_refuses_to_heartbeat(
        replicas: Replicas, clock: Clock) -> None:
    dead = await replicas.open("api-1")
    await running_run(dead, "r1")
    await dead.mark_interrupted()
    await running_run(dead, "r2")
    clock.advance(TTL * 10)
    viewer = replicas.make(None, read_only=True)
    assert await viewer.open() == []
    assert await viewer.recover_expired() == []
    with pytest.raises(StoreReadOnly):
        await viewer.heartbeat()
    with pytest.raises(StoreReadOnly):
        await viewer.reopen("r1")
    assert (await viewer.get_run("r2")).status == "running"
    assert (await viewer.get_run("r1")).status == "interrupted"
    await viewer.close()
    assert await replicas.make("api-2").open() == ["r2"]  # a writable one does recover


# --- reopen ---------------------------------------------------------------------------------------


async def test_reopen_continues_the_seq_and_a_later_run_finished_closes_the_run(
        replicas: Replicas, clock: Clock) -> None:
    first = await replicas.open("api-1")
    await running_run(first, "r1")
    assert await first.mark_interrupted() == ["r1"]
    before = await first.get_run("r1")
    clock.advance(5.0)
    resumer = await replicas.open("api-2")
    record = await resumer.reopen("r1", tenant="acme")
    assert (record.status, record.outcome, record.last_seq) == ("running", None, 3)
    assert record.updated_at == pytest.approx(before.updated_at + 5.0)
    assert record.created_at == before.created_at
    assert await resumer.get_run("r1") == record
    assert await first.mark_interrupted() == []  # no longer api-1's run
    with pytest.raises(SeqConflict):
        await resumer.append("r1", stamped("r1", searches(1), start=5))
    assert await resumer.append("r1", stamped("r1", searches(2), start=4)) == 5
    assert await resumer.append("r1", stamped("r1", [finished()], start=6)) == 6
    done = await resumer.get_run("r1")
    assert (done.status, done.outcome, done.last_seq) == ("finished", "answered", 6)
    events = await stored(resumer, "r1")
    assert [e.seq for e in events] == [1, 2, 3, 4, 5, 6]  # the interruption stays in the log
    assert [(t.seq, t.outcome) for t in terminals(events)] == [
        (3, "interrupted"), (6, "answered")]
    assert await resumer.mark_interrupted() == []


async def test_a_reopened_run_belongs_to_its_new_owner_and_its_lease(
        replicas: Replicas, clock: Clock) -> None:
    first = await replicas.open("api-1")
    await running_run(first, "r1")
    await first.mark_interrupted()
    resumer = await replicas.open("api-2")
    await resumer.reopen("r1")
    sweeper = await replicas.open("api-3")
    clock.advance(TTL - 1)
    await first.heartbeat()
    await sweeper.heartbeat()
    assert await sweeper.recover_expired() == []  # api-2's lease is alive
    clock.advance(2)
    assert await sweeper.recover_expired() == ["r1"]  # api-2's lapsed (api-1's did not)
    events = await stored(sweeper, "r1")
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert [t.seq for t in terminals(events)] == [3, 4]


async def test_reopen_refuses_running_finished_missing_and_other_tenants_runs(
        replicas: Replicas) -> None:
    store = await replicas.open("api-1")
    await running_run(store, "live")
    await store.create_run(meta("done"))
    await store.append("done", stamped("done", [*searches(1), finished()]))
    await running_run(store, "cut")
    await store.create_run(meta("theirs", tenant="other"))
    assert sorted(await store.mark_interrupted()) == ["cut", "live", "theirs"]
    await store.reopen("live")
    with pytest.raises(RunNotResumable, match="running"):
        await store.reopen("live")
    with pytest.raises(RunNotResumable, match="finished") as refused:
        await store.reopen("done", tenant="acme")
    assert (refused.value.run_id, refused.value.status) == ("done", "finished")
    with pytest.raises(RunNotFound):
        await store.reopen("theirs", tenant="acme")  # another tenant's: as if missing
    with pytest.raises(RunNotFound):
        await store.reopen("nope")
    assert (await store.get_run("theirs")).status == "interrupted"
    assert (await store.get_run("done")).status == "finished"
    assert (await store.reopen("theirs", tenant="other")).status == "running"


async def test_of_two_concurrent_reopens_exactly_one_wins(replicas: Replicas) -> None:
    first = await replicas.open("api-1")
    for i in range(5):
        await running_run(first, f"r{i}")
    await first.mark_interrupted()
    b = await replicas.open("api-2")
    c = await replicas.open("api-3")
    for i in range(5):
        got = await asyncio.gather(b.reopen(f"r{i}"), c.reopen(f"r{i}"),
                                   return_exceptions=True)
        won = [r for r in got if not isinstance(r, BaseException)]
        lost = [r for r in got if isinstance(r, BaseException)]
        assert len(won) == 1 and len(lost) == 1, got
        assert isinstance(lost[0], RunNotResumable)
    owned_b, owned_c = await b.mark_interrupted(), await c.mark_interrupted()
    assert sorted(owned_b + owned_c) == [f"r{i}" for i in range(5)]  # each one owner


# --- owners and the keeper ---------------------------------------------------------------------


def test_default_owners_are_unique_and_name_the_host_and_process(tmp_path: Path) -> None:
    first, second = default_owner(), default_owner()
    assert first != second
    assert first.startswith(f"{socket.gethostname()}-{os.getpid()}-")
    a, b = SqliteRunStore(tmp_path / "a.db"), SqliteRunStore(tmp_path / "a.db")
    assert a.owner != b.owner and a.lease_ttl_s == 15.0
    with pytest.raises(ValueError, match="lease_ttl_s"):
        SqliteRunStore(tmp_path / "a.db", lease_ttl_s=0)
    with pytest.raises(ValueError, match="owner"):
        SqliteRunStore(tmp_path / "a.db", owner="")
    assert isinstance(a, RunStore)


async def test_a_version_1_file_keeps_working_and_a_read_only_open_does_not_upgrade_it(
        tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript("""
            CREATE TABLE runs (run_id TEXT PRIMARY KEY, tenant TEXT NOT NULL,
                question TEXT NOT NULL, mode TEXT NOT NULL, status TEXT NOT NULL,
                outcome TEXT, owner TEXT NOT NULL, created_us INTEGER NOT NULL,
                updated_us INTEGER NOT NULL, last_seq INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL,
                type TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (run_id, seq));
            CREATE TABLE tasks (task_id TEXT PRIMARY KEY, tenant TEXT NOT NULL,
                kind TEXT NOT NULL, run_id TEXT, doc_id TEXT, status TEXT NOT NULL,
                progress REAL NOT NULL, params TEXT NOT NULL, result TEXT, error TEXT,
                created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL);
            INSERT INTO runs VALUES ('old', 'acme', 'q', 'agent', 'running', NULL, 'default',
                1, 1, 0);
            PRAGMA user_version = 1;
        """)
        conn.commit()
    async with SqliteRunStore(path, read_only=True) as viewer:
        assert (await viewer.get_run("old")).status == "running"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (1,)
    async with SqliteRunStore(path) as store:  # a new server: "default" has no lease
        assert (await store.get_run("old")).status == "interrupted"
        assert [e.seq for e in await stored(store, "old")] == [1]
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (3,)  # v2 owners, v3 sessions
        assert conn.execute("SELECT owner FROM owners").fetchall() == []  # closed: released


def fill_sqlite(conn: sqlite3.Connection, owner: str) -> None:
    """Leave no room in the file for ``owner``'s lease row (as a full disk would)."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    conn.execute("DELETE FROM owners WHERE owner = ?", (owner,))
    count = 0
    for size in (400, 100, 30):
        while True:
            count += 1
            try:
                conn.execute("INSERT INTO owners VALUES (?, ?)",
                             (f"filler-{count:08d}".ljust(size, "x"), 2**62))
            except sqlite3.OperationalError as exc:
                assert "full" in str(exc)
                break


def unfill_sqlite(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM owners WHERE owner LIKE 'filler-%'")
    conn.execute("PRAGMA max_page_count = 1073741823")


async def test_keeper_turns_unwritable_on_a_full_sqlite_disk_and_back(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    owner = "api-" + "1" * 100  # a long lease row: it cannot squeeze into a corner
    async with SqliteRunStore(tmp_path / "runs.db", owner=owner) as store:
        keeper = LeaseKeeper(store, interval_s=0.02)
        assert keeper.interval_s == 0.02
        await keeper.start()
        try:
            assert keeper.writable and keeper.reason is None and keeper.last_ok is not None
            with caplog.at_level(logging.WARNING, logger="reactive_rag.store"):
                await store._write(lambda conn: fill_sqlite(conn, owner))
                await eventually(lambda: not keeper.writable, timeout_s=10.0)
            assert keeper.reason == (
                "the run store refused a write: SQLite: database or disk is full")
            assert any("not renewed" in r.getMessage() for r in caplog.records)
            stale = keeper.last_ok
            await store._write(unfill_sqlite)
            await eventually(lambda: keeper.writable, timeout_s=10.0)
            assert keeper.reason is None and keeper.last_ok is not None
            assert keeper.last_ok >= (stale or 0)
        finally:
            await keeper.aclose()
            await keeper.aclose()  # idempotent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start_redis(port: int, folder: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--dir", str(folder),
         "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return proc
        assert proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
        time.sleep(0.02)


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
async def test_keeper_turns_unwritable_while_redis_is_down_and_back(tmp_path: Path) -> None:
    port = _free_port()
    server = _start_redis(port, tmp_path)
    try:
        store = RedisRunStore(f"redis://127.0.0.1:{port}/0", owner="api-1")
        async with store, LeaseKeeper(store, interval_s=0.02) as keeper:
            assert keeper.writable
            server.terminate()
            server.wait(timeout=10)
            await eventually(lambda: not keeper.writable, timeout_s=10.0)
            assert keeper.reason is not None
            assert keeper.reason.startswith("the run store refused a write: Redis:")
            server = _start_redis(port, tmp_path)
            await eventually(lambda: keeper.writable, timeout_s=10.0)
            assert keeper.reason is None
            assert await store._redis.get(store._lease_key("api-1")) is not None
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.parametrize("awaitable", [True, False])
async def test_keeper_sweeps_expired_owners_and_reports_what_it_recovered(
        replicas: Replicas, clock: Clock, awaitable: bool,
        caplog: pytest.LogCaptureFixture) -> None:
    dead = await replicas.open("api-1")
    await running_run(dead, "r1")
    await running_run(dead, "r2")
    alive = await replicas.open("api-2")
    await running_run(alive, "mine")
    calls: list[list[str]] = []

    async def on_async(ids: list[str]) -> None:
        calls.append(ids)

    def on_sync(ids: list[str]) -> None:
        calls.append(ids)

    keeper = LeaseKeeper(alive, interval_s=0.02, on_recovered=on_async if awaitable else on_sync)
    assert LeaseKeeper(alive).interval_s == pytest.approx(TTL / 3)
    with pytest.raises(ValueError):
        LeaseKeeper(alive, interval_s=0)
    with caplog.at_level(logging.WARNING, logger="reactive_rag.store"):
        async with keeper:
            assert calls == []  # the first sweep (in start) found api-1 alive
            clock.advance(TTL + 1)
            await eventually(lambda: bool(calls), timeout_s=10.0)
            for _ in range(2):  # more sweeps (what the keeper's loop runs): nothing more
                assert await keeper.tick() == []
    assert calls == [["r1", "r2"]]
    assert keeper.writable and keeper.last_ok == clock.now
    assert (await alive.get_run("mine")).status == "running"  # its own lease was renewed
    assert (await alive.get_run("r1")).status == "interrupted"
    assert any("r1, r2" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records if r.name == "reactive_rag.store")


async def test_a_failing_on_recovered_callback_does_not_stop_the_keeper(
        replicas: Replicas, clock: Clock) -> None:
    dead = await replicas.open("api-1")
    await running_run(dead, "r1")
    alive = await replicas.open("api-2")

    def broken(ids: list[str]) -> None:
        raise RuntimeError("callback bug")

    async def status(run_id: str) -> str:
        return (await alive.get_run(run_id)).status

    async with LeaseKeeper(alive, interval_s=0.02, on_recovered=broken) as keeper:
        clock.advance(TTL + 1)
        deadline = time.monotonic() + 10
        while await status("r1") != "interrupted":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        await running_run(dead, "r2")  # api-1 (lease lapsed) writes on: the sweeps go on
        while await status("r2") != "interrupted":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        assert keeper.writable


# --- the server's settings ---------------------------------------------------------------------


def test_server_config_takes_the_owner_and_lease_ttl_from_file_env_and_overrides(
        tmp_path: Path) -> None:
    assert (ServerConfig().owner, ServerConfig().lease_ttl_s) == (None, 15.0)
    assert ServerConfig.load(env={"REACTIVE_RAG_SERVER_OWNER": "api-7"}).owner == "api-7"
    toml = tmp_path / "server.toml"
    toml.write_text('owner = "api-8"\nlease_ttl_s = 30\n')
    loaded = ServerConfig.load(toml, env={})
    assert (loaded.owner, loaded.lease_ttl_s) == ("api-8", 30.0)
    assert ServerConfig.load(toml, env={}, owner="api-9").owner == "api-9"
    for bad in ({"owner": ""}, {"owner": "two words"}, {"lease_ttl_s": 0}):
        with pytest.raises(ConfigError):
            ServerConfig.load(env={}, **bad)
    sqlite = server_store(str(tmp_path / "runs.db"), owner="api-7", lease_ttl_s=30.0)
    redis = server_store("redis://127.0.0.1:1/0", owner="api-7", lease_ttl_s=30.0)
    for store in (sqlite, redis):
        assert (store.owner, store.lease_ttl_s) == ("api-7", 30.0)
    unnamed = [server_store(str(tmp_path / "runs.db")) for _ in range(2)]
    assert unnamed[0].owner != unnamed[1].owner


def test_serve_has_an_owner_flag() -> None:
    import argparse

    from reactive_rag.cli._serve import add_serve_commands

    parser = argparse.ArgumentParser()
    add_serve_commands(parser.add_subparsers(dest="command"))
    assert parser.parse_args(["serve", "--owner", "api-7"]).owner == "api-7"
    assert parser.parse_args(["serve"]).owner is None


async def test_the_server_opens_its_store_as_the_configured_owner(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, owner="api-7", lease_ttl_s=30.0) as client:
        store = client.app[STORE_KEY]
        assert (store.owner, store.lease_ttl_s) == ("api-7", 30.0)


async def test_a_writer_that_lost_its_lease_cannot_write_into_the_resumed_run(
    replicas: Replicas, clock: Clock
) -> None:
    """Fencing: a paused server wakes after another one resumed its run."""
    paused = await replicas.open("api-1")
    await running_run(paused, "r1")
    other = await replicas.open("api-2")
    clock.advance(TTL + 1)  # api-1 stops heart-beating (paused, partitioned)
    await other.heartbeat()
    assert await other.recover_expired() == ["r1"]
    await other.reopen("r1")
    late = stamped("r1", searches(1), start=4)
    with pytest.raises(RunOwnedElsewhere, match="another owner"):
        await paused.append("r1", late)
    assert isinstance(RunOwnedElsewhere("x"), RunAlreadyFinished)  # the recorder stops
    assert await other.append("r1", late) == 4  # the owner that resumed it writes on
    assert (await other.get_run("r1")).last_seq == 4


async def test_after_its_own_outage_a_keeper_waits_a_lease_before_judging_others(
    replicas: Replicas, clock: Clock
) -> None:
    """A store outage stops every owner's heartbeat: lapsed leases then are no death."""
    alive = await replicas.open("api-1")
    await running_run(alive, "r1")
    judge = await replicas.open("api-2")
    keeper = LeaseKeeper(judge)
    real = judge.heartbeat

    async def down() -> None:
        raise StoreUnavailable("connection refused")

    judge.heartbeat = down  # type: ignore[method-assign]
    assert await keeper.tick() == [] and not keeper.writable
    clock.advance(TTL + 1)  # the outage outlasts every lease
    assert await keeper.tick() == []  # its heartbeats fail all along
    clock.advance(1)
    judge.heartbeat = real  # type: ignore[method-assign]
    assert await keeper.tick() == [] and keeper.writable  # back, but too soon to judge
    await alive.heartbeat()  # api-1 was alive all along: it renews
    clock.advance(TTL - 1)
    assert await keeper.tick() == []  # still within a lease of its own outage
    await alive.heartbeat()
    clock.advance(2)
    assert await keeper.tick() == []  # judged now: api-1's lease is live
    assert (await judge.get_run("r1")).status == "running"
    clock.advance(TTL + 1)  # now api-1 really stops
    assert await keeper.tick() == ["r1"]
