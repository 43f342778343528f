"""The session knowledge base ("compression: rag"): a session's web results, searchable.

Instead of pasting every search result and scraped page into the model's
context, a session indexes them into a temporary index, runs the original
query against it and hands over the best passages, picked round-robin across
URLs so one site cannot fill the context.

Concurrency: the searches of one session run at the same time (fan-out), and
each adds what it found. Every mutation and every query holds the session's
``asyncio.Lock``, so no add is lost between another's read and write, and the
seen-URL check-and-mark is atomic (two searches never both index a URL).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence

from actors.rerank import round_robin
from actors.scrape import ScrapedPage, page_doc_id
from actors.text import chunk_text
from streams import EvidenceChunk, Hit, PageScraped

from ._exceptions import WebKbClosed
from ._index import Bm25WebKbIndex, WebKbIndex

__all__ = ["WebKnowledgeBase", "pick_round_robin"]


def pick_round_robin(ranked: Sequence[EvidenceChunk], k: int,
                     max_per_url: int | None = None) -> list[EvidenceChunk]:
    """Take ``k`` passages from a best-first list, one URL at a time.

    :func:`actors.rerank.round_robin` keyed by URL (else document, else chunk id):
    URLs take turns in the order of their best passage; in each turn a URL gives
    its next-best passage. ``max_per_url`` caps any URL outright.
    """
    return round_robin(ranked, k, _url_of, max_per_url)


def _url_of(chunk: EvidenceChunk) -> str:
    return chunk.url or chunk.doc_id or chunk.id


class WebKnowledgeBase:
    """One session's temporary index and seen-URL set.

    Args:
        session_id: the session's id (for messages and the store).
        index: the temporary index (in-memory BM25 by default).
        target_words, overlap_ratio: chunking of long hit contents.
        clock: monotonic seconds, for ``last_used`` (tests pass a fake).
    """

    def __init__(
        self,
        session_id: str,
        index: WebKbIndex | None = None,
        *,
        target_words: int = 220,
        overlap_ratio: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session_id = session_id
        self._index: WebKbIndex = index if index is not None else Bm25WebKbIndex()
        self._lock = asyncio.Lock()
        self._seen_urls: set[str] = set()
        self._ids: set[str] = set()
        self._target_words = target_words
        self._overlap = overlap_ratio
        self._clock = clock
        self.last_used = clock()
        self.closed = False
        #: pass to ``ScraperActor(pages=...)`` so the session's runs never fetch a page twice
        self.scraped_pages: dict[str, ScrapedPage] = {}

    # --- state -------------------------------------------------------------------------

    def _check(self) -> None:
        if self.closed:
            raise WebKbClosed(f"session {self.session_id!r} has ended")
        self.last_used = self._clock()

    @property
    def seen_urls(self) -> frozenset[str]:
        """URLs this session has indexed (a snapshot)."""
        return frozenset(self._seen_urls)

    def __len__(self) -> int:
        return len(self._index)

    async def claim_urls(self, urls: Iterable[str]) -> list[str]:
        """Mark ``urls`` seen; return those no earlier call claimed (atomically)."""
        async with self._lock:
            self._check()
            fresh: list[str] = []
            for u in urls:
                if u not in self._seen_urls:
                    self._seen_urls.add(u)
                    fresh.append(u)
            return fresh

    # --- adding ------------------------------------------------------------------------

    def _hit_chunks(self, hit: Hit) -> list[EvidenceChunk]:
        text = (hit.content or "").strip() or hit.snippet.strip()
        if not text:
            return []
        doc_id = page_doc_id(hit.url)
        pieces = chunk_text(text, target_words=self._target_words, overlap_ratio=self._overlap)
        ids = [f"{doc_id}#{i}" for i in range(len(pieces))]
        return [
            EvidenceChunk(id=ids[i], text=p.text, doc_id=doc_id, url=hit.url, title=hit.title,
                          position=i, prev_id=ids[i - 1] if i else None,
                          next_id=ids[i + 1] if i + 1 < len(ids) else None,
                          source=hit.source or "web")
            for i, p in enumerate(pieces)
        ]

    async def add_hits(self, hits: Sequence[Hit]) -> int:
        """Index search hits (content if present, else the snippet); returns passages added.

        A URL already indexed in this session is skipped.
        """
        async with self._lock:
            self._check()
            new: list[EvidenceChunk] = []
            for hit in hits:
                if hit.url in self._seen_urls:
                    continue
                self._seen_urls.add(hit.url)
                new.extend(self._hit_chunks(hit))
            return await self._add_locked(new)

    async def add_chunks(self, chunks: Sequence[EvidenceChunk]) -> int:
        """Index passages (e.g. a scraped page's); ids already present are skipped."""
        async with self._lock:
            self._check()
            for c in chunks:
                if c.url:
                    self._seen_urls.add(c.url)
            return await self._add_locked(chunks)

    async def add_page(self, page: PageScraped) -> int:
        """Index a scraped page's passages (they replace nothing: ids are per position)."""
        return await self.add_chunks(page.chunks)

    async def _add_locked(self, chunks: Sequence[EvidenceChunk]) -> int:
        fresh: list[EvidenceChunk] = []
        for c in chunks:
            if c.id not in self._ids:
                self._ids.add(c.id)
                fresh.append(c)
        if fresh:
            await self._index.add(fresh)
        return len(fresh)

    # --- querying -------------------------------------------------------------------------

    async def query(self, query: str, k: int = 8, *, candidates: int | None = None,
                    max_per_url: int | None = None) -> list[EvidenceChunk]:
        """The best ``k`` passages for ``query``, round-robin across URLs.

        Args:
            candidates: passages ranked before the round-robin pick (default ``4 * k``).
            max_per_url: hard cap on passages from one URL.
        """
        async with self._lock:
            self._check()
            ranked = await self._index.search(query, candidates or 4 * k)
        return pick_round_robin(ranked, k, max_per_url)

    async def compress(self, query: str, hits: Sequence[Hit], k: int = 8, *,
                       max_per_url: int | None = None) -> list[EvidenceChunk]:
        """The "compression: rag" step: index ``hits``, then answer ``query`` from the session.

        Passages of earlier searches (and scraped pages) of the session compete
        too; a URL already indexed is not indexed again.
        """
        await self.add_hits(hits)
        return await self.query(query, k, max_per_url=max_per_url)

    async def close(self) -> None:
        """Drop the temporary index and the seen URLs; later calls raise ``WebKbClosed``."""
        async with self._lock:
            if self.closed:
                return
            self.closed = True
            self._seen_urls.clear()
            self._ids.clear()
            self.scraped_pages.clear()
            await self._index.close()
