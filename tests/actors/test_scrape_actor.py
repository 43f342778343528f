"""The scraper actor over a real run: pages become linked evidence, failures become events."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Sequence

import pytest
from aiohttp.test_utils import TestServer

import actors.scrape as scrape_pkg
from actors import ActorRun
from actors.scrape import FetchConfig, ScrapeConfig, ScrapedPage, ScraperActor, UrlGuard
from streams import Event, PageScraped, ScrapeFailed, ScrapeRequested

from ._scrape_fixtures import MAIN_PARAGRAPHS, FakeResolver, ServerState, local_server

LOCAL = UrlGuard.allowing("127.0.0.1")


def local_actor(**kw: object) -> ScraperActor:
    fetch = FetchConfig(guard=LOCAL, timeout_s=kw.pop("timeout_s", 5.0),  # type: ignore[arg-type]
                        max_bytes=1024 * 1024)
    cfg = ScrapeConfig(fetch=fetch, target_words=kw.pop("target_words", 220),  # type: ignore[arg-type]
                       overlap_ratio=kw.pop("overlap_ratio", 0.1))  # type: ignore[arg-type]
    return ScraperActor(cfg, **kw)  # type: ignore[arg-type]


@pytest.fixture
async def server() -> AsyncIterator[tuple[TestServer, ServerState]]:
    async with local_server() as s:
        yield s


async def answers(run: ActorRun, n: int) -> list[Event]:
    """Wait (bounded) until ``n`` page.scraped/scrape.failed events are on the stream."""
    def done() -> list[Event]:
        return [e for e in run.stream.history() if e.type in ("page.scraped", "scrape.failed")]
    async with asyncio.timeout(20):
        while len(done()) < n:  # noqa: ASYNC110 - polling the stream's history is the point
            await asyncio.sleep(0.01)
    return done()


async def scrape_all(actor: ScraperActor, urls: Sequence[str],
                     check: Callable[[ActorRun], None] | None = None) -> list[Event]:
    async with ActorRun("run-scrape", [actor], deadline_s=30) as run:
        for i, url in enumerate(urls):
            run.publish(ScrapeRequested(call_id=f"c{i}", url=url))
        out = await answers(run, len(urls))
        if check:
            check(run)
    return out


async def test_a_page_becomes_linked_overlapping_evidence(server) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    url = str(srv.make_url("/long"))
    [event] = await scrape_all(local_actor(target_words=80, overlap_ratio=0.3), [url])
    assert isinstance(event, PageScraped)
    assert event.call_id == "c0" and event.url == url
    assert event.title.startswith("The shrinking delta")
    chunks = event.chunks
    assert len(chunks) > 3
    assert [c.position for c in chunks] == list(range(len(chunks)))
    assert chunks[0].prev_id is None and chunks[-1].next_id is None
    for a, b in itertools.pairwise(chunks):
        assert a.next_id == b.id and b.prev_id == a.id
        assert a.doc_id == b.doc_id and a.url == url
    # neighbours overlap: each chunk opens with the closing sentence(s) of the previous one
    for a, b in itertools.pairwise(chunks):
        assert b.text[:60] in a.text
    text = " ".join(c.text for c in chunks)
    assert MAIN_PARAGRAPHS[3] in text and "Accept all cookies" not in text


async def test_chunk_ids_are_stable_across_runs(server) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    url = str(srv.make_url("/article"))
    [a] = await scrape_all(local_actor(), [url])
    [b] = await scrape_all(local_actor(), [url + "#section-2"])  # same page, other fragment
    assert isinstance(a, PageScraped) and isinstance(b, PageScraped)
    assert [c.id for c in a.chunks] == [c.id for c in b.chunks]


async def test_a_page_is_fetched_once_per_session(server) -> None:  # type: ignore[no-untyped-def]
    srv, state = server
    url = str(srv.make_url("/article"))
    state.delay = 0.05  # so the duplicates arrive while the first fetch is in flight
    actor = local_actor()
    events = await scrape_all(actor, [url, url, url + "#x", url])
    assert all(isinstance(e, PageScraped) for e in events)
    assert state.requests.count("/article") == 1
    assert sorted(e.call_id for e in events) == ["c0", "c1", "c2", "c3"]  # type: ignore[attr-defined]
    # a session passing its page map along: the next run does not fetch again
    pages: dict[str, ScrapedPage] = {}
    await scrape_all(local_actor(pages=pages), [url])
    await scrape_all(local_actor(pages=pages), [url])
    assert state.requests.count("/article") == 2


async def test_concurrency_is_bounded(server) -> None:  # type: ignore[no-untyped-def]
    srv, state = server
    state.delay = 0.05
    urls = [str(srv.make_url(f"/article/{i}")) for i in range(12)]
    events = await scrape_all(local_actor(concurrency=3), urls)
    assert len(events) == 12 and all(isinstance(e, PageScraped) for e in events)
    assert state.max_in_flight == 3


async def test_every_failure_is_a_scrape_failed_and_the_actor_keeps_serving(server) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    resolver = FakeResolver({"rebind.example": ["93.184.216.34", "10.0.0.1"]})
    bad = {
        "http://169.254.169.254/latest/meta-data/": "BlockedAddress",
        "http://0x7f.0.0.2/": "BlockedAddress",
        f"http://rebind.example:{srv.port}/": "BlockedAddress",
        "file:///etc/passwd": "BlockedScheme",
        str(srv.make_url("/redirect").with_query(to="http://10.0.0.1/")): "BlockedAddress",
        str(srv.make_url("/loop-a")): "TooManyRedirects",
        str(srv.make_url("/bomb")): "BodyTooLarge",
        str(srv.make_url("/big-chunked")): "BodyTooLarge",
        str(srv.make_url("/drip")): "FetchTimeout",
        str(srv.make_url("/json")): "UnsupportedContentType",
        str(srv.make_url("/status/503")): "FetchFailed",
        str(srv.make_url("/empty")): "ExtractionFailed",
        "not a url at all": "BlockedScheme",
    }
    good = [str(srv.make_url(f"/article/{i}")) for i in range(3)]
    urls = [*bad, *good]
    events = await scrape_all(local_actor(timeout_s=0.5, resolver=resolver), urls)
    failed = {e.url: e for e in events if isinstance(e, ScrapeFailed)}
    assert {u: e.error.kind for u, e in failed.items()} == bad
    assert failed[str(srv.make_url("/drip"))].error.retryable
    assert not failed["file:///etc/passwd"].error.retryable
    scraped = [e for e in events if isinstance(e, PageScraped)]
    assert sorted(e.url for e in scraped) == sorted(good)


async def test_scrape_is_cut_by_the_run_deadline(server) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    actor = local_actor(timeout_s=30)
    async with ActorRun("run-deadline", [actor], deadline_s=0.4, grace_s=5) as run:
        run.publish(ScrapeRequested(call_id="slow", url=str(srv.make_url("/hang"))))
        [event] = await answers(run, 1)
    assert isinstance(event, ScrapeFailed) and event.error.retryable


async def test_plain_text_pages_are_chunked_as_is(server) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    [event] = await scrape_all(local_actor(), [str(srv.make_url("/plain"))])
    assert isinstance(event, PageScraped)
    assert MAIN_PARAGRAPHS[0] in event.chunks[0].text


async def test_fingerprints_identify_near_duplicate_pages(server) -> None:  # type: ignore[no-untyped-def]
    srv, _ = server
    actor = local_actor()
    await scrape_all(actor, [str(srv.make_url("/article/1")), str(srv.make_url("/article/2")),
                             str(srv.make_url("/latin1-header"))])
    pages = {p.url.rsplit("/", 1)[-1]: p for p in actor.pages.values()}
    a, b, other = pages["1"], pages["2"], pages["latin1-header"]
    assert len(a.fingerprints) == len(a.chunks)
    assert bin(a.fingerprint ^ b.fingerprint).count("1") <= 6  # same story, other title
    assert bin(a.fingerprint ^ other.fingerprint).count("1") > 12


def test_exported_names_are_honest() -> None:
    assert sorted(scrape_pkg.__all__) == scrape_pkg.__all__
    for name in scrape_pkg.__all__:
        assert getattr(scrape_pkg, name) is not None


def test_concurrency_must_be_positive() -> None:
    with pytest.raises(ValueError):
        ScraperActor(concurrency=0)


def test_scrape_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        ScrapeConfig(overlap_ratio=0.7)
    with pytest.raises(ValueError):
        ScrapeConfig(max_chunks=0)
