"""Page fetchers that record what they fetched, and one that replays it.

The page boundary is :class:`~actors.scrape.Fetcher`: extraction and chunking
run again on replay (they are local and deterministic), so a cassette holds
the page as the server sent it (decoded text), not our reading of it.
"""

from __future__ import annotations

from typing import Any

from actors.scrape import FetchConfig, FetchedPage, Fetcher, ScrapeError

from ._tape import Tape

__all__ = ["RecordingFetcher", "ReplayFetcher", "page_key"]


def page_key(url: str) -> dict[str, Any]:
    """A page request as matched on replay: the URL asked for."""
    return {"url": url}


class RecordingFetcher(Fetcher):
    """A fetcher whose every page, typed error or cut fetch goes on the cassette."""

    def __init__(self, inner: Fetcher, cassette: Tape) -> None:
        super().__init__(inner.config)
        self.inner = inner
        self._cassette = cassette

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def fetch(self, url: str, *, deadline: float | None = None) -> FetchedPage:
        return await self._cassette.tape("page", page_key(url),
                                         self.inner.fetch(url, deadline=deadline), _page_json)


def _page_json(page: FetchedPage) -> dict[str, Any]:
    return {"final_url": page.final_url, "status": page.status,
            "content_type": page.content_type, "charset": page.charset,
            "text": page.text, "redirects": page.redirects}


class ReplayFetcher(Fetcher):
    """Answers fetches from the cassette only: opens no connection, resolves no name."""

    def __init__(self, cassette: Tape, config: FetchConfig | None = None) -> None:
        super().__init__(config)
        self._cassette = cassette

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def fetch(self, url: str, *, deadline: float | None = None) -> FetchedPage:
        got = await self._cassette.take("page", page_key(url))
        r = await self._cassette.outcome(got, ScrapeError)
        text = str(r.get("text") or "")
        charset = str(r.get("charset") or "")
        status = r.get("status")
        redirects = r.get("redirects")
        return FetchedPage(
            url=url, final_url=str(r.get("final_url") or url),
            status=status if isinstance(status, int) else 200,
            content_type=str(r.get("content_type") or ""), charset=charset, text=text,
            body=_encode(text, charset),
            redirects=redirects if isinstance(redirects, int) else 0)


def _encode(text: str, charset: str) -> bytes:
    try:
        return text.encode(charset or "utf-8", errors="replace")
    except LookupError:
        return text.encode("utf-8")
