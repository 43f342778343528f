"""The bounded event buffer and its overflow policy, shared by every slow consumer.

Used by :class:`streams.AsyncSubscriber` (a push-fed sink) and by the HTTP
service's per-client feeds (a pulled source), so one policy decides what a slow
consumer loses:

1. a progress event (``Priority.PROGRESS``) arriving at a full buffer replaces a
   buffered progress event (of its own type first) or is folded away;
2. a normal event makes room by dropping a buffered progress event; failing
   that, ``OverflowPolicy.DROP_NORMAL`` drops the oldest buffered normal event,
   ``OverflowPolicy.DETACH`` (default) refuses it;
3. an essential event is never dropped: with no room it is refused.

A refused event means the consumer must be detached (it cannot be given a
stream with no gaps but progress ones).
"""

from __future__ import annotations

import enum
from collections import deque

from ._events import Event, Priority

__all__ = ["EventBuffer", "OverflowPolicy"]


class OverflowPolicy(enum.Enum):
    """What a full buffer does with a normal (non-progress, non-essential) event."""

    DETACH = "detach"
    DROP_NORMAL = "drop_normal"


class EventBuffer:
    """A FIFO of at most ``maxsize`` events that applies the overflow policy."""

    def __init__(self, maxsize: int, policy: OverflowPolicy = OverflowPolicy.DETACH) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be >= 1")
        self.maxsize = maxsize
        self.policy = policy
        self._events: deque[Event] = deque()
        self._progress = 0
        self.coalesced = 0  # progress events replaced or folded by newer ones
        self.dropped = 0  # events removed to make room for a more important one
        self.high_water = 0

    def __len__(self) -> int:
        return len(self._events)

    def push(self, event: Event) -> bool:
        """Buffer ``event`` (or fold it away); ``False``: it may not be dropped and there is
        no room, so the consumer must be detached."""
        if len(self._events) >= self.maxsize and not self._make_room(event):
            return event.priority is Priority.PROGRESS  # a folded tick is not a refusal
        self._events.append(event)
        if event.priority is Priority.PROGRESS:
            self._progress += 1
        self.high_water = max(self.high_water, len(self._events))
        return True

    def popleft(self) -> Event:
        event = self._events.popleft()
        if event.priority is Priority.PROGRESS:
            self._progress -= 1
        return event

    def clear(self) -> None:
        self._events.clear()
        self._progress = 0

    def _make_room(self, event: Event) -> bool:
        if event.priority is Priority.PROGRESS:
            self.coalesced += 1
            return self._remove_progress(prefer_type=event.type)
        if self._remove_progress(prefer_type=None):
            self.dropped += 1
            return True
        if self.policy is OverflowPolicy.DROP_NORMAL:
            for i, buffered in enumerate(self._events):
                if buffered.priority is Priority.NORMAL:
                    del self._events[i]
                    self.dropped += 1
                    return True
        return False

    def _remove_progress(self, prefer_type: str | None) -> bool:
        if self._progress == 0:
            return False
        fallback: int | None = None
        for i, buffered in enumerate(self._events):
            if buffered.priority is Priority.PROGRESS:
                if prefer_type is None or buffered.type == prefer_type:
                    fallback = i
                    break
                if fallback is None:
                    fallback = i
        if fallback is None:  # pragma: no cover - the counter and the deque agree
            return False
        del self._events[fallback]
        self._progress -= 1
        return True
