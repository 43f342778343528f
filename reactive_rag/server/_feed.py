"""A bounded buffer between a run's event source and one network client.

A pump task drains the source (the store's ``attach``: stored tail, then live
events) as fast as it produces, so the run never waits for a client; the
client's writer takes events out at its own pace. The buffer is the streams'
:class:`~streams.EventBuffer`, so the same overflow policy as every other slow
consumer applies; a client that would lose an event it may not is detached with
a reason it is told before the connection closes. Memory per client is bounded
by ``maxsize`` events.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from streams import Event, EventBuffer

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
        self._source = source
        self._buffer = EventBuffer(maxsize)
        self._ended = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._delivered = 0
        self.detached_reason: str | None = None
        self.error: BaseException | None = None

    @property
    def maxsize(self) -> int:
        """Buffer capacity in events."""
        return self._buffer.maxsize

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
        buffer = self._buffer
        return FeedStats(len(buffer), self._delivered, buffer.coalesced + buffer.dropped,
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
        batch = await self.get_batch(timeout_s, limit=1)
        return batch[0] if batch else None

    async def get_batch(self, timeout_s: float | None = None, *,
                        limit: int = 64) -> list[Event]:
        """Every buffered event (at least one, at most ``limit``), waiting for the first;
        an empty list at the end of the run or once detached.

        A writer that sends what has piled up in one write keeps up with a burst
        (a plan step's parallel results settle together) at a fraction of the
        per-event cost.

        Raises:
            TimeoutError: nothing arrived within ``timeout_s`` (time for a keep-alive).
        """
        while not self._buffer:
            if self._ended:
                return []
            self._wake.clear()
            async with asyncio.timeout(timeout_s):
                await self._wake.wait()
        buffer = self._buffer
        out = [buffer.popleft() for _ in range(min(limit, len(buffer)))]
        self._delivered += len(out)
        return out

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
        if not self._buffer.push(event):
            self.detach(f"client too slow: buffer of {self.maxsize} events full at "
                        f"{event.type} seq {event.seq}")
            return
        self._wake.set()
