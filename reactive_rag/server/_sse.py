"""``GET /v1/runs/{id}/events``: a run's events as Server-Sent Events.

Each event is ``id: <seq>``, ``event: <type>``, ``data: <event JSON>``; a
client resumes with ``Last-Event-ID`` (browsers send it by themselves) or
``?after=N``. The stream ends after ``run.finished``. A client that cannot keep
up is detached with a final ``event: detached`` saying why; the run never
waits for it.

:class:`SseWriter` and :func:`relay` are the one way a face streams a run over
SSE (the native events here, AG-UI, the OpenAI-compatible chunks, A2A): they
differ only in how events are framed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence

from aiohttp import web

from streams import Event, encode_json

from ._feed import EventFeed

__all__ = [
    "KEEP_ALIVE",
    "STREAM_HEADERS",
    "ClientGone",
    "SseWriter",
    "format_event",
    "relay",
    "serve_sse",
]


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

STREAM_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                  "X-Accel-Buffering": "no"}
"""Headers of every SSE response (``X-Accel-Buffering``: a proxy must not hold events back)."""

KEEP_ALIVE = b": keep-alive\n\n"


def _fits(request: web.Request, data: bytes) -> bool:
    """True if writing ``data`` now cannot wait for the client (its socket keeps up)."""
    transport = request.transport
    return transport is not None and not transport.is_closing() and \
        transport.get_write_buffer_size() + len(data) < _UNBLOCKED_BYTES


class ClientGone(Exception):
    """The client left, or (``stalled``) one write to it took longer than the server waits."""

    def __init__(self, reason: str, *, stalled: bool = False) -> None:
        super().__init__(reason)
        self.stalled = stalled


class SseWriter:
    """One client's SSE response, written with a time limit per write.

    Every face that streams a run over SSE (the native events, AG-UI, the
    OpenAI-compatible chunks, A2A) writes through this: a client whose socket
    does not take a write within ``write_timeout_s`` is gone, and the run never
    waits for it.
    """

    def __init__(self, request: web.Request, *, write_timeout_s: float,
                 headers: Mapping[str, str] | None = None) -> None:
        self.request = request
        self.write_timeout_s = write_timeout_s
        self.response = web.StreamResponse(headers={**STREAM_HEADERS, **(headers or {})})

    async def prepare(self) -> web.StreamResponse:
        """Send the status line and headers (from here on errors go in the stream)."""
        await self.response.prepare(self.request)
        return self.response

    async def send(self, data: bytes) -> None:
        """Write ``data``; raises :class:`ClientGone` when the client left or stalled."""
        try:
            if _fits(self.request, data):  # cannot block: no timer to arm and cancel
                await self.response.write(data)
            else:
                async with asyncio.timeout(self.write_timeout_s):
                    await self.response.write(data)
        except TimeoutError as exc:
            raise ClientGone(f"client too slow: one write took over "
                             f"{self.write_timeout_s:g} s", stalled=True) from exc
        except (ConnectionError, RuntimeError) as exc:
            raise ClientGone("the client left") from exc

    async def send_last(self, data: bytes) -> None:
        """Write a closing notice to a client that may be stalled: a second at most."""
        with contextlib.suppress(TimeoutError, ConnectionError, RuntimeError):
            await asyncio.wait_for(self.response.write(data), min(1.0, self.write_timeout_s))

    async def finish(self) -> None:
        """End the response (a client that left already is no error)."""
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.response.write_eof()


async def relay(feed: EventFeed, writer: SseWriter, frame: Callable[[Sequence[Event]], bytes],
                *, keepalive_s: float, ends: Callable[[Event], bool] | None = None) -> None:
    """Write ``feed``'s events as ``frame`` frames them until the feed ends or an event
    ``ends`` the stream, with a keep-alive comment every ``keepalive_s`` of quiet.

    A client too slow to take a write is detached (``feed.detached_reason`` says
    why; the caller tells it in its own framing). Raises :class:`ClientGone`
    when the client left.
    """
    while True:
        try:
            events = await feed.get_batch(keepalive_s)
        except TimeoutError:
            data = KEEP_ALIVE
            events = []
        else:
            if not events:
                return
            if ends is not None:
                last = next((i for i, e in enumerate(events) if ends(e)), None)
                events = events if last is None else events[: last + 1]
            data = frame(events)
        try:
            await writer.send(data)
        except ClientGone as exc:
            if exc.stalled:
                feed.detach(str(exc))
                return
            raise
        if ends is not None and events and ends(events[-1]):
            return


async def serve_sse(request: web.Request, feed: EventFeed, *, keepalive_s: float,
                    write_timeout_s: float) -> web.StreamResponse:
    """Write ``feed`` to the client until the run ends, the client leaves, or it is detached."""
    writer = SseWriter(request, write_timeout_s=write_timeout_s)
    await writer.prepare()
    try:
        await writer.send(b"retry: 1000\n\n")
        await relay(feed, writer, lambda events: b"".join(format_event(e) for e in events),
                    keepalive_s=keepalive_s)
    except ClientGone:  # the client left: the run goes on
        return writer.response
    if feed.detached_reason is not None:
        body = json.dumps({"reason": feed.detached_reason})
        await writer.send_last(f": detached\nevent: detached\ndata: {body}\n\n".encode())
    await writer.finish()
    return writer.response
