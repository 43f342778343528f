"""``GET /v1/runs/{id}/ws``: a run's events over a WebSocket.

The server sends each event as one JSON text message (the same JSON as SSE
``data``), resumable with ``?after=N``; after ``run.finished`` it closes with
1000. A client may send ``{"cancel": true}`` to cancel the run and gets
``{"type": "cancel.result", "cancelled": bool}`` (true: cancelled, or recorded for the
replica running the run; false: it had already ended). A client that cannot keep up
gets ``{"type": "stream.detached", "reason": ...}`` and a 1013 close.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Awaitable, Callable

from aiohttp import WSCloseCode, WSMsgType, web

from streams import encode_json

from ._feed import EventFeed
from ._problems import make_problem

__all__ = ["check_handshake", "serve_ws"]

_WS_KEY = re.compile(r"[A-Za-z0-9+/]{21}[AQgw]==", re.ASCII)
"""A ``Sec-WebSocket-Key``: 16 bytes in canonical base64 (aiohttp would take sloppier ones)."""


def check_handshake(request: web.Request, ws: web.WebSocketResponse) -> None:
    """400 ``websocket_required`` unless ``request`` is a WebSocket handshake ``ws`` accepts.

    Exactly the handshakes the OpenAPI document lists: ``Upgrade: websocket``
    (any case), ``upgrade`` among the ``Connection`` tokens, version 13, 8 or
    7, and a key of 16 bytes in canonical base64 (aiohttp alone would drop
    stray characters from it and take it).
    """
    headers = request.headers
    connection = {t.strip(" \t").lower() for t in headers.get("Connection", "").split(",")}
    if headers.get("Upgrade", "").lower() != "websocket" or "upgrade" not in connection or \
            headers.get("Sec-WebSocket-Version") not in ("13", "8", "7") or \
            _WS_KEY.fullmatch(headers.get("Sec-WebSocket-Key", "")) is None or \
            not ws.can_prepare(request).ok:
        raise make_problem(400, "websocket_required",
                           "open a WebSocket here (Upgrade: websocket, Connection: Upgrade, "
                           "Sec-WebSocket-Version: 13 and a Sec-WebSocket-Key)")


async def serve_ws(request: web.Request, ws: web.WebSocketResponse, feed: EventFeed, *,
                   cancel: Callable[[], Awaitable[bool]], write_timeout_s: float) -> None:
    """Send ``feed`` on ``ws`` while reading client messages; never cancels on disconnect."""

    async def send_events() -> None:
        while True:
            event = await feed.get()
            if event is None:
                break
            await asyncio.wait_for(ws.send_str(encode_json(event)), write_timeout_s)
        if feed.detached_reason is not None:
            with contextlib.suppress(Exception):
                await ws.send_str(json.dumps({"type": "stream.detached",
                                              "reason": feed.detached_reason}))
            await ws.close(code=WSCloseCode.TRY_AGAIN_LATER, message=b"detached")
        else:
            await ws.close(code=WSCloseCode.OK, message=b"run finished")

    sender = asyncio.get_running_loop().create_task(send_events(), name="ws-send")
    try:
        async for msg in ws:
            if msg.type is not WSMsgType.TEXT:
                continue
            try:
                data = json.loads(msg.data)
            except (ValueError, RecursionError):  # a deeply nested frame is just a bad message
                data = None
            if isinstance(data, dict) and data.get("cancel") is True:
                done = await cancel()
                await ws.send_str(json.dumps({"type": "cancel.result", "cancelled": done}))
            else:
                await ws.send_str(json.dumps({"type": "error", "code": "invalid_message",
                                              "detail": 'send {"cancel": true} or nothing'}))
    except (ConnectionError, RuntimeError):
        pass
    finally:
        if not sender.done():
            sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await sender
        if not ws.closed:
            with contextlib.suppress(Exception):
                await ws.close(code=WSCloseCode.GOING_AWAY)
