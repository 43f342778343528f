"""Errors of the stream substrate.

Hierarchy::

    StreamError
    ├── EncodeError (ValueError)         an event holding a value the wire format cannot carry
    ├── DecodeError (ValueError)         bytes/text that are not a valid event
    │   ├── MalformedEvent               garbage, truncated, or a payload that fails validation
    │   ├── UnknownEventType             a ``type`` no registered class declares
    │   └── UnsupportedVersion           a ``v`` newer than this code understands
    └── StreamClosed (RuntimeError)      publishing after the run's ``run.finished``
"""

from __future__ import annotations

__all__ = [
    "DecodeError",
    "EncodeError",
    "MalformedEvent",
    "StreamClosed",
    "StreamError",
    "UnknownEventType",
    "UnsupportedVersion",
]


class StreamError(Exception):
    """Root of every error raised by ``streams``."""


class EncodeError(StreamError, ValueError):
    """The event holds a value the wire format cannot carry (e.g. an int beyond 64 bits)."""


class DecodeError(StreamError, ValueError):
    """The input is not an event this code can read; nothing else is affected."""


class MalformedEvent(DecodeError):
    """Garbage, truncated data, or a payload that does not fit its event type."""


class UnknownEventType(DecodeError):
    """The ``type`` field names no registered event class."""

    def __init__(self, event_type: object) -> None:
        super().__init__(f"unknown event type {event_type!r}")
        self.event_type = event_type


class UnsupportedVersion(DecodeError):
    """The event was written by a newer schema version than this code knows."""

    def __init__(self, event_type: str, version: object, supported: int) -> None:
        super().__init__(
            f"event {event_type!r} has schema version {version!r}; "
            f"this code understands up to v{supported}"
        )
        self.event_type = event_type
        self.version = version
        self.supported = supported


class StreamClosed(StreamError, RuntimeError):
    """The run already finished; its stream takes no more events."""
