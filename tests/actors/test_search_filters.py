"""Structured search filters: what each web API receives, what is reported unapplied,
and what the searcher holds every provider's hits to (against the local fake APIs)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from actors import ActorRun
from actors.providers import (
    BraveProvider,
    DuckDuckGoProvider,
    GoogleCseProvider,
    HttpProvider,
    SearxngProvider,
    TavilyProvider,
    TenantSearchConfig,
)
from actors.search import Searcher, SearcherActor
from streams import Event, Hit, SearchCompleted, SearchFailed, SearchFilters, SearchRequested

from ._web_fixtures import PROVIDERS, FakeWeb, Result, fake_web, words

TODAY = dt.date(2024, 6, 15)
CLASSES: dict[str, type[HttpProvider]] = {
    "searxng": SearxngProvider, "brave": BraveProvider, "google_cse": GoogleCseProvider,
    "tavily": TavilyProvider, "duckduckgo": DuckDuckGoProvider,
}


def make(web: FakeWeb, provider: str, **kw: Any) -> HttpProvider:
    return CLASSES[provider](web.settings(provider, **kw), name=provider, today=lambda: TODAY)


def sent(web: FakeWeb, provider: str) -> dict[str, Any]:
    """Everything the fake API received besides the query: parameters, form, JSON body."""
    seen = web.last_request[provider]
    return {**seen["params"], **seen["form"], **seen["json"]}


async def ask(web: FakeWeb, provider: str, filters: SearchFilters | None,
              **kw: Any) -> tuple[list[Hit], dict[str, Any], tuple[str, ...]]:
    async with make(web, provider, **kw) as p:
        hits = list(await p.search("rust async", 5, None, filters=filters))
        unapplied = tuple(str(u.filter) for u in p.unapplied(filters)) if filters else ()
    return hits, sent(web, provider), unapplied


DATE_KEYS = ("time_range", "freshness", "dateRestrict", "start_date", "end_date", "df")
SITE_KEYS = ("siteSearch", "siteSearchFilter", "include_domains", "exclude_domains")


def only(params: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k in keys}


# --- what goes on the wire ---------------------------------------------------------------


@pytest.mark.parametrize(("provider", "wire"), [
    ("searxng", {"time_range": "week"}),
    ("brave", {"freshness": "pw"}),
    ("google_cse", {"dateRestrict": "d4"}),
    ("tavily", {"start_date": "2024-06-12"}),
    ("duckduckgo", {"df": "w"}),
])
async def test_a_since_date_becomes_each_apis_own_parameter(provider: str,
                                                           wire: dict[str, str]) -> None:
    async with fake_web() as web:
        _, params, unapplied = await ask(web, provider, SearchFilters(date_from="2024-06-12"))
    assert only(params, DATE_KEYS) == wire
    assert "date" not in unapplied


@pytest.mark.parametrize(("provider", "wire", "date_unapplied"), [
    ("searxng", {"time_range": "year"}, True),  # reaches back, cannot end before today
    ("brave", {"freshness": "2024-01-01to2024-03-31"}, False),
    ("google_cse", {"dateRestrict": "d167"}, True),
    ("tavily", {"start_date": "2024-01-01", "end_date": "2024-03-31"}, False),
    ("duckduckgo", {"df": "y"}, True),
])
async def test_a_closed_date_range_is_sent_where_the_api_can_bound_both_ends(
        provider: str, wire: dict[str, str], date_unapplied: bool) -> None:
    async with fake_web() as web:
        _, params, unapplied = await ask(
            web, provider, SearchFilters(date_from="2024-01-01", date_to="2024-03-31"))
    assert only(params, DATE_KEYS) == wire
    assert ("date" in unapplied) is date_unapplied


@pytest.mark.parametrize(("provider", "wire"), [
    ("searxng", {}), ("duckduckgo", {}),
    ("brave", {"freshness": "2022-01-01to2024-06-15"}),
    ("google_cse", {"dateRestrict": "d897"}),
])
async def test_a_start_more_than_a_year_back_is_unapplied_where_windows_end_at_a_year(
        provider: str, wire: dict[str, str]) -> None:
    async with fake_web() as web:
        _, params, unapplied = await ask(web, provider, SearchFilters(date_from="2022-01-01"))
    assert only(params, DATE_KEYS) == wire
    assert ("date" in unapplied) is (not wire)


@pytest.mark.parametrize(("provider", "wire"), [
    ("google_cse", {"siteSearch": "docs.python.org", "siteSearchFilter": "i"}),
    ("tavily", {"include_domains": ["docs.python.org"]}),
    ("searxng", {}), ("brave", {}), ("duckduckgo", {}),
])
async def test_one_site_is_sent_where_the_api_has_a_site_parameter(
        provider: str, wire: dict[str, Any]) -> None:
    async with fake_web() as web:
        _, params, unapplied = await ask(
            web, provider, SearchFilters(sites=("https://www.docs.python.org/3/",)))
        query = web.last_request[provider]["query"]
    assert only(params, SITE_KEYS) == wire
    assert query == "rust async"  # never smuggled into the query as site:
    assert ("sites" in unapplied) is (not wire)


@pytest.mark.parametrize(("provider", "wire"), [
    ("google_cse", {"siteSearch": "pinterest.com", "siteSearchFilter": "e"}),
    ("tavily", {"exclude_domains": ["pinterest.com"]}),
])
async def test_an_excluded_site_is_sent_as_an_exclusion(provider: str,
                                                        wire: dict[str, Any]) -> None:
    async with fake_web() as web:
        _, params, unapplied = await ask(web, provider,
                                         SearchFilters(exclude_sites=("pinterest.com",)))
    assert only(params, SITE_KEYS) == wire and unapplied == ()


async def test_google_takes_one_site_so_two_are_reported_and_not_half_sent() -> None:
    async with fake_web() as web:
        _, params, unapplied = await ask(
            web, "google_cse", SearchFilters(sites=("python.org", "rust-lang.org")))
    assert only(params, SITE_KEYS) == {} and unapplied == ("sites",)


@pytest.mark.parametrize(("provider", "wire"), [
    ("searxng", {"language": "ja"}),
    ("brave", {"search_lang": "jp"}),  # Brave's own code for Japanese
    ("google_cse", {"lr": "lang_ja"}),
    ("tavily", {}), ("duckduckgo", {}),
])
async def test_language_uses_each_apis_code_or_is_reported(provider: str,
                                                           wire: dict[str, str]) -> None:
    async with fake_web() as web:
        _, params, unapplied = await ask(web, provider, SearchFilters(language="ja"))
    assert only(params, ("language", "search_lang", "lr", "kl")) == wire
    assert ("language" in unapplied) is (not wire)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_empty_or_blank_filters_send_exactly_the_unfiltered_request(provider: str) -> None:
    async with fake_web() as web:
        _, plain, _ = await ask(web, provider, None)
        _, blank, unapplied = await ask(web, provider, SearchFilters(sites=("  ",)))
    assert blank == plain and unapplied == ()


async def test_a_filter_wins_over_the_configured_option_only_when_given() -> None:
    async with fake_web() as web:
        _, plain, _ = await ask(web, "brave", None, options={"freshness": "py"})
        _, dated, _ = await ask(web, "brave", SearchFilters(date_from="2024-06-15"),
                                options={"freshness": "py"})
    assert plain["freshness"] == "py" and dated["freshness"] == "pd"


async def test_every_unapplied_filter_says_why() -> None:
    async with fake_web() as web, make(web, "duckduckgo") as ddg:
        reasons = ddg.unapplied(SearchFilters(date_from="2020-01-01", sites=("a.org",),
                                              language="de", doc_types=("pdf",)))
    described = [u.describe("duckduckgo") for u in reasons]
    assert [u.filter for u in reasons] == ["date", "sites", "language", "doc_types"]
    assert described[0] == ("duckduckgo: date (df reaches back at most a year, "
                            "not to 2020-01-01)")
    assert all(d.count("(") == 1 and d.endswith(")") for d in described)


# --- the searcher holds every provider's hits to the filters ------------------------------


def results(*rows: tuple[str, str | None]) -> list[Result]:
    return [Result(url=url, title=f"t{i}", snippet=words(url), published=date)
            for i, (url, date) in enumerate(rows)]


async def test_sites_are_enforced_by_host_on_a_provider_that_cannot_send_them() -> None:
    async with fake_web() as web:
        web.results["brave"] = results(
            ("https://docs.python.org/3/library/asyncio.html", None),
            ("https://www.docs.python.org/3/faq.html", None),
            ("https://mirror.docs.python.org/x", None),
            ("https://python.org/about", None),  # the parent is not the site
            ("https://docs.python.org.evil.test/phish", None),
            ("https://notdocs.python.org/y", None),
        )
        async with make(web, "brave") as brave:
            outcome = await Searcher([brave]).search("asyncio", filters=SearchFilters(
                sites=("docs.python.org",)))
    assert [h.url for h in outcome.hits] == [
        "https://docs.python.org/3/library/asyncio.html",
        "https://www.docs.python.org/3/faq.html",
        "https://mirror.docs.python.org/x",
    ]
    assert outcome.stats.off_site == 3
    assert outcome.unapplied == ()  # checked on every hit: nothing leaked past it


async def test_excluded_sites_never_come_back_subdomains_included() -> None:
    async with fake_web() as web:
        web.results["searxng"] = results(("https://www.pinterest.com/pin/1", None),
                                         ("https://uk.pinterest.com/pin/2", None),
                                         ("https://example.org/a", None))
        async with make(web, "searxng") as searxng:
            outcome = await Searcher([searxng]).search("q", filters=SearchFilters(
                exclude_sites=("pinterest.com",)))
    assert [h.url for h in outcome.hits] == ["https://example.org/a"]


async def test_dated_hits_outside_the_range_are_dropped_and_undated_ones_reported() -> None:
    async with fake_web() as web:
        rows = (("https://a.test/new", "2024-06-14T08:00:00"),
                ("https://a.test/old", "2023-02-01T08:00:00"),
                ("https://a.test/undated", None))
        web.results["searxng"] = results(*rows)
        web.results["duckduckgo"] = results(("https://d.test/1", None), ("https://d.test/2", None))
        async with make(web, "searxng") as searxng, make(web, "duckduckgo") as ddg:
            searcher = Searcher([searxng, ddg])
            wide = await searcher.search("q", filters=SearchFilters(date_from="2022-01-01",
                                                                    date_to="2024-06-30"))
            narrow = await searcher.search("q2", filters=SearchFilters(date_from="2024-01-01"))
    # 2022 is more than a year back: neither API could send it, the searcher checked
    # the dated hits and says the undated ones were not held to it
    assert {h.url for h in wide.hits} == {"https://a.test/new", "https://a.test/old",
                                          "https://a.test/undated", "https://d.test/1",
                                          "https://d.test/2"}
    assert wide.unapplied == (
        "searxng: date (time_range reaches back at most a year, not to 2022-01-01; "
        "1 undated hit kept)",
        "duckduckgo: date (df reaches back at most a year, not to 2022-01-01; "
        "2 undated hits kept)",
    )
    assert "https://a.test/old" not in {h.url for h in narrow.hits}
    assert narrow.stats.out_of_range == 1
    assert narrow.unapplied == ()  # both sent a window reaching back to 2024-01-01


class LegacyAdapter:
    """A third-party provider written before filters: ``search(query, k, deadline)`` only."""

    def __init__(self, inner: HttpProvider) -> None:
        self.inner = inner
        self.name = "legacy"

    async def search(self, query: str, k: int, deadline: float | None) -> Sequence[Hit]:
        return await self.inner.search(query, k, deadline)


async def test_a_provider_without_filters_is_called_as_before_and_held_to_them() -> None:
    async with fake_web() as web:
        web.results["searxng"] = results(("https://keep.test/1", "2024-06-01"),
                                         ("https://drop.test/2", "2024-06-01"))
        legacy = LegacyAdapter(make(web, "searxng"))
        searcher = Searcher([legacy])
        outcome = await searcher.search("q", filters=SearchFilters(
            sites=("keep.test",), language="en", date_from="2024-05-01"))
        await legacy.inner.aclose()
        params = sent(web, "searxng")
    assert outcome.providers == ("legacy",) and not outcome.errors
    assert [h.url for h in outcome.hits] == ["https://keep.test/1"]
    assert "time_range" not in params and "language" not in params
    assert outcome.unapplied == ("legacy: language (the provider takes no filters)",)


async def test_filters_pass_through_retries_and_breakers_of_a_configured_tenant() -> None:
    async with fake_web() as web:
        tenant = TenantSearchConfig(providers={"tavily": web.settings("tavily", retries=0)})
        searcher = Searcher.from_config(tenant)
        await searcher.search("q", filters=SearchFilters(sites=("python.org",),
                                                         date_from="2024-01-01"))
        await searcher.aclose()
        body = web.last_request["tavily"]["json"]
    assert body["include_domains"] == ["python.org"]
    assert body["start_date"] == "2024-01-01"


# --- through the actor ------------------------------------------------------------------


async def run_one(actor: SearcherActor, request: SearchRequested) -> Event:
    done = asyncio.Event()
    found: list[Event] = []
    async with ActorRun("run-f", [actor], deadline_s=20) as run:
        def collect(event: Event) -> None:
            if event.type in ("search.completed", "search.failed", "actor.failed"):
                found.append(event)
                done.set()

        run.stream.subscribe(collect, name="test")
        run.publish(request)
        await done.wait()
        run.finish("answered", answer="done")
        await run.wait()
    return found[0]


async def test_the_actor_searches_with_the_requests_filters_and_reports_unapplied() -> None:
    async with fake_web() as web:
        web.results["google_cse"] = results(("https://en.wikipedia.org/wiki/Rust", None),
                                            ("https://blog.test/rust", None))
        tenant = TenantSearchConfig(providers={"google_cse": web.settings("google_cse",
                                                                          retries=0)})
        actor = SearcherActor(Searcher.from_config(tenant), close_searcher=True)
        done = await run_one(actor, SearchRequested(
            query="rust", call_id="c1",
            filters=SearchFilters(sites=("wikipedia.org",), doc_types=("pdf",))))
        params = sent(web, "google_cse")
    assert isinstance(done, SearchCompleted) and done.call_id == "c1"
    assert (params["siteSearch"], params["siteSearchFilter"]) == ("wikipedia.org", "i")
    assert [h.url for h in done.hits] == ["https://en.wikipedia.org/wiki/Rust"]
    assert done.unapplied == ("google_cse: doc_types (document types are not file types; "
                              "fileType is not sent)",)


async def test_an_inverted_date_range_fails_clearly_without_asking_any_api() -> None:
    async with fake_web() as web:
        tenant = TenantSearchConfig(providers={"brave": web.settings("brave", retries=0)})
        actor = SearcherActor(Searcher.from_config(tenant), close_searcher=True)
        done = await run_one(actor, SearchRequested(query="q", filters=SearchFilters(
            date_from="2024-05-01", date_to="2024-04-01")))
        assert web.requests["brave"] == 0
    assert isinstance(done, SearchFailed) and not done.error.retryable
    assert done.error.kind == "InvalidFilters"
    assert done.error.message == "date filter ends (2024-04-01) before it starts (2024-05-01)"


def test_an_unparseable_date_is_refused_when_the_request_is_made() -> None:
    with pytest.raises(ValidationError, match=r"not an ISO date .*'last week'"):
        SearchRequested(query="q", filters={"date_from": "last week"})
