"""Typed doors to protobuf's JSON mapping (the only module that imports ``google.protobuf``).

The A2A types are protobuf messages; ``protobuf`` ships no type stubs, so its
functions are wrapped here once, with the types the rest of the package relies on.
"""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf.json_format import (  # type: ignore[import-untyped]
    MessageToDict,
    ParseDict,
)

__all__ = ["from_json", "to_json"]

_M = TypeVar("_M")


def to_json(message: Any) -> dict[str, Any]:
    """A message (or a ``Struct``) as the JSON object of protobuf's JSON mapping."""
    data: dict[str, Any] = MessageToDict(message)
    return data


def from_json(data: Any, message: _M) -> _M:
    """Fill ``message`` from JSON ``data``, ignoring unknown fields; returns ``message``.

    Raises:
        Exception: protobuf's ``ParseError`` (or a ``TypeError``/``ValueError``) for
            data of the wrong shape.
    """
    parsed: _M = ParseDict(data, message, ignore_unknown_fields=True)
    return parsed
