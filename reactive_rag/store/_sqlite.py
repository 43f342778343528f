"""The embedded default store: one SQLite file in WAL mode.

Uses the stdlib ``sqlite3`` driver on two dedicated threads (one writer
connection, one reader connection) rather than ``aiosqlite``: that is what
aiosqlite does internally anyway, and owning the threads lets a whole append
(check, insert, status update) run as one function inside one transaction
with no event-loop round trips. WAL lets the reader replay and follow runs
while the writer commits. ``synchronous=NORMAL`` keeps every committed
transaction through a process crash (``kill -9``); pass ``synchronous="FULL"``
to also survive a power loss, at the cost of an fsync per commit.

Owner leases live in the ``owners`` table (schema version 2; a version-1 file
gains the table on its first writable open): one row per live owner with the
time its lease expires. Conversation sessions live in the ``sessions`` table
(schema version 3; older files gain it on their first writable open, and a
read-only open of such a file finds no session).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from pydantic import JsonValue

from actors import enable_wal
from streams import Event, Outcome, RunFinished, encode_msgpack

from ._base import (
    StoreBase,
    check_batch,
    new_session_args,
    parse_cursor,
    session_data_text,
    session_id_ok,
)
from ._cancels_sqlite import CANCELS_SCHEMA, SqliteCancelTable
from ._delete_sqlite import SqliteRunDeleter
from ._exceptions import (
    RunAlreadyFinished,
    RunExists,
    RunNotFound,
    RunNotResumable,
    RunOwnedElsewhere,
    SeqConflict,
    SessionExists,
    SessionNotFound,
    StoreClosed,
    StoreCorrupt,
    StoreError,
    StoreUnavailable,
)
from ._protocol import (
    RunMeta,
    RunPage,
    RunRecord,
    RunStatus,
    SessionRecord,
)
from ._sql_rows import (
    INTERRUPTED_REASON,
    RUN_COLUMNS,
    SESSION_COLUMNS,
    decode_rows,
    run_from_row,
    session_from_row,
)
from ._sqlite_common import transaction
from ._sqlite_inline import Declined, InlineWriter
from ._tasks_sqlite import TASKS_SCHEMA, SqliteTaskTable

__all__ = ["SqliteRunStore"]

log = logging.getLogger("reactive_rag.store")

_T = TypeVar("_T")

SCHEMA_VERSION = 3  # 2: the owners (lease) table; 3: the sessions table

WAL_LIMIT_BYTES = 16 * 1024 * 1024
"""Past this size the write-ahead log is checkpointed and truncated (see append)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id     TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    question   TEXT NOT NULL,
    mode       TEXT NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('running', 'finished', 'interrupted')),
    outcome    TEXT,
    owner      TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    last_seq   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_by_tenant ON runs (tenant, created_us, run_id);
CREATE INDEX IF NOT EXISTS runs_running ON runs (owner) WHERE status = 'running';
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    type   TEXT NOT NULL,
    data   BLOB NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
""" + TASKS_SCHEMA + """CREATE TABLE IF NOT EXISTS owners (
    owner      TEXT PRIMARY KEY,
    expires_us INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    data       TEXT NOT NULL,
    ttl_us     INTEGER NOT NULL,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    expires_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_expiry ON sessions (expires_us);
""" + CANCELS_SCHEMA

def _no_sessions_table(exc: sqlite3.OperationalError) -> bool:
    """A file older than schema 3, opened read-only (never upgraded): it has no sessions."""
    return "no such table: sessions" in str(exc)


def _translate(exc: sqlite3.DatabaseError) -> StoreError:
    """sqlite3's errors as ours: locked/unopenable is retryable, the rest is damage."""
    if isinstance(exc, sqlite3.OperationalError):
        return StoreUnavailable(f"SQLite: {exc}")
    if isinstance(exc, sqlite3.IntegrityError):
        return StoreError(f"SQLite constraint failed: {exc}")
    return StoreCorrupt(f"SQLite: {exc}")


class _Connection:
    """One sqlite3 connection that lives on, and is only used from, its own thread."""

    def __init__(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._conn: sqlite3.Connection | None = None

    async def call(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        return await self.submit(fn)

    def submit(self, fn: Callable[[sqlite3.Connection], _T]) -> asyncio.Future[_T]:
        """Start ``fn`` on the connection's thread; its future on the running loop."""
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._executor, self._run, fn)

    def _run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        if self._conn is None:
            raise StoreClosed("the SQLite store is not open")
        try:
            return fn(self._conn)
        except sqlite3.DatabaseError as exc:
            raise _translate(exc) from exc

    async def connect(self, opener: Callable[[], sqlite3.Connection]) -> None:
        def do() -> None:
            try:
                self._conn = opener()
            except sqlite3.DatabaseError as exc:
                raise _translate(exc) from exc

        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, do)

    async def close(self) -> None:
        def do() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, do)
        finally:
            self._executor.shutdown(wait=True)


class SqliteRunStore(SqliteTaskTable, SqliteRunDeleter, SqliteCancelTable, StoreBase):
    """Runs and events in one SQLite file (WAL); the default store.

    Args:
        path: the database file (created with its folder if missing).
        owner: see :class:`StoreBase`; one process per owner writes to a file.
        synchronous: SQLite ``synchronous`` pragma (``NORMAL`` or ``FULL``).
        busy_timeout_s: how long a write waits for another process's lock.
        **options: ``lease_ttl_s``, ``read_only``, ``clock``, ``poll_interval_s``.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        owner: str | None = None,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout_s: float = 5.0,
        **options: Any,
    ) -> None:
        super().__init__(owner=owner, **options)
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError("synchronous must be 'NORMAL' or 'FULL'")
        self.path = Path(path)
        self._synchronous = synchronous
        self._busy_ms = int(busy_timeout_s * 1000)
        self._writer: _Connection | None = None
        self._reader: _Connection | None = None
        self._inline: InlineWriter | None = None
        self._checkpoints: set[asyncio.Future[None]] = set()

    # --- lifecycle ---------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=self._busy_ms / 1000)
        conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        enable_wal(conn, self._busy_ms / 1000)  # (other processes may be opening it too)
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    async def open(self) -> list[str]:
        """Open (creating the schema), write this owner's lease, then recover crashed runs.

        Recovers this owner's own ``running`` runs and those of owners whose
        lease expired; a read-only open writes and recovers nothing.
        """
        if self._is_open:
            return []
        if self.read_only and not self.path.exists():
            raise StoreUnavailable(f"no run store at {self.path} (nothing was stored there yet)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        writer, reader = _Connection("rr-store-w"), _Connection("rr-store-r")
        try:
            await writer.connect(self._connect)
            await writer.call(self._create_schema_rw if not self.read_only
                              else self._create_schema_ro)
            await reader.connect(self._connect)
        except BaseException:
            await writer.close()
            await reader.close()
            raise
        self._writer, self._reader = writer, reader
        self._is_open = True
        if self.read_only:
            return []
        if self._synchronous == "NORMAL":  # (with FULL a commit syncs the disk: not here)
            try:
                self._inline = InlineWriter(self.path, synchronous=self._synchronous,
                                            checkpoint=self._request_checkpoint)
            except sqlite3.DatabaseError as exc:
                await self.close()
                raise _translate(exc) from exc
        await self.heartbeat()
        now = self._now_us()
        return await self._write(lambda conn: transaction(conn, lambda: [
            *self._interrupt_locked(conn, "owner = ?", (self.owner,), now),
            *self._interrupt_expired_locked(conn, now),
        ]))

    @staticmethod
    def _create_schema_rw(conn: sqlite3.Connection) -> None:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"store schema version {version} is newer than this code ({SCHEMA_VERSION})"
            )
        conn.executescript(_SCHEMA)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @staticmethod
    def _create_schema_ro(conn: sqlite3.Connection) -> None:
        """A read-only open never upgrades a file (an older live server keeps opening it)."""
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"store schema version {version} is newer than this code ({SCHEMA_VERSION})"
            )
        has_runs = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'"
        ).fetchone()
        if has_runs is None:  # an empty file: give readers tables to read (as before)
            SqliteRunStore._create_schema_rw(conn)

    async def close(self) -> None:
        """Delete this owner's lease (best effort), close both connections; idempotent."""
        if self._is_open and not self.read_only and self._writer is not None:
            owner = self.owner
            with contextlib.suppress(StoreError):  # tidiness only: the lease expires anyway
                await self._writer.call(lambda conn: conn.execute(
                    "DELETE FROM owners WHERE owner = ?", (owner,)).close())
        self._is_open = False
        if self._inline is not None:
            self._inline.close()
            self._inline = None
        pending = [f for f in self._checkpoints if f.get_loop() is asyncio.get_running_loop()]
        if pending:
            await asyncio.wait(pending)
        writer, reader = self._writer, self._reader
        self._writer = self._reader = None
        if reader is not None:
            await reader.close()
        if writer is not None:
            await writer.close()

    async def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` result (``"ok"`` when healthy)."""

        def do(conn: sqlite3.Connection) -> str:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
            return "\n".join(str(row[0]) for row in rows)

        return await self._read(do)

    async def _write(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        self._check_open()
        assert self._writer is not None
        return await self._writer.call(fn)

    async def _read(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        self._check_open()
        assert self._reader is not None
        return await self._reader.call(fn)

    # --- runs --------------------------------------------------------------------------------

    async def create_run(self, meta: RunMeta) -> RunRecord:
        """Store a new ``running`` run (raises RunExists if the id is taken)."""
        self._writable()
        if not meta.run_id or not meta.tenant:
            raise ValueError("a run needs a non-empty run_id and tenant")
        now = self._now_us()

        def do(conn: sqlite3.Connection) -> RunRecord:
            try:
                conn.execute(
                    "INSERT INTO runs (run_id, tenant, question, mode, status, owner,"
                    " created_us, updated_us) VALUES (?, ?, ?, ?, 'running', ?, ?, ?)",
                    (meta.run_id, meta.tenant, meta.question, meta.mode, self.owner, now, now),
                )
            except sqlite3.IntegrityError as exc:
                raise RunExists(f"run {meta.run_id!r} already exists") from exc
            return run_from_row(
                (meta.run_id, meta.tenant, meta.question, meta.mode, "running", None, now, now, 0)
            )

        return await self._write(do)

    async def append(self, run_id: str, events: Sequence[Event]) -> int:
        """Store events in one transaction; see :meth:`RunStore.append`.

        On the loop that opened the store it commits right here
        (:meth:`append_now`), unless that would wait; then on the writer thread.
        """
        done = self.append_now(run_id, events)
        if done is not None:
            return done
        self._writable()
        check_batch(run_id, events)
        now = self._now_us()
        batch = list(events)
        return await self._write(functools.partial(self._append_one, run_id, batch, now))

    def append_now(self, run_id: str, events: Sequence[Event]) -> int | None:
        """Commit on this thread if that cannot wait (:mod:`._sqlite_inline`: the
        thread that opened the store, the write lock free); None: nothing written.

        A subclass that overrides :meth:`append` (a wrapper injecting faults,
        say) gets every append through it: this then always returns None.

        Raises:
            StoreError: as :meth:`append` (the batch was refused or the write failed).
        """
        inline = self._inline
        if inline is None or not inline.here() or type(self).append is not _OWN_APPEND:
            return None
        self._writable()
        check_batch(run_id, events)
        try:
            done = inline.run(functools.partial(self._append_one, run_id, list(events),
                                                self._now_us()))
        except sqlite3.DatabaseError as exc:
            raise _translate(exc) from exc
        return None if isinstance(done, Declined) else done

    def _append_one(self, run_id: str, batch: list[Event], now: int,
                    conn: sqlite3.Connection) -> int:
        return transaction(conn, lambda: self._append_locked(conn, run_id, batch, now))

    def _request_checkpoint(self) -> None:
        """A WAL checkpoint on the writer thread (the inline writer makes none).

        Passive (writers go on); under a steady stream of appends a passive one
        never catches up with the log's end, so the log would only grow: past
        :data:`WAL_LIMIT_BYTES` a truncating one follows, which holds appends
        back (they queue on the writer thread) while it runs.
        """
        writer = self._writer
        if writer is None:
            return
        wal = self.path.with_name(self.path.name + "-wal")

        def do(conn: sqlite3.Connection) -> None:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            with contextlib.suppress(OSError):
                if wal.stat().st_size > WAL_LIMIT_BYTES:
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

        future = writer.submit(do)
        self._checkpoints.add(future)
        future.add_done_callback(self._checkpointed)

    def _checkpointed(self, future: asyncio.Future[None]) -> None:
        self._checkpoints.discard(future)
        if not future.cancelled() and future.exception() is not None:
            log.warning("WAL checkpoint failed (the next one retries): %s", future.exception())

    def _append_locked(
        self, conn: sqlite3.Connection, run_id: str, batch: list[Event], now: int
    ) -> int:
        row = conn.execute(
            "SELECT status, last_seq, owner FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
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
                f"run {run_id!r} has events up to seq {last}; got seq {fresh[0].seq}"
            )
        conn.executemany(
            "INSERT INTO events (run_id, seq, type, data) VALUES (?, ?, ?, ?)",
            [(run_id, event.seq, event.type, encode_msgpack(event)) for event in fresh],
        )
        tail = fresh[-1]
        if isinstance(tail, RunFinished):
            conn.execute(
                "UPDATE runs SET last_seq = ?, updated_us = ?, status = 'finished', outcome = ?"
                " WHERE run_id = ?",
                (tail.seq, now, tail.outcome, run_id),
            )
        else:
            conn.execute(
                "UPDATE runs SET last_seq = ?, updated_us = ? WHERE run_id = ?",
                (tail.seq, now, run_id),
            )
        return tail.seq

    async def finish(self, run_id: str, outcome: Outcome) -> bool:
        """Close a running run with ``outcome`` (no event); False if already closed."""
        self._writable()
        now = self._now_us()

        def do(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "UPDATE runs SET status = 'finished', outcome = ?, updated_us = ?"
                " WHERE run_id = ? AND status = 'running'",
                (outcome, now, run_id),
            )
            if cur.rowcount:
                return True
            if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
                raise RunNotFound(run_id)
            return False

        return await self._write(do)

    async def mark_interrupted(self) -> list[str]:
        """Close this owner's ``running`` runs with a stored ``run.finished(interrupted)``."""
        self._writable()
        now = self._now_us()
        return await self._write(lambda conn: transaction(
            conn, lambda: self._interrupt_locked(conn, "owner = ?", (self.owner,), now)))

    def _interrupt_locked(
        self, conn: sqlite3.Connection, where: str, params: tuple[Any, ...], now: int
    ) -> list[str]:
        """In a write transaction: interrupt the ``running`` runs matching ``where``."""
        rows = conn.execute(
            f"SELECT run_id, last_seq FROM runs WHERE status = 'running' AND {where}"
            " ORDER BY run_id",
            params,
        ).fetchall()
        for run_id, last in rows:
            terminal = RunFinished(
                outcome="interrupted",
                reason=INTERRUPTED_REASON,
                run_id=run_id,
                seq=last + 1,
                ts=self._clock(),
                actor="store",
            )
            conn.execute(
                "INSERT INTO events (run_id, seq, type, data) VALUES (?, ?, ?, ?)",
                (run_id, terminal.seq, terminal.type, encode_msgpack(terminal)),
            )
            conn.execute(
                "UPDATE runs SET status = 'interrupted', outcome = 'interrupted',"
                " last_seq = ?, updated_us = ? WHERE run_id = ?",
                (terminal.seq, now, run_id),
            )
        return [str(run_id) for run_id, _ in rows]

    _EXPIRED = "owner != ? AND owner NOT IN (SELECT owner FROM owners WHERE expires_us > ?)"

    def _interrupt_expired_locked(self, conn: sqlite3.Connection, now: int) -> list[str]:
        """In a write transaction: interrupt the runs of other owners with no live lease."""
        ids = self._interrupt_locked(conn, self._EXPIRED, (self.owner, now), now)
        conn.execute("DELETE FROM owners WHERE expires_us <= ? AND owner != ?", (now, self.owner))
        return ids

    def _sweep_needed(self, conn: sqlite3.Connection, now: int) -> bool:
        """A read: is there a run to recover or a lapsed lease row to delete?"""
        row = conn.execute(
            f"SELECT EXISTS (SELECT 1 FROM runs WHERE status = 'running' AND {self._EXPIRED})"
            " OR EXISTS (SELECT 1 FROM owners WHERE expires_us <= ? AND owner != ?)",
            (self.owner, now, now, self.owner),
        ).fetchone()
        return bool(row[0])

    async def heartbeat(self) -> None:
        """Write or renew this owner's lease (``owners`` row), ``lease_ttl_s`` from now."""
        self._writable()
        expires = self._now_us() + int(self.lease_ttl_s * 1_000_000)
        owner = self.owner

        def do(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO owners (owner, expires_us) VALUES (?, ?)"
                " ON CONFLICT (owner) DO UPDATE SET expires_us = excluded.expires_us",
                (owner, expires),
            )

        await self._write(do)

    async def recover_expired(self) -> list[str]:
        """Interrupt the running runs of other owners whose lease expired (one transaction)."""
        if self.read_only:
            self._check_open()
            return []
        now = self._now_us()
        if not await self._read(lambda conn: self._sweep_needed(conn, now)):
            return []  # the usual case: no write lock taken
        return await self._write(
            lambda conn: transaction(conn, lambda: self._interrupt_expired_locked(conn, now)))

    async def reopen(self, run_id: str, tenant: str | None = None) -> RunRecord:
        """An ``interrupted`` run becomes ``running`` again under this owner (one transaction)."""
        self._writable()
        now = self._now_us()

        def body(conn: sqlite3.Connection) -> RunRecord:
            row = conn.execute(
                "SELECT tenant, status FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None or (tenant is not None and row[0] != tenant):
                raise RunNotFound(run_id)
            if row[1] != "interrupted":
                raise RunNotResumable(run_id, row[1])
            conn.execute(
                "UPDATE runs SET status = 'running', outcome = NULL, owner = ?, updated_us = ?"
                " WHERE run_id = ?",
                (self.owner, now, run_id),
            )
            return run_from_row(conn.execute(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone())

        return await self._write(lambda conn: transaction(conn, lambda: body(conn)))

    async def get_run(self, run_id: str, tenant: str | None = None) -> RunRecord:
        """One run, scoped to ``tenant`` (another tenant's id raises RunNotFound)."""

        def do(conn: sqlite3.Connection) -> RunRecord:
            row = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
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

        def do(conn: sqlite3.Connection) -> RunPage:
            if bound is None:
                rows = conn.execute(
                    f"SELECT {RUN_COLUMNS} FROM runs WHERE tenant = ?"
                    " ORDER BY created_us DESC, run_id DESC LIMIT ?",
                    (tenant, limit + 1),
                ).fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {RUN_COLUMNS} FROM runs WHERE tenant = ?"
                    " AND (created_us, run_id) < (?, ?)"
                    " ORDER BY created_us DESC, run_id DESC LIMIT ?",
                    (tenant, bound[0], bound[1], limit + 1),
                ).fetchall()
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

        def do(conn: sqlite3.Connection) -> list[str]:
            # substr, not LIKE: a prefix may hold '%' or '_' (ids are free-form text)
            rows = conn.execute(
                "SELECT run_id FROM runs WHERE run_id >= ? AND substr(run_id, 1, ?) = ?"
                " AND (? IS NULL OR tenant = ?) ORDER BY run_id LIMIT ?",
                (prefix, len(prefix), prefix, tenant, tenant, limit),
            ).fetchall()
            return [str(row[0]) for row in rows]

        return await self._read(do)

    async def _fetch(self, run_id: str, after_seq: int, limit: int) -> list[Event]:
        def do(conn: sqlite3.Connection) -> list[Event]:
            rows = conn.execute(
                "SELECT seq, data FROM events WHERE run_id = ? AND seq > ?"
                " ORDER BY seq LIMIT ?",
                (run_id, after_seq, limit),
            ).fetchall()
            return decode_rows(run_id, rows)

        return await self._read(do)

    async def _status(self, run_id: str) -> RunStatus:
        def do(conn: sqlite3.Connection) -> RunStatus:
            row = conn.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
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

        def body(conn: sqlite3.Connection) -> SessionRecord:
            conn.execute("DELETE FROM sessions WHERE session_id = ? AND expires_us <= ?",
                         (session_id, now))
            try:
                conn.execute(f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES (?,?,?,?,?,?,?)",
                             row)
            except sqlite3.IntegrityError as exc:
                raise SessionExists(f"session {session_id!r} already exists") from exc
            return session_from_row(row)

        return await self._write(lambda conn: transaction(conn, lambda: body(conn)))

    @staticmethod
    def _live_session(conn: sqlite3.Connection, session_id: str, tenant: str | None,
                      now: int) -> tuple[Any, ...]:
        row = conn.execute(
            f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
        if row is None or row[6] <= now or (tenant is not None and row[1] != tenant):
            raise SessionNotFound(session_id)
        return cast(tuple[Any, ...], row)

    async def get_session(self, session_id: str, tenant: str | None = None, *,
                          touch: bool = True) -> SessionRecord:
        """One live session; ``touch`` (not on a read-only store) slides its expiry."""
        self._check_open()
        if not session_id_ok(session_id):
            raise SessionNotFound(session_id)
        now = self._now_us()
        if not touch or self.read_only:

            def read(conn: sqlite3.Connection) -> SessionRecord:
                try:
                    return session_from_row(self._live_session(conn, session_id, tenant, now))
                except sqlite3.OperationalError as exc:
                    if _no_sessions_table(exc):
                        raise SessionNotFound(session_id) from None
                    raise

            return await self._read(read)

        def body(conn: sqlite3.Connection) -> SessionRecord:
            row = self._live_session(conn, session_id, tenant, now)
            expires = now + int(row[3])
            conn.execute("UPDATE sessions SET expires_us = ? WHERE session_id = ?",
                         (expires, session_id))
            return session_from_row((*row[:6], expires))

        return await self._write(lambda conn: transaction(conn, lambda: body(conn)))

    async def save_session(self, session_id: str, data: dict[str, JsonValue], *,
                           tenant: str | None = None) -> SessionRecord:
        """Replace a live session's data and slide its expiry."""
        self._writable()
        if not session_id_ok(session_id):
            raise SessionNotFound(session_id)
        text = session_data_text(data)
        now = self._now_us()

        def body(conn: sqlite3.Connection) -> SessionRecord:
            row = self._live_session(conn, session_id, tenant, now)
            expires = now + int(row[3])
            conn.execute(
                "UPDATE sessions SET data = ?, updated_us = ?, expires_us = ?"
                " WHERE session_id = ?", (text, now, expires, session_id))
            return session_from_row((session_id, row[1], text, row[3], row[4], now, expires))

        return await self._write(lambda conn: transaction(conn, lambda: body(conn)))

    async def delete_session(self, session_id: str, tenant: str | None = None) -> bool:
        """Delete a live session; False if none was visible."""
        self._writable()
        if not session_id_ok(session_id):
            self._check_open()
            return False
        now = self._now_us()

        def do(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "DELETE FROM sessions WHERE session_id = ? AND expires_us > ?"
                " AND (? IS NULL OR tenant = ?)", (session_id, now, tenant, tenant))
            return bool(cur.rowcount)

        return await self._write(do)

    async def sweep_sessions(self) -> list[str]:
        """Delete the expired sessions (one transaction); return their ids."""
        if self.read_only:
            self._check_open()
            return []
        now = self._now_us()

        def body(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(
                "SELECT session_id FROM sessions WHERE expires_us <= ? ORDER BY session_id",
                (now,)).fetchall()
            conn.execute("DELETE FROM sessions WHERE expires_us <= ?", (now,))
            return [str(r[0]) for r in rows]

        def needed(conn: sqlite3.Connection) -> bool:
            row = conn.execute("SELECT EXISTS (SELECT 1 FROM sessions WHERE expires_us <= ?)",
                               (now,)).fetchone()
            return bool(row[0])

        if not await self._read(needed):
            return []  # the usual case: no write lock taken
        return await self._write(lambda conn: transaction(conn, lambda: body(conn)))


_OWN_APPEND = SqliteRunStore.append
