"""A bounded buffer between a run's event source and one network client.

A pump task drains the source (the store's ``attach``: stored tail, then live
events) as fast as it produces, so the run never waits for a client; the
client's writer takes events out at its own pace. When the buffer is full the
overflow policy of :class:`streams.AsyncSubscriber` applies: progress events
are coalesced (the newest replaces a buffered one of its type), a normal event
may push out a buffered progress event, and otherwise the client is detached
with a reason it is told before the connection closes. Memory per client is
bounded by ``maxsize`` events.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

from streams import Event, Priority, RunFinished

__all__ = ["EventFeed", "FeedStats"]


@dataclass(frozen=True, slots=True)
class FeedStats:
    """Counters of one client feed."""

    depth: int
    delivered: int
    coalesced: int
    detached_reason: str | None


class EventFeed:
    """Events for one client, through a bounded buffer with an overflow policy.

    Use as ``async with EventFeed(source, maxsize=...) as feed:`` and call
    :meth:`get` until it returns ``None`` (the run ended) or
    :attr:`detached_reason` is set.
    """

    def __init__(self, source: AsyncIterator[Event], *, maxsize: int = 256) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be >= 1")
        self._source = source
        self.maxsize = maxsize
        self._buffer: deque[Event] = deque()
        self._ended = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._delivered = 0
        self._coalesced = 0
        self.detached_reason: str | None = None
        self.error: BaseException | None = None

    async def __aenter__(self) -> EventFeed:
        self._task = asyncio.get_running_loop().create_task(self._pump(), name="event-feed")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the pump and release the source (unsubscribes from the live run)."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        aclose = getattr(self._source, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()

    def statistics(self) -> FeedStats:
        """Buffer depth and counters."""
        return FeedStats(len(self._buffer), self._delivered, self._coalesced,
                         self.detached_reason)

    def detach(self, reason: str) -> None:
        """Cut the client off: nothing more is delivered, ``get`` returns None."""
        if self.detached_reason is None:
            self.detached_reason = reason
            self._buffer.clear()
            self._ended = True
            self._wake.set()
            if self._task is not None and self._task is not asyncio.current_task():
                self._task.cancel()

    async def get(self, timeout_s: float | None = None) -> Event | None:
        """The next event; None at the end of the run or once detached.

        Raises:
            TimeoutError: nothing arrived within ``timeout_s`` (time for a keep-alive).
        """
        while not self._buffer:
            if self._ended:
                return None
            self._wake.clear()
            async with asyncio.timeout(timeout_s):
                await self._wake.wait()
        self._delivered += 1
        return self._buffer.popleft()

    # --- pump -------------------------------------------------------------------------------

    async def _pump(self) -> None:
        try:
            async for event in self._source:
                self._push(event)
                if self._ended:
                    return
                if len(self._buffer) * 2 >= self.maxsize:
                    # A replayed tail arrives in bursts: let the writer take some
                    # before deciding that the client cannot keep up.
                    await asyncio.sleep(0)
                if isinstance(event, RunFinished):
                    break
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the source failed (store down, gap): tell the client
            self.error = exc  # deliver what is buffered, then say why the stream stops
            self.detached_reason = f"event source failed: {type(exc).__name__}"
            self._ended = True
            self._wake.set()
            return
        self._ended = True
        self._wake.set()

    def _push(self, event: Event) -> None:
        buffer = self._buffer
        if len(buffer) >= self.maxsize and not self._make_room(event):
            return
        buffer.append(event)
        self._wake.set()

    def _make_room(self, event: Event) -> bool:
        buffer = self._buffer
        if event.priority is Priority.PROGRESS:
            self._coalesced += 1
            for i, old in enumerate(buffer):
                if old.priority is Priority.PROGRESS and old.type == event.type:
                    del buffer[i]
                    return True
            return False  # the newest progress event is folded away
        for i, old in enumerate(buffer):
            if old.priority is Priority.PROGRESS:
                del buffer[i]
                self._coalesced += 1
                return True
        self.detach(f"client too slow: buffer of {self.maxsize} events full at "
                    f"{event.type} seq {event.seq}")
        return False
