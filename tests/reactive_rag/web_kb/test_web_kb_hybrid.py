"""The hybrid (corpus index) session index: same passages back, fair picks, nothing left on disk."""

from __future__ import annotations

import asyncio

from actors.models import HashingEmbedder
from reactive_rag.web_kb import HybridWebKbIndex, WebKbStore, WebKnowledgeBase
from streams import EvidenceChunk, Hit

from .test_web_kb import DELTA


async def test_results_are_the_passages_that_were_added(tmp_path) -> None:  # type: ignore[no-untyped-def]
    index = HybridWebKbIndex(HashingEmbedder(128), root=tmp_path)
    kb = WebKnowledgeBase("s", index)
    page = [EvidenceChunk(id=f"web:abc#{i}", text=t, url="https://a.example/", doc_id="web:abc",
                          position=i, prev_id=f"web:abc#{i - 1}" if i else None)
            for i, t in enumerate([DELTA, "Bread rises because yeast ferments sugar."])]
    await kb.add_chunks(page)
    await kb.add_hits([Hit(url="https://b.example/", title="Dams",
                           snippet="Dams hold back sediment from the delta.")])
    found = await kb.query("delta sediment", k=3)
    assert {c.id for c in found} >= {"web:abc#0"}
    top = next(c for c in found if c.id == "web:abc#0")
    assert top.text == DELTA and top.url == "https://a.example/" and top.score is not None
    assert found[0].url != found[1].url  # round-robin across the two sites
    # later adds are searchable too (a new generation, old vectors reused)
    await kb.add_hits([Hit(url="https://c.example/", snippet="Glaciers carve valleys slowly.")])
    assert (await kb.query("glaciers valleys", k=1))[0].url == "https://c.example/"
    assert index.path.exists()
    await kb.close()
    assert not index.path.exists()


async def test_concurrent_adds_and_queries_on_the_hybrid_index(tmp_path) -> None:  # type: ignore[no-untyped-def]
    kb = WebKnowledgeBase("s", HybridWebKbIndex(HashingEmbedder(64), root=tmp_path))
    await asyncio.gather(
        *(kb.add_hits([Hit(url=f"https://s{i}.example/", snippet=f"topic {i} river delta")])
          for i in range(20)),
        *(kb.query("river delta", k=3) for _ in range(5)),
    )
    assert len(kb) == 20
    found = await kb.query("river delta", k=20)
    assert len({c.url for c in found}) == 20
    await kb.close()


async def test_a_store_with_an_embedder_gives_sessions_hybrid_indexes() -> None:
    store = WebKbStore(embedder=HashingEmbedder(64))
    kb = store.get("a")
    await kb.add_hits([Hit(url="https://a.example/", snippet=DELTA)])
    assert (await kb.query("delta", k=1))[0].url == "https://a.example/"
    await store.close()
