"""What only the PostgreSQL store has: its URL, its schema, LISTEN/NOTIFY, a server that goes away.

The protocol itself (runs, attach, leases, sessions, tasks...) is checked by the
shared store tests, parametrised over every backend. These run against the test
server (``REACTIVE_RAG_TEST_POSTGRES_URL``), each in a schema of its own; "the
server goes away" is a TCP proxy in front of it that the test cuts, so the
shared server itself is never stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from reactive_rag.server import ConfigError, ServerConfig
from reactive_rag.server import make_store as server_store
from reactive_rag.store import (
    LeaseKeeper,
    PostgresRunStore,
    Recorder,
    RunMeta,
    RunStore,
    SeqConflict,
    StoreClosed,
    StoreError,
    StoreUnavailable,
)
from reactive_rag.store.backends._postgres import SCHEMA_VERSION
from streams import Event, RunFinished, RunStarted, RunStream, SearchRequested

from ..._eventually import eventually
from .._store_fixtures import NEEDS_POSTGRES, POSTGRES_URL, drop_pg_schema, searches, stamped
from .._tcp_proxy import TcpProxy

REPO = Path(__file__).resolve().parents[3]

pytestmark = NEEDS_POSTGRES


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


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    name = f"test_pg_{uuid.uuid4().hex[:16]}"
    try:
        yield name
    finally:
        await drop_pg_schema(name)


def url() -> str:
    assert POSTGRES_URL is not None
    return POSTGRES_URL


async def sql(query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """One statement on the test server over a connection of the test's own."""
    async with await psycopg.AsyncConnection.connect(url(), autocommit=True) as conn:
        cur = await conn.execute(query, params)  # type: ignore[arg-type]
        return await cur.fetchall() if cur.description else []


# --- URLs, schemas, errors before anything is stored ------------------------------------------


@pytest.mark.parametrize(("bad", "says"), [
    ("redis://127.0.0.1:6379/0", "not a PostgreSQL URL"),
    ("postgresql://app:hunter2@db/runs?bogus=1", 'invalid URI query parameter: "bogus"'),
    ("postgresql://app:hunter2@[::1/runs", "IPv6"),
    ("postgresql://app:hunter2@db:5x32/runs", "port '5x32' is not a number"),
    ("postgresql://app:hunter2@db/runs?schema=Runs-Prod", "schema is 1 to 48 of a-z 0-9 _"),
    ("postgresql://app:hunter2@db/runs?schema=", "schema is 1 to 48 of a-z 0-9 _"),
])
def test_a_bad_url_is_refused_at_once_with_the_reason_and_never_the_password(
        bad: str, says: str) -> None:
    with pytest.raises(ValueError, match=r"PostgreSQL|schema") as refused:
        PostgresRunStore(bad)
    assert says in str(refused.value)
    assert "hunter2" not in str(refused.value)
    if bad.startswith("postgres"):
        with pytest.raises(ConfigError) as config:  # `serve` says so before it opens anything
            ServerConfig.load(env={}, store=bad)
        assert says in str(config.value) and "hunter2" not in str(config.value)


def test_a_url_names_the_schema_and_keeps_every_libpq_parameter() -> None:
    store = PostgresRunStore("postgres://app:pw@db:6543/runs?sslmode=disable&schema=rr_prod"
                             "&application_name=api")
    assert store.schema == "rr_prod" and store.channel == "rr_prod_events"
    assert store.url == "postgres://app:***@db:6543/runs?sslmode=disable&schema=rr_prod" \
                        "&application_name=api"
    assert conninfo_to_dict(store._conninfo) == {
        "user": "app", "password": "pw", "host": "db", "port": "6543", "dbname": "runs",
        "sslmode": "disable", "application_name": "api"}
    assert PostgresRunStore("postgresql:///runs", schema="other").schema == "other"
    assert PostgresRunStore("postgresql:///runs").schema == "reactive_rag"
    with pytest.raises(ValueError, match="schema"):
        PostgresRunStore("postgresql:///runs", schema='x"; DROP TABLE runs; --')


def test_the_server_and_the_cli_take_a_postgres_url() -> None:
    for target in ("postgresql://127.0.0.1:1/db", "postgres://127.0.0.1:1/db?schema=b"):
        store = server_store(target, owner="api-7", lease_ttl_s=30.0)
        assert isinstance(store, PostgresRunStore) and isinstance(store, RunStore)
        assert (store.owner, store.lease_ttl_s, store.read_only) == ("api-7", 30.0, False)
        assert server_store(target, read_only=True).read_only
    assert ServerConfig.load(env={"REACTIVE_RAG_SERVER_STORE": "postgresql://h/db"}).store == \
        "postgresql://h/db"
    # what `serve` logs and `resume` prints about its store: never the password
    assert ServerConfig(store="postgresql://app:hunter2@db/rr?schema=x").store_label() == \
        "postgresql://app:***@db/rr?schema=x"


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "reactive_rag", *argv], capture_output=True,
                            text=True, timeout=120, check=False, cwd=REPO)
    result.stderr = " ".join(result.stderr.split())  # the console wraps long lines
    return result


def test_the_cli_refuses_a_bad_or_unreachable_postgres_store_in_one_line(schema: str) -> None:
    bad = _cli("runs", "--store", "postgresql://app:hunter2@db/rr?bogus=1")
    assert bad.returncode == 1 and 'invalid URI query parameter: "bogus"' in bad.stderr
    down = _cli("resume", "some-run", "--store", "postgresql://app:hunter2@127.0.0.1:1/rr")
    assert down.returncode != 0 and "Connection refused" in down.stderr
    empty = _cli("runs", "--store", f"{url()}{'&' if '?' in url() else '?'}schema={schema}")
    assert empty.returncode == 1 and f"no run store in schema '{schema}'" in empty.stderr
    for result in (bad, down, empty):
        assert "Traceback" not in result.stderr and "hunter2" not in result.stderr


async def test_an_unreachable_server_is_unavailable_and_the_store_stays_closed() -> None:
    store = PostgresRunStore("postgresql://postgres@127.0.0.1:1/db")  # nothing listens on 1
    with pytest.raises(StoreUnavailable, match=r"PostgreSQL: .*refused"):
        await store.open()
    with pytest.raises(StoreClosed):
        await store.get_run("r1")


async def test_a_missing_database_or_user_is_named_in_the_error() -> None:
    params = conninfo_to_dict(url())
    base = f"postgresql://{params.get('user', 'postgres')}@{params['host']}:{params['port']}"
    with pytest.raises(StoreUnavailable, match='database "no_such_db_here" does not exist'):
        await PostgresRunStore(f"{base}/no_such_db_here").open()
    other = f"postgresql://no_such_role@{params['host']}:{params['port']}/{params['dbname']}"
    with pytest.raises(StoreUnavailable, match='role "no_such_role" does not exist'):
        await PostgresRunStore(other).open()


async def test_a_read_only_open_of_an_empty_schema_finds_no_store_and_creates_nothing(
        schema: str) -> None:
    with pytest.raises(StoreUnavailable, match=f"no run store in schema '{schema}'"):
        await PostgresRunStore(url(), schema=schema, read_only=True).open()
    assert await sql("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)) == []


async def test_a_schema_written_by_newer_code_is_refused(schema: str) -> None:
    async with PostgresRunStore(url(), schema=schema):
        pass
    await sql(f"UPDATE \"{schema}\".store_meta SET value = %s", (SCHEMA_VERSION + 1,))
    for read_only in (False, True):
        with pytest.raises(StoreError, match="newer than this code"):
            await PostgresRunStore(url(), schema=schema, read_only=read_only).open()


async def test_an_app_role_uses_the_schema_a_dba_made_and_is_refused_others(
        schema: str) -> None:
    role = f"rr_app_{uuid.uuid4().hex[:8]}"
    params = conninfo_to_dict(url())
    as_app = f"postgresql://{role}@{params['host']}:{params['port']}/{params['dbname']}"
    await sql(f'CREATE ROLE "{role}" LOGIN')
    try:
        await sql(f'CREATE SCHEMA "{schema}" AUTHORIZATION "{role}"')  # no CREATE on the db
        async with PostgresRunStore(as_app, schema=schema) as store:
            await store.create_run(meta("r1"))
            assert (await store.get_run("r1")).status == "running"
        with pytest.raises(StoreError, match="permission denied") as refused:
            await PostgresRunStore(as_app, schema=schema + "_x").open()  # may not create it
        assert not isinstance(refused.value, StoreUnavailable)  # retrying will not help
    finally:
        await drop_pg_schema(schema)
        await sql(f'DROP ROLE "{role}"')


async def test_replicas_opening_a_new_schema_at_once_all_open_it(schema: str) -> None:
    stores = [PostgresRunStore(url(), schema=schema, owner=f"api-{i}") for i in range(6)]
    try:
        assert await asyncio.gather(*(s.open() for s in stores)) == [[]] * 6
        await stores[0].create_run(meta("r1"))
        assert all([(await s.get_run("r1")).run_id == "r1" for s in stores])
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_two_schemas_in_one_database_are_two_stores(schema: str) -> None:
    other = schema + "_b"
    try:
        async with PostgresRunStore(url(), schema=schema) as a, \
                PostgresRunStore(url(), schema=other) as b:
            await a.create_run(meta("same-id"))
            await b.create_run(meta("same-id"))
            await a.append("same-id", stamped("same-id", searches(3)))
            assert (await a.get_run("same-id")).last_seq == 3
            assert (await b.get_run("same-id")).last_seq == 0
            assert [r.run_id for r in (await b.list_runs("acme")).runs] == ["same-id"]
    finally:
        await drop_pg_schema(other)


# --- seq assignment ------------------------------------------------------------------------


async def test_two_writers_racing_for_the_same_seqs_never_store_one_seq_twice(
        schema: str) -> None:
    # Two store objects (two pools), same owner: as a writer and its retry elsewhere.
    async with PostgresRunStore(url(), schema=schema, owner="api-1") as a, \
            PostgresRunStore(url(), schema=schema, owner="api-1") as b:
        await a.create_run(meta("r1"))
        last = 0
        sent: dict[int, set[str]] = {}  # seq -> the queries the two writers sent for it
        for round_no in range(40):
            mine = [SearchRequested(query=f"a{round_no}-{i}", run_id="r1", seq=last + 1 + i,
                                    ts=1.0) for i in range(3)]
            theirs = [SearchRequested(query=f"b{round_no}-{i}", run_id="r1", seq=last + 1 + i,
                                      ts=1.0) for i in range(2 + round_no % 3)]
            for event in (*mine, *theirs):
                sent.setdefault(event.seq, set()).add(event.query)
            got = await asyncio.gather(a.append("r1", mine), b.append("r1", theirs),
                                       return_exceptions=True)
            assert all(isinstance(r, int | SeqConflict) for r in got), got
            before, last = last, (await a.get_run("r1")).last_seq
            # the first to lock the run stores its batch; the other only what goes beyond
            assert last == before + max(len(mine), len(theirs))
        events = await collect(a.events("r1"))
        assert [e.seq for e in events] == list(range(1, last + 1))
        assert all(getattr(e, "query", None) in sent[e.seq] for e in events)
        rows = await sql(f'SELECT count(*), count(DISTINCT seq) FROM "{schema}".events')
        assert rows == [(last, last)]


# --- LISTEN/NOTIFY -------------------------------------------------------------------------


async def test_a_follower_in_another_store_is_woken_by_notify_not_by_polling(
        schema: str) -> None:
    # block_s of an hour: a follower that were not woken by NOTIFY would wait that long.
    async with PostgresRunStore(url(), schema=schema) as writer, \
            PostgresRunStore(url(), schema=schema, block_s=3600) as reader:
        stream = RunStream("r1", keep_history=False)
        recorder = await Recorder(writer, stream, meta("r1"), flush_interval_s=0.001).start()
        stream.publish(RunStarted(question="why?"))
        await recorder.flush()
        followers = [asyncio.create_task(collect(reader.attach("r1", after)))
                     for after in (0, 1, 1)]
        for i in range(40):
            stream.publish(SearchRequested(query=f"q{i}"))
            await asyncio.sleep(0.003)  # many commits, each one notified
        stream.publish(RunFinished(outcome="answered"))
        await recorder.aclose()
        got = await asyncio.wait_for(asyncio.gather(*followers), 60)
        assert [[e.seq for e in events] for events in got] == [
            list(range(1, 43)), list(range(2, 43)), list(range(2, 43))]
        assert reader._listener is not None and reader._listener.notifications > 0


async def test_a_finish_without_an_event_ends_a_follower_at_once(schema: str) -> None:
    async with PostgresRunStore(url(), schema=schema) as writer, \
            PostgresRunStore(url(), schema=schema, block_s=3600) as reader:
        await writer.create_run(meta("r1"))
        await writer.append("r1", stamped("r1", searches(2)))
        seen, follower = follow(reader.attach("r1", 0))
        await eventually(lambda: len(seen) == 2, "the follower to have the stored events")
        # ... and to be waiting for a notification about r1 (a finish before it watched
        # would change no event for it to read, and it would wait block_s)
        await eventually(lambda: reader._listener is not None and "r1" in reader._listener._waiters,
                         "the follower to listen for r1")
        assert not follower.done()
        assert await writer.finish("r1", "cancelled")  # a status change only: notified too
        got = await asyncio.wait_for(follower, 60)
        assert [e.seq for e in got] == [1, 2]


async def test_attach_follows_a_real_child_process_writing_to_postgres(schema: str) -> None:
    from .._store_fixtures import pg_schema

    prefix = f"{schema}:"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.reactive_rag._store_child", "postgres", url(), prefix,
        "p-", "2", "150", "0.001", cwd=REPO, stdout=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line.decode().split() == ["created", "p-run-0"]
        async with PostgresRunStore(url(), schema=pg_schema(prefix), block_s=3600) as store:
            got = await asyncio.wait_for(collect(store.attach("p-run-0", 0)), 60)
            assert [e.seq for e in got] == list(range(1, 153))
            assert isinstance(got[-1], RunFinished)
            assert store._listener is not None and store._listener.notifications > 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.communicate()
        await drop_pg_schema(pg_schema(prefix))


async def test_killed_connections_are_replaced_and_no_event_is_lost_or_doubled(
        schema: str) -> None:
    target = url() + ("&" if "?" in url() else "?") + f"application_name={schema}"
    async with PostgresRunStore(target, schema=schema) as writer, \
            PostgresRunStore(target, schema=schema, block_s=3600) as reader:
        stream = RunStream("r1", keep_history=False)
        recorder = await Recorder(writer, stream, meta("r1"), flush_interval_s=0.001,
                                  retry_max_s=0.05).start()
        stream.publish(RunStarted(question="why?"))
        await recorder.flush()
        follower = asyncio.create_task(collect(reader.attach("r1", 0)))
        for i in range(60):
            stream.publish(SearchRequested(query=f"q{i}"))
            await asyncio.sleep(0.002)
            if i in (20, 40):  # an operator (or a failover) kills every session of the app
                killed = await sql(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = %s AND pid <> pg_backend_pid()", (schema,))
                assert killed and all(ok for (ok,) in killed)
        stream.publish(RunFinished(outcome="answered"))
        await recorder.aclose()
        got = await asyncio.wait_for(follower, 60)
        assert [e.seq for e in got] == list(range(1, 63))
        stored = await collect(writer.events("r1"))
        assert [e.seq for e in stored] == list(range(1, 63))
        assert (await writer.get_run("r1")).status == "finished"


# --- a server that goes away ---------------------------------------------------------------


@pytest.fixture
async def proxy() -> AsyncIterator[TcpProxy]:
    params = conninfo_to_dict(url())
    forwarder = TcpProxy(str(params["host"]), int(params["port"]))
    await forwarder.start()
    try:
        yield forwarder
    finally:
        await forwarder.stop()


def via(proxy: TcpProxy) -> str:
    params = conninfo_to_dict(url())
    return f"postgresql://{params.get('user', 'postgres')}@127.0.0.1:{proxy.port}/" \
           f"{params['dbname']}"


async def test_a_server_back_within_the_retry_window_loses_nothing(
        schema: str, proxy: TcpProxy) -> None:
    async with PostgresRunStore(via(proxy), schema=schema, connect_timeout_s=0.5) as store, \
            PostgresRunStore(url(), schema=schema) as direct:
        stream = RunStream("r1", keep_history=False)
        recorder = await Recorder(store, stream, meta("r1"), retry_window_s=60,
                                  retry_max_s=0.05).start()
        stream.publish(RunStarted(question="why?"))
        await recorder.flush()
        attached = store.attach("r1", 0)
        assert (await anext(attached)).seq == 1  # stored tail read: now on live events
        live = asyncio.create_task(collect(attached))
        await proxy.stop()  # the server goes away
        for i in range(20):
            stream.publish(SearchRequested(query=f"q{i}"))
        with pytest.raises(StoreUnavailable, match="PostgreSQL"):
            await store.get_run("r1")
        await eventually(lambda: recorder.statistics().retries >= 2, timeout_s=20.0)
        assert (await direct.get_run("r1")).last_seq == 1  # nothing more got through
        assert not live.done()  # a client was shown nothing uncommitted
        await proxy.start()  # ... and comes back
        stream.publish(RunFinished(outcome="answered"))
        await asyncio.wait_for(recorder.aclose(), 60)
        got = await asyncio.wait_for(live, 60)
        assert [e.seq for e in got] == list(range(2, 23))  # after the seq 1 it took first
        assert [e.seq for e in await collect(direct.events("r1"))] == list(range(1, 23))
        assert (await direct.get_run("r1")).outcome == "answered"


async def test_a_server_that_stays_away_fails_the_run_which_is_stored_once_it_returns(
        schema: str, proxy: TcpProxy) -> None:
    reasons: list[str] = []
    async with PostgresRunStore(via(proxy), schema=schema, connect_timeout_s=0.5) as store, \
            PostgresRunStore(url(), schema=schema) as direct:
        stream = RunStream("r1", keep_history=False)
        recorder = await Recorder(store, stream, meta("r1"), retry_window_s=0.5,
                                  retry_max_s=0.05, on_give_up=reasons.append).start()
        stream.publish(RunStarted(question="why?"))
        stream.publish(SearchRequested(query="a"))
        await recorder.flush()
        seen, live = follow(store.attach("r1", 0))
        await eventually(lambda: len(seen) == 2, "the follower to have the stored events")
        await proxy.stop()
        stream.publish(SearchRequested(query="b"))  # never stored: the server is gone
        got = await asyncio.wait_for(live, 60)
        assert [e.seq for e in got] == [1, 2, 3]
        end = got[-1]
        assert isinstance(end, RunFinished) and end.outcome == "failed"
        assert "stopped taking this run's events" in end.reason and "PostgreSQL" in end.reason
        assert str(proxy.port) not in end.reason and "127.0.0.1" not in end.reason
        assert len(reasons) == 1
        with pytest.raises(StoreError):
            await recorder.aclose()
        assert (await direct.get_run("r1")).status == "running"  # not yet: it cannot write
        await proxy.start()
        await eventually(lambda: recorder.repaired, timeout_s=20.0)
        run = await direct.get_run("r1")
        assert (run.status, run.outcome, run.last_seq) == ("finished", "failed", 3)
        assert (await collect(direct.events("r1")))[-1] == end


async def test_the_lease_keeper_turns_unwritable_while_the_server_is_away_and_back(
        schema: str, proxy: TcpProxy, caplog: pytest.LogCaptureFixture) -> None:
    store = PostgresRunStore(via(proxy), schema=schema, owner="api-1", connect_timeout_s=0.5)
    async with store, LeaseKeeper(store, interval_s=0.02) as keeper:
        assert keeper.writable
        with caplog.at_level(logging.WARNING, logger="reactive_rag.store"):
            await proxy.stop()
            await eventually(lambda: not keeper.writable, timeout_s=20.0)
        assert keeper.reason is not None
        assert keeper.reason.startswith("the run store refused a write: PostgreSQL:")
        await proxy.start()
        await eventually(lambda: keeper.writable, timeout_s=20.0)
        assert keeper.reason is None
        rows = await sql(f'SELECT owner FROM "{schema}".owners')
        assert rows == [("api-1",)]
    assert await sql(f'SELECT owner FROM "{schema}".owners') == []  # close released it
