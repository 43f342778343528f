"""The SSRF suite: every hostile target is refused or cut with a typed error, never a hang.

No test touches the network: refused addresses never get a connection attempt,
names resolve through an injected resolver, and the only server is on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestServer

from actors.scrape import (
    BlockedAddress,
    BlockedScheme,
    BodyTooLarge,
    FetchConfig,
    Fetcher,
    FetchTimeout,
    ScrapeError,
    TooManyRedirects,
    UnsupportedContentType,
    UrlGuard,
)

from ._scrape_fixtures import FakeResolver, ServerState, local_server
from .test_scrape_guard import PRIVATE_URLS

LOCAL = UrlGuard.allowing("127.0.0.1")  # tests opt out for their own server only
NEVER_HANG_S = 10.0


@pytest.fixture
async def server() -> AsyncIterator[tuple[TestServer, ServerState]]:
    async with local_server() as s:
        yield s


async def fetch_error(fetcher: Fetcher, url: str) -> ScrapeError:
    async with asyncio.timeout(NEVER_HANG_S):
        with pytest.raises(ScrapeError) as info:
            await fetcher.fetch(url)
    return info.value


@pytest.mark.parametrize("url", PRIVATE_URLS)
async def test_direct_private_addresses_are_refused_before_connecting(url: str) -> None:
    resolver = FakeResolver({})
    async with Fetcher(resolver=resolver) as f:
        err = await fetch_error(f, url)
    assert isinstance(err, BlockedAddress)
    assert resolver.asked == []  # refused before any DNS lookup or connection


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/", "gopher://x:70/_",
                                 "data:text/html,hi"])
async def test_non_http_schemes_are_refused(url: str) -> None:
    async with Fetcher() as f:
        assert isinstance(await fetch_error(f, url), BlockedScheme)


async def test_the_default_guard_refuses_even_the_local_test_server(server) -> None:  # type: ignore[no-untyped-def]
    srv, state = server
    async with Fetcher() as f:
        assert isinstance(await fetch_error(f, str(srv.make_url("/article"))), BlockedAddress)
    assert state.requests == []


@pytest.mark.parametrize(
    "addresses",
    [["10.0.0.7"], ["127.0.0.1"], ["169.254.169.254"], ["::1"], ["fd00::5"],
     ["93.184.216.34", "127.0.0.1"], ["127.0.0.1", "93.184.216.34"]],
)
async def test_names_resolving_to_private_addresses_are_refused(
    server, addresses: list[str]  # type: ignore[no-untyped-def]
) -> None:
    srv, state = server
    resolver = FakeResolver({"rebind.example": addresses})
    async with Fetcher(resolver=resolver) as f:
        err = await fetch_error(f, f"http://rebind.example:{srv.port}/article")
    assert isinstance(err, BlockedAddress)
    assert resolver.asked == ["rebind.example"]
    assert state.requests == []  # the server never saw a request


async def test_a_name_on_an_allowed_network_is_fetched_with_its_own_host_header(server) -> None:  # type: ignore[no-untyped-def]
    srv, state = server
    resolver = FakeResolver({"site.test": ["127.0.0.1"]})
    async with Fetcher(FetchConfig(guard=LOCAL), resolver=resolver) as f:
        page = await f.fetch(f"http://site.test:{srv.port}/article")
    assert "shrinking delta" in page.text
    assert state.headers[-1]["Host"] == f"site.test:{srv.port}"


@pytest.mark.parametrize(
    "target",
    ["http://10.0.0.1/secret", "http://169.254.169.254/latest/meta-data/", "http://[::1]/",
     "http://127.0.0.2/", "http://0x7f.2/", "http://2886729729/", "http://localhost/", "file:///etc/passwd",
     "gopher://127.0.0.1:6379/_FLUSHALL"],
)
async def test_redirect_out_of_the_allow_list_is_refused(server, target: str) -> None:  # type: ignore[no-untyped-def]
    srv, state = server
    async with Fetcher(FetchConfig(guard=LOCAL)) as f:
        err = await fetch_error(f, str(srv.make_url("/redirect").with_query(to=target)))
    assert isinstance(err, BlockedAddress | BlockedScheme)
    assert len(state.requests) == 1  # only the first hop was fetched


async def test_redirect_to_a_name_resolving_privately_is_refused(server) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    resolver = FakeResolver({"internal.example": ["10.1.1.1"]})
    async with Fetcher(FetchConfig(guard=LOCAL), resolver=resolver) as f:
        err = await fetch_error(
            f, str(srv.make_url("/redirect").with_query(to="http://internal.example/")))
    assert isinstance(err, BlockedAddress)


async def test_redirect_loops_are_cut(server) -> None:  # type: ignore[no-untyped-def]
    srv, state = server
    async with Fetcher(FetchConfig(guard=LOCAL)) as f:
        err = await fetch_error(f, str(srv.make_url("/loop-a")))
    assert isinstance(err, TooManyRedirects)
    assert "loop" in str(err)
    assert len(state.requests) == 2


async def test_too_many_redirects_are_cut(server) -> None:  # type: ignore[no-untyped-def]
    srv, state = server
    async with Fetcher(FetchConfig(guard=LOCAL, max_redirects=3)) as f:
        err = await fetch_error(f, str(srv.make_url("/chain/10")))
        assert isinstance(err, TooManyRedirects)
        assert len(state.requests) == 4  # the original + 3 redirects
        page = await f.fetch(str(srv.make_url("/chain/2")))  # within the cap: followed
    assert page.redirects == 3 and page.final_url.endswith("/article")


@pytest.mark.parametrize("path", ["/big-declared", "/big-chunked"])
async def test_oversized_bodies_are_cut(server, path: str) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    async with Fetcher(FetchConfig(guard=LOCAL, max_bytes=1024 * 1024)) as f:
        assert isinstance(await fetch_error(f, str(srv.make_url(path))), BodyTooLarge)


async def test_gzip_bomb_is_cut_by_decompressed_size(server) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    async with Fetcher(FetchConfig(guard=LOCAL, max_bytes=2 * 1024 * 1024)) as f:
        err = await fetch_error(f, str(srv.make_url("/bomb")))
    assert isinstance(err, BodyTooLarge)
    assert "decompressed" in str(err)


async def test_slow_drip_body_is_cut_by_the_total_deadline(server) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    async with Fetcher(FetchConfig(guard=LOCAL, timeout_s=0.5)) as f:
        err = await fetch_error(f, str(srv.make_url("/drip")))
    assert isinstance(err, FetchTimeout) and isinstance(err, TimeoutError)
    assert err.retryable


async def test_caller_deadline_cuts_before_the_fetch_timeout(server) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    loop = asyncio.get_running_loop()
    async with Fetcher(FetchConfig(guard=LOCAL, timeout_s=60)) as f:
        async with asyncio.timeout(NEVER_HANG_S):
            with pytest.raises(FetchTimeout):
                await f.fetch(str(srv.make_url("/hang")), deadline=loop.time() + 0.3)


@pytest.mark.parametrize("path", ["/json", "/image", "/pdf", "/no-type", "/brotli"])
async def test_wrong_content_types_and_encodings_are_refused(server, path: str) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    async with Fetcher(FetchConfig(guard=LOCAL)) as f:
        assert isinstance(await fetch_error(f, str(srv.make_url(path))), UnsupportedContentType)


async def test_pdf_is_accepted_only_when_enabled(server) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    async with Fetcher(FetchConfig(guard=LOCAL, allow_pdf=True)) as f:
        page = await f.fetch(str(srv.make_url("/pdf")))
    assert page.content_type == "application/pdf" and page.body.startswith(b"%PDF")


async def test_one_fetcher_survives_every_hostile_target_and_still_serves(server) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    hostile = ["/bomb", "/big-chunked", "/drip", "/loop-a", "/json", "/status/500"]
    cfg = FetchConfig(guard=LOCAL, timeout_s=0.5, max_bytes=1024 * 1024)
    async with Fetcher(cfg) as f:
        async with asyncio.timeout(NEVER_HANG_S):
            results = await asyncio.gather(
                *(f.fetch(str(srv.make_url(p))) for p in hostile), return_exceptions=True)
        assert all(isinstance(r, ScrapeError) for r in results)
        page = await f.fetch(str(srv.make_url("/article")))
    assert "sediment" in page.text


RAW_REPLIES = {
    "garbage": b"this is not HTTP at all\r\n\r\n",
    "truncated": (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5000\r\n\r\n"
                  b"<p>only a little"),
    "huge-header": b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n",
    "header-drip": b"HTTP/1.1 200 OK\r\n",  # then silence: headers never finish
    "bad-gzip": (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\n"
                 b"Content-Length: 12\r\n\r\nnot gzip!!!!"),
    "bad-location": b"HTTP/1.1 302 Found\r\nLocation: http://[::1\r\nContent-Length: 0\r\n\r\n",
}


@pytest.mark.parametrize("kind", sorted(RAW_REPLIES))
async def test_broken_servers_give_typed_errors(kind: str) -> None:
    stop = asyncio.Event()
    handlers: list[asyncio.Task[None]] = []

    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(RAW_REPLIES[kind])
            await writer.drain()
            if kind == "header-drip":
                await stop.wait()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.append(task)
        await reply(reader, writer)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with Fetcher(FetchConfig(guard=LOCAL, timeout_s=0.5)) as f:
            err = await fetch_error(f, f"http://127.0.0.1:{port}/")
    finally:
        stop.set()
        await asyncio.gather(*handlers, return_exceptions=True)
        server.close()
        await server.wait_closed()
    expected = {"header-drip": FetchTimeout}.get(kind)
    if expected is not None:
        assert isinstance(err, expected)
    assert type(err).__name__ in {"FetchFailed", "FetchTimeout"}, err
