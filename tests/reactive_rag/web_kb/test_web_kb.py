"""The session knowledge base: a session's results, searchable, fair across sites, race-free."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

import reactive_rag.web_kb as session_pkg
from reactive_rag.web_kb import (
    Bm25WebKbIndex,
    WebKbClosed,
    WebKbIndex,
    WebKnowledgeBase,
    pick_round_robin,
)
from streams import EvidenceChunk, Hit, PageScraped

DELTA = ("The river delta is shrinking because upstream dams trap the sediment that once "
         "replenished the shoreline.")


def chunk(url: str, i: int, text: str = "", score: float | None = None) -> EvidenceChunk:
    return EvidenceChunk(id=f"{url}#{i}", text=text or f"passage {i} of {url}", url=url,
                         doc_id=url, position=i, score=score)


class YieldingIndex:
    """An index whose add reads, yields, then writes: loses updates if calls interleave."""

    def __init__(self) -> None:
        self.items: list[EvidenceChunk] = []

    def __len__(self) -> int:
        return len(self.items)

    async def add(self, chunks: Sequence[EvidenceChunk]) -> None:
        snapshot = list(self.items)
        await asyncio.sleep(0)
        self.items = snapshot + list(chunks)

    async def search(self, query: str, k: int) -> list[EvidenceChunk]:
        await asyncio.sleep(0)
        return [c for c in self.items if query in c.text][:k]

    async def close(self) -> None:
        self.items = []


def test_the_yielding_index_fits_the_protocol() -> None:
    assert isinstance(YieldingIndex(), WebKbIndex)
    assert isinstance(Bm25WebKbIndex(), WebKbIndex)


async def test_search_results_are_found_by_the_original_query() -> None:
    kb = WebKnowledgeBase("s1")
    added = await kb.add_hits([
        Hit(url="https://a.example/delta", title="Delta", snippet=DELTA),
        Hit(url="https://b.example/bread", title="Bread",
            snippet="Sourdough bread needs a starter culture of wild yeast and bacteria."),
        Hit(url="https://c.example/empty", title="Nothing"),  # no text: nothing to index
    ])
    assert added == 2 and len(kb) == 2
    found = await kb.query("why is the delta shrinking", k=3)
    assert found[0].url == "https://a.example/delta"
    assert found[0].score is not None and found[0].score > 0
    assert await kb.query("quantum chromodynamics", k=3) == []


async def test_long_hit_content_is_chunked_with_neighbours() -> None:
    kb = WebKnowledgeBase("s1", target_words=30)
    content = " ".join(f"Sentence number {i} talks about the delta and its sediment." for i in
                       range(40))
    await kb.add_hits([Hit(url="https://a.example/long", snippet="short", content=content)])
    found = await kb.query("delta sediment", k=50, max_per_url=50)
    assert len(found) > 5
    by_pos = sorted(found, key=lambda c: c.position)
    assert by_pos[0].prev_id is None and by_pos[0].next_id == by_pos[1].id


async def test_passages_are_picked_round_robin_across_urls() -> None:
    kb = WebKnowledgeBase("s1")
    flood = [chunk("https://big.example/", i, f"{DELTA} Part {i} of a long page.")
             for i in range(10)]
    await kb.add_chunks(flood)
    await kb.add_hits([
        Hit(url="https://small.example/1", snippet="The delta loses sediment to the dams."),
        Hit(url="https://small.example/2", snippet="Dams upstream trap sediment; the shoreline "
            "of the delta recedes."),
    ])
    found = await kb.query("delta sediment dams shoreline", k=4)
    urls = [c.url for c in found]
    assert len(found) == 4
    assert set(urls) == {"https://big.example/", "https://small.example/1",
                         "https://small.example/2"}
    assert urls.count("https://big.example/") == 2  # not 4: one site cannot fill the context


def test_round_robin_order_and_cap() -> None:
    ranked = [chunk("a", 0), chunk("a", 1), chunk("b", 0), chunk("a", 2), chunk("c", 0),
              chunk("b", 1)]
    assert [c.id for c in pick_round_robin(ranked, 5)] == ["a#0", "b#0", "c#0", "a#1", "b#1"]
    assert [c.id for c in pick_round_robin(ranked, 10, max_per_url=1)] == ["a#0", "b#0", "c#0"]
    assert pick_round_robin([], 3) == []


async def test_a_url_seen_in_the_session_is_not_indexed_again() -> None:
    kb = WebKnowledgeBase("s1")
    hit = Hit(url="https://a.example/delta", snippet=DELTA)
    assert await kb.add_hits([hit]) == 1
    assert await kb.add_hits([hit, hit]) == 0
    assert kb.seen_urls == {"https://a.example/delta"}
    assert await kb.claim_urls(["https://a.example/delta", "https://new.example/"]) == [
        "https://new.example/"]


async def test_scraped_pages_are_added_once_by_chunk_id() -> None:
    kb = WebKnowledgeBase("s1")
    page = PageScraped(url="https://a.example/p", chunks=(chunk("https://a.example/p", 0, DELTA),
                                                           chunk("https://a.example/p", 1)))
    assert await kb.add_page(page) == 2
    assert await kb.add_page(page) == 0
    assert "https://a.example/p" in kb.seen_urls


async def test_concurrent_adds_in_one_session_lose_nothing() -> None:
    # the index alone loses updates when adds interleave...
    bare = YieldingIndex()
    await asyncio.gather(*(bare.add([chunk(f"u{i}", 0)]) for i in range(50)))
    assert len(bare) < 50
    # ...the session serialises them
    kb = WebKnowledgeBase("s1", YieldingIndex())
    await asyncio.gather(*(kb.add_hits([Hit(url=f"https://s{i}.example/", snippet=f"text {i}")])
                           for i in range(50)),
                         *(kb.add_chunks([chunk(f"https://p{i}.example/", 0)]) for i in range(50)),
                         *(kb.query("text", k=5) for _ in range(20)))
    assert len(kb) == 100
    assert len(kb.seen_urls) == 100


async def test_concurrent_claims_give_each_url_to_exactly_one_search() -> None:
    kb = WebKnowledgeBase("s1")
    urls = [f"https://x.example/{i}" for i in range(30)]
    claims = await asyncio.gather(*(kb.claim_urls(urls[i % 3::2]) for i in range(12)))
    flat = [u for c in claims for u in c]
    assert sorted(flat) == sorted(set(flat))  # nobody claimed a URL twice
    assert set(flat) == set(urls[0::2]) | set(urls[1::2])


async def test_a_closed_session_refuses_use_and_holds_nothing() -> None:
    index = YieldingIndex()
    kb = WebKnowledgeBase("s1", index)
    await kb.add_hits([Hit(url="https://a.example/", snippet=DELTA)])
    await kb.close()
    await kb.close()  # idempotent
    assert len(index) == 0 and kb.seen_urls == frozenset()
    with pytest.raises(WebKbClosed):
        await kb.add_hits([Hit(url="https://b.example/", snippet=DELTA)])
    with pytest.raises(WebKbClosed):
        await kb.query("delta")


async def test_bm25_index_rebuilds_after_adds() -> None:
    index = Bm25WebKbIndex()
    assert await index.search("delta", 3) == []
    await index.add([chunk("a", 0, DELTA)])
    assert [c.id for c in await index.search("delta", 3)] == ["a#0"]
    await index.add([chunk("b", 0, "The delta of a river is a landform of sediment.")])
    assert {c.id for c in await index.search("delta", 3)} == {"a#0", "b#0"}


def test_exported_names_are_honest() -> None:
    assert sorted(session_pkg.__all__) == session_pkg.__all__
    for name in session_pkg.__all__:
        assert getattr(session_pkg, name) is not None


async def test_compress_answers_from_this_and_earlier_searches() -> None:
    kb = WebKnowledgeBase("s1")
    first = await kb.compress("delta sediment", [Hit(url="https://a.example/", snippet=DELTA)])
    assert [c.url for c in first] == ["https://a.example/"]
    second = await kb.compress("delta sediment", [
        Hit(url="https://a.example/", snippet=DELTA),  # seen: not indexed twice
        Hit(url="https://b.example/", snippet="Sediment builds the delta over centuries."),
    ], k=5)
    assert sorted(c.url for c in second) == ["https://a.example/", "https://b.example/"]
    assert len(kb) == 2
