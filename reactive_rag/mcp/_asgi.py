"""One aiohttp request served by an ASGI application, response streamed as it is sent.

The MCP SDK's Streamable HTTP transport is ASGI; the server is aiohttp. This is the
small bridge between them (HTTP only, no WebSocket, no lifespan: the caller runs the
ASGI app's lifecycle itself). The request body goes to ``receive`` chunk by chunk;
``send`` turns ``http.response.start`` into an aiohttp :class:`~aiohttp.web.StreamResponse`
and writes each body part at once, so an SSE response reaches the client event by event.

After the body, ``receive`` answers ``http.disconnect`` once the response is complete
or the client has gone. aiohttp (without handler cancellation) has no awaitable for a
lost connection, so the transport is checked every ``disconnect_poll_s``; a write to a
closed connection fails at once anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from aiohttp import web

__all__ = ["AsgiApp", "serve_asgi"]

Message = MutableMapping[str, Any]
AsgiApp = Callable[[MutableMapping[str, Any], Callable[[], Awaitable[Message]],
                    Callable[[Message], Awaitable[None]]], Awaitable[None]]


def _scope(request: web.Request, extra: MutableMapping[str, Any]) -> dict[str, Any]:
    transport = request.transport
    peer = transport.get_extra_info("peername") if transport is not None else None
    sock = transport.get_extra_info("sockname") if transport is not None else None
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.raw_path.partition("?")[0].encode("latin-1"),
        "query_string": request.query_string.encode("latin-1"),
        "root_path": "",
        "headers": [(k.lower(), v) for k, v in request.raw_headers],
        "client": (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None,
        "server": (str(sock[0]), int(sock[1])) if isinstance(sock, tuple) else None,
        "state": {},
        **extra,
    }


async def serve_asgi(request: web.Request, app: AsgiApp, *,
                     scope: MutableMapping[str, Any] | None = None,
                     disconnect_poll_s: float = 1.0) -> web.StreamResponse:
    """Answer ``request`` with ``app``; ``scope`` adds keys to the ASGI scope.

    Raises:
        RuntimeError: the app returned without starting a response.
    """
    response: web.StreamResponse | None = None
    complete = asyncio.Event()
    body_done = False

    async def receive() -> Message:
        nonlocal body_done
        if not body_done:
            chunk = await request.content.readany()
            body_done = request.content.at_eof()
            return {"type": "http.request", "body": bytes(chunk), "more_body": not body_done}
        while not complete.is_set():
            transport = request.transport
            if transport is None or transport.is_closing():
                break
            try:
                await asyncio.wait_for(complete.wait(), disconnect_poll_s)
            except TimeoutError:
                continue
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal response
        kind = message["type"]
        if kind == "http.response.start":
            if response is not None:
                raise RuntimeError("http.response.start sent twice")
            started = web.StreamResponse(status=int(message["status"]))
            for name, value in message.get("headers", ()):
                started.headers.add(name.decode("latin-1"), value.decode("latin-1"))
            await started.prepare(request)
            response = started
        elif kind == "http.response.body":
            if response is None:
                raise RuntimeError("http.response.body before http.response.start")
            body = bytes(message.get("body", b""))
            if message.get("more_body", False):
                if body:
                    await response.write(body)
            else:
                await response.write_eof(body)
                complete.set()

    try:
        await app(_scope(request, scope or {}), receive, send)
    finally:
        complete.set()
    if response is None:
        raise RuntimeError("the ASGI application sent no response")
    return response
