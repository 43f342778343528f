"""The simulated web of ``bench/webqa.py`` (``bench/_simweb.py``) behaves as it claims.

Three tiny hand-written rows (invented places and people; ``../shared/data`` is not
read): snippets are each page's first 20 words, the Host header picks the site, spam
and mirrors exist and spam ranks high, the search endpoint speaks SearXNG's JSON as
our SearXNG provider parses it, and the scraper reaches the simulated hosts only.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp
import pytest

from actors.providers import ProviderSettings, SearxngProvider
from actors.scrape import BlockedAddress, ScrapeConfig, ScrapeError, Scraper
from tests._bench import bench_module

REPO = Path(__file__).resolve().parents[3]


def _simweb() -> ModuleType:
    return bench_module("_simweb")


sw = _simweb()

ROWS: list[dict[str, Any]] = [
    {  # the IRCoT processed format (what ../shared/data holds)
        "question_id": "t1",
        "question_text": "Which river flows through the town where the Brindlecombe clock "
                         "tower stands?",
        "answers_objects": [{"spans": ["Quenby"]}],
        "contexts": [
            {"id": "0", "title": "Brindlecombe clock tower", "is_supporting": True,
             "paragraph_text": "The Brindlecombe clock tower is a stone tower in the market "
                               "town of Harlow Vale. It was built in 1881 by the mason Edwin "
                               "Pardoe and restored after a fire in 1952."},
            {"id": "1", "title": "Harlow Vale", "is_supporting": True,
             "paragraph_text": "Harlow Vale is a small market town in the county of Westmere, "
                               "known for its Thursday cattle fair and its grammar school. "
                               "The river Quenby flows through its centre and once powered "
                               "four woollen mills along the valley floor."},
            {"id": "2", "title": "Westmere Railway", "is_supporting": False,
             "paragraph_text": "The Westmere Railway was a branch line opened in 1874 that "
                               "linked the county's market towns with the coast, closing to "
                               "passengers in 1961 after years of falling traffic."},
        ],
    },
    {
        "question_id": "t2",
        "question_text": "Who was born first, Odile Marchetti or Pavel Drunov?",
        "answers_objects": [{"spans": ["Odile Marchetti"]}],
        "contexts": [
            {"id": "0", "title": "Odile Marchetti", "is_supporting": True,
             "paragraph_text": "Odile Marchetti (born 3 May 1931) is a retired cellist who "
                               "taught at the conservatory of Lunel for thirty years and "
                               "recorded the complete suites twice."},
            {"id": "1", "title": "Pavel Drunov", "is_supporting": True,
             "paragraph_text": "Pavel Drunov (born 17 October 1948) is a composer of film "
                               "scores and chamber music, best known for his three string "
                               "quartets written in the nineteen seventies."},
        ],
    },
    {  # the original HotpotQA format
        "_id": "t3", "question": "Is Velmora glacier in the same country as Lake Tisset?",
        "answer": "yes", "type": "comparison",
        "supporting_facts": [["Velmora glacier", 0], ["Lake Tisset", 0]],
        "context": [
            ["Velmora glacier", ["Velmora glacier is a valley glacier in the northern ranges "
                                 "of Ostland. ", "It has retreated about two kilometres "
                                 "since the first survey of its snout in 1890."]],
            ["Lake Tisset", ["Lake Tisset is a glacial lake in central Ostland, fed by "
                             "meltwater streams. ", "Its outflow forms the upper course of "
                             "the river Arne and feeds two small reservoirs."]],
        ],
    },
]


@pytest.fixture
async def web() -> AsyncIterator[Any]:
    rows = [sw.parse_row(r) for r in ROWS]
    simweb = sw.SimWeb.build(rows, mirror_share=0.5, delays_s={"p300": 0.3})
    async with simweb:
        yield simweb


def _session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(resolver=sw.SimResolver()))


def test_rows_of_both_formats_are_parsed() -> None:
    rows = [sw.parse_row(r) for r in ROWS]
    assert rows[0].gold == {"Brindlecombe clock tower", "Harlow Vale"}
    assert rows[0].answers == ("Quenby",) and not rows[0].yes_no
    assert rows[2].gold == {"Velmora glacier", "Lake Tisset"} and rows[2].yes_no
    assert rows[2].paragraphs[0][1].startswith("Velmora glacier is a valley glacier")


async def test_spam_and_mirrors_are_present_and_spam_ranks_high(web: Any) -> None:
    counts = web.counts()
    assert counts["wiki"] == 7  # distinct titles
    assert counts["spam"] == 3 * len(ROWS)
    assert counts["mirror"] >= 1
    spam = [p for p in web.pages if p.kind == "spam"]
    assert {p.host for p in spam} == set(sw.SPAM_HOSTS)
    for page in spam:  # stuffed with the question's words, never the answer's facts
        if page.origin == ROWS[0]["question_text"]:
            assert "brindlecombe" in page.text.lower() and "quenby" not in page.text.lower()
    for mirror in (p for p in web.pages if p.kind == "mirror"):
        original = web.pages[[p.title for p in web.pages].index(mirror.origin)]
        assert mirror.host in sw.MIRROR_HOSTS and mirror.text != original.text
        kept = set(mirror.text.split())
        assert len(kept & set(original.text.split())) >= 0.8 * len(set(original.text.split()))
    top = web.search(ROWS[0]["question_text"])[:3]
    assert any(web.page_at(r["url"]).kind == "spam" for r in top)


async def test_snippets_are_the_first_20_words(web: Any) -> None:
    results = web.search("Harlow Vale market town river")
    assert results
    for r in results:
        page = web.page_at(r["url"])
        assert page is not None
        assert r["content"] == " ".join(page.text.split()[:20])
        assert len(r["content"].split()) <= 20 < len(page.text.split())
    harlow = next(r for r in results if r["title"] == "Harlow Vale")
    assert "Quenby" not in harlow["content"]  # the answer is past the snippet


async def test_the_host_header_decides_which_site_answers(web: Any) -> None:
    wiki = web.wiki_url("Harlow Vale")
    assert wiki is not None and wiki.startswith(f"http://{sw.WIKI_HOST}:{web.port}/wiki/")
    path = wiki.split(str(web.port), 1)[1]
    async with _session() as http:
        async with http.get(wiki) as resp:
            assert resp.status == 200 and resp.content_type == "text/html"
            body = await resp.text()
        assert "river Quenby flows through its centre" in body
        assert "Navigation menu" in body and "cookie" in body.lower() and "<footer" in body
        async with http.get(f"http://{sw.MIRROR_HOSTS[0]}:{web.port}{path}") as resp:
            assert resp.status == 404  # same path, other host: not that site's page
        async with http.get(f"http://{sw.SPAM_HOSTS[0]}:{web.port}{path}") as resp:
            assert resp.status == 404
    assert web.served["wiki"] == 1 and web.served["404"] == 2


async def test_searxng_provider_parses_the_endpoint(web: Any) -> None:
    provider = SearxngProvider(ProviderSettings(kind="searxng", base_url=web.search_url()),
                               name="simweb")
    try:
        hits = await provider.search("Odile Marchetti cellist", 10, None)
        t0 = time.perf_counter()
        slow = SearxngProvider(ProviderSettings(kind="searxng",
                                                base_url=web.search_url("p300")), name="p300")
        try:
            assert await slow.search("Odile Marchetti", 10, None)
        finally:
            await slow.aclose()
        assert time.perf_counter() - t0 >= 0.3
    finally:
        await provider.aclose()
    assert hits and all(h.source == "simweb" for h in hits)
    hosts = {h.url.split("/")[2].split(":")[0] for h in hits}
    assert hosts <= set(sw.HOSTS)
    first = next(h for h in hits if h.title == "Odile Marchetti")
    assert first.snippet.split() == web.page_at(first.url).text.split()[:20]
    assert any(h.published_at for h in hits if "spam" in h.url)


async def test_the_scraper_reaches_the_simulated_hosts_only(web: Any) -> None:
    scraper = Scraper(ScrapeConfig(fetch=sw.sim_scraper().scraper.config.fetch),
                      resolver=sw.SimResolver())
    await scraper.open()
    try:
        page = await scraper.scrape(web.wiki_url("Harlow Vale"))
        assert " ".join(web.page_at(web.wiki_url("Harlow Vale")).text.split()) in " ".join(
            page.text.split())
        for junk in ("Navigation menu", "Privacy policy", "We use cookies", "Related articles"):
            assert junk not in page.text  # the extractor removed the boilerplate
        with pytest.raises(BlockedAddress):
            await scraper.scrape(f"{web.search_url()}/search?q=x&format=json")
        with pytest.raises(ScrapeError):
            await scraper.scrape("http://elsewhere.example/")
    finally:
        await scraper.close()
