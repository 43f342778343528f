"""The searcher's fan-out and merge: all-settled, fallback, hedging, dedup, blacklist, seen URLs."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from actors.providers import (
    Blacklist,
    ProviderNotConfigured,
    ProviderTimeout,
    ProviderUnavailable,
)
from actors.search import Searcher, SeenUrls
from streams import Hit
from tests._eventually import eventually

from ._web_fixtures import words


class Fake:
    """An in-process provider: fixed hits, optional delay or error; counts calls in flight."""

    def __init__(self, name: str, hits: Sequence[Hit] = (), *, delay: float = 0.0,
                 error: Exception | None = None) -> None:
        self.name = name
        self.hits = list(hits)
        self.delay = delay
        self.error = error
        self.calls: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.cancelled = 0

    async def search(self, query: str, k: int, deadline: float | None) -> Sequence[Hit]:
        self.calls.append(query)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1
        if self.error is not None:
            raise self.error
        return [h.model_copy(update={"source": self.name}) for h in self.hits][:k]


def hit(url: str, text: str = "", **kw: object) -> Hit:
    return Hit(url=url, title=url, snippet=text or words(url), **kw)


async def test_one_failing_provider_never_loses_the_others_hits() -> None:
    good = Fake("good", [hit("https://a.test/1"), hit("https://a.test/2")])
    bad = Fake("bad", error=ProviderUnavailable("HTTP 503", provider="bad"))
    out = await Searcher([bad, good]).search("q")
    assert [h.url for h in out.hits] == ["https://a.test/1", "https://a.test/2"]
    assert out.providers == ("good",) and not out.failed
    assert [type(e) for e in out.errors] == [ProviderUnavailable]


async def test_all_failing_is_reported_as_failed_with_every_error() -> None:
    a = Fake("a", error=ProviderUnavailable("down", provider="a"))
    b = Fake("b", error=ProviderTimeout("slow", provider="b"))
    out = await Searcher([a, b]).search("q")
    assert out.failed and out.hits == ()
    assert {e.provider for e in out.errors} == {"a", "b"}


async def test_an_empty_answer_is_a_success_not_a_failure() -> None:
    out = await Searcher([Fake("empty")]).search("q")
    assert not out.failed and out.providers == ("empty",) and out.hits == ()


async def test_queries_times_providers_run_in_parallel() -> None:
    providers = [Fake(n, [hit(f"https://{n}.test/")], delay=0.05) for n in ("a", "b", "c")]
    out = await Searcher(providers).search(["q1", "q2"])
    assert all(p.max_in_flight == 2 and sorted(p.calls) == ["q1", "q2"] for p in providers)
    assert {h.url for h in out.hits} == {"https://a.test/", "https://b.test/", "https://c.test/"}


async def test_request_may_name_providers_and_unknown_names_fail_without_a_call() -> None:
    a, b = Fake("a", [hit("https://a.test/")]), Fake("b", [hit("https://b.test/")])
    out = await Searcher([a, b]).search("q", providers=["b", "nope"])
    assert a.calls == [] and b.calls == ["q"]
    assert [type(e) for e in out.errors] == [ProviderNotConfigured]


async def test_provider_timeout_inside_the_deadline() -> None:
    slow = Fake("slow", [hit("https://slow.test/")], delay=5.0)
    fast = Fake("fast", [hit("https://fast.test/")])
    deadline = asyncio.get_running_loop().time() + 0.1
    out = await Searcher([slow, fast]).search("q", deadline=deadline)
    assert [h.url for h in out.hits] == ["https://fast.test/"]
    assert [type(e) for e in out.errors] == [ProviderTimeout] and slow.cancelled == 1


async def test_per_provider_timeout_caps_a_provider_even_without_a_deadline() -> None:
    slow = Fake("slow", [hit("https://slow.test/")], delay=5.0)
    out = await Searcher([slow], provider_timeout_s=0.05).search("q")
    assert out.failed and isinstance(out.errors[0], ProviderTimeout)


async def test_fallback_is_asked_only_when_every_primary_failed() -> None:
    primary = Fake("p", error=ProviderUnavailable("down", provider="p"))
    backup = Fake("f", [hit("https://f.test/")])
    searcher = Searcher([primary, backup], fallback=["f"])
    out = await searcher.search("q")
    assert [h.url for h in out.hits] == ["https://f.test/"] and backup.calls == ["q"]
    primary.error = None
    primary.hits = [hit("https://p.test/")]
    await searcher.search("q2")
    assert backup.calls == ["q"]  # the primary answered: no fallback call


async def test_hedging_asks_the_fallback_when_the_primary_is_slow() -> None:
    slow = Fake("p", [hit("https://p.test/")], delay=5.0)
    backup = Fake("f", [hit("https://f.test/")])
    out = await Searcher([slow, backup], fallback=["f"], hedge_delay_s=0.05).search("q")
    assert [h.url for h in out.hits] == ["https://f.test/"]
    assert out.providers == ("f",) and slow.cancelled == 1
    assert "overtaken" in str(out.errors[0])


async def test_no_hedge_when_the_primary_answers_in_time() -> None:
    primary = Fake("p", [hit("https://p.test/")], delay=0.01)
    backup = Fake("f", [hit("https://f.test/")])
    out = await Searcher([primary, backup], fallback=["f"], hedge_delay_s=1.0).search("q")
    assert out.providers == ("p",) and backup.calls == []


async def test_urls_are_normalised_and_deduplicated_keeping_the_first() -> None:
    a = Fake("a", [hit("HTTPS://Example.COM:443/Path/?utm_source=x&id=1#top", "first")])
    b = Fake("b", [hit("https://example.com/Path?id=1", "second",
                       published_at="2024-01-01", content="full text")])
    out = await Searcher([a, b]).search("q")
    assert len(out.hits) == 1
    only = out.hits[0]
    assert only.url == "https://example.com/Path?id=1" and only.snippet == "first"
    assert only.source == "a"
    assert only.content == "full text" and only.published_at == "2024-01-01"  # completed
    assert out.stats.duplicate_url == 1


async def test_near_duplicate_text_under_different_urls_is_dropped() -> None:
    text = " ".join(["the quick brown fox jumps over the lazy dog while the cat watches "
                     "from the warm windowsill in the afternoon sun"] * 3)
    a = Fake("a", [hit("https://a.test/story", text)])
    b = Fake("b", [hit("https://mirror.test/copy", text + " today"),
                   hit("https://b.test/other", words("unrelated")),
                   hit("https://copy.test/same", text.upper())])
    out = await Searcher([a, b]).search("q")
    assert [h.url for h in out.hits] == ["https://a.test/story", "https://b.test/other"]
    assert out.stats.near_duplicate == 2


async def test_short_snippets_are_not_mistaken_for_duplicates() -> None:
    a = Fake("a", [hit("https://a.test/", "Python docs")])
    b = Fake("b", [hit("https://b.test/", "Python docs")])
    out = await Searcher([a, b]).search("q")
    assert len(out.hits) == 2


async def test_blacklist_applies_to_normalised_urls() -> None:
    a = Fake("a", [hit("https://WWW.Pinterest.com/pin/1"), hit("https://ok.test/"),
                   hit("https://example.net/x")])
    bl = Blacklist(["*://*.pinterest.com/*", r"/example\.(net|org)/"])
    out = await Searcher([a], blacklist=bl).search("q")
    assert [h.url for h in out.hits] == ["https://ok.test/"]
    assert out.stats.blacklisted == 2


async def test_invalid_urls_are_dropped() -> None:
    a = Fake("a", [Hit(url="mailto:x@y.test"), hit("https://ok.test/")])
    out = await Searcher([a]).search("q")
    assert [h.url for h in out.hits] == ["https://ok.test/"] and out.stats.invalid_url == 1


async def test_round_robin_merge_and_k_cap() -> None:
    a = Fake("a", [hit(f"https://a.test/{i}") for i in range(5)])
    b = Fake("b", [hit(f"https://b.test/{i}") for i in range(5)])
    out = await Searcher([a, b], max_results=10).search("q", k=4)
    assert [h.url for h in out.hits] == ["https://a.test/0", "https://b.test/0",
                                         "https://a.test/1", "https://b.test/1"]
    capped = await Searcher([a, b], max_results=3).search("q", k=50)
    assert len(capped.hits) == 3


async def test_session_never_gets_a_url_it_already_saw() -> None:
    a = Fake("a", [hit("https://a.test/1"), hit("https://a.test/2")])
    seen = SeenUrls()
    searcher = Searcher([a])
    first = await searcher.search("q", seen=seen, k=1)
    assert [h.url for h in first.hits] == ["https://a.test/1"]
    assert "https://a.test/1" in seen and len(seen) == 1
    second = await searcher.search("q", seen=seen)
    assert [h.url for h in second.hits] == ["https://a.test/2"]
    third = await searcher.search("q", seen=seen)
    assert third.hits == () and not third.failed and third.stats.seen_before == 2


async def test_remember_false_filters_by_the_seen_set_without_adding_to_it() -> None:
    a = Fake("a", [hit("https://a.test/1"), hit("https://a.test/2")])
    seen = SeenUrls(["https://a.test/1"])
    out = await Searcher([a]).search("q", seen=seen, remember=False)
    assert [h.url for h in out.hits] == ["https://a.test/2"]  # the known page is dropped
    assert set(seen) == {"https://a.test/1"}  # and what came back is not remembered
    again = await Searcher([a]).search("q", seen=seen, remember=False)
    assert [h.url for h in again.hits] == ["https://a.test/2"]


def test_seen_urls_add_web_normalises_and_ignores_non_web_urls() -> None:
    seen = SeenUrls()
    assert seen.add_web("HTTPS://A.test/page#frag")
    assert not seen.add_web("https://a.test/page")  # the same page, spelled differently
    assert not seen.add_web("corpus://docs/readme")  # a corpus passage is no web page
    assert len(seen) == 1


async def test_concurrent_searches_of_one_session_share_the_seen_set() -> None:
    a = Fake("a", [hit(f"https://a.test/{i}") for i in range(6)], delay=0.01)
    seen = SeenUrls()
    searcher = Searcher([a])
    outs = await asyncio.gather(*(searcher.search(f"q{i}", seen=seen, k=2) for i in range(3)))
    urls = [h.url for o in outs for h in o.hits]
    assert len(urls) == len(set(urls)) == 4  # no page returned twice in the session
    assert set(seen) == set(urls)  # and no update lost


async def test_include_date_false_strips_dates() -> None:
    a = Fake("a", [hit("https://a.test/", published_at="2024-02-02")])
    out = await Searcher([a], include_date=False).search("q")
    assert out.hits[0].published_at is None


async def test_a_provider_breaking_the_protocol_fails_alone() -> None:
    class Broken:
        name = "broken"

        async def search(self, query: str, k: int, deadline: float | None) -> Sequence[Hit]:
            return ["not a hit"]  # type: ignore[list-item]

    out = await Searcher([Broken(), Fake("a", [hit("https://a.test/")])]).search("q")
    assert [h.url for h in out.hits] == ["https://a.test/"]
    assert "not Hit" in str(out.errors[0])


async def test_cancelling_a_search_cancels_the_provider_calls() -> None:
    slow = Fake("slow", delay=5.0)
    task = asyncio.create_task(Searcher([slow]).search("q"))
    await eventually(lambda: slow.in_flight == 1, "the provider call under way")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slow.cancelled == 1


async def test_corpus_passages_are_kept_per_chunk_and_not_marked_seen() -> None:
    local = Fake("local", [
        Hit(url="corpus://demo/doc-1", chunk_id="doc-1#0", doc_id="doc-1", snippet=words("c0")),
        Hit(url="corpus://demo/doc-1", chunk_id="doc-1#1", doc_id="doc-1", snippet=words("c1")),
        Hit(url="https://site.test/page", chunk_id="doc-2#0", snippet=words("c2")),
        Hit(url="corpus://demo/doc-1", chunk_id="doc-1#0", doc_id="doc-1", snippet=words("c0")),
    ])
    seen = SeenUrls()
    searcher = Searcher([local])
    first = await searcher.search("q", seen=seen)
    assert [h.chunk_id for h in first.hits] == ["doc-1#0", "doc-1#1", "doc-2#0"]
    assert first.hits[0].url == "corpus://demo/doc-1" and len(seen) == 0
    again = await searcher.search("q", seen=seen)
    assert len(again.hits) == 3  # passages are not web pages: the seen set leaves them alone


async def test_with_providers_puts_extra_first_and_keeps_the_tenant_rules() -> None:
    web_p = Fake("web", [hit("https://web.test/"), hit("https://pinterest.com/x")])
    backup = Fake("backup", [hit("https://backup.test/")])
    base = Searcher([web_p, backup], fallback=["backup"],
                    blacklist=Blacklist(["pinterest.com"]), max_results=5)
    local = Fake("local", [hit("https://local.test/")])
    run = base.with_providers([local], provider_timeout_s=2.0)
    out = await run.search("q")
    assert run.primary == ["local", "web"] and run.fallback == ["backup"]
    assert [h.url for h in out.hits] == ["https://local.test/", "https://web.test/"]
    assert run.providers["web"] is web_p and run.provider_timeout_s == 2.0
