"""The local corpus as a SearchProvider: hits, deadlines, errors, read-on."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.providers import ProviderNotConfigured, ProviderTimeout, ProviderUnavailable
from actors.providers._protocol import SearchProvider
from reactive_rag.agent._reader import ReaderActor
from reactive_rag.index import (
    ChunkingConfig,
    CorpusIndex,
    Direction,
    LocalCorpusProvider,
    SearchFilter,
)
from streams import ReadCompleted, ReadRequested

from ..._eventually import eventually
from .._index_helpers import CountingEmbedder, long_doc, topic_docs


@pytest.fixture
def index(tmp_path: Path) -> Iterator[CorpusIndex]:
    idx = CorpusIndex(tmp_path, CountingEmbedder(),
                      chunking=ChunkingConfig(target_words=40, overlap_ratio=0.1, max_words=80))
    idx.index_documents("topics", topic_docs())
    idx.index_documents("long", [long_doc()])
    yield idx
    idx.close()


async def test_provider_returns_hits_with_doc_and_chunk_ids(index: CorpusIndex) -> None:
    provider = LocalCorpusProvider(index, "topics")
    assert isinstance(provider, SearchProvider)
    hits = await provider.search("magma lava eruption", 3, None)
    assert len(hits) == 3
    top = hits[0]
    assert (top.doc_id, top.chunk_id, top.title) == ("volcano", "volcano#0", "Volcano")
    assert top.url == "corpus://topics/volcano"
    assert top.source == "local:topics" and top.content and "magma" in top.content
    assert top.published_at == "2024-01-15"
    assert [h.score for h in hits] == sorted([h.score or 0 for h in hits], reverse=True)


async def test_provider_merges_collections_and_applies_filters(index: CorpusIndex) -> None:
    both = LocalCorpusProvider(index, ["topics", "long"])
    hits = await both.search("item3x4 paragraph", 2, None)
    assert hits[0].doc_id == "long"
    only_topics = LocalCorpusProvider(index, ["topics", "long"],
                                      filters=SearchFilter(collections=["topics"]))
    assert all(h.doc_id != "long" for h in await only_topics.search("item3x4 paragraph", 5, None))
    md_only = LocalCorpusProvider(index, "topics", filters=SearchFilter(doc_types=["md"]))
    hits = await md_only.search("volcano", 3, None)
    assert len(hits) == 3 and "volcano" not in {h.doc_id for h in hits}


async def test_provider_does_not_block_the_event_loop(index: CorpusIndex) -> None:
    class Slow(CountingEmbedder):
        def embed_queries(self, texts):  # type: ignore[no-untyped-def]
            time.sleep(0.3)
            return super().embed_queries(texts)

    slow_index = CorpusIndex(index.root, Slow())
    provider = LocalCorpusProvider(slow_index, "topics")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    hits = await provider.search("bread", 2, None)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    slow_index.close()
    assert hits and ticks >= 5  # the loop kept running while the query was embedded


async def test_provider_respects_the_deadline(index: CorpusIndex) -> None:
    class Stuck(CountingEmbedder):
        def embed_queries(self, texts):  # type: ignore[no-untyped-def]
            time.sleep(0.5)
            return super().embed_queries(texts)

    finished = threading.Event()

    class Watched(LocalCorpusProvider):
        def _search_sync(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            try:  # runs in the worker thread
                return super()._search_sync(*args, **kwargs)
            finally:
                finished.set()

    stuck = CorpusIndex(index.root, Stuck())
    provider = Watched(stuck, "topics", name="corpus")
    loop = asyncio.get_running_loop()
    with pytest.raises(ProviderTimeout, match="corpus"):
        await provider.search("bread", 2, loop.time() + 0.05)
    with pytest.raises(ProviderTimeout):
        await provider.search("bread", 2, loop.time() - 1)
    # let the abandoned worker thread finish before closing
    await eventually(finished.is_set, "the abandoned search thread to finish")
    stuck.close()


async def test_provider_errors_are_provider_errors(index: CorpusIndex, tmp_path: Path) -> None:
    with pytest.raises(ProviderNotConfigured, match="missing"):
        await LocalCorpusProvider(index, "missing").search("x", 3, None)
    (index.root / "topics" / "CURRENT").write_text("gen-000099\n")
    fresh = CorpusIndex(index.root, CountingEmbedder())
    with pytest.raises(ProviderUnavailable, match="corrupt"):
        await LocalCorpusProvider(fresh, "topics").search("x", 3, None)
    fresh.close()


async def test_provider_edge_cases(index: CorpusIndex) -> None:
    provider = LocalCorpusProvider(index, "topics")
    assert await provider.search("   ", 5, None) == []
    assert await provider.search("bread", 0, None) == []
    with pytest.raises(ValueError):
        LocalCorpusProvider(index, [])


async def test_read_on_returns_following_chunks(index: CorpusIndex) -> None:
    """Read-on goes through the run's reader, over every collection the run may read."""
    reader = ReaderActor(index, ["topics", "long"])

    async def read(chunk_id: str, direction: Direction, count: int) -> list[str]:
        out = await reader.on_receive(ReadRequested(call_id="r", chunk_id=chunk_id,
                                                    direction=direction, count=count),
                                      None)  # type: ignore[arg-type]  # reads need no context
        assert out is not None
        [done] = out
        assert isinstance(done, ReadCompleted)
        return [c.id for c in done.chunks]

    assert await read("long#0", "next", 2) == ["long#1", "long#2"]
    assert await read("long#2", "prev", 1) == ["long#1"]


async def test_provider_searches_in_tasks_survive_a_concurrent_reindex(tmp_path: Path) -> None:
    from .._index_helpers import topic_docs as docs_v

    cfg = ChunkingConfig(target_words=40, overlap_ratio=0.1, max_words=80)
    idx = CorpusIndex(tmp_path, CountingEmbedder(), chunking=cfg)
    idx.index_documents("c", docs_v("stamp0"))
    provider = LocalCorpusProvider(idx, "c", mode="dense")
    done = asyncio.Event()
    seen: set[str] = set()

    async def searcher() -> int:
        n = 0
        while not done.is_set():
            hits = await provider.search("the", 6, None)
            stamps = {(h.content or "").rsplit(" ", 1)[-1] for h in hits}
            assert len(hits) == 6 and len(stamps) == 1, stamps
            seen.update(stamps)
            n += 1
        return n

    async def writer() -> None:
        try:
            for v in range(1, 4):
                await asyncio.to_thread(idx.index_documents, "c", docs_v(f"stamp{v}"))
        finally:
            done.set()

    counts = await asyncio.gather(searcher(), searcher(), writer())
    assert counts[0] > 0 and counts[1] > 0
    assert "stamp3" in {(h.content or "").rsplit(" ", 1)[-1]
                        for h in await provider.search("the", 6, None)}
    idx.close()
