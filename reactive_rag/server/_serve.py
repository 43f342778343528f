"""Serving the app until SIGINT/SIGTERM: the one path ``reactive-rag serve`` and
:func:`reactive_rag.serve` share (bind first, JSON problems, faces mounted by the caller)."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import Callable, Sequence

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from ._app import create_app
from ._bind import bind_listener
from ._config import ServerConfig
from ._problems import ProblemAppRunner
from ._redact import RedactingAccessLogger

__all__ = ["serve"]

_LOG = logging.getLogger("reactive_rag.server")


def serve(config: ServerConfig | None = None, *,
          mounts: Sequence[Callable[[web.Application], None]] = ()) -> None:
    """Serve the HTTP API and the web page until SIGINT or SIGTERM.

    ``config`` defaults to ``ServerConfig()``: one open ``default`` tenant on
    127.0.0.1:8080 over the default index and run store. The port is bound before
    the store is opened or any work starts, so a taken port raises
    :class:`~reactive_rag.server.BindError` at once; a bad config raises
    :class:`~reactive_rag.server.ConfigError`. ``mounts`` add routes before start-up
    (the MCP face mounts ``/mcp`` this way: it sits above the server).
    """
    config = config or ServerConfig()
    app = create_app(config)  # builds each tenant's searcher and chat client, or refuses
    if config.open_mode and config.host != "127.0.0.1":
        _LOG.warning("host %s ignored: without tenants the server only listens on 127.0.0.1",
                     config.host)
    for mount in mounts:
        mount(app)
    listener = bind_listener(config.bind_host, config.port)
    _run_app(app, listener, access_log_class=RedactingAccessLogger,
             print=lambda msg: _LOG.info("%s (store: %s)", msg.strip(), config.store_label()))


def _run_app(app: web.Application, listener: socket.socket, *,
             access_log_class: type[AbstractAccessLogger],
             print: Callable[[str], None]) -> None:
    """``web.run_app``, served by :class:`ProblemAppRunner`.

    ``web.run_app`` builds its own ``AppRunner``, whose connections answer a
    request aiohttp's parser rejects with ``text/plain``; this one answers
    them as JSON problems. Same defaults as ``run_app`` (keep-alive 75 s,
    shutdown timeout 60 s) and the same exit: SIGINT or SIGTERM stops
    listening, closes the app (runs cancelled, store closed) and returns.
    """

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        runner = ProblemAppRunner(app, access_log_class=access_log_class, keepalive_timeout=75.0)
        try:
            await runner.setup()
            try:
                site = web.SockSite(runner, listener)
                await site.start()
                print(f"======== Running on {site.name} ========\n(Press CTRL+C to quit)")
                await stop.wait()
            finally:
                await runner.cleanup()
        finally:
            listener.close()

    asyncio.run(run())
