"""Follow a run stream from async code: its events after a seq, in order, to its end.

The stream's replay (history, then live, no gap and no duplicate) feeds one
bounded :class:`~streams.EventBridge`; the consumer awaits it. A consumer slower
than the stream by more than ``buffer`` events is not a leak: the overflowed
bridge closes and the follower subscribes again from the last seq it yielded,
taking the rest from the stream's history, so memory stays bounded and nothing
is lost or repeated.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from ._bridge import EventBridge
from ._events import Event
from ._stream import RunStream

__all__ = ["follow"]


async def follow(
    stream: RunStream,
    after_seq: int = 0,
    *,
    until: Callable[[Event], bool] | None = None,
    buffer: int = 1024,
) -> AsyncIterator[Event]:
    """Yield the stream's events with ``seq > after_seq``, then stop at its end.

    The end is the stream's completion (after its ``run.finished``), or the
    first event for which ``until`` is true (it is yielded). Needs a stream
    that keeps its history (the default) and a running event loop.

    Raises:
        ValueError: ``after_seq`` is negative or ``buffer`` < 1.
        RuntimeError: the stream keeps no history.
    """
    if after_seq < 0:
        raise ValueError(f"after_seq must be >= 0, got {after_seq}")
    if buffer < 1:
        raise ValueError("buffer must be >= 1")
    cursor = after_seq
    while True:
        bridge: EventBridge[Event] = EventBridge(buffer)

        def push(event: Event, bridge: EventBridge[Event] = bridge) -> None:
            bridge.push(event)  # a refusal closes the bridge: caught up below

        def close(_exc: Exception | None = None,
                  bridge: EventBridge[Event] = bridge) -> None:
            bridge.close()

        subscription = stream.replay(cursor).subscribe(push, close, close)
        try:
            while True:
                event = await bridge.get()
                if event is None:
                    break
                if event.seq <= cursor:
                    continue
                yield event
                cursor = event.seq
                if until is not None and until(event):
                    return
        finally:
            subscription.dispose()
        if not bridge.overflowed:
            return  # the stream completed
