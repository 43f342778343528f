"""Conversation sessions in the run store: round trip, restarts, sliding TTL, tenants, ids.

Every backend; a hand-moved clock decides when a session expires (Redis keys
also carry a real PEXPIRE of the TTL, which the tests keep well above their
wall time). The in-memory session knowledge bases' TTL is checked at the end.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from reactive_rag.store import (
    RedisRunStore,
    RunMeta,
    SessionExists,
    SessionNotFound,
    SessionRecord,
    SqliteRunStore,
    StoreClosed,
    StoreReadOnly,
)
from reactive_rag.store._sqlite import SCHEMA_VERSION
from reactive_rag.web_kb import WebKbStore

from .._store_fixtures import BACKENDS, NEEDS_REDIS, AnyStore, Clock, drop_namespace, make_store

TTL = 60.0
DATA: dict[str, Any] = {"turns": [{"q": "Who founded Bayer?", "n": 1, "ok": True}],
                        "summary": "", "nested": {"x": [1.5, None, "é"]}}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@contextlib.asynccontextmanager
async def opened(backend: str, tmp_path: Path, clock: Clock, *,
                 prefix: str | None = None, **options: Any) -> AsyncIterator[AnyStore]:
    """A store on ``clock``; Redis keys are dropped at the end unless ``prefix`` is shared."""
    extra: dict[str, Any] = {} if prefix is None else {"prefix": prefix}
    store = make_store(backend, tmp_path, clock=clock, **extra, **options)
    await store.open()
    try:
        yield store
    finally:
        if prefix is None:
            await drop_namespace(store)
        await store.close()


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path,
                clock: Clock) -> AsyncIterator[AnyStore]:
    async with opened(request.param, tmp_path, clock) as opened_store:
        yield opened_store


async def test_a_session_round_trips_its_data_and_times(store: AnyStore, clock: Clock) -> None:
    created = await store.create_session("s-1", "acme", DATA, ttl_s=TTL)
    assert created == SessionRecord("s-1", "acme", DATA, TTL, clock.now, clock.now,
                                    clock.now + TTL)
    assert await store.get_session("s-1", "acme") == created
    assert await store.get_session("s-1") == created  # an operator: no tenant scope
    clock.advance(5)
    saved = await store.save_session("s-1", {"turns": [], "summary": "folded"}, tenant="acme")
    assert saved.data == {"turns": [], "summary": "folded"}
    assert (saved.created_at, saved.updated_at, saved.expires_at) == (
        created.created_at, clock.now, clock.now + TTL)
    assert await store.get_session("s-1", "acme", touch=False) == saved
    with pytest.raises(SessionExists):
        await store.create_session("s-1", "acme", {}, ttl_s=TTL)
    with pytest.raises(SessionExists):  # another tenant cannot take the id either
        await store.create_session("s-1", "beta", {}, ttl_s=TTL)
    assert await store.delete_session("s-1", "acme") is True
    assert await store.delete_session("s-1", "acme") is False
    with pytest.raises(SessionNotFound):
        await store.get_session("s-1", "acme")
    with pytest.raises(SessionNotFound):
        await store.save_session("s-1", DATA)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_sessions_survive_closing_and_reopening_the_store(
        backend: str, tmp_path: Path, clock: Clock) -> None:
    prefix = f"test-sessions-restart-{tmp_path.name}:"
    try:
        async with opened(backend, tmp_path, clock, prefix=prefix) as first:
            await first.create_session("keep", "acme", DATA, ttl_s=TTL)
            await first.save_session("keep", {**DATA, "summary": "after one turn"})
        clock.advance(10)
        async with opened(backend, tmp_path, clock, prefix=prefix) as second:  # a restart
            again = await second.get_session("keep", "acme")
            assert again.data == {**DATA, "summary": "after one turn"}
            assert again.expires_at == clock.now + TTL
            await second.save_session("keep", {"turns": []}, tenant="acme")
        async with opened(backend, tmp_path, clock, prefix=prefix) as third:
            assert (await third.get_session("keep", touch=False)).data == {"turns": []}
    finally:
        async with opened(backend, tmp_path, clock, prefix=prefix) as last:
            await drop_namespace(last)


async def test_use_slides_the_ttl_and_an_idle_session_expires(
        store: AnyStore, clock: Clock) -> None:
    await store.create_session("used", "acme", {}, ttl_s=TTL)
    await store.create_session("saved", "acme", {}, ttl_s=TTL)
    await store.create_session("idle", "acme", {}, ttl_s=TTL)
    await store.create_session("peeked", "acme", {}, ttl_s=TTL)
    for _ in range(3):  # 135 s in all: each use (a touch or a save) starts the TTL again
        clock.advance(45)
        touched = await store.get_session("used", "acme")
        assert touched.expires_at == clock.now + TTL and touched.updated_at < clock.now
        await store.save_session("saved", {"n": 1})
        if clock.now < 1_700_000_000.0 + TTL:
            await store.get_session("peeked", touch=False)  # a look is not a use
    for name in ("idle", "peeked"):
        with pytest.raises(SessionNotFound):
            await store.get_session(name)
        with pytest.raises(SessionNotFound):
            await store.save_session(name, {})
        assert await store.delete_session(name) is False
    assert await store.sweep_sessions() == ["idle", "peeked"]
    assert await store.sweep_sessions() == []
    clock.advance(TTL - 1)
    assert await store.sweep_sessions() == []
    clock.advance(1)  # exactly at expires_at: gone
    with pytest.raises(SessionNotFound):
        await store.get_session("used")
    assert sorted(await store.sweep_sessions()) == ["saved", "used"]


async def test_an_expired_id_can_be_created_again(store: AnyStore, clock: Clock) -> None:
    await store.create_session("again", "acme", {"old": True}, ttl_s=10)
    clock.advance(11)
    fresh = await store.create_session("again", "beta", {"new": True}, ttl_s=TTL)
    assert fresh.tenant == "beta" and fresh.created_at == clock.now
    assert (await store.get_session("again", "beta")).data == {"new": True}
    assert await store.sweep_sessions() == []  # the new one is live


async def test_each_session_keeps_its_own_ttl(store: AnyStore, clock: Clock) -> None:
    await store.create_session("short", "acme", {}, ttl_s=0.5)
    await store.create_session("long", "acme", {}, ttl_s=3600)
    clock.advance(1)
    assert await store.sweep_sessions() == ["short"]
    assert (await store.get_session("long")).ttl_s == 3600


async def test_another_tenants_session_is_not_there(store: AnyStore) -> None:
    await store.create_session("mine", "acme", DATA, ttl_s=TTL)
    before = await store.get_session("mine", touch=False)
    with pytest.raises(SessionNotFound) as missing:
        await store.get_session("nobody-has-this", "beta")
    with pytest.raises(SessionNotFound) as taken:
        await store.get_session("mine", "beta")
    with pytest.raises(SessionNotFound):
        await store.save_session("mine", {"stolen": True}, tenant="beta")
    # the same answer as for an id nobody has (only the id it was asked for differs)
    assert str(taken.value) == str(missing.value).replace("nobody-has-this", "mine")
    assert await store.delete_session("mine", "beta") is False
    after = await store.get_session("mine", "acme", touch=False)
    assert after == before  # untouched: not even the expiry moved


@pytest.mark.parametrize("bad", ["", "a" * 129, "has space", "slash/x", "dot.x", "ü", "a:b",
                                 "*", "new\nline"])
async def test_a_malformed_id_is_refused_on_create_and_absent_otherwise(
        store: AnyStore, bad: str) -> None:
    with pytest.raises(ValueError):
        await store.create_session(bad, "acme", {}, ttl_s=TTL)
    with pytest.raises(SessionNotFound):
        await store.get_session(bad)
    with pytest.raises(SessionNotFound):
        await store.save_session(bad, {})
    assert await store.delete_session(bad) is False


async def test_bad_arguments_are_refused(store: AnyStore) -> None:
    assert (await store.create_session("A_z-09" + "x" * 122, "acme", {}, ttl_s=1)).ttl_s == 1
    for ttl in (0, -1, float("nan"), float("inf"), True):
        with pytest.raises(ValueError):
            await store.create_session("t", "acme", {}, ttl_s=ttl)
    with pytest.raises(ValueError):
        await store.create_session("t", "", {}, ttl_s=TTL)
    for data in ({"x": float("nan")}, {"x": object()}, ["not", "an", "object"]):
        with pytest.raises(ValueError):
            await store.create_session("t", "acme", data, ttl_s=TTL)  # type: ignore[arg-type]
    await store.create_session("t", "acme", {}, ttl_s=TTL)
    with pytest.raises(ValueError):
        await store.save_session("t", {"x": float("inf")})
    assert (await store.get_session("t")).data == {}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_read_only_store_reads_sessions_and_never_writes(
        backend: str, tmp_path: Path, clock: Clock) -> None:
    prefix = f"test-sessions-ro-{tmp_path.name}:"
    async with opened(backend, tmp_path, clock, prefix=prefix) as writer:
        created = await writer.create_session("s", "acme", DATA, ttl_s=TTL)
        await writer.create_session("old", "acme", {}, ttl_s=1)
        try:
            clock.advance(2)
            async with opened(backend, tmp_path, clock, prefix=prefix,
                              read_only=True) as viewer:
                seen = await viewer.get_session("s", "acme")  # touch=True reads only
                assert seen == created
                with pytest.raises(StoreReadOnly):
                    await viewer.create_session("n", "acme", {}, ttl_s=TTL)
                with pytest.raises(StoreReadOnly):
                    await viewer.save_session("s", {})
                with pytest.raises(StoreReadOnly):
                    await viewer.delete_session("s")
                assert await viewer.sweep_sessions() == []
                with pytest.raises(SessionNotFound):
                    await viewer.get_session("old")
            assert await writer.get_session("s", touch=False) == created
            assert await writer.sweep_sessions() == ["old"]
        finally:
            await drop_namespace(writer)


async def test_a_closed_store_refuses_session_calls(tmp_path: Path) -> None:
    closed = SqliteRunStore(tmp_path / "runs.db")
    with pytest.raises(StoreClosed):
        await closed.get_session("s")
    with pytest.raises(StoreClosed):
        await closed.sweep_sessions()
    with pytest.raises(StoreClosed):
        await closed.delete_session("s")


async def test_sessions_and_runs_share_the_store_without_touching_each_other(
        store: AnyStore, clock: Clock) -> None:
    await store.create_run(RunMeta(run_id="r1", tenant="acme", question="q"))
    await store.create_session("r1", "acme", {"run": "r1"}, ttl_s=1)
    clock.advance(2)
    assert await store.sweep_sessions() == ["r1"]
    assert (await store.get_run("r1", "acme")).status == "running"


# --- SQLite schema upgrades -------------------------------------------------------------------

_V1 = """
CREATE TABLE runs (run_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, question TEXT NOT NULL,
    mode TEXT NOT NULL, status TEXT NOT NULL, outcome TEXT, owner TEXT NOT NULL,
    created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL,
    last_seq INTEGER NOT NULL DEFAULT 0);
CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,
    data BLOB NOT NULL, PRIMARY KEY (run_id, seq));
CREATE TABLE tasks (task_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, kind TEXT NOT NULL,
    run_id TEXT, doc_id TEXT, status TEXT NOT NULL, progress REAL NOT NULL,
    params TEXT NOT NULL, result TEXT, error TEXT, created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL);
INSERT INTO runs VALUES ('old', 'acme', 'q', 'agent', 'finished', 'answered', 'default',
    1, 1, 0);
"""
_V2 = _V1 + "CREATE TABLE owners (owner TEXT PRIMARY KEY, expires_us INTEGER NOT NULL);\n"


def _version(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


@pytest.mark.parametrize(("version", "script"), [(1, _V1), (2, _V2)])
async def test_older_files_gain_the_sessions_table_and_read_only_opens_leave_them(
        tmp_path: Path, clock: Clock, version: int, script: str) -> None:
    assert SCHEMA_VERSION == 3
    path = tmp_path / "runs.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript(script + f"PRAGMA user_version = {version};")
        conn.commit()
    async with SqliteRunStore(path, read_only=True, clock=clock) as viewer:
        with pytest.raises(SessionNotFound):  # no table yet: no session, not an error
            await viewer.get_session("s")
        assert await viewer.sweep_sessions() == []
        assert (await viewer.get_run("old")).outcome == "answered"
    assert _version(path) == version
    async with SqliteRunStore(path, clock=clock) as store:
        await store.create_session("s", "acme", DATA, ttl_s=TTL)
        assert (await store.get_run("old")).outcome == "answered"
    assert _version(path) == 3
    async with SqliteRunStore(path, read_only=True, clock=clock) as viewer:
        assert (await viewer.get_session("s", "acme")).data == DATA


# --- the in-memory session knowledge bases ----------------------------------------------------


async def test_handing_out_a_knowledge_base_counts_as_use() -> None:
    clock = Clock()
    sessions = WebKbStore(ttl_s=60, clock=clock)
    kb = sessions.get("busy")
    sessions.get("idle")
    for _ in range(3):  # a run holding the knowledge base only gets it again, 45 s apart
        clock.advance(45)
        assert sessions.get("busy") is kb
    assert await sessions.sweep() == ["idle"]
    assert not kb.closed and "busy" in sessions
    clock.advance(61)
    assert await sessions.sweep() == ["busy"]
    await sessions.close()


@pytest.mark.parametrize("backend", [pytest.param("redis", marks=NEEDS_REDIS)])
async def test_a_redis_session_key_expires_by_itself_and_each_use_sets_it_again(
        backend: str, tmp_path: Path, clock: Clock) -> None:
    async with opened(backend, tmp_path, clock) as redis_store:
        assert isinstance(redis_store, RedisRunStore)
        key = redis_store._session_key("s")
        await redis_store.create_session("s", "acme", {}, ttl_s=TTL)
        await redis_store._redis.pexpire(key, 5_000)  # as if most of the TTL had passed
        await redis_store.get_session("s", touch=False)
        assert await redis_store._redis.pttl(key) <= 5_000
        await redis_store.get_session("s")
        assert 55_000 < await redis_store._redis.pttl(key) <= 60_000
        await redis_store._redis.pexpire(key, 5_000)
        await redis_store.save_session("s", {"n": 1})
        assert 55_000 < await redis_store._redis.pttl(key) <= 60_000
        await redis_store._redis.delete(key)  # Redis expired it: gone, and swept from the index
        with pytest.raises(SessionNotFound):
            await redis_store.get_session("s")
        clock.advance(TTL)
        assert await redis_store.sweep_sessions() == ["s"]
        assert await redis_store._redis.zcard(redis_store._sessions_key) == 0
