"""The one bounded hand-over from stream callbacks (any thread) to one asyncio consumer.

A stream delivers events by calling subscribers synchronously, possibly on a
publisher's thread; async code (the run store's recorder, a store attacher, a
task follower) wants to ``await`` them. :class:`EventBridge` is the single way
to cross that line: a deque under a lock plus one future, bounded by
``maxsize``. It never blocks the publisher and never grows without bound: a
push into a full bridge is refused and the bridge is marked ``overflowed``; the
consumer decides what that means (the recorder fails the run, an attacher goes
back to reading the store, which holds everything it was given). An overflowed
bridge is closed at once, so nothing is ever taken out of it after a gap: the
consumer drains what it holds, ``get`` returns None, and it checks ``overflowed``.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import deque
from typing import Generic, TypeVar

__all__ = ["BridgeClosed", "EventBridge"]

T = TypeVar("T")


class BridgeClosed(Exception):
    """Raised by :meth:`EventBridge.get` when the producer closed the bridge with an error."""


class EventBridge(Generic[T]):
    """A bounded FIFO fed from any thread and drained by one coroutine on one loop.

    Create it on the consumer's event loop. ``push`` and ``close`` may be called
    from any thread; ``get`` and ``take`` only from the loop's thread.
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be >= 1")
        self.maxsize = maxsize
        self._items: deque[T] = deque()
        self._lock = threading.Lock()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._error: BaseException | None = None
        self.overflowed = False
        self.high_water = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (items may still be waiting)."""
        return self._closed

    def push(self, item: T) -> bool:
        """Queue ``item``; False if closed, or full (then ``overflowed`` is set and it closes)."""
        with self._lock:
            if self._closed:
                return False
            accepted = len(self._items) < self.maxsize
            if accepted:
                self._items.append(item)
                self.high_water = max(self.high_water, len(self._items))
            else:
                self.overflowed = self._closed = True  # nothing after a lost item
        self._wake()
        return accepted

    def close(self, error: BaseException | None = None) -> None:
        """No more items: ``get`` drains what is queued, then returns None (or raises)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._error = error
        self._wake()

    def take(self, limit: int) -> list[T]:
        """Up to ``limit`` queued items at once, without waiting."""
        with self._lock:
            count = min(limit, len(self._items))
            return [self._items.popleft() for _ in range(count)]

    def peek(self, limit: int) -> list[T]:
        """Up to ``limit`` of the oldest queued items, left queued (see :meth:`drop`)."""
        with self._lock:
            return list(itertools.islice(self._items, limit))

    def drop(self, count: int) -> None:
        """Remove the ``count`` oldest items (those a :meth:`peek` on the loop's thread
        returned: producers only ever add at the other end)."""
        with self._lock:
            for _ in range(min(count, len(self._items))):
                self._items.popleft()

    async def get(self, timeout_s: float | None = None) -> T | None:
        """The next item; None once closed and drained.

        Raises:
            TimeoutError: nothing arrived within ``timeout_s`` (None: wait for ever).
            BridgeClosed: the producer closed the bridge with an error (after the
                queued items were taken).
        """
        while True:
            with self._lock:
                if self._items:
                    return self._items.popleft()
                if self._closed:
                    if self._error is not None:
                        raise BridgeClosed(str(self._error)) from self._error
                    return None
                waiter = self._waiter = self._loop.create_future()
            try:
                async with asyncio.timeout(timeout_s):
                    await waiter
            finally:
                self._waiter = None

    def _wake(self) -> None:
        if threading.get_ident() != self._thread:
            if not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._wake)
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
