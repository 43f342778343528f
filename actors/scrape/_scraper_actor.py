"""The scraper actor: ``scrape.requested`` -> ``page.scraped`` | ``scrape.failed``.

Fetching is delegated to :class:`Fetcher` (guarded, capped, deadlined),
extraction to :func:`extract_html`, chunking to :func:`page_chunks`. A page is
fetched at most once per actor (per run) — a repeated or concurrent request for
the same normalised URL shares the first one's result — and at most once per
session when a session passes its shared ``pages`` mapping.
"""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass, field

from aiohttp.abc import AbstractResolver

from streams import Event, PageScraped, ScrapeFailed, ScrapeRequested

from .._actor import Actor, ActorContext, error_info
from ..text import url_key
from ._exceptions import ExtractionFailed, FetchTimeout
from ._extract import Extracted, ExtractorName, better, extraction_order, run_extractor
from ._fetch import FetchConfig, Fetcher
from ._page import ScrapedPage, page_chunks, page_doc_id

__all__ = ["ScrapeConfig", "Scraper", "ScraperActor"]

_THREAD_ABOVE = 100_000  # characters of HTML extracted off the event loop


@dataclass(frozen=True)
class ScrapeConfig:
    """How pages are fetched, extracted and chunked.

    Args:
        fetch: fetch limits and the SSRF guard.
        extractor: ``selectolax`` (default, chosen by ``bench/_web_scrape.py``:
            ~10x faster than trafilatura at equal or better token F1 on our
            pages), ``trafilatura`` (optional dependency) or ``auto``.
        fallback: if the first extractor finds under ``min_chars`` characters, try
            the other one too (trafilatura only when installed; it runs in a thread).
        target_words, overlap_ratio: chunk size and overlap between neighbours.
        max_chunks: passages kept per page (the rest of a huge page is dropped).
    """

    fetch: FetchConfig = field(default_factory=FetchConfig)
    extractor: ExtractorName = "selectolax"
    fallback: bool = True
    min_chars: int = 200
    target_words: int = 220
    overlap_ratio: float = 0.1
    max_chunks: int = 200

    def __post_init__(self) -> None:
        if self.target_words < 1 or not 0.0 <= self.overlap_ratio < 0.5:
            raise ValueError("need target_words >= 1 and 0 <= overlap_ratio < 0.5")
        if self.max_chunks < 1 or self.min_chars < 0:
            raise ValueError("need max_chunks >= 1 and min_chars >= 0")


class Scraper:
    """Fetch, extract and chunk one URL; usable without the actor (CLI, session KB)."""

    def __init__(
        self, config: ScrapeConfig | None = None, *, resolver: AbstractResolver | None = None
    ) -> None:
        self.config = config or ScrapeConfig()
        self.fetcher = Fetcher(self.config.fetch, resolver=resolver)

    async def open(self) -> None:
        await self.fetcher.open()

    async def close(self) -> None:
        await self.fetcher.close()

    async def scrape(self, url: str, *, deadline: float | None = None) -> ScrapedPage:
        """Scrape ``url`` before the absolute loop-time ``deadline``.

        Raises:
            ScrapeError: a typed refusal, cut or failure.
        """
        page = await self.fetcher.fetch(url, deadline=deadline)
        cfg = self.config
        if page.content_type == "text/plain":
            title, text, extractor = "", page.text.strip(), "plain"
        elif page.content_type == "application/pdf":
            raise ExtractionFailed("PDF text extraction is not available", url=url)
        else:
            got = await self._extract(page.text, page.final_url)
            title, text, extractor = got.title, got.text, got.extractor
        if not text:
            raise ExtractionFailed("the page has no text", url=url)
        chunks = page_chunks(
            url, title, text, target_words=cfg.target_words,
            overlap_ratio=cfg.overlap_ratio, max_chunks=cfg.max_chunks,
        )
        return ScrapedPage(
            url=url, final_url=page.final_url, title=title, text=text,
            doc_id=page_doc_id(url), chunks=chunks, extractor=extractor,
        )

    async def _extract(self, html: str, url: str) -> Extracted:
        """Extract with the configured order; slow extractors and huge pages off the loop."""
        cfg = self.config
        best: Extracted | None = None
        error: ExtractionFailed | None = None
        for name in extraction_order(cfg.extractor, cfg.fallback):
            try:
                if name == "selectolax" and len(html) <= _THREAD_ABOVE:
                    got = run_extractor(name, html, url)
                else:
                    got = await asyncio.to_thread(run_extractor, name, html, url)
            except ExtractionFailed as exc:
                error = exc
                continue
            best = better(best, got)
            if len(best.text) >= cfg.min_chars:
                break
        if best is None or not best.text.strip():
            raise ExtractionFailed("no text could be extracted", url=url) from error
        return best


class ScraperActor(Actor):
    """Scrapes pages on request, ``concurrency`` at a time.

    Args:
        config: fetch/extract/chunk settings (the SSRF guard is on by default).
        concurrency: pages fetched at once.
        resolver: DNS resolver under the guard (tests inject one).
        pages: a mapping shared by a session's runs (normalised URL -> page) so a
            session never fetches a page twice; a private one if ``None``.
    """

    name = "scraper"
    handles = ("scrape.requested",)
    concurrency = 4
    timeout_s = 30.0

    def __init__(
        self,
        config: ScrapeConfig | None = None,
        *,
        concurrency: int = 4,
        resolver: AbstractResolver | None = None,
        pages: MutableMapping[str, ScrapedPage] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.concurrency = concurrency
        self.scraper = Scraper(config, resolver=resolver)
        self.pages: MutableMapping[str, ScrapedPage] = {} if pages is None else pages
        self._inflight: dict[str, asyncio.Future[ScrapedPage]] = {}
        self.fetches = 0

    async def on_start(self, ctx: ActorContext) -> None:
        await self.scraper.open()

    async def on_stop(self, ctx: ActorContext) -> None:
        for fut in self._inflight.values():
            if fut.done() and not fut.cancelled():
                fut.exception()  # mark retrieved: no "never retrieved" warning
        await self.scraper.close()

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        assert isinstance(msg, ScrapeRequested)
        page = await self._page(msg.url, ctx)
        return [PageScraped(call_id=msg.call_id, url=msg.url, title=page.title,
                            chunks=page.chunks)]

    async def _page(self, url: str, ctx: ActorContext) -> ScrapedPage:
        key = url_key(url)
        cached = self.pages.get(key)
        if cached is not None:
            return cached
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[ScrapedPage] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            left = ctx.remaining()
            deadline = None if left is None else asyncio.get_running_loop().time() + left
            self.fetches += 1
            page = await self.scraper.scrape(url, deadline=deadline)
        except BaseException as exc:
            fut.set_exception(exc if isinstance(exc, Exception) else FetchTimeout(
                "the scrape was cancelled", url=url))
            fut.exception()
            self._inflight.pop(key, None)
            raise
        fut.set_result(page)
        self.pages[key] = page
        final_key = url_key(page.final_url)
        self.pages.setdefault(final_key, page)
        self._inflight.pop(key, None)
        return page

    def on_failure(self, msg: Event, exc: BaseException) -> Event | None:
        if isinstance(msg, ScrapeRequested):
            return ScrapeFailed(call_id=msg.call_id, url=msg.url, error=error_info(exc))
        return super().on_failure(msg, exc)
