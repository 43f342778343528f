"""What every store shares: replay, attach (stored tail then committed live events), cursors.

A backend implements a few primitives (fetch a page of events, follow new
events, read a run's status); replay and attach live here once, so SQLite,
Redis and PostgreSQL behave the same. Attach only ever yields committed events: the stored
tail, then what the run's recorder commits (commit-before-deliver), so a seq a
client saw is never given to a different event later.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Protocol, Self

from pydantic import JsonValue
from reactivex import abc

from streams import BridgeClosed, Event, EventBridge, RunFinished

from ._exceptions import InvalidCursor, SeqConflict, StoreClosed, StoreReadOnly
from ._protocol import RunRecord, RunStatus

__all__ = [
    "CommittedSource",
    "StoreBase",
    "check_batch",
    "make_cursor",
    "new_session_args",
    "parse_cursor",
    "session_data_text",
    "session_id_ok",
    "session_ttl_us",
]

PAGE = 512
_CURSOR = re.compile(r"^(\d{16}):(.+)$", re.DOTALL)


class CommittedSource(Protocol):
    """A writer (the recorder) that hands live attachers each event once it is committed."""

    def subscribe_committed(self, sink: EventBridge[Event]) -> abc.DisposableBase:
        """Push every event committed from now on into ``sink``, then close it."""
        ...

    @property
    def terminal(self) -> RunFinished | None:
        """The ending handed to clients when the store stopped taking writes, until stored."""
        ...

    @property
    def repaired(self) -> bool:
        """True once nothing is left to store."""
        ...


def make_cursor(created_us: int, run_id: str) -> str:
    """A page cursor that sorts like (created, run id), newest last."""
    return f"{created_us:016d}:{run_id}"


def parse_cursor(cursor: str) -> tuple[int, str]:
    """Split a cursor made by :func:`make_cursor`; raise InvalidCursor otherwise."""
    match = _CURSOR.match(cursor)
    if match is None:
        raise InvalidCursor("invalid page cursor")
    return int(match.group(1)), match.group(2)


def check_batch(run_id: str, events: Sequence[Event]) -> None:
    """Events of one append: this run's, consecutive ``seq``, ``run.finished`` only last."""
    previous: int | None = None
    for index, event in enumerate(events):
        if event.run_id != run_id:
            raise ValueError(
                f"event seq {event.seq} belongs to run {event.run_id!r}, not {run_id!r}"
            )
        if event.seq < 1:
            raise SeqConflict(f"event {event.type!r} has no seq (was it published on a stream?)")
        if previous is not None and event.seq != previous + 1:
            raise SeqConflict(f"batch for run {run_id!r} jumps from seq {previous} to {event.seq}")
        if isinstance(event, RunFinished) and index != len(events) - 1:
            raise SeqConflict(f"run.finished (seq {event.seq}) must be the last event of a run")
        previous = event.seq


_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


def session_id_ok(session_id: object) -> bool:
    """Whether ``session_id`` is one a session can have (1-128 of ``A-Za-z0-9_-``)."""
    return isinstance(session_id, str) and _SESSION_ID.fullmatch(session_id) is not None


def session_ttl_us(ttl_s: float) -> int:
    """A session TTL in whole microseconds (at least 1); ValueError unless positive, finite."""
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, int | float) or \
            not math.isfinite(ttl_s) or ttl_s <= 0:
        raise ValueError("ttl_s must be a positive, finite number of seconds")
    return max(1, round(ttl_s * 1_000_000))


def session_data_text(data: dict[str, JsonValue]) -> str:
    """``data`` as compact JSON text; ValueError unless it is a JSON object (no NaN)."""
    if not isinstance(data, dict):
        raise ValueError("session data must be a JSON object")
    try:
        return json.dumps(data, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"session data is not JSON: {exc}") from None


def new_session_args(session_id: str, tenant: str, data: dict[str, JsonValue],
                     ttl_s: float) -> tuple[int, str]:
    """Check a new session's arguments (ValueError); its TTL in microseconds and data as JSON."""
    if not session_id_ok(session_id):
        raise ValueError("a session id is 1 to 128 of A-Z a-z 0-9 _ -")
    if not tenant:
        raise ValueError("a session needs a non-empty tenant")
    return session_ttl_us(ttl_s), session_data_text(data)


class StoreBase:
    """Replay and attach on top of backend primitives.

    Args:
        owner: names the process (or deployment) that writes runs; ``None``
            (the default) takes a new unique id (:func:`~reactive_rag.store.default_owner`).
            On :meth:`open` this owner's runs left ``running`` (a crashed
            previous incarnation of a stable, configured owner) are marked
            interrupted, and so are those of owners whose lease expired; the
            runs of live owners are left alone, so several servers can share
            one backend.
        lease_ttl_s: how long this owner's lease lasts after each
            :meth:`heartbeat` (renew it well within that, e.g. with a
            :class:`~reactive_rag.store.LeaseKeeper`).
        read_only: an operator's view (``reactive-rag runs``/``replay`` beside a
            live server): :meth:`open` recovers nothing and every write raises
            :class:`~reactive_rag.store.StoreReadOnly`.
        clock: Unix-time source for timestamps (injectable for tests).
        poll_interval_s: how often a follower without live events re-reads.
    """

    live_buffer = 4096
    """Committed events one live attacher may hold; past that it reads them from the store."""

    def __init__(
        self,
        *,
        owner: str | None = None,
        lease_ttl_s: float = 15.0,
        read_only: bool = False,
        clock: Callable[[], float] = time.time,
        poll_interval_s: float = 0.02,
    ) -> None:
        from ._lease import default_owner

        if owner is not None and not owner:
            raise ValueError("owner must be a non-empty string (or None for a unique id)")
        if not lease_ttl_s > 0:
            raise ValueError("lease_ttl_s must be > 0")
        self.owner: str = default_owner() if owner is None else owner
        self.lease_ttl_s = float(lease_ttl_s)
        self.read_only = read_only
        self._clock = clock
        self._poll_interval_s = poll_interval_s
        self._recorders: dict[str, CommittedSource] = {}
        self._is_open = False

    async def open(self) -> list[str]:
        raise NotImplementedError

    def _writable(self) -> None:
        """Raise unless this store may write (it was not opened read-only)."""
        if self.read_only:
            raise StoreReadOnly("this store was opened read-only: it records and recovers "
                                "nothing")

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- primitives a backend implements ---------------------------------------------------

    async def _fetch(self, run_id: str, after_seq: int, limit: int) -> list[Event]:
        raise NotImplementedError

    async def _follow(self, run_id: str, after_seq: int) -> list[Event]:
        """New events after ``after_seq``, waiting a little for them; may return []."""
        await asyncio.sleep(self._poll_interval_s)
        return await self._fetch(run_id, after_seq, PAGE)

    async def _status(self, run_id: str) -> RunStatus:
        raise NotImplementedError

    async def get_run(self, run_id: str, tenant: str | None = None) -> RunRecord:
        raise NotImplementedError

    # --- shared ------------------------------------------------------------------------------

    def _now_us(self) -> int:
        return int(self._clock() * 1_000_000)

    def _check_open(self) -> None:
        if not self._is_open:
            raise StoreClosed(f"{type(self).__name__} is not open")

    def register_writer(self, run_id: str, writer: CommittedSource) -> None:
        """Let live attachers of ``run_id`` take committed events from ``writer``."""
        self._recorders[run_id] = writer

    def unregister_writer(self, run_id: str, writer: CommittedSource) -> None:
        """Undo :meth:`register_writer` (only if ``writer`` is still the registered one)."""
        if self._recorders.get(run_id) is writer:
            del self._recorders[run_id]

    async def events(
        self, run_id: str, after_seq: int = 0, *, tenant: str | None = None
    ) -> AsyncIterator[Event]:
        """Replay the stored events with ``seq > after_seq``, page by page."""
        await self.get_run(run_id, tenant)
        cursor = max(0, after_seq)
        while True:
            batch = await self._fetch(run_id, cursor, PAGE)
            for event in batch:
                yield event
            if len(batch) < PAGE:
                return
            cursor = batch[-1].seq

    async def attach(
        self, run_id: str, after_seq: int = 0, *, tenant: str | None = None
    ) -> AsyncIterator[Event]:
        """Committed events after ``after_seq`` until the run ends (see RunStore.attach)."""
        await self.get_run(run_id, tenant)
        cursor = max(0, after_seq)
        writer = self._recorders.get(run_id)
        inner = (self._follow_store(run_id, cursor) if writer is None
                 else self._attach_committed(run_id, cursor, writer))
        ended = False
        # Close the inner generator with this one, so its subscription ends now.
        async with contextlib.aclosing(inner):
            async for event in inner:
                yield event
                ended = isinstance(event, RunFinished)
        if not ended:
            # The client already holds the end, or a seq past it: it gets the
            # terminal event again, never an empty stream.
            record = await self.get_run(run_id)
            last = await self._fetch(run_id, record.last_seq - 1, 1)
            if last and isinstance(last[0], RunFinished):
                yield last[0]

    async def _ends(self, run_id: str, event: RunFinished) -> bool:
        """Whether ``event`` ends the run's stream: an interrupted run may have been resumed."""
        if event.outcome != "interrupted":
            return True
        if await self._status(run_id) == "running":
            return False
        return not await self._fetch(run_id, event.seq, 1)

    def _pending_terminal(self, run_id: str, cursor: int) -> RunFinished | None:
        """The ending a given-up recorder handed out but could not store yet."""
        writer = self._recorders.get(run_id)
        terminal = None if writer is None or writer.repaired else writer.terminal
        return terminal if terminal is not None and terminal.seq == cursor + 1 else None

    async def _follow_store(self, run_id: str, after_seq: int) -> AsyncGenerator[Event, None]:
        cursor = after_seq
        while True:
            batch = await self._fetch(run_id, cursor, PAGE)
            if not batch:
                if await self._status(run_id) != "running":
                    # The status changes in the same transaction as the last events.
                    batch = await self._fetch(run_id, cursor, PAGE)
                    if not batch:
                        return
                else:
                    pending = self._pending_terminal(run_id, cursor)
                    if pending is not None:
                        yield pending
                        return
                    batch = await self._follow(run_id, cursor)
            for event in batch:
                if event.seq <= cursor:
                    continue
                yield event
                cursor = event.seq
                if isinstance(event, RunFinished) and await self._ends(run_id, event):
                    return

    async def _attach_committed(
        self, run_id: str, after_seq: int, writer: CommittedSource
    ) -> AsyncGenerator[Event, None]:
        # Subscribe before reading the store: every event committed from now on
        # reaches the sink, and every one committed before is in the store.
        sink: EventBridge[Event] = EventBridge(self.live_buffer)
        subscription = writer.subscribe_committed(sink)
        try:
            cursor = after_seq
            while True:
                batch = await self._fetch(run_id, cursor, PAGE)
                for event in batch:
                    yield event
                    cursor = event.seq
                    if isinstance(event, RunFinished) and await self._ends(run_id, event):
                        return
                if len(batch) < PAGE:
                    break
            while True:
                try:
                    item = await sink.get()
                except BridgeClosed:
                    item = None
                if item is None:
                    # The writer ended, or we fell behind: what it committed is stored.
                    rest = self._follow_store(run_id, cursor)
                    async with contextlib.aclosing(rest):
                        async for event in rest:
                            yield event
                    return
                if item.seq <= cursor:
                    continue
                if item.seq > cursor + 1:  # committed meanwhile: read it back
                    for event in await self._fetch(run_id, cursor, item.seq - cursor - 1):
                        yield event
                        cursor = event.seq
                yield item
                cursor = item.seq
                if isinstance(item, RunFinished) and await self._ends(run_id, item):
                    return
        finally:
            subscription.dispose()
