"""Fetching what a user expects: decoded text, followed redirects, nothing leaked."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestServer

from actors.scrape import FetchConfig, Fetcher, FetchFailed, UrlGuard
from actors.scrape._fetch import detect_charset

from ._scrape_fixtures import ServerState, local_server

LOCAL = UrlGuard.allowing("127.0.0.1")


@pytest.fixture
async def server() -> AsyncIterator[tuple[TestServer, ServerState]]:
    async with local_server() as s:
        yield s


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with Fetcher(FetchConfig(guard=LOCAL)) as f:
        yield f


async def test_html_page_is_fetched_and_decoded(server, fetcher: Fetcher) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    page = await fetcher.fetch(str(srv.make_url("/article")))
    assert page.status == 200 and page.is_html
    assert page.charset == "utf-8"
    assert "<h1>The shrinking delta</h1>" in page.text


@pytest.mark.parametrize(
    ("path", "expected"),
    [("/latin1-header", "Café crème à Zürich"),  # charset from the header
     ("/meta-charset", "Привет, мир!"),  # from <meta http-equiv>
     ("/undeclared", "французских булок")],  # guessed by charset-normalizer
)
async def test_charsets_are_detected(server, fetcher: Fetcher, path: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    page = await fetcher.fetch(str(srv.make_url(path)))
    assert expected in page.text


@pytest.mark.parametrize("path", ["/gzip", "/deflate-raw"])
async def test_compressed_bodies_are_decompressed(server, fetcher: Fetcher, path: str) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    page = await fetcher.fetch(str(srv.make_url(path)))
    assert "sediment" in page.text


async def test_redirect_within_the_allow_list_is_followed(server, fetcher: Fetcher) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    page = await fetcher.fetch(str(srv.make_url("/redirect").with_query(to="/plain")))
    assert page.final_url == str(srv.make_url("/plain"))
    assert page.content_type == "text/plain" and page.redirects == 1


async def test_cookies_are_never_sent_back(server, fetcher: Fetcher) -> None:  # type: ignore[no-untyped-def]
    srv, state = server
    page = await fetcher.fetch(str(srv.make_url("/set-cookie")))
    assert "secret-token" not in page.text
    assert all("Cookie" not in h for h in state.headers)


async def test_url_credentials_are_not_forwarded(server, fetcher: Fetcher) -> None:  # type: ignore[no-untyped-def]
    srv, state = server
    url = srv.make_url("/echo").with_user("alice").with_password("s3cret")
    page = await fetcher.fetch(str(url))
    assert "Authorization" not in state.headers[-1]
    assert "s3cret" not in page.text


async def test_a_custom_user_agent_is_sent(server) -> None:  # type: ignore[no-untyped-def]
    srv, state = server
    async with Fetcher(FetchConfig(guard=LOCAL, user_agent="test-bot/1")) as f:
        await f.fetch(str(srv.make_url("/plain")))
    assert state.headers[-1]["User-Agent"] == "test-bot/1"


@pytest.mark.parametrize(("code", "retryable"), [(404, False), (403, False), (429, True),
                                                 (500, True), (503, True)])
async def test_http_errors_are_typed_with_their_status(
    server, fetcher: Fetcher, code: int, retryable: bool  # type: ignore[no-untyped-def]
) -> None:
    srv, _ = server
    with pytest.raises(FetchFailed) as info:
        await fetcher.fetch(str(srv.make_url(f"/status/{code}")))
    assert info.value.status == code and info.value.retryable is retryable


async def test_connection_refused_is_a_retryable_fetch_failure(fetcher: Fetcher) -> None:
    with pytest.raises(FetchFailed) as info:
        await fetcher.fetch("http://127.0.0.1:9/")  # discard port: nothing listens
    assert info.value.status is None and info.value.retryable


def test_charset_detection_order() -> None:
    body = '<meta charset="koi8-r"><p>да</p>'.encode("koi8-r")
    assert detect_charset(body, "utf-8") == "utf-8"  # the header wins
    assert detect_charset(body, None) == "koi8-r"  # then <meta>
    assert detect_charset(body, "no-such-charset") == "koi8-r"  # a bogus header is ignored
    assert detect_charset(b"plain ascii", None) == "utf-8"


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        FetchConfig(max_bytes=0)
    with pytest.raises(ValueError):
        FetchConfig(timeout_s=0)
