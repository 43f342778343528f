"""A server-grade store on PostgreSQL (psycopg 3, async, with a connection pool).

Install the ``postgres`` extra (``psycopg[binary]``, ``psycopg-pool``). The
tables are those of the SQLite store (same columns, same rows, so the same
decoders), in one schema per deployment (``?schema=NAME`` in the URL, default
``reactive_rag``), created on the first writable open. Every multi-row change
(append + status, finish, interrupt, reopen) is one transaction that first locks
the run's row (``SELECT ... FOR UPDATE``), so concurrent writers of one run
serialise and a ``seq`` is never given twice; the primary key ``(run_id, seq)``
holds that even against a bug.

Live attach across processes uses LISTEN/NOTIFY (:mod:`._postgres_listen`):
each such transaction notifies the store's channel with the run id, which
PostgreSQL delivers only after the commit, so a woken follower reads committed
events only.

Owner leases live in the ``owners`` table. Crash recovery locks the lapsed
lease rows first (``FOR UPDATE``): an owner renewing at that moment either
renewed before (its row no longer matches) or waits until the sweep is done, so
a live owner's runs are never interrupted, and two sweepers never write the
same terminal event. Timestamps come from the writers' clocks (as with SQLite
and Redis), not the server's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from pydantic import JsonValue

from streams import Event, Outcome, RunFinished, encode_msgpack

from .._base import (
    PAGE,
    StoreBase,
    check_batch,
    new_session_args,
    parse_cursor,
    session_data_text,
    session_id_ok,
)
from .._exceptions import (
    RunAlreadyFinished,
    RunExists,
    RunNotFound,
    RunNotResumable,
    RunOwnedElsewhere,
    SeqConflict,
    SessionExists,
    SessionNotFound,
    StoreError,
    StoreUnavailable,
)
from .._protocol import RunMeta, RunPage, RunRecord, RunStatus, SessionRecord
from .._sql_rows import (
    INTERRUPTED_REASON,
    RUN_COLUMNS,
    SESSION_COLUMNS,
    decode_rows,
    run_from_row,
    session_from_row,
)
from ._cancels_postgres import PostgresCancelTable, cancels_schema
from ._delete_postgres import PostgresRunDeleter
from ._postgres_common import parse_postgres_url, redact_url, translated
from ._postgres_listen import Listener
from ._tasks_postgres import PostgresTaskTable, tasks_schema

__all__ = ["PostgresRunStore"]

_T = TypeVar("_T")
Conn = AsyncConnection[Any]

SCHEMA_VERSION = 2  # 2: the cancel_requests table

log = logging.getLogger("reactive_rag.store")


class _ConnectionLost(StoreUnavailable):
    """The connection broke while a statement ran (the server may be fine)."""


def _schema_sql(schema: str) -> str:
    s = f'"{schema}"'
    return f"""
CREATE TABLE IF NOT EXISTS {s}.store_meta (
    key   text PRIMARY KEY,
    value bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.runs (
    run_id     text COLLATE "C" PRIMARY KEY,
    tenant     text NOT NULL,
    question   text NOT NULL,
    mode       text NOT NULL,
    status     text NOT NULL CHECK (status IN ('running', 'finished', 'interrupted')),
    outcome    text,
    owner      text NOT NULL,
    created_us bigint NOT NULL,
    updated_us bigint NOT NULL,
    last_seq   bigint NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_by_tenant ON {s}.runs (tenant, created_us, run_id);
CREATE INDEX IF NOT EXISTS runs_running ON {s}.runs (owner) WHERE status = 'running';
CREATE TABLE IF NOT EXISTS {s}.events (
    run_id text COLLATE "C" NOT NULL REFERENCES {s}.runs (run_id) ON DELETE CASCADE,
    seq    bigint NOT NULL,
    type   text NOT NULL,
    data   bytea NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS {s}.owners (
    owner      text PRIMARY KEY,
    expires_us bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.sessions (
    session_id text COLLATE "C" PRIMARY KEY,
    tenant     text NOT NULL,
    data       text NOT NULL,
    ttl_us     bigint NOT NULL,
    created_us bigint NOT NULL,
    updated_us bigint NOT NULL,
    expires_us bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_expiry ON {s}.sessions (expires_us);
""" + tasks_schema(schema) + cancels_schema(schema)


def _lock_key(schema: str) -> int:
    """A stable advisory-lock key for creating ``schema`` (signed 64 bits)."""
    digest = hashlib.sha256(f"reactive_rag:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PostgresRunStore(PostgresTaskTable, PostgresRunDeleter, PostgresCancelTable, StoreBase):
    """Runs and events in PostgreSQL tables; several servers may share one database.

    Args:
        url: ``postgresql://user:password@host:port/dbname`` (or ``postgres://``),
            with any libpq parameter after ``?``, and ``schema=NAME`` for the
            schema of this store's tables (default ``reactive_rag``).
        schema: overrides the URL's ``schema``: 1 to 48 of ``a-z 0-9 _``.
        owner: see :class:`StoreBase` (its lease is a row of ``owners``).
        max_connections: pool size for reads and writes (followers wait on one
            shared LISTEN connection, not on the pool).
        connect_timeout_s: how long making a connection, or waiting for a
            free one, may take before the call raises ``StoreUnavailable``.
        block_s: how long a follower waits for a notification before it
            re-reads the run anyway.
        **options: ``lease_ttl_s``, ``read_only``, ``clock``, ``poll_interval_s``.

    Raises:
        ValueError: a URL that is not PostgreSQL's or that libpq cannot parse,
            or a malformed schema name (before anything connects).
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        owner: str | None = None,
        max_connections: int = 16,
        connect_timeout_s: float = 5.0,
        block_s: float = 1.0,
        **options: Any,
    ) -> None:
        super().__init__(owner=owner, **options)
        target = parse_postgres_url(url, schema)
        if max_connections < 1:
            raise ValueError("max_connections must be >= 1")
        if not connect_timeout_s > 0 or not block_s > 0:
            raise ValueError("connect_timeout_s and block_s must be > 0")
        self.url = redact_url(url)
        """The URL without its password (for logs and messages)."""
        self.schema = target.schema
        self._conninfo = target.conninfo
        self.channel = f"{self.schema}_events"
        """The NOTIFY channel of this store's commits."""
        self._max_connections = max_connections
        self._connect_timeout_s = connect_timeout_s
        self._block_s = block_s
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._listener: Listener | None = None
        s = f'"{self.schema}"'
        self._runs, self._events = f"{s}.runs", f"{s}.events"
        self._owners, self._sessions = f"{s}.owners", f"{s}.sessions"

    # --- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> list[str]:
        """Connect (creating the schema), write this owner's lease, then recover crashed runs.

        Recovers this owner's own ``running`` runs and those of owners whose
        lease expired; a read-only open writes and recovers nothing (and finds
        no store where nothing was stored yet).
        """
        if self._is_open:
            return []
        # One direct connection first: an unreachable server or a bad password
        # fails here at once with libpq's own reason, not after a pool timeout.
        with translated():
            conn = await AsyncConnection.connect(
                self._conninfo, autocommit=True,
                connect_timeout=max(2, round(self._connect_timeout_s)))
            async with conn:
                await (self._check_schema_ro(conn) if self.read_only
                       else self._create_schema(conn))
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            self._conninfo, min_size=1, max_size=self._max_connections, open=False,
            timeout=self._connect_timeout_s, kwargs={"autocommit": True},
            check=AsyncConnectionPool.check_connection, name=f"rr-{self.schema}")
        try:
            with translated():
                await pool.open(wait=True, timeout=self._connect_timeout_s)
        except BaseException:
            await pool.close()
            raise
        self._pool = pool
        self._listener = Listener(self._conninfo, self.channel,
                                  connect_timeout_s=self._connect_timeout_s)
        self._is_open = True
        if self.read_only:
            return []
        try:
            await self.heartbeat()
            now = self._now_us()

            async def recover(conn: Conn) -> list[str]:
                own = await self._interrupt_locked(conn, "owner = %s", (self.owner,), now)
                return [*own, *await self._interrupt_expired_locked(conn, now)]

            return await self._write(recover)
        except BaseException:
            await self.close()
            raise

    async def _create_schema(self, conn: Conn) -> None:
        async with conn.transaction():
            # Replicas opening at once must not race on CREATE ... IF NOT EXISTS.
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(self.schema),))
            version = await self._stored_version(conn)
            if version is None or version < SCHEMA_VERSION:
                cur = await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                                         (self.schema,))
                if await cur.fetchone() is None:  # (a schema a DBA made needs no CREATE right)
                    await conn.execute(f'CREATE SCHEMA "{self.schema}"')
                await conn.execute(_schema_sql(self.schema))
                await conn.execute(
                    f'INSERT INTO "{self.schema}".store_meta (key, value)'
                    " VALUES ('schema_version', %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    (SCHEMA_VERSION,))

    async def _check_schema_ro(self, conn: Conn) -> None:
        """A read-only open creates nothing: no schema yet means no store yet."""
        if await self._stored_version(conn) is None:
            raise StoreUnavailable(
                f"no run store in schema {self.schema!r} of {self.url} (nothing was stored "
                "there yet)")

    async def _stored_version(self, conn: Conn) -> int | None:
        """The schema version stored in ``store_meta`` (None: no store); refuses newer ones."""
        cur = await conn.execute("SELECT to_regclass(%s)", (f'"{self.schema}".store_meta',))
        exists = await cur.fetchone()
        if exists is None or exists[0] is None:
            return None
        cur = await conn.execute(
            f"SELECT value FROM \"{self.schema}\".store_meta WHERE key = 'schema_version'")
        row = await cur.fetchone()
        version = 0 if row is None else int(row[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"store schema version {version} is newer than this code ({SCHEMA_VERSION})")
        return version

    async def close(self) -> None:
        """Delete this owner's lease (best effort), stop listening, close the pool; idempotent."""
        if self._is_open and not self.read_only and self._pool is not None:
            # Tidiness only (the lease expires anyway): never hold a shutdown up for it.
            owner = self.owner
            with contextlib.suppress(StoreError, TimeoutError):
                async with asyncio.timeout(2.0):
                    await self._write(lambda conn: conn.execute(
                        f"DELETE FROM {self._owners} WHERE owner = %s", (owner,)))
        self._is_open = False
        listener, self._listener = self._listener, None
        pool, self._pool = self._pool, None
        if listener is not None:
            await listener.aclose()
        if pool is not None:
            await pool.close(timeout=2.0)

    async def _read(self, fn: Callable[[Conn], Awaitable[_T]]) -> _T:
        """A pure read on a pooled connection, tried once more if that connection broke.

        Reads change nothing, so a connection an operator (or a failover) cut
        mid-query costs the caller nothing; a server that is really gone fails
        the second try too (``StoreUnavailable``).
        """
        try:
            return await self._autocommit(fn)
        except _ConnectionLost as lost:
            log.info("PostgreSQL connection lost mid-read, reading again: %s", lost.__cause__)
        return await self._autocommit(fn)

    async def _autocommit(self, fn: Callable[[Conn], Awaitable[_T]]) -> _T:
        """``fn`` on a pooled connection in autocommit mode (each statement on its own).

        For writes that are one statement, atomic by themselves; never retried
        here, as a statement whose connection broke may or may not have run.
        """
        self._check_open()
        assert self._pool is not None
        with translated():
            async with self._pool.connection() as conn:
                try:
                    return await fn(conn)
                except psycopg.OperationalError as exc:
                    if conn.broken:
                        raise _ConnectionLost(f"PostgreSQL: {exc}") from exc
                    raise

    async def _write(self, fn: Callable[[Conn], Awaitable[_T]]) -> _T:
        """``fn`` inside one transaction on a pooled connection (rolled back if it raises)."""
        self._check_open()
        assert self._pool is not None
        with translated():
            async with self._pool.connection() as conn, conn.transaction():
                return await fn(conn)

    async def _notify(self, conn: Conn, run_id: str) -> None:
        """Wake the followers of ``run_id`` when (and only if) this transaction commits."""
        await conn.execute("SELECT pg_notify(%s, %s)", (self.channel, run_id))

    # --- runs --------------------------------------------------------------------------------

    async def create_run(self, meta: RunMeta) -> RunRecord:
        """Store a new ``running`` run (raises RunExists if the id is taken)."""
        self._writable()
        if not meta.run_id or not meta.tenant:
            raise ValueError("a run needs a non-empty run_id and tenant")
        now = self._now_us()

        async def do(conn: Conn) -> RunRecord:
            cur = await conn.execute(
                f"INSERT INTO {self._runs} (run_id, tenant, question, mode, status, owner,"
                " created_us, updated_us) VALUES (%s, %s, %s, %s, 'running', %s, %s, %s)"
                " ON CONFLICT (run_id) DO NOTHING",
                (meta.run_id, meta.tenant, meta.question, meta.mode, self.owner, now, now))
            if cur.rowcount != 1:
                raise RunExists(f"run {meta.run_id!r} already exists")
            return run_from_row(
                (meta.run_id, meta.tenant, meta.question, meta.mode, "running", None, now, now, 0))

        return await self._write(do)

    async def append(self, run_id: str, events: Sequence[Event]) -> int:
        """Store events in one transaction; see :meth:`RunStore.append`."""
        self._writable()
        check_batch(run_id, events)
        now = self._now_us()
        batch = list(events)
        return await self._write(lambda conn: self._append_locked(conn, run_id, batch, now))

    async def _append_locked(self, conn: Conn, run_id: str, batch: list[Event],
                             now: int) -> int:
        cur = await conn.execute(
            f"SELECT status, last_seq, owner FROM {self._runs} WHERE run_id = %s FOR UPDATE",
            (run_id,))
        row = await cur.fetchone()
        if row is None:
            raise RunNotFound(run_id)
        status, last, owner = row
        fresh = [event for event in batch if event.seq > last]
        if not fresh:
            return int(last)
        if status != "running":
            raise RunAlreadyFinished(f"run {run_id!r} is {status}; cannot append")
        if owner != self.owner:
            raise RunOwnedElsewhere(f"run {run_id!r} is written by another owner now "
                                    "(it was recovered and resumed); cannot append")
        if fresh[0].seq != last + 1:
            raise SeqConflict(
                f"run {run_id!r} has events up to seq {last}; got seq {fresh[0].seq}")
        await conn.execute(
            f"INSERT INTO {self._events} (run_id, seq, type, data)"
            " SELECT %s, * FROM unnest(%s::bigint[], %s::text[], %s::bytea[])",
            (run_id, [e.seq for e in fresh], [e.type for e in fresh],
             [encode_msgpack(e) for e in fresh]))
        tail = fresh[-1]
        if isinstance(tail, RunFinished):
            await conn.execute(
                f"UPDATE {self._runs} SET last_seq = %s, updated_us = %s, status = 'finished',"
                " outcome = %s WHERE run_id = %s", (tail.seq, now, tail.outcome, run_id))
        else:
            await conn.execute(
                f"UPDATE {self._runs} SET last_seq = %s, updated_us = %s WHERE run_id = %s",
                (tail.seq, now, run_id))
        await self._notify(conn, run_id)
        return tail.seq

    async def finish(self, run_id: str, outcome: Outcome) -> bool:
        """Close a running run with ``outcome`` (no event); False if already closed."""
        self._writable()
        now = self._now_us()

        async def do(conn: Conn) -> bool:
            cur = await conn.execute(
                f"UPDATE {self._runs} SET status = 'finished', outcome = %s, updated_us = %s"
                " WHERE run_id = %s AND status = 'running'", (outcome, now, run_id))
            if cur.rowcount:
                await self._notify(conn, run_id)
                return True
            cur = await conn.execute(f"SELECT 1 FROM {self._runs} WHERE run_id = %s", (run_id,))
            if await cur.fetchone() is None:
                raise RunNotFound(run_id)
            return False

        return await self._write(do)

    async def mark_interrupted(self) -> list[str]:
        """Close this owner's ``running`` runs with a stored ``run.finished(interrupted)``."""
        self._writable()
        now = self._now_us()
        return await self._write(
            lambda conn: self._interrupt_locked(conn, "owner = %s", (self.owner,), now))

    async def _interrupt_locked(self, conn: Conn, where: str, params: tuple[Any, ...],
                                now: int) -> list[str]:
        """In a transaction: interrupt the ``running`` runs matching ``where`` (rows locked)."""
        cur = await conn.execute(
            f"SELECT run_id, last_seq FROM {self._runs} WHERE status = 'running' AND {where}"
            " ORDER BY run_id FOR UPDATE", params)
        rows = await cur.fetchall()
        for run_id, last in rows:
            terminal = RunFinished(
                outcome="interrupted", reason=INTERRUPTED_REASON, run_id=run_id,
                seq=last + 1, ts=self._clock(), actor="store")
            await conn.execute(
                f"INSERT INTO {self._events} (run_id, seq, type, data) VALUES (%s, %s, %s, %s)",
                (run_id, terminal.seq, terminal.type, encode_msgpack(terminal)))
            await conn.execute(
                f"UPDATE {self._runs} SET status = 'interrupted', outcome = 'interrupted',"
                " last_seq = %s, updated_us = %s WHERE run_id = %s", (terminal.seq, now, run_id))
            await self._notify(conn, run_id)
        return [str(run_id) for run_id, _ in rows]

    async def _interrupt_expired_locked(self, conn: Conn, now: int) -> list[str]:
        """In a transaction: interrupt the runs of other owners with no live lease."""
        # Lock the lapsed leases first: a renewal racing this sweep then either
        # committed before (the row no longer matches) or waits for our commit.
        await conn.execute(
            f"SELECT owner FROM {self._owners} WHERE expires_us <= %s AND owner <> %s"
            " ORDER BY owner FOR UPDATE", (now, self.owner))
        ids = await self._interrupt_locked(
            conn, f"owner <> %s AND owner NOT IN (SELECT owner FROM {self._owners}"
            " WHERE expires_us > %s)", (self.owner, now), now)
        await conn.execute(f"DELETE FROM {self._owners} WHERE expires_us <= %s AND owner <> %s",
                           (now, self.owner))
        return ids

    async def _sweep_needed(self, conn: Conn, now: int) -> bool:
        """A read: is there a run to recover or a lapsed lease row to delete?"""
        cur = await conn.execute(
            f"SELECT EXISTS (SELECT 1 FROM {self._runs} WHERE status = 'running'"
            f" AND owner <> %s AND owner NOT IN (SELECT owner FROM {self._owners}"
            " WHERE expires_us > %s))"
            f" OR EXISTS (SELECT 1 FROM {self._owners} WHERE expires_us <= %s AND owner <> %s)",
            (self.owner, now, now, self.owner))
        row = await cur.fetchone()
        return bool(row and row[0])

    async def heartbeat(self) -> None:
        """Write or renew this owner's lease (``owners`` row), ``lease_ttl_s`` from now."""
        self._writable()
        expires = self._now_us() + int(self.lease_ttl_s * 1_000_000)
        owner = self.owner
        await self._autocommit(lambda conn: conn.execute(
            f"INSERT INTO {self._owners} (owner, expires_us) VALUES (%s, %s)"
            " ON CONFLICT (owner) DO UPDATE SET expires_us = EXCLUDED.expires_us",
            (owner, expires)))

    async def recover_expired(self) -> list[str]:
        """Interrupt the running runs of other owners whose lease expired (one transaction)."""
        if self.read_only:
            self._check_open()
            return []
        now = self._now_us()
        if not await self._read(lambda conn: self._sweep_needed(conn, now)):
            return []  # the usual case: no row locked
        return await self._write(lambda conn: self._interrupt_expired_locked(conn, now))

    async def reopen(self, run_id: str, tenant: str | None = None) -> RunRecord:
        """An ``interrupted`` run becomes ``running`` again under this owner (one transaction)."""
        self._writable()
        now = self._now_us()

        async def do(conn: Conn) -> RunRecord:
            cur = await conn.execute(
                f"SELECT tenant, status FROM {self._runs} WHERE run_id = %s FOR UPDATE",
                (run_id,))
            row = await cur.fetchone()
            if row is None or (tenant is not None and row[0] != tenant):
                raise RunNotFound(run_id)
            if row[1] != "interrupted":
                raise RunNotResumable(run_id, row[1])
            cur = await conn.execute(
                f"UPDATE {self._runs} SET status = 'running', outcome = NULL, owner = %s,"
                f" updated_us = %s WHERE run_id = %s RETURNING {RUN_COLUMNS}",
                (self.owner, now, run_id))
            updated = await cur.fetchone()
            assert updated is not None  # the row is locked
            await self._notify(conn, run_id)
            return run_from_row(updated)

        return await self._write(do)

    async def get_run(self, run_id: str, tenant: str | None = None) -> RunRecord:
        """One run, scoped to ``tenant`` (another tenant's id raises RunNotFound)."""

        async def do(conn: Conn) -> RunRecord:
            cur = await conn.execute(
                f"SELECT {RUN_COLUMNS} FROM {self._runs} WHERE run_id = %s", (run_id,))
            row = await cur.fetchone()
            if row is None or (tenant is not None and row[1] != tenant):
                raise RunNotFound(run_id)
            return run_from_row(row)

        return await self._read(do)

    async def list_runs(
        self, tenant: str, *, limit: int = 50, before: str | None = None
    ) -> RunPage:
        """A tenant's runs, newest first; ``before`` is a previous page's ``next_before``."""
        if limit < 1:
            raise ValueError("limit must be >= 1")
        bound = parse_cursor(before) if before is not None else None

        async def do(conn: Conn) -> RunPage:
            if bound is None:
                cur = await conn.execute(
                    f"SELECT {RUN_COLUMNS} FROM {self._runs} WHERE tenant = %s"
                    " ORDER BY created_us DESC, run_id DESC LIMIT %s", (tenant, limit + 1))
            else:
                cur = await conn.execute(
                    f"SELECT {RUN_COLUMNS} FROM {self._runs} WHERE tenant = %s"
                    " AND (created_us, run_id) < (%s, %s)"
                    " ORDER BY created_us DESC, run_id DESC LIMIT %s",
                    (tenant, bound[0], bound[1], limit + 1))
            rows = await cur.fetchall()
            runs = tuple(run_from_row(row) for row in rows[:limit])
            more = len(rows) > limit
            return RunPage(runs=runs, next_before=runs[-1].cursor if more else None)

        return await self._read(do)

    async def run_ids_with_prefix(
        self, prefix: str, *, tenant: str | None = None, limit: int = 10
    ) -> list[str]:
        """Run ids starting with ``prefix`` (a range scan of the primary key), sorted."""
        if limit < 1:
            raise ValueError("limit must be >= 1")

        async def do(conn: Conn) -> list[str]:
            # starts_with, not LIKE: a prefix may hold '%' or '_' (ids are free-form text)
            cur = await conn.execute(
                f"SELECT run_id FROM {self._runs} WHERE run_id >= %s"
                " AND starts_with(run_id, %s) AND (%s::text IS NULL OR tenant = %s)"
                " ORDER BY run_id LIMIT %s", (prefix, prefix, tenant, tenant, limit))
            return [str(row[0]) for row in await cur.fetchall()]

        return await self._read(do)

    async def _fetch(self, run_id: str, after_seq: int, limit: int) -> list[Event]:
        async def do(conn: Conn) -> list[Event]:
            cur = await conn.execute(
                f"SELECT seq, data FROM {self._events} WHERE run_id = %s AND seq > %s"
                " ORDER BY seq LIMIT %s", (run_id, after_seq, limit))
            return decode_rows(run_id, await cur.fetchall())

        return await self._read(do)

    async def _follow(self, run_id: str, after_seq: int) -> list[Event]:
        """Wait for a commit to ``run_id`` to be notified (at most ``block_s``), then read."""
        self._check_open()
        listener = self._listener
        assert listener is not None
        await listener.ensure()
        waiter = listener.watch(run_id)
        try:
            # Read after watching: a commit between the caller's read and now
            # was notified before we listened for it, so look once more.
            batch = await self._fetch(run_id, after_seq, PAGE)
            if batch:
                return batch
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._block_s):
                    await waiter.wait()
        finally:
            listener.unwatch(run_id, waiter)
        return await self._fetch(run_id, after_seq, PAGE)

    async def _status(self, run_id: str) -> RunStatus:
        async def do(conn: Conn) -> RunStatus:
            cur = await conn.execute(
                f"SELECT status FROM {self._runs} WHERE run_id = %s", (run_id,))
            row = await cur.fetchone()
            if row is None:
                raise RunNotFound(run_id)
            return cast(RunStatus, row[0])

        return await self._read(do)

    # --- conversation sessions -------------------------------------------------------------

    async def create_session(self, session_id: str, tenant: str, data: dict[str, JsonValue],
                             *, ttl_s: float) -> SessionRecord:
        """Store a new session (an expired one with the same id is replaced)."""
        self._writable()
        ttl_us, text = new_session_args(session_id, tenant, data, ttl_s)
        now = self._now_us()
        row = (session_id, tenant, text, ttl_us, now, now, now + ttl_us)

        async def do(conn: Conn) -> SessionRecord:
            await conn.execute(
                f"DELETE FROM {self._sessions} WHERE session_id = %s AND expires_us <= %s",
                (session_id, now))
            cur = await conn.execute(
                f"INSERT INTO {self._sessions} ({SESSION_COLUMNS})"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (session_id) DO NOTHING", row)
            if cur.rowcount != 1:
                raise SessionExists(f"session {session_id!r} already exists")
            return session_from_row(row)

        return await self._write(do)

    async def get_session(self, session_id: str, tenant: str | None = None, *,
                          touch: bool = True) -> SessionRecord:
        """One live session; ``touch`` (not on a read-only store) slides its expiry."""
        self._check_open()
        if not session_id_ok(session_id):
            raise SessionNotFound(session_id)
        now = self._now_us()
        if not touch or self.read_only:
            query = (f"SELECT {SESSION_COLUMNS} FROM {self._sessions} WHERE session_id = %s"
                     " AND expires_us > %s AND (%s::text IS NULL OR tenant = %s)")
            params: tuple[Any, ...] = (session_id, now, tenant, tenant)
        else:
            query = (f"UPDATE {self._sessions} SET expires_us = %s + ttl_us"
                     " WHERE session_id = %s AND expires_us > %s"
                     f" AND (%s::text IS NULL OR tenant = %s) RETURNING {SESSION_COLUMNS}")
            params = (now, session_id, now, tenant, tenant)
        return await self._one_session(session_id, query, params,
                                       writes=touch and not self.read_only)

    async def _one_session(self, session_id: str, query: str, params: tuple[Any, ...], *,
                           writes: bool) -> SessionRecord:
        async def do(conn: Conn) -> SessionRecord:
            cur = await conn.execute(query, params)
            row = await cur.fetchone()
            if row is None:
                raise SessionNotFound(session_id)
            return session_from_row(row)

        # one statement: atomic on its own
        return await (self._autocommit(do) if writes else self._read(do))

    async def save_session(self, session_id: str, data: dict[str, JsonValue], *,
                           tenant: str | None = None) -> SessionRecord:
        """Replace a live session's data and slide its expiry (one statement)."""
        self._writable()
        if not session_id_ok(session_id):
            raise SessionNotFound(session_id)
        text = session_data_text(data)
        now = self._now_us()
        return await self._one_session(
            session_id,
            f"UPDATE {self._sessions} SET data = %s, updated_us = %s, expires_us = %s + ttl_us"
            " WHERE session_id = %s AND expires_us > %s AND (%s::text IS NULL OR tenant = %s)"
            f" RETURNING {SESSION_COLUMNS}",
            (text, now, now, session_id, now, tenant, tenant), writes=True)

    async def delete_session(self, session_id: str, tenant: str | None = None) -> bool:
        """Delete a live session; False if none was visible."""
        self._writable()
        if not session_id_ok(session_id):
            self._check_open()
            return False
        now = self._now_us()

        async def do(conn: Conn) -> bool:
            cur = await conn.execute(
                f"DELETE FROM {self._sessions} WHERE session_id = %s AND expires_us > %s"
                " AND (%s::text IS NULL OR tenant = %s)", (session_id, now, tenant, tenant))
            return bool(cur.rowcount)

        return await self._autocommit(do)

    async def sweep_sessions(self) -> list[str]:
        """Delete the expired sessions (one statement); return their ids."""
        if self.read_only:
            self._check_open()
            return []
        now = self._now_us()

        async def do(conn: Conn) -> list[str]:
            cur = await conn.execute(
                f"DELETE FROM {self._sessions} WHERE expires_us <= %s RETURNING session_id",
                (now,))
            return sorted(str(row[0]) for row in await cur.fetchall())

        return await self._autocommit(do)
