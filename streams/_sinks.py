"""Bridge from the synchronous run stream to an async sink (socket, file, queue).

The stream never waits for a subscriber. An :class:`AsyncSubscriber` takes each
event with ``put_nowait`` semantics into a bounded :class:`~streams.EventBuffer`
that a consumer task drains into the sink; the buffer's overflow policy decides
what a slow subscriber loses, and a subscriber that would lose an event it may
not is detached with the reason (published as ``subscriber.detached``).
Memory per subscriber is therefore bounded by ``maxsize`` events.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from reactivex import abc

from ._buffer import EventBuffer, OverflowPolicy
from ._events import Event, RunFinished
from ._stream import RunStream

__all__ = ["AsyncSubscriber", "SubscriberStats"]

Sink = Callable[[Event], Awaitable[None]]


def _current_task() -> asyncio.Task[object] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # called from a thread without a running loop
        return None


@dataclass(frozen=True, slots=True)
class SubscriberStats:
    """A snapshot of one subscriber's buffer (trio-style ``statistics()``)."""

    name: str
    depth: int
    maxsize: int
    high_water: int
    delivered: int
    coalesced: int
    dropped: int
    detached_reason: str | None


class AsyncSubscriber:
    """Feeds a stream into an async sink through a bounded buffer.

    Args:
        sink: awaited once per event, in order. If it raises, the subscriber
            is detached with the error as reason.
        name: shown in ``subscriber.detached`` events and statistics.
        maxsize: buffer capacity in events.
        policy: what to do with normal events when the buffer is full.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        name: str,
        maxsize: int = 1024,
        policy: OverflowPolicy = OverflowPolicy.DETACH,
    ) -> None:
        self._sink = sink
        self.name = name
        self._buffer = EventBuffer(maxsize, policy)
        self._wake = asyncio.Event()
        self._done = asyncio.Event()
        self._source_completed = False
        self._subscription: abc.DisposableBase | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._stream: RunStream | None = None
        self._delivered = 0
        self.detached_reason: str | None = None

    @property
    def maxsize(self) -> int:
        """Buffer capacity in events."""
        return self._buffer.maxsize

    @property
    def policy(self) -> OverflowPolicy:
        """What the full buffer does with a normal event."""
        return self._buffer.policy

    # --- lifecycle ------------------------------------------------------------------

    def attach(self, stream: RunStream, *, after_seq: int | None = None) -> AsyncSubscriber:
        """Subscribe to ``stream`` (live, or from ``after_seq`` with replay) and start draining.

        Must be called from a running event loop.
        """
        if self._task is not None:
            raise RuntimeError(f"subscriber {self.name!r} is already attached")
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._stream = stream
        self._task = self._loop.create_task(self._consume(), name=f"subscriber:{self.name}")
        source = stream.events if after_seq is None else stream.replay(after_seq)
        self._subscription = source.subscribe(self._on_next, self._on_error, self._on_completed)
        return self

    async def wait(self) -> None:
        """Return once every event up to the end of the run was delivered, or on detach."""
        await self._done.wait()

    async def aclose(self) -> None:
        """Unsubscribe and stop the consumer; buffered events are discarded."""
        self._unsubscribe()
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._done.set()

    def statistics(self) -> SubscriberStats:
        """Buffer depth and counters, for monitors."""
        return SubscriberStats(
            name=self.name,
            depth=len(self._buffer),
            maxsize=self.maxsize,
            high_water=self._buffer.high_water,
            delivered=self._delivered,
            coalesced=self._buffer.coalesced,
            dropped=self._buffer.dropped,
            detached_reason=self.detached_reason,
        )

    # --- the synchronous side (called by the stream) ----------------------------------

    def _on_next(self, event: Event) -> None:
        if self._loop is not None and threading.get_ident() != self._loop_thread:
            self._loop.call_soon_threadsafe(self._push, event)
        else:
            self._push(event)

    def _on_error(self, exc: Exception) -> None:
        if self._loop is not None and threading.get_ident() != self._loop_thread:
            self._loop.call_soon_threadsafe(self._on_error, exc)
            return
        self._detach(f"source failed: {type(exc).__name__}: {exc}")

    def _on_completed(self) -> None:
        # From another thread, completion must queue behind the events it follows.
        if self._loop is not None and threading.get_ident() != self._loop_thread:
            self._loop.call_soon_threadsafe(self._on_completed)
            return
        self._source_completed = True
        self._wake.set()

    def _push(self, event: Event) -> None:
        if self.detached_reason is not None:
            return
        if not self._buffer.push(event):
            self._detach(f"buffer full ({self.maxsize} events): could not deliver "
                         f"{event.type} seq {event.seq}")
            return
        self._wake.set()

    def _detach(self, reason: str) -> None:
        if self.detached_reason is not None:
            return
        self.detached_reason = reason
        self._buffer.clear()
        self._unsubscribe()
        task = self._task
        if task is not None and not task.done() and task is not _current_task():
            task.cancel()
        self._done.set()
        if self._stream is not None:
            self._stream.report_detached(self.name, reason)

    def _unsubscribe(self) -> None:
        if self._subscription is not None:
            self._subscription.dispose()
            self._subscription = None

    # --- the async side -----------------------------------------------------------------

    async def _consume(self) -> None:
        buffer = self._buffer
        try:
            while True:
                while not buffer:
                    if self._source_completed:
                        return
                    self._wake.clear()
                    await self._wake.wait()
                event = buffer.popleft()
                try:
                    await self._sink(event)
                except Exception as exc:
                    self._detach(f"sink raised {type(exc).__name__}: {exc}")
                    return
                self._delivered += 1
                if isinstance(event, RunFinished):
                    self._source_completed = True
        finally:
            self._unsubscribe()
            self._done.set()
