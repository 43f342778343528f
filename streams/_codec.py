"""msgpack (wire and storage) and JSON (SSE, logs) codecs for events.

Decoding never raises anything but :class:`DecodeError` subclasses: garbage,
truncated input, an unknown ``type`` or a newer ``v`` are data problems of one
message, never a crash of the run that reads them.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import msgpack
from pydantic import ValidationError

from ._events import EVENT_TYPES, Event
from ._exceptions import EncodeError, MalformedEvent, UnknownEventType, UnsupportedVersion

__all__ = ["decode_json", "decode_msgpack", "encode_json", "encode_msgpack", "event_from_dict"]


def encode_msgpack(event: Event) -> bytes:
    """Serialise an event to msgpack bytes.

    Raises:
        EncodeError: a value msgpack cannot carry (an integer beyond 64 bits).
    """
    # The serializer and a per-thread Packer directly: model_dump()'s keyword
    # handling and a new Packer per call were a fifth of a round trip.
    packer = _packers.__dict__.get("packer")
    if packer is None:
        packer = _packers.packer = msgpack.Packer(use_bin_type=True)
    try:
        packed: bytes = packer.pack(event.__pydantic_serializer__.to_python(event))
    except (OverflowError, TypeError, ValueError) as exc:
        packer.reset()  # a failed pack may leave bytes in its buffer
        raise EncodeError(f"cannot encode {event.type!r} event: {exc}") from exc
    return packed


_packers = threading.local()  # a msgpack.Packer keeps a buffer: one per thread


def encode_json(event: Event) -> str:
    """Serialise an event to a compact JSON string."""
    return event.__pydantic_serializer__.to_json(event).decode()


def event_from_dict(data: Any) -> Event:
    """Build the right event class from a plain mapping (the discriminated union).

    Raises:
        MalformedEvent: not a mapping, no ``type``, or the payload fails validation.
        UnknownEventType: the ``type`` is not registered.
        UnsupportedVersion: ``v`` is newer than the registered class.
    """
    if not isinstance(data, dict):
        raise MalformedEvent(f"an event must be a mapping, got {type(data).__name__}")
    event_type = data.get("type")
    if not isinstance(event_type, str):
        raise MalformedEvent("an event needs a string `type` field")
    cls = EVENT_TYPES.get(event_type)
    if cls is None:
        raise UnknownEventType(event_type)
    version = data.get("v", 1)
    supported = _supported_version(cls)
    if not isinstance(version, int) or isinstance(version, bool):
        raise MalformedEvent(f"event {event_type!r} has a non-integer version {version!r}")
    if version > supported:
        raise UnsupportedVersion(event_type, version, supported)
    try:
        event: Event = cls.__pydantic_validator__.validate_python(data)
    except ValidationError as exc:
        raise MalformedEvent(f"invalid {event_type!r} event: {exc.error_count()} error(s): "
                             f"{_first_error(exc)}") from exc
    except (TypeError, ValueError, RecursionError) as exc:  # pragma: no cover - defensive
        raise MalformedEvent(f"invalid {event_type!r} event: {exc}") from exc
    return event


_versions: dict[type[Event], int] = {}


def _supported_version(cls: type[Event]) -> int:
    """The newest ``v`` a class reads (its field default), looked up once per class."""
    version = _versions.get(cls)
    if version is None:
        version = _versions[cls] = cls.model_fields["v"].default
    return version


def decode_msgpack(data: bytes) -> Event:
    """Parse msgpack bytes into an event.

    Raises:
        DecodeError: for any input that is not a valid, known event.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise MalformedEvent(f"expected bytes, got {type(data).__name__}")
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError,
            msgpack.StackError, RecursionError) as exc:
        raise MalformedEvent(f"not a msgpack event: {type(exc).__name__}: {exc}") from exc
    return event_from_dict(obj)


def decode_json(data: str | bytes) -> Event:
    """Parse JSON text into an event.

    Raises:
        DecodeError: for any input that is not a valid, known event.
    """
    try:
        obj = json.loads(data)
    except (ValueError, TypeError, RecursionError) as exc:
        raise MalformedEvent(f"not a JSON event: {exc}") from exc
    return event_from_dict(obj)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err.get("loc", ()))
    return f"{loc}: {err.get('msg', '')}"
