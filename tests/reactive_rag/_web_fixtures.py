"""Fixtures for the web page and task tests: a small corpus, a stand-in API, a cuttable proxy.

The stand-in app implements the run API the page uses (``POST /v1/runs``,
``GET /v1/runs/{id}``, SSE events with ``Last-Event-ID``/``?after=`` resume,
cancel) over a real :class:`~reactive_rag.Engine`, so the page is tested
against real runs even where the full server is not wanted. The
:class:`DropProxy` sits between the browser and the app and cuts every TCP
connection on demand: a real network drop, whatever serves the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from actors.models import HashingEmbedder
from reactive_rag.engine._engine import Engine, RunHandle
from reactive_rag.index import CorpusIndex
from reactive_rag.run import RunConfigError
from reactive_rag.web import add_web_routes
from streams import AsyncSubscriber, Event, Hit, encode_json

from ._corpus import DOCS


class SlowProvider:
    """A web-like search provider that takes a while and finds nothing.

    Makes a run last long enough (each search waits for it) for a test to
    cut the connection in the middle.
    """

    name = "slow-web"

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    async def search(self, query: str, k: int, deadline: float) -> Sequence[Hit]:
        await asyncio.sleep(self.delay_s)
        return []


_ENGINE = web.AppKey("engine", Engine)
_HANDLES = web.AppKey("handles", dict[str, RunHandle])


def _problem(status: int, code: str, detail: str) -> web.Response:
    return web.json_response({"type": "about:blank", "status": status, "code": code,
                              "detail": detail}, status=status,
                             content_type="application/problem+json")


def _handle(request: web.Request) -> RunHandle:
    handle = request.app[_HANDLES].get(request.match_info["run_id"])
    if handle is None:
        raise web.HTTPNotFound(text=json.dumps({"code": "run_not_found", "detail": "no such run"}),
                               content_type="application/problem+json")
    return handle


async def _create_run(request: web.Request) -> web.Response:
    body = await request.json()
    try:
        handle = request.app[_ENGINE].start(
            str(body.get("question", "")), mode=body.get("mode", "agent"),
            collections=list(body.get("collections") or ["demo"]), budget=body.get("budget"))
    except RunConfigError as exc:
        return _problem(422, "invalid_run", str(exc))
    request.app[_HANDLES][handle.run_id] = handle
    base = f"/v1/runs/{handle.run_id}"
    return web.json_response({"run_id": handle.run_id, "links": {
        "self": base, "events": f"{base}/events", "cancel": f"{base}/cancel"}}, status=201)


async def _get_run(request: web.Request) -> web.Response:
    handle = _handle(request)
    finished = handle.stream.finished
    return web.json_response({
        "run_id": handle.run_id,
        "status": "finished" if finished else "running",
        "outcome": finished.outcome if finished else None,
        "answer": finished.answer if finished else "",
        "reason": finished.reason if finished else "",
        "last_seq": handle.stream.last_seq,
    })


def _after(request: web.Request) -> int:
    raw = request.headers.get("Last-Event-ID") or request.query.get("after") or "0"
    try:
        return max(0, int(raw))
    except ValueError:
        return 0


async def _events(request: web.Request) -> web.StreamResponse:
    handle = _handle(request)
    after = _after(request)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
    await response.prepare(request)

    async def sink(event: Event) -> None:
        frame = f"id: {event.seq}\nevent: {event.type}\ndata: {encode_json(event)}\n\n"
        await response.write(frame.encode())

    subscriber = AsyncSubscriber(sink, name=f"sse:{id(response)}", maxsize=4096)
    subscriber.attach(handle.stream, after_seq=after)
    try:
        await subscriber.wait()
    finally:
        await subscriber.aclose()
    if subscriber.detached_reason is None:
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
    return response


async def _cancel(request: web.Request) -> web.Response:
    accepted = _handle(request).cancel("cancelled from the web page")
    return web.json_response({"accepted": accepted}, status=202 if accepted else 409)


def standin_app(engine: Engine) -> web.Application:
    """The run API subset the page uses, over ``engine``, plus the page itself."""
    app = web.Application()
    app[_ENGINE] = engine
    app[_HANDLES] = {}
    app.router.add_post("/v1/runs", _create_run)
    app.router.add_get("/v1/runs/{run_id}", _get_run)
    app.router.add_get("/v1/runs/{run_id}/events", _events)
    app.router.add_post("/v1/runs/{run_id}/cancel", _cancel)
    add_web_routes(app)

    async def wait_runs(app: web.Application) -> None:
        for handle in app[_HANDLES].values():
            handle.cancel("test server shutting down")
            with contextlib.suppress(Exception):
                await handle.wait()

    app.on_shutdown.append(wait_runs)
    return app


def demo_index(root: Any) -> CorpusIndex:
    """A four-document ``demo`` collection with the offline hashing embedder."""
    index = CorpusIndex(root, HashingEmbedder())
    index.index_documents("demo", DOCS)
    return index


class DropProxy:
    """A TCP proxy on 127.0.0.1 that can cut every connection through it at once.

    While :attr:`refusing`, new connections are closed as soon as they arrive,
    so a client sees the network gone until :meth:`restore`.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.refusing = False
        self.drops = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> DropProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        pumps = [asyncio.create_task(self._pump(reader, up_writer)),
                 asyncio.create_task(self._pump(up_reader, writer))]
        self._tasks.update(pumps)
        try:
            await asyncio.gather(*pumps, return_exceptions=True)
        finally:
            self._tasks.difference_update(pumps)
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.close()
                with contextlib.suppress(ConnectionError, OSError):
                    await w.wait_closed()

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    def drop(self) -> None:
        """Cut every open connection (both sides) and refuse new ones."""
        self.refusing = True
        self.drops += 1
        for writer in list(self._writers):
            transport = writer.transport
            transport.abort()

    def restore(self) -> None:
        """Accept connections again."""
        self.refusing = False

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.drop()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._server is not None:
            await self._server.wait_closed()
