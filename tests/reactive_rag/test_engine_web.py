"""`--web` end to end: web results from a SearXNG-format server become citable evidence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors.models import HashingEmbedder
from actors.providers import TenantSearchConfig
from actors.search import Searcher
from reactive_rag._engine import Engine
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
