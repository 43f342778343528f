"""Bridge from the synchronous run stream to an async sink (socket, file, queue).

The stream never waits for a subscriber. An :class:`AsyncSubscriber` takes each
event with ``put_nowait`` semantics into a bounded buffer that a consumer task
drains into the sink. When the buffer is full the overflow policy applies:

1. progress events (``Priority.PROGRESS``, e.g. ``budget.tick``) are coalesced:
   the newest replaces a buffered one, or the newest is dropped;
2. a normal event makes room by dropping a buffered progress event; if there is
   none, the policy decides: ``DETACH`` (default: the subscriber sees a stream
   with no gaps except progress, or is told it was cut off) or ``DROP_NORMAL``
   (drop the oldest buffered normal event, also to make room for an essential one);
3. essential events (terminal, evidence, answer) are never dropped: if one
   cannot be buffered the subscriber is detached with a reason.

Memory per subscriber is therefore bounded by ``maxsize`` events.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from reactivex import abc

from ._events import Event, Priority, RunFinished
from ._stream import RunStream

__all__ = ["AsyncSubscriber", "OverflowPolicy", "SubscriberStats"]

Sink = Callable[[Event], Awaitable[None]]


def _current_task() -> asyncio.Task[object] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # called from a thread without a running loop
        return None


class OverflowPolicy(enum.Enum):
    """What a full buffer does with a normal (non-progress, non-essential) event."""

    DETACH = "detach"
    DROP_NORMAL = "drop_normal"


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
        if maxsize < 1:
            raise ValueError("maxsize must be >= 1")
        self._sink = sink
        self.name = name
        self.maxsize = maxsize
        self.policy = policy
        self._buffer: deque[Event] = deque()
        self._progress_in_buffer = 0
        self._wake = asyncio.Event()
        self._done = asyncio.Event()
        self._source_completed = False
        self._subscription: abc.DisposableBase | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._stream: RunStream | None = None
        self._delivered = 0
        self._coalesced = 0
        self._dropped = 0
        self._high_water = 0
        self.detached_reason: str | None = None

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
            high_water=self._high_water,
            delivered=self._delivered,
            coalesced=self._coalesced,
            dropped=self._dropped,
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
        buffer = self._buffer
        if len(buffer) >= self.maxsize and not self._make_room(event):
            return
        buffer.append(event)
        if event.priority is Priority.PROGRESS:
            self._progress_in_buffer += 1
        if len(buffer) > self._high_water:
            self._high_water = len(buffer)
        self._wake.set()

    def _make_room(self, event: Event) -> bool:
        """Apply the overflow policy; True if ``event`` may now be appended."""
        if event.priority is Priority.PROGRESS:
            if self._remove_progress(prefer_type=event.type):
                self._coalesced += 1
                return True
            self._coalesced += 1  # the newest progress event is folded away
            return False
        if self._remove_progress(prefer_type=None):
            self._dropped += 1
            return True
        if self.policy is OverflowPolicy.DROP_NORMAL:
            for i, buffered in enumerate(self._buffer):
                if buffered.priority is Priority.NORMAL:
                    del self._buffer[i]
                    self._dropped += 1
                    return True
        self._detach(
            f"buffer full ({self.maxsize} events): could not deliver {event.type} "
            f"seq {event.seq}"
        )
        return False

    def _remove_progress(self, prefer_type: str | None) -> bool:
        if self._progress_in_buffer == 0:
            return False
        fallback: int | None = None
        for i, buffered in enumerate(self._buffer):
            if buffered.priority is Priority.PROGRESS:
                if prefer_type is None or buffered.type == prefer_type:
                    del self._buffer[i]
                    self._progress_in_buffer -= 1
                    return True
                if fallback is None:
                    fallback = i
        if fallback is not None:
            del self._buffer[fallback]
            self._progress_in_buffer -= 1
            return True
        return False  # pragma: no cover - counter and buffer agree

    def _detach(self, reason: str) -> None:
        if self.detached_reason is not None:
            return
        self.detached_reason = reason
        self._buffer.clear()
        self._progress_in_buffer = 0
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
                if event.priority is Priority.PROGRESS:
                    self._progress_in_buffer -= 1
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
