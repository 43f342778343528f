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
from collections import OrderedDict

from aiohttp import web

from streams import Event, encode_json

from ._feed import EventFeed

__all__ = ["format_event", "serve_sse"]


_ENCODED_MAX = 4096
_encoded: OrderedDict[int, tuple[Event, bytes]] = OrderedDict()
"""Recently framed live events by identity: every subscriber of a run gets the same
committed event objects, so each is encoded once, not once per client."""


def format_event(event: Event, *, event_id: str | None = None) -> bytes:
    """One SSE message for ``event`` (the JSON never contains a raw newline).

    ``event_id``: the message's ``id`` (default: the event's ``seq``).
    """
    if event_id is not None:
        return f"id: {event_id}\nevent: {event.type}\ndata: {encode_json(event)}\n\n".encode()
    hit = _encoded.get(id(event))
    if hit is not None and hit[0] is event:
        return hit[1]
    framed = f"id: {event.seq}\nevent: {event.type}\ndata: {encode_json(event)}\n\n".encode()
    _encoded[id(event)] = (event, framed)  # holding the event keeps its id from reuse
    if len(_encoded) > _ENCODED_MAX:
        _encoded.popitem(last=False)
    return framed


_UNBLOCKED_BYTES = 32 * 1024
"""Below half asyncio's default high-water mark (64 KiB) a write only buffers."""


def _fits(request: web.Request, data: bytes) -> bool:
    """True if writing ``data`` now cannot wait for the client (its socket keeps up)."""
    transport = request.transport
    return transport is not None and not transport.is_closing() and \
        transport.get_write_buffer_size() + len(data) < _UNBLOCKED_BYTES


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
                events = await feed.get_batch(keepalive_s)
            except TimeoutError:
                async with asyncio.timeout(write_timeout_s):
                    await response.write(b": keep-alive\n\n")
                continue
            if not events:
                break
            data = b"".join(format_event(e) for e in events)
            try:
                if _fits(request, data):  # cannot block: no timer to arm and cancel
                    await response.write(data)
                else:
                    async with asyncio.timeout(write_timeout_s):
                        await response.write(data)
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
