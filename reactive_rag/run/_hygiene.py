"""Tool-argument hygiene: what every call's arguments go through before dispatch.

A planner (a model above all) can emit control characters, zero-width marks or
a pasted paragraph as a query. Providers get clean, bounded text instead, and
the request event records what was changed, so nothing is altered silently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import JsonValue

from streams import ToolCall

__all__ = ["MAX_QUERY_CHARS", "clean_call", "clean_text"]

MAX_QUERY_CHARS = 200
"""Longest query sent to a provider; longer ones are cut at a word boundary."""

# C0/C1 controls (tab and newlines become spaces below), zero-width and
# bidirectional-override marks, the BOM.
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
_SPACE = re.compile(r"\s+")


def clean_text(text: str, *, limit: int | None = None) -> tuple[str, tuple[str, ...]]:
    """``text`` without control characters, whitespace collapsed, cut to ``limit``.

    Returns the clean text and a note per kind of change (empty if none).
    """
    notes: list[str] = []
    stripped, n = _CONTROL.subn("", text)
    if n:
        notes.append(f"{n} control character{'s' if n != 1 else ''} removed")
    out = _SPACE.sub(" ", stripped).strip()
    if limit is not None and len(out) > limit:
        cut = out[: limit + 1]
        space = cut.rfind(" ")
        short = (cut[:space] if space > limit // 2 else out[:limit]).rstrip(" ,;:-")
        notes.append(f"cut from {len(out)} to {len(short)} characters at a word boundary")
        out = short
    return out, tuple(notes)


def clean_call(call: ToolCall) -> tuple[ToolCall, tuple[str, ...]]:
    """The call with its text arguments cleaned, and what changed (argument: note)."""
    args: dict[str, JsonValue] = dict(call.args)
    notes: list[str] = []
    for name, limit in _TEXT_ARGS.get(call.tool, {}).items():
        value = args.get(name)
        if not isinstance(value, str):
            continue
        clean, changed = clean_text(value, limit=limit)
        if changed:
            args[name] = clean
            notes.extend(f"{name}: {note}" for note in changed)
    if not notes:
        return call, ()
    return call.model_copy(update={"args": args}), tuple(notes)


_TEXT_ARGS: Mapping[str, Mapping[str, int | None]] = {
    "search": {"query": MAX_QUERY_CHARS},
    "scrape": {"url": 2048, "result_id": 200},
    "read": {"chunk_id": 300},
}
