"""The reader actor: "read on" from a found passage to its neighbours in the source."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from actors import Actor, ActorContext, error_info
from reactive_rag.index import Chunk, ChunkNotFound, CollectionNotFound, CorpusIndex
from streams import Event, EvidenceChunk, PageScraped, ReadCompleted, ReadFailed, ReadRequested

__all__ = ["OutOfScope", "ReaderActor"]


class OutOfScope(LookupError):
    """A chunk id this run may not read (unknown, or in a collection it may not search)."""

    retryable = False


class ReaderActor(Actor):
    """Serves ``read.requested`` from the corpus index or from pages this run opened.

    Scope is enforced here, in code, for every id (including ids a model made
    up): a chunk is read only if it exists in one of the allowed collections,
    or belongs to a page this run scraped (``page.scraped`` carries every chunk
    of the page, linked to its neighbours, though only the relevant ones became
    evidence).
    """

    name = "reader"
    handles = ("page.scraped", "read.requested")
    timeout_s = 10.0

    def __init__(self, index: CorpusIndex, collections: Sequence[str]) -> None:
        self.index = index
        self.collections = tuple(collections)
        self.page_chunks: dict[str, EvidenceChunk] = {}

    def on_restore(self, events: Sequence[Event]) -> None:
        """A resumed run's opened pages: every chunk of the pages its stored log scraped."""
        for event in events:
            if isinstance(event, PageScraped):
                for chunk in event.chunks:
                    self.page_chunks.setdefault(chunk.id, chunk)

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        if isinstance(msg, PageScraped):
            for chunk in msg.chunks:
                self.page_chunks.setdefault(chunk.id, chunk)
            return None
        assert isinstance(msg, ReadRequested)
        if msg.chunk_id in self.page_chunks:
            return [ReadCompleted(call_id=msg.call_id, chunk_id=msg.chunk_id,
                                  chunks=self._read_page(msg))]
        chunks = await asyncio.to_thread(self._read, msg)
        return [ReadCompleted(call_id=msg.call_id, chunk_id=msg.chunk_id,
                              chunks=tuple(c.to_evidence() for c in chunks))]

    def _read_page(self, msg: ReadRequested) -> tuple[EvidenceChunk, ...]:
        """Neighbours of a page chunk by its links, in reading order."""
        count = max(1, min(msg.count, 3))
        start = self.page_chunks[msg.chunk_id]
        before: list[EvidenceChunk] = []
        after: list[EvidenceChunk] = []
        if msg.direction in ("prev", "both"):
            cur = start
            while len(before) < count and cur.prev_id in self.page_chunks:
                cur = self.page_chunks[cur.prev_id]
                before.insert(0, cur)
        if msg.direction in ("next", "both"):
            cur = start
            while len(after) < count and cur.next_id in self.page_chunks:
                cur = self.page_chunks[cur.next_id]
                after.append(cur)
        return (*before, *after)

    def _read(self, msg: ReadRequested) -> list[Chunk]:
        count = max(1, min(msg.count, 3))
        for collection in self.collections:
            try:
                return self.index.neighbours(msg.chunk_id, msg.direction, count,
                                             collection=collection)
            except (ChunkNotFound, CollectionNotFound):
                continue
        raise OutOfScope(f"chunk {msg.chunk_id!r} is not in the collections this run may read")

    def on_failure(self, msg: Event, exc: BaseException) -> Event | None:
        assert isinstance(msg, ReadRequested)
        return ReadFailed(call_id=msg.call_id, chunk_id=msg.chunk_id, error=error_info(exc))
