"""Reading a run export (``GET /v1/runs/{id}/export``) for ``reactive-rag replay --from-file``.

An export is NDJSON: one event per line in the JSON codec (:func:`streams.decode_json`),
one run's events in ``seq`` order. Every line is checked before anything is shown,
so a damaged file is one clear line naming the first bad line, never half a replay.
"""

from __future__ import annotations

from pathlib import Path

from streams import DecodeError, Event, decode_json

__all__ = ["ExportFileError", "read_export"]

_MAX_REASON = 200


class ExportFileError(ValueError):
    """The file is not a run export; the message is one line naming the file (and line)."""


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_REASON else flat[:_MAX_REASON - 3] + "..."


def read_export(path: Path) -> list[Event]:
    """The events of the export at ``path``, checked: one run, ``seq`` strictly increasing.

    Blank lines are skipped (a trailing newline is not an event).

    Raises:
        ExportFileError: unreadable, empty, a line that is not an event, or an
            event of another run or out of order (the message names the line).
    """
    events: list[Event] = []
    try:
        with path.open("rb") as lines:
            for number, raw in enumerate(lines, 1):
                if not raw.strip():
                    continue
                try:
                    event = decode_json(raw)
                except DecodeError as exc:
                    raise ExportFileError(f"{path}: line {number}: {_one_line(str(exc))}") \
                        from None
                if events and event.run_id != events[0].run_id:
                    raise ExportFileError(
                        f"{path}: line {number}: an event of run {event.run_id!r} in the "
                        f"export of run {events[0].run_id!r}")
                if events and event.seq <= events[-1].seq:
                    raise ExportFileError(
                        f"{path}: line {number}: seq {event.seq} after seq {events[-1].seq} "
                        "(an export is in seq order)")
                events.append(event)
    except OSError as exc:
        raise ExportFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not events:
        raise ExportFileError(f"{path}: no events (is it an export of GET "
                              "/v1/runs/{id}/export?)")
    return events
