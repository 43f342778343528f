"""The local corpus under a search request's filters, and hits that name their neighbours."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.providers import FilteringProvider
from actors.search import Searcher
from reactive_rag.agent._reader import ReaderActor
from reactive_rag.index import (
    ChunkingConfig,
    CorpusIndex,
    Document,
    LocalCorpusProvider,
    SearchFilter,
)
from streams import ReadCompleted, ReadRequested, SearchFilters

from .._index_helpers import CountingEmbedder, long_doc, topic_docs

TEXT = "Asyncio runs coroutines on an event loop; tasks await futures and sockets."


def web_docs() -> list[Document]:
    """The same topic on several hosts, in two languages, some dated, one without a URL."""
    def doc(doc_id: str, url: str, date: str | None, lang: str | None, kind: str = "html"
            ) -> Document:
        return Document(id=doc_id, text=f"{TEXT} ({doc_id})", title=doc_id, url=url,
                        doc_type=kind, date=date,
                        metadata={"language": lang} if lang else {})

    return [
        doc("py-en", "https://docs.python.org/3/library/asyncio.html", "2024-03-01", "en"),
        doc("py-fr", "https://docs.python.org/fr/3/library/asyncio.html", "2024-03-02", "fr-FR"),
        doc("wiki", "https://en.wikipedia.org/wiki/Asyncio", "2023-11-20", "en"),
        doc("blog", "https://www.blog.example.com/asyncio", "2024-05-10", "en", "md"),
        doc("notes", "", None, None, "md"),  # a local note: corpus:// address, no date
        doc("file", "file:///home/me/asyncio.txt", "2024-04-01", None, "txt"),
    ]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[CorpusIndex]:
    idx = CorpusIndex(tmp_path, CountingEmbedder(),
                      chunking=ChunkingConfig(target_words=40, overlap_ratio=0.1, max_words=80))
    idx.index_documents("web", web_docs())
    idx.index_documents("topics", topic_docs())
    idx.index_documents("long", [long_doc()])
    yield idx
    idx.close()


async def ids(provider: LocalCorpusProvider, filters: SearchFilters, query: str = "asyncio",
              k: int = 10) -> set[str]:
    return {h.doc_id or "" for h in await provider.search(query, k, None, filters=filters)}


async def test_the_corpus_declares_every_filter(index: CorpusIndex) -> None:
    provider = LocalCorpusProvider(index, "web")
    assert isinstance(provider, FilteringProvider)
    assert provider.supported_filters == {"date", "doc_types", "sites", "exclude_sites",
                                          "language"}


async def test_only_chunks_in_the_date_range_come_back(index: CorpusIndex) -> None:
    provider = LocalCorpusProvider(index, "web")
    assert await ids(provider, SearchFilters(date_from="2024-03-01", date_to="2024-04-30")) == {
        "py-en", "py-fr", "file"}  # "notes" has no date: a bound excludes it
    assert await ids(provider, SearchFilters(date_to="2023-12-31")) == {"wiki"}
    assert await ids(provider, SearchFilters()) == {d.id for d in web_docs()}


async def test_doc_types_and_the_providers_own_filter_must_both_hold(
        index: CorpusIndex) -> None:
    provider = LocalCorpusProvider(index, "topics")
    # topics alternate txt/md and are dated 2024-01-15 .. 2024-06-15
    assert await ids(provider, SearchFilters(doc_types=("md",)), "the", 10) == {
        "bread", "tides", "violin"}
    md_only = LocalCorpusProvider(index, "topics", filters=SearchFilter(doc_types=["md"]))
    both = await ids(md_only, SearchFilters(date_from="2024-03-01"), "the", 10)
    assert both == {"tides", "violin"}  # md AND since March ("bees" is txt, "bread" Feb)
    none = await ids(md_only, SearchFilters(doc_types=("txt",)), "the", 10)
    assert none == set()  # md (provider) and txt (request) cannot both hold


async def test_sites_match_hosts_and_subdomains_and_never_corpus_addresses(
        index: CorpusIndex) -> None:
    provider = LocalCorpusProvider(index, "web")
    assert await ids(provider, SearchFilters(sites=("python.org",))) == {"py-en", "py-fr"}
    assert await ids(provider, SearchFilters(sites=("example.com", "wikipedia.org"))) == {
        "blog", "wiki"}
    assert await ids(provider, SearchFilters(exclude_sites=("docs.python.org",))) == {
        "wiki", "blog", "notes", "file"}


async def test_language_keeps_documents_in_that_language(index: CorpusIndex) -> None:
    provider = LocalCorpusProvider(index, "web")
    french = SearchFilters(language="fr")
    assert await ids(provider, french) == {"py-fr"}  # "fr-FR" counts as French
    assert provider.unapplied(french) == ()


async def test_a_corpus_without_language_metadata_is_not_emptied_but_reported(
        index: CorpusIndex) -> None:
    provider = LocalCorpusProvider(index, "topics")
    german = SearchFilters(language="de")
    found = await ids(provider, german, "bread yeast", 3)
    assert found and "bread" in found
    [why] = provider.unapplied(german)
    assert why.describe(provider.name) == "local: language (no language metadata in topics)"


async def test_hits_name_their_neighbours_and_the_index_reads_them(
        index: CorpusIndex) -> None:
    provider = LocalCorpusProvider(index, "long")
    hits = await provider.search("item5x3 paragraph", 3, None)
    middle = next(h for h in hits if h.prev_id and h.next_id)
    assert middle.chunk_id == f"long#{middle.position}"
    after = index.chunk(middle.next_id or "", collection="long")
    before = index.chunk(middle.prev_id or "", collection="long")
    assert (before.position, after.position) == (middle.position - 1, middle.position + 1)
    out = await ReaderActor(index, ["long"]).on_receive(
        ReadRequested(call_id="r", chunk_id=middle.chunk_id or ""), None)  # type: ignore[arg-type]
    assert out is not None and isinstance(out[0], ReadCompleted)
    [read_on] = out[0].chunks
    assert (read_on.id, read_on.text) == (middle.next_id, after.text)
    first = (await provider.search("Paragraph 0 begins here", 10, None))
    edge = next(h for h in first if h.position == 0)
    assert edge.prev_id is None and edge.next_id == "long#1"


async def test_filtered_corpus_hits_keep_their_neighbours_through_the_searcher(
        index: CorpusIndex) -> None:
    searcher = Searcher([LocalCorpusProvider(index, ["web", "long"])])
    outcome = await searcher.search("asyncio item3x2", k=10, filters=SearchFilters(
        sites=("python.org",), date_from="2024-01-01"))
    assert {h.doc_id for h in outcome.hits} == {"py-en", "py-fr"}
    assert all(h.chunk_id == f"{h.doc_id}#{h.position}" for h in outcome.hits)
    assert outcome.unapplied == ()


async def test_a_selective_filter_still_fills_k(tmp_path: Path) -> None:
    idx = CorpusIndex(tmp_path, CountingEmbedder())
    docs = [Document(id=f"d{i}", text=f"report number {i} about harbour tides",
                     url=f"https://{'port' if i % 10 == 0 else 'other'}.test/{i}",
                     date=f"2024-01-{i % 28 + 1:02d}") for i in range(120)]
    idx.index_documents("many", docs)
    provider = LocalCorpusProvider(idx, "many")
    found = await ids(provider, SearchFilters(sites=("port.test",)), "harbour tides", 12)
    idx.close()
    assert found == {f"d{i}" for i in range(0, 120, 10)}  # all 12, none lost to the top-k cut
