"""Local servers, pages and a fake DNS resolver for the scraper tests (no network)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gzip
import socket
import zlib
from collections.abc import AsyncIterator, Mapping, Sequence

from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.test_utils import TestServer

from actors.scrape._guard import static_results

MAIN_PARAGRAPHS = (
    "The river delta formed over roughly seven thousand years as sediment carried from the "
    "highlands settled where the current slowed near the coast.",
    "Farmers in the region adapted by building raised fields, which kept crops above the "
    "seasonal floods while the silt renewed the soil every spring.",
    "Recent surveys show that the delta is now shrinking, because upstream dams trap most "
    "of the sediment that once replenished the shoreline.",
    "Engineers have proposed controlled releases of sediment-laden water to slow the loss, "
    "although the cost and the effect on fisheries remain disputed.",
)
BOILERPLATE = (
    "Accept all cookies",
    "Subscribe to our newsletter for weekly updates",
    "Copyright 2024 Example Media Group. All rights reserved.",
    "Share on Facebook",
    "Related: Ten places to visit this summer",
)


def article_html(paragraphs: Sequence[str] = MAIN_PARAGRAPHS, title: str = "The shrinking delta",
                 *, repeat: int = 1) -> str:
    """A realistic news page: menus, cookie banner, sidebar, comments, footer, scripts."""
    body = "\n".join(f"<p>{p}</p>" for _ in range(repeat) for p in paragraphs)
    nav = "".join(f'<li><a href="/s/{i}">Section {i}</a></li>' for i in range(12))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title} | Example News</title>
<style>body {{ font-family: sans-serif }} .x {{ color: red }}</style>
<script>window.dataLayer = [{{"event": "pageview"}}]; function track() {{ return 1 }}</script>
</head><body>
<div class="cookie-banner"><p>{BOILERPLATE[0]}</p><button>OK</button></div>
<header class="site-header"><a href="/">Example News</a><nav><ul>{nav}</ul></nav></header>
<div class="layout">
<main><article>
<h1>{title}</h1>
<p class="byline">By A. Writer, 3 March 2024</p>
{body}
<div class="share-tools"><a href="#">{BOILERPLATE[3]}</a></div>
</article>
<section class="related"><h2>Related</h2>
<ul><li><a href="/r/1">{BOILERPLATE[4]}</a></li></ul></section>
<section id="comments"><h2>Comments</h2><p>First! Great article, thanks.</p></section>
</main>
<aside class="sidebar"><div class="newsletter"><p>{BOILERPLATE[1]}</p>
<form><input name=e></form></div></aside>
</div>
<footer><p>{BOILERPLATE[2]}</p><ul><li><a href="/about">About</a></li></ul></footer>
<script>track();</script>
</body></html>"""


@functools.cache
def gzip_bomb(decompressed_mb: int = 32) -> bytes:
    """A small gzip body that inflates to ``decompressed_mb`` MiB of zeros."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * (1024 * 1024)
    return b"".join([*(z.compress(block) for _ in range(decompressed_mb)), z.flush()])


class FakeResolver(AbstractResolver):
    """Maps names to fixed addresses, like a DNS server an attacker controls."""

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self.table = dict(table)
        self.asked: list[str] = []

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        self.asked.append(host)
        if host not in self.table:
            raise OSError(f"fake DNS: no such host {host}")
        return static_results(host, port, self.table[host])

    async def close(self) -> None:
        return None


class ServerState:
    """What the test server saw (requests, headers, concurrency)."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.delay = 0.0


def make_app(state: ServerState) -> web.Application:
    app = web.Application()
    routes = web.RouteTableDef()

    @web.middleware
    async def record(request: web.Request, handler):  # type: ignore[no-untyped-def]
        state.requests.append(request.path_qs)
        state.headers.append(dict(request.headers))
        state.in_flight += 1
        state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            if state.delay:
                await asyncio.sleep(state.delay)
            return await handler(request)
        finally:
            state.in_flight -= 1

    @routes.get("/article")
    @routes.get("/article/{n}")
    async def article(request: web.Request) -> web.Response:
        n = request.match_info.get("n", "")
        return web.Response(text=article_html(title=f"The shrinking delta {n}".strip()),
                            content_type="text/html")

    @routes.get("/long")
    async def long(request: web.Request) -> web.Response:
        return web.Response(text=article_html(repeat=12), content_type="text/html")

    @routes.get("/plain")
    async def plain(request: web.Request) -> web.Response:
        return web.Response(text="\n\n".join(MAIN_PARAGRAPHS), content_type="text/plain")

    @routes.get("/latin1-header")
    async def latin1_header(request: web.Request) -> web.Response:
        html = "<html><body><article><p>Café crème à Zürich, naïve façade.</p></article></body>"
        return web.Response(body=html.encode("latin-1"),
                            headers={"Content-Type": "text/html; charset=ISO-8859-1"})

    @routes.get("/meta-charset")
    async def meta_charset(request: web.Request) -> web.Response:
        html = ('<html><head><meta http-equiv="Content-Type" content="text/html; '
                'charset=windows-1251"></head><body><p>Привет, мир! Это тестовая страница '
                "на русском языке.</p></body></html>")
        return web.Response(body=html.encode("cp1251"), headers={"Content-Type": "text/html"})

    @routes.get("/undeclared")
    async def undeclared(request: web.Request) -> web.Response:
        text = ("Съешь же ещё этих мягких французских булок, да выпей чаю. " * 20)
        html = f"<html><body><p>{text}</p></body></html>"
        return web.Response(body=html.encode("cp1251"), headers={"Content-Type": "text/html"})

    @routes.get("/gzip")
    async def gzipped(request: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(article_html().encode()),
                            headers={"Content-Type": "text/html", "Content-Encoding": "gzip"})

    @routes.get("/deflate-raw")
    async def deflate_raw(request: web.Request) -> web.Response:
        z = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        body = z.compress(article_html().encode()) + z.flush()
        return web.Response(body=body,
                            headers={"Content-Type": "text/html", "Content-Encoding": "deflate"})

    @routes.get("/bomb")
    async def bomb(request: web.Request) -> web.Response:
        return web.Response(body=gzip_bomb(),
                            headers={"Content-Type": "text/html", "Content-Encoding": "gzip"})

    @routes.get("/brotli")
    async def brotli(request: web.Request) -> web.Response:
        return web.Response(body=b"\x0b\x02\x80hello\x03",
                            headers={"Content-Type": "text/html", "Content-Encoding": "br"})

    @routes.get("/big-declared")
    async def big_declared(request: web.Request) -> web.Response:
        return web.Response(body=b"<p>" + b"x" * (3 * 1024 * 1024),
                            headers={"Content-Type": "text/html"})

    @routes.get("/big-chunked")
    async def big_chunked(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        with contextlib.suppress(ConnectionError):
            for _ in range(400):  # 25 MiB if nobody stops reading
                await resp.write(b"<p>" + b"y" * 65533)
        return resp

    @routes.get("/drip")
    async def drip(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        await resp.prepare(request)
        with contextlib.suppress(ConnectionError):
            for _ in range(600):  # one byte every 100 ms: a minute if nobody cuts it
                await resp.write(b"a")
                await asyncio.sleep(0.1)
        return resp

    @routes.get("/hang")
    async def hang(request: web.Request) -> web.Response:
        await asyncio.sleep(60)
        return web.Response(text="late", content_type="text/html")

    @routes.get("/json")
    async def json(request: web.Request) -> web.Response:
        return web.json_response({"a": 1})

    @routes.get("/image")
    async def image(request: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG\r\n\x1a\n", content_type="image/png")

    @routes.get("/pdf")
    async def pdf(request: web.Request) -> web.Response:
        return web.Response(body=b"%PDF-1.4\n%%EOF", content_type="application/pdf")

    @routes.get("/no-type")
    async def no_type(request: web.Request) -> web.Response:
        resp = web.Response(body=b"<p>hello</p>")
        resp.headers.popall("Content-Type", None)
        return resp

    @routes.get("/status/{code}")
    async def status(request: web.Request) -> web.Response:
        return web.Response(status=int(request.match_info["code"]), text="nope",
                            content_type="text/html")

    @routes.get("/redirect")
    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query["to"])

    @routes.get("/loop-a")
    async def loop_a(request: web.Request) -> web.Response:
        raise web.HTTPFound("/loop-b")

    @routes.get("/loop-b")
    async def loop_b(request: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("/loop-a")

    @routes.get("/chain/{n}")
    async def chain(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if n == 0:
            raise web.HTTPFound("/article")
        raise web.HTTPTemporaryRedirect(f"/chain/{n - 1}")

    @routes.get("/set-cookie")
    async def set_cookie(request: web.Request) -> web.Response:
        resp = web.HTTPFound("/echo")
        resp.set_cookie("session", "secret-token")
        raise resp

    @routes.get("/echo")
    async def echo(request: web.Request) -> web.Response:
        lines = [f"{k}: {v}" for k, v in request.headers.items()]
        return web.Response(text="\n".join(["headers seen by the server:", *lines]),
                            content_type="text/plain")

    @routes.get("/empty")
    async def empty(request: web.Request) -> web.Response:
        return web.Response(text="<html><head><script>x()</script></head><body><nav></nav>"
                                 "<img src=a.png></body></html>", content_type="text/html")

    app.router.add_routes(routes)
    app.middlewares.append(record)
    return app


@contextlib.asynccontextmanager
async def local_server() -> AsyncIterator[tuple[TestServer, ServerState]]:
    """A real HTTP server on 127.0.0.1 serving every fixture route."""
    state = ServerState()
    gzip_bomb()  # build it before serving, not inside a handler on the loop
    server = TestServer(make_app(state), host="127.0.0.1")
    await server.start_server()
    try:
        yield server, state
    finally:
        await server.close()
