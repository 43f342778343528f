"""What every store shares: replay, attach (stored tail then live), cursors, batch checks.

A backend implements a few primitives (fetch a page of events, follow new
events, read a run's status); replay and the no-gap/no-duplicate attach logic
live here once, so SQLite and Redis behave the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Protocol, Self

from reactivex import Observable, abc

from streams import Event, RunFinished, RunStream

from ._exceptions import AttachGap, InvalidCursor, SeqConflict, StoreClosed, StoreReadOnly
from ._protocol import LiveSource, RunRecord, RunStatus

__all__ = ["StoreBase", "UnflushedSource", "check_batch", "make_cursor", "parse_cursor"]

PAGE = 512
_CURSOR = re.compile(r"^(\d{16}):(.+)$", re.DOTALL)


class UnflushedSource(Protocol):
    """A writer (the recorder) that can show events it holds but has not yet made durable."""

    def unflushed(self) -> list[Event]:
        """Events accepted but not yet committed, in ``seq`` order."""
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


class _Inbox:
    """Events pushed by the stream (any thread) for one attacher on the event loop.

    A deque and one future: about a third of the cost of an ``asyncio.Queue``,
    which matters with a thousand attachers on one run.
    """

    def __init__(self) -> None:
        self.items: deque[Event | None] = deque()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._waiter: asyncio.Future[None] | None = None

    def push(self, item: Event | None) -> None:
        if threading.get_ident() != self._thread:
            self._loop.call_soon_threadsafe(self.push, item)
            return
        self.items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self, timeout_s: float | None) -> Event | None:
        """The next item; raises TimeoutError after ``timeout_s`` (None: wait forever)."""
        while not self.items:
            self._waiter = self._loop.create_future()
            try:
                async with asyncio.timeout(timeout_s):
                    await self._waiter
            finally:
                self._waiter = None
        return self.items.popleft()


class StoreBase:
    """Replay and attach on top of backend primitives.

    Args:
        owner: names the process (or deployment) that writes runs; on
            :meth:`open` only this owner's runs left ``running`` are marked
            interrupted, so several servers can share one backend.
        read_only: an operator's view (``reactive-rag runs``/``replay`` beside a
            live server): :meth:`open` recovers nothing and every write raises
            :class:`~reactive_rag.store.StoreReadOnly`.
        clock: Unix-time source for timestamps (injectable for tests).
        poll_interval_s: how often a follower without live events re-reads.
        gap_timeout_s: how long a live attacher waits for events between the
            stored tail and the first live event to be written.
    """

    def __init__(
        self,
        *,
        owner: str = "default",
        read_only: bool = False,
        clock: Callable[[], float] = time.time,
        poll_interval_s: float = 0.02,
        gap_timeout_s: float = 10.0,
    ) -> None:
        self.owner = owner
        self.read_only = read_only
        self._clock = clock
        self._poll_interval_s = poll_interval_s
        self._gap_timeout_s = gap_timeout_s
        self._recorders: dict[str, UnflushedSource] = {}
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

    def register_writer(self, run_id: str, writer: UnflushedSource) -> None:
        """Let live attachers of ``run_id`` see events ``writer`` holds but has not written."""
        self._recorders[run_id] = writer

    def unregister_writer(self, run_id: str, writer: UnflushedSource) -> None:
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
        self,
        run_id: str,
        after_seq: int = 0,
        live: LiveSource | None = None,
        *,
        tenant: str | None = None,
    ) -> AsyncIterator[Event]:
        """Stored tail, then live events, with no gap and no duplicate (see RunStore.attach)."""
        if isinstance(live, RunStream) and live.run_id != run_id:
            raise ValueError(f"live stream is run {live.run_id!r}, not {run_id!r}")
        await self.get_run(run_id, tenant)
        after_seq = max(0, after_seq)
        inner = (
            self._follow_store(run_id, after_seq)
            if live is None
            else self._attach_live(run_id, after_seq, live)
        )
        # Close the inner generator with this one, so its subscription ends now.
        async with contextlib.aclosing(inner):
            async for event in inner:
                yield event

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
                    batch = await self._follow(run_id, cursor)
            for event in batch:
                if event.seq <= cursor:
                    continue
                yield event
                cursor = event.seq
                if isinstance(event, RunFinished):
                    return

    async def _attach_live(
        self, run_id: str, after_seq: int, live: LiveSource
    ) -> AsyncGenerator[Event, None]:
        inbox = _Inbox()

        in_memory = False
        if isinstance(live, RunStream):
            try:  # the stream keeps its whole history: it alone has everything, no I/O
                source: Observable[Event] = live.replay(after_seq)
                in_memory = True
            except RuntimeError:
                source = live.events
        else:
            source = live
        # Subscribe before reading the store: everything published from now on
        # is queued, and everything before is stored, held by the recorder, or
        # in the stream's history, which _fill_gap consults.
        subscription: abc.DisposableBase = source.subscribe(
            inbox.push, lambda _exc: inbox.push(None), lambda: inbox.push(None)
        )
        try:
            cursor = after_seq
            while not in_memory:
                batch = await self._fetch(run_id, cursor, PAGE)
                for event in batch:
                    yield event
                    cursor = event.seq
                    if isinstance(event, RunFinished):
                        return
                if len(batch) < PAGE:
                    break
            while True:
                if inbox.items:
                    item = inbox.items.popleft()
                elif isinstance(live, RunStream) and live.last_seq <= cursor:
                    item = await inbox.get(None)  # nothing is missing: wait for the next
                else:
                    try:
                        item = await inbox.get(self._poll_interval_s)
                    except TimeoutError:
                        # Quiet stream: events published before we subscribed
                        # may still be missing and no live event will show the gap.
                        for event in await self._catch_up(run_id, cursor, live):
                            yield event
                            cursor = event.seq
                            if isinstance(event, RunFinished):
                                return
                        continue
                if item is None:  # the live source ended: whatever is left is in the store
                    rest = self._follow_store(run_id, cursor)
                    async with contextlib.aclosing(rest):
                        async for event in rest:
                            yield event
                    return
                if item.seq <= cursor:
                    continue
                if item.seq > cursor + 1:
                    for event in await self._fill_gap(run_id, cursor, item.seq, live):
                        yield event
                        cursor = event.seq
                yield item
                cursor = item.seq
                if isinstance(item, RunFinished):
                    return
        finally:
            subscription.dispose()

    async def _catch_up(self, run_id: str, cursor: int, live: LiveSource) -> list[Event]:
        if isinstance(live, RunStream):
            newest = live.last_seq
            return await self._fill_gap(run_id, cursor, newest + 1, live) if newest > cursor else []
        return await self._fetch(run_id, cursor, PAGE)

    async def _fill_gap(
        self, run_id: str, cursor: int, upto: int, live: LiveSource
    ) -> list[Event]:
        """Events ``cursor < seq < upto``: from memory if held there, else once written."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._gap_timeout_s
        found: dict[int, Event] = {}
        while True:
            # Memory first, then the store: an event leaves the recorder's
            # memory only after it is committed, so reading in this order
            # cannot miss one that moves in between.
            if isinstance(live, RunStream):
                for event in live.history(cursor):
                    if event.seq >= upto:
                        break
                    found[event.seq] = event
            writer = self._recorders.get(run_id)
            if writer is not None:
                for event in writer.unflushed():
                    if cursor < event.seq < upto:
                        found[event.seq] = event
            missing = [seq for seq in range(cursor + 1, upto) if seq not in found]
            if missing:
                start = missing[0] - 1
                for event in await self._fetch(run_id, start, upto - start - 1):
                    if event.seq < upto:
                        found[event.seq] = event
                missing = [seq for seq in missing if seq not in found]
            if not missing:
                return [found[seq] for seq in range(cursor + 1, upto)]
            if loop.time() >= deadline:
                raise AttachGap(
                    f"run {run_id!r}: events {missing[0]}..{missing[-1]} were never stored"
                )
            await asyncio.sleep(self._poll_interval_s)
