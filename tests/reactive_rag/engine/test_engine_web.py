"""`--web` end to end: web results from a SearXNG-format server become citable evidence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors.models import HashingEmbedder
from actors.providers import TenantSearchConfig
from actors.search import Searcher
from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex, Document
from tests.actors._web_fixtures import Result, fake_web


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CorpusIndex]:
    idx = CorpusIndex(tmp_path_factory.mktemp("web-idx"), HashingEmbedder())
    idx.index_documents("demo", [Document(id="tea", title="Tea",
                                          text="Tea is an aromatic beverage made from leaves.")])
    yield idx
    idx.close()


async def test_web_hits_are_searched_next_to_the_corpus_and_cited(index: CorpusIndex) -> None:
    async with fake_web() as web_api:
        web_api.results["searxng"] = [
            Result(url="https://history.example/bayer?utm_source=x",
                   title="Bayer company history",
                   snippet="Friedrich Bayer founded the dye company Bayer in Barmen in 1863 "
                           "together with Johann Friedrich Weskott."),
            Result(url="https://blocked.example/spam", title="Bayer spam",
                   snippet="Buy Bayer founded cheap 1863 now now now now now now"),
        ]
        config = TenantSearchConfig(providers={"searxng": web_api.settings("searxng")},
                                    blacklist=["*://blocked.example/*"])
        searcher = Searcher.from_config(config)
        engine = Engine(index, web=searcher)
        try:
            result = await engine.ask("Who founded the Bayer company in 1863?",
                                      collections=["demo"])
        finally:
            await searcher.aclose()
    assert result.outcome == "answered", result.reason
    urls = {c.url for c in result.evidence.values()}
    assert "https://history.example/bayer" in urls  # normalised: tracking params dropped
    assert not any("blocked.example" in u for u in urls)
    assert any("Friedrich Bayer" in c.claim.quote for c in result.citations)
    assert web_api.requests["searxng"] >= 1


async def test_compression_rag_answers_from_the_session_index_round_robin(
        index: CorpusIndex) -> None:
    long_page = " ".join(
        f"Paragraph {i} of the Bayer chronicle talks about dyes and chemistry in the Rhine "
        f"valley during year {1850 + i}." for i in range(120))
    async with fake_web() as web_api:
        web_api.results["searxng"] = [
            Result(url="https://chronicle.example/bayer", title="Bayer chronicle",
                   snippet="A long chronicle", content=long_page),
            Result(url="https://history.example/bayer", title="Bayer company history",
                   snippet="Friedrich Bayer founded the dye company Bayer in Barmen in 1863."),
        ]
        config = TenantSearchConfig(providers={"searxng": web_api.settings("searxng")},
                                    compression="rag")
        searcher = Searcher.from_config(config)
        engine = Engine(index, web=searcher, web_compression="rag")
        try:
            result = await engine.ask("Who founded the Bayer company in 1863?",
                                      collections=["demo"])
        finally:
            await searcher.aclose()
    assert result.outcome == "answered", result.reason
    web_chunks = [c for c in result.evidence.values() if c.url.startswith("https://")]
    # the long page was chunked in the session index; passages, not whole pages, came back
    assert web_chunks and all(len(c.text.split()) <= 320 for c in web_chunks)
    assert {c.url for c in web_chunks} == {"https://chronicle.example/bayer",
                                          "https://history.example/bayer"}
    assert any("Friedrich Bayer" in c.claim.quote for c in result.citations)
