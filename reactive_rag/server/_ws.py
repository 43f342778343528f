"""``GET /v1/runs/{id}/ws``: a run's events over a WebSocket.

The server sends each event as one JSON text message (the same JSON as SSE
``data``), resumable with ``?after=N``; after ``run.finished`` it closes with
1000. A client may send ``{"cancel": true}`` to cancel the run and gets
``{"type": "cancel.result", "cancelled": bool}``. A client that cannot keep up
gets ``{"type": "stream.detached", "reason": ...}`` and a 1013 close.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable

from aiohttp import WSCloseCode, WSMsgType, web

from streams import encode_json

from ._feed import EventFeed

__all__ = ["serve_ws"]


async def serve_ws(request: web.Request, ws: web.WebSocketResponse, feed: EventFeed, *,
                   cancel: Callable[[], bool], write_timeout_s: float) -> None:
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
                await ws.send_str(json.dumps({"type": "cancel.result", "cancelled": cancel()}))
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
