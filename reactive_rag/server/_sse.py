"""``GET /v1/runs/{id}/events``: a run's events as Server-Sent Events.

Each event is ``id: <seq>``, ``event: <type>``, ``data: <event JSON>``; a
client resumes with ``Last-Event-ID`` (browsers send it by themselves) or
``?after=N``. The stream ends after ``run.finished``. A client that cannot keep
up is detached with a final ``event: detached`` saying why; the run never
waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from aiohttp import web

from streams import Event, encode_json

from ._feed import EventFeed

__all__ = ["format_event", "serve_sse"]


def format_event(event: Event, *, event_id: str | None = None) -> bytes:
    """One SSE message for ``event`` (the JSON never contains a raw newline).

    ``event_id``: the message's ``id`` (default: the event's ``seq``).
    """
    sse_id = event.seq if event_id is None else event_id
    return f"id: {sse_id}\nevent: {event.type}\ndata: {encode_json(event)}\n\n".encode()


async def serve_sse(request: web.Request, feed: EventFeed, *, keepalive_s: float,
                    write_timeout_s: float) -> web.StreamResponse:
    """Write ``feed`` to the client until the run ends, the client leaves, or it is detached."""
    response = web.StreamResponse(headers={
        "Content-Type": "text/event-stream",
        "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no",
    })
    await response.prepare(request)
    try:
        await response.write(b"retry: 1000\n\n")
        while True:
            try:
                event = await feed.get(keepalive_s)
            except TimeoutError:
                await asyncio.wait_for(response.write(b": keep-alive\n\n"), write_timeout_s)
                continue
            if event is None:
                break
            try:
                await asyncio.wait_for(response.write(format_event(event)), write_timeout_s)
            except TimeoutError:
                feed.detach(f"client too slow: one write took over {write_timeout_s:g} s")
                break
        if feed.detached_reason is not None:
            body = json.dumps({"reason": feed.detached_reason})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    response.write(f": detached\nevent: detached\ndata: {body}\n\n".encode()),
                    min(1.0, write_timeout_s))
        await response.write_eof()
    except (ConnectionError, RuntimeError):  # the client left: the run goes on
        pass
    return response
