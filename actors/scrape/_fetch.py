"""Safe page fetching over aiohttp: guarded, capped, deadlined, cookie-free.

Every limit is enforced by this module rather than trusted to the server:

* redirects are followed by hand (``allow_redirects=False``) so each target is
  re-checked by the SSRF guard; a cap and a loop check stop redirect chains;
* the body is streamed and counted *after* decompression (aiohttp's own
  decompression is off), so a 10 kB gzip bomb cannot inflate to gigabytes;
* one total deadline covers connect, redirects, headers and body, so a server
  that drips one byte every 100 ms is cut, not waited on;
* no cookie jar, no ``trust_env`` (no proxies or ``.netrc`` credentials), no
  credentials from the URL, and no request headers beyond a fixed set.
"""

from __future__ import annotations

import asyncio
import codecs
import re
import zlib
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

import aiohttp
from aiohttp.abc import AbstractResolver
from multidict import CIMultiDictProxy
from yarl import URL

from ._exceptions import (
    BodyTooLarge,
    FetchFailed,
    FetchTimeout,
    ScrapeError,
    TooManyRedirects,
    UnsupportedContentType,
)
from ._guard import GuardedResolver, UrlGuard

__all__ = ["FetchConfig", "FetchedPage", "Fetcher", "detect_charset"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_TEXT_TYPES = (*_HTML_TYPES, "text/plain")
_PDF = "application/pdf"
_META_CHARSET = re.compile(
    rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]+)""", re.IGNORECASE
)
_CHUNK = 16 * 1024


@dataclass(frozen=True)
class FetchConfig:
    """Limits of one fetch.

    Args:
        guard: the SSRF policy (on by default; tests pass an allow-list).
        max_redirects: redirects followed before :class:`TooManyRedirects`.
        max_bytes: cap on the decompressed body.
        timeout_s: total time for one fetch (the caller's deadline may cut it further).
        allow_pdf: accept ``application/pdf`` (off by default).
        user_agent: the ``User-Agent`` sent.
    """

    guard: UrlGuard = field(default_factory=UrlGuard)
    max_redirects: int = 5
    max_bytes: int = 5 * 1024 * 1024
    timeout_s: float = 15.0
    allow_pdf: bool = False
    user_agent: str = "reactive-rag-scraper/0.1 (+https://github.com/reactive-rag)"

    def __post_init__(self) -> None:
        if self.max_redirects < 0 or self.max_bytes < 1 or self.timeout_s <= 0:
            raise ValueError("max_redirects >= 0, max_bytes >= 1 and timeout_s > 0 are required")

    @property
    def content_types(self) -> tuple[str, ...]:
        return (*_TEXT_TYPES, _PDF) if self.allow_pdf else _TEXT_TYPES


@dataclass(frozen=True)
class FetchedPage:
    """A fetched, decoded page.

    Attributes:
        url: the URL asked for; ``final_url``: where the redirects ended.
        content_type: the media type without parameters.
        text: the decoded body ('' for PDF); ``body``: the raw (decompressed) bytes.
        charset: the charset used to decode, and ``redirects`` followed.
    """

    url: str
    final_url: str
    status: int
    content_type: str
    charset: str
    text: str
    body: bytes
    redirects: int

    @property
    def is_html(self) -> bool:
        return self.content_type in _HTML_TYPES


def _valid_codec(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return codecs.lookup(name.strip().strip("\"'")).name
    except LookupError:
        return None


def detect_charset(body: bytes, header_charset: str | None, *, is_html: bool = True) -> str:
    """The charset to decode ``body`` with: header, then ``<meta>``, then a guess."""
    found = _valid_codec(header_charset)
    if found:
        return found
    if body.startswith(codecs.BOM_UTF8):
        return "utf-8"
    if is_html:
        m = _META_CHARSET.search(body[:4096])
        if m:
            found = _valid_codec(m.group(1).decode("ascii", "ignore"))
            if found:
                return found
    try:
        body.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(body[:65536]).best()
    return _valid_codec(best.encoding if best else None) or "utf-8"


class _Decoder:
    """Streams Content-Encoding decompression with a cap on the OUTPUT size."""

    def __init__(self, encoding: str, cap: int, url: str) -> None:
        self._cap = cap
        self._url = url
        self._size = 0
        self._parts: list[bytes] = []
        self._deflate_raw_retry = False
        self._z: zlib._Decompress | None
        if encoding in ("", "identity"):
            self._z = None
        elif encoding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._z = zlib.decompressobj(zlib.MAX_WBITS)
            self._deflate_raw_retry = True
        else:
            raise UnsupportedContentType(f"content encoding {encoding!r} not supported", url=url)

    def _add(self, data: bytes) -> None:
        self._size += len(data)
        if self._size > self._cap:
            raise BodyTooLarge(f"body exceeds {self._cap} bytes (decompressed)", url=self._url)
        self._parts.append(data)

    def feed(self, chunk: bytes) -> None:
        if self._z is None:
            self._add(chunk)
            return
        data = chunk
        try:
            while data:
                out = self._z.decompress(data, self._cap - self._size + 1)
                self._add(out)
                data = self._z.unconsumed_tail
        except zlib.error as exc:
            if self._deflate_raw_retry and self._size == 0:
                # some servers send raw deflate without the zlib header
                self._deflate_raw_retry = False
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                self.feed(chunk)
                return
            raise FetchFailed(f"corrupt compressed body: {exc}", url=self._url) from exc
        self._deflate_raw_retry = False

    def finish(self) -> bytes:
        if self._z is not None:
            try:
                self._add(self._z.flush(self._cap - self._size + 1))
            except zlib.error as exc:
                raise FetchFailed(f"corrupt compressed body: {exc}", url=self._url) from exc
        return b"".join(self._parts)


def _unwrap(exc: BaseException) -> ScrapeError | None:
    """A ScrapeError raised inside aiohttp (the resolver's refusal) and wrapped by it."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, ScrapeError):
            return cur
        seen.add(id(cur))
        nxt = getattr(cur, "os_error", None)
        cur = nxt if isinstance(nxt, BaseException) else (cur.__cause__ or cur.__context__)
    return None


class Fetcher:
    """Fetches pages safely; use as ``async with Fetcher(config) as f: await f.fetch(url)``.

    Args:
        config: limits and guard.
        resolver: the DNS resolver the guard wraps (aiohttp's default if
            ``None``); tests inject one mapping names to chosen addresses.
        limit: connections open at once.
    """

    def __init__(
        self,
        config: FetchConfig | None = None,
        *,
        resolver: AbstractResolver | None = None,
        limit: int = 32,
    ) -> None:
        self.config = config or FetchConfig()
        self._resolver = resolver
        self._limit = limit
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def open(self) -> None:
        if self._session is not None:
            return
        connector = aiohttp.TCPConnector(
            resolver=GuardedResolver(self.config.guard, self._resolver),
            limit=self._limit,
            ttl_dns_cache=10,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
            trust_env=False,
            headers={
                "User-Agent": self.config.user_agent,
                "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1",
                "Accept-Encoding": "gzip, deflate",
            },
            timeout=aiohttp.ClientTimeout(total=None),
            raise_for_status=False,
        )

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def fetch(self, url: str, *, deadline: float | None = None) -> FetchedPage:
        """Fetch ``url`` within ``timeout_s`` and the absolute loop-time ``deadline``.

        Raises:
            ScrapeError: a subclass for every refusal, cut or failure.
        """
        if self._session is None:
            await self.open()
        loop = asyncio.get_running_loop()
        until = loop.time() + self.config.timeout_s
        if deadline is not None:
            until = min(until, deadline)
        try:
            async with asyncio.timeout_at(until):
                return await self._fetch(url)
        except ScrapeError:
            raise
        except TimeoutError as exc:
            raise FetchTimeout(f"fetch did not complete in time: {url}", url=url) from exc
        except aiohttp.ClientError as exc:
            inner = _unwrap(exc)
            if inner is not None:
                if not inner.url:
                    inner.url = url
                raise inner from exc
            raise FetchFailed(f"{type(exc).__name__}: {exc}", url=url) from exc
        except (OSError, ValueError, UnicodeError) as exc:
            raise FetchFailed(f"{type(exc).__name__}: {exc}", url=url) from exc

    async def _fetch(self, url: str) -> FetchedPage:
        assert self._session is not None
        guard = self.config.guard
        current = guard.check_url(url)
        visited = {str(current)}
        for hop in range(self.config.max_redirects + 1):
            async with self._session.get(
                current, allow_redirects=False, auth=None, max_line_size=16384
            ) as resp:
                if resp.status in _REDIRECTS:
                    location = resp.headers.get("Location")
                    if not location:
                        raise FetchFailed(
                            f"redirect {resp.status} without Location", url=url, status=resp.status
                        )
                    nxt = guard.check_url(current.join(URL(location)))
                    if str(nxt) in visited:
                        raise TooManyRedirects(f"redirect loop at {nxt}", url=url)
                    visited.add(str(nxt))
                    current = nxt
                    continue
                if resp.status >= 400:
                    raise FetchFailed(f"HTTP {resp.status}", url=url, status=resp.status)
                return await self._read(url, current, resp, hop)
        raise TooManyRedirects(
            f"more than {self.config.max_redirects} redirects", url=url
        )

    async def _read(
        self, url: str, final: URL, resp: aiohttp.ClientResponse, redirects: int
    ) -> FetchedPage:
        headers: CIMultiDictProxy[str] = resp.headers
        ctype = resp.content_type.lower() if "Content-Type" in headers else ""
        if ctype not in self.config.content_types:
            raise UnsupportedContentType(
                f"content type {ctype or '(none)'!r} is not allowed", url=url
            )
        cap = self.config.max_bytes
        length = resp.content_length
        encoding = headers.get("Content-Encoding", "").strip().lower()
        if length is not None and length > cap:
            raise BodyTooLarge(f"Content-Length {length} exceeds {cap} bytes", url=url)
        decoder = _Decoder(encoding, cap, url)
        raw = 0
        async for chunk in resp.content.iter_chunked(_CHUNK):
            raw += len(chunk)
            if raw > cap:
                raise BodyTooLarge(f"body exceeds {cap} bytes", url=url)
            decoder.feed(chunk)
        body = decoder.finish()
        is_html = ctype in _HTML_TYPES
        if ctype == _PDF:
            charset, text = "", ""
        else:
            charset = detect_charset(body, resp.charset, is_html=is_html)
            text = body.decode(charset, errors="replace")
        return FetchedPage(
            url=url, final_url=str(final), status=resp.status, content_type=ctype,
            charset=charset, text=text, body=body, redirects=redirects,
        )
