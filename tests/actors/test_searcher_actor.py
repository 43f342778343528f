"""The searcher actor in a real ActorRun, against the local fake APIs."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from actors import ActorRun
from actors.providers import (
    CircuitBreaker,
    ResilientProvider,
    TenantSearchConfig,
)
from actors.search import Searcher, SearcherActor, SeenUrls
from streams import (
    ActorFailed,
    Event,
    EvidenceChunk,
    EvidenceRegistered,
    Hit,
    ProviderHealth,
    SearchCompleted,
    SearchFailed,
    SearchRequested,
)

from ._web_fixtures import FakeWeb, default_results, fake_web


def tenant(web: FakeWeb, names: Sequence[str], **kw: object) -> TenantSearchConfig:
    providers = {n: web.settings(n, retries=0, breaker_threshold=2, breaker_cool_down_s=60)
                 for n in names}
    return TenantSearchConfig(providers=providers, **kw)


async def run_searches(actor: SearcherActor, requests: Sequence[SearchRequested],
                       deadline_s: float | None = 20, extra: Sequence[Event] = ()) -> list[Event]:
    """Publish ``extra`` (e.g. ``evidence.registered``), then the requests; wait for answers."""
    answers: list[Event] = []
    done = asyncio.Event()
    if not requests:
        done.set()
    async with ActorRun("run-1", [actor], deadline_s=deadline_s) as run:
        def collect(event: Event) -> None:
            if event.type in ("search.completed", "search.failed", "actor.failed"):
                answers.append(event)
                if len(answers) == len(requests):
                    done.set()

        run.stream.subscribe(collect, name="test")
        for e in extra:
            run.publish(e)
        for r in requests:
            run.publish(r)
        await done.wait()
        for _ in range(3):  # let a registration with no search after it land
            await asyncio.sleep(0)
        run.finish("answered", answer="done")
        await run.wait()
    return run.stream.history()


def answers(events: Sequence[Event]) -> list[Event]:
    return [e for e in events if e.type in ("search.completed", "search.failed", "actor.failed")]


async def test_failing_provider_never_loses_the_others_results() -> None:
    async with fake_web() as web:
        web.mode["brave"] = "unavailable"
        searcher = Searcher.from_config(tenant(web, ["searxng", "brave", "tavily"]))
        events = await run_searches(SearcherActor(searcher, close_searcher=True),
                                    [SearchRequested(query="rust async", call_id="c1")])
    [done] = answers(events)
    assert isinstance(done, SearchCompleted) and done.call_id == "c1"
    assert done.providers == ("searxng", "tavily")
    expected = {r.url for p in ("searxng", "tavily") for r in default_results(p, "rust async")}
    assert {h.url for h in done.hits} == expected
    assert [(e.kind, e.retryable) for e in done.errors] == [("ProviderUnavailable", True)]
    assert done.errors[0].message.startswith("brave: HTTP 503")
    assert done.cause is not None  # answers the request


async def test_all_providers_failing_is_a_typed_search_failed() -> None:
    async with fake_web() as web:
        web.mode["searxng"] = "auth"
        web.mode["tavily"] = "quota"
        searcher = Searcher.from_config(tenant(web, ["searxng", "tavily"]))
        events = await run_searches(SearcherActor(searcher, close_searcher=True),
                                    [SearchRequested(query="q", call_id="c2")])
    [failed] = answers(events)
    assert isinstance(failed, SearchFailed) and failed.call_id == "c2"
    assert failed.error.kind == "AllProvidersFailed" and not failed.error.retryable
    assert "searxng: HTTP 403" in failed.error.message
    assert "tavily: HTTP 432" in failed.error.message


async def test_unknown_provider_in_the_request_fails_without_network() -> None:
    async with fake_web() as web:
        searcher = Searcher.from_config(tenant(web, ["searxng"]))
        events = await run_searches(SearcherActor(searcher, close_searcher=True),
                                    [SearchRequested(query="q", providers=("bing",))])
        assert web.requests["searxng"] == 0
    [failed] = answers(events)
    assert isinstance(failed, SearchFailed)
    assert "ProviderNotConfigured" in failed.error.kind or "bing" in failed.error.message


async def test_deadline_is_respected_with_a_slow_provider() -> None:
    async with fake_web() as web:
        web.mode["searxng"] = "slow"
        web.mode["brave"] = "slow"
        searcher = Searcher.from_config(tenant(web, ["searxng", "brave"]))
        events = await run_searches(SearcherActor(searcher, close_searcher=True),
                                    [SearchRequested(query="q")], deadline_s=0.5)
    [failed] = answers(events)
    assert isinstance(failed, SearchFailed)
    assert "no answer before the deadline" in failed.error.message and failed.error.retryable
    finished = events[-1]
    assert finished.type == "run.finished"
    # the answer came before the run's deadline fired (no budget.exhausted before it)
    kinds = [e.type for e in events]
    assert "budget.exhausted" not in kinds[: kinds.index("search.failed")]


async def test_slow_provider_does_not_hold_back_a_fast_one_within_the_deadline() -> None:
    async with fake_web() as web:
        web.mode["brave"] = "slow"
        searcher = Searcher.from_config(tenant(web, ["searxng", "brave"]))
        events = await run_searches(SearcherActor(searcher, close_searcher=True),
                                    [SearchRequested(query="q")], deadline_s=0.5)
    [done] = answers(events)
    assert isinstance(done, SearchCompleted) and done.providers == ("searxng",)
    assert [e.kind for e in done.errors] == ["ProviderTimeout"]


async def test_health_events_are_published_when_a_provider_goes_down_and_back() -> None:
    async with fake_web() as web:
        web.mode["brave"] = "unavailable"
        clock = [0.0]
        inner = Searcher.from_config(tenant(web, ["searxng", "brave"]))
        brave = inner.providers["brave"]
        assert isinstance(brave, ResilientProvider)
        brave.breaker = CircuitBreaker("brave", failure_threshold=2, cool_down_s=10,
                                       clock=lambda: clock[0])
        reqs = [SearchRequested(query=f"q{i}") for i in range(3)]
        actor = SearcherActor(inner)
        actor.concurrency = 1
        events = await run_searches(actor, reqs)
        health = [e for e in events if isinstance(e, ProviderHealth)]
        assert [(h.provider, h.state) for h in health] == [("brave", "down")]
        assert web.requests["brave"] == 2  # the third search did not call it
        web.mode["brave"] = "ok"
        clock[0] = 11.0
        events = await run_searches(SearcherActor(inner, close_searcher=True),
                                    [SearchRequested(query="again")])
    health = [e for e in events if isinstance(e, ProviderHealth)]
    assert [(h.provider, h.state) for h in health] == [("brave", "probing"), ("brave", "up")]
    [done] = answers(events)
    assert isinstance(done, SearchCompleted) and set(done.providers) == {"searxng", "brave"}


def registered(*hits: Hit) -> EvidenceRegistered:
    """What the run's controller publishes once it keeps these results as evidence."""
    return EvidenceRegistered(chunks=tuple(
        EvidenceChunk(id=f"web:{i}", url=h.url, text=h.snippet or "x", snippet=True)
        for i, h in enumerate(hits)))


async def test_session_seen_urls_are_exposed_and_respected_across_runs() -> None:
    async with fake_web() as web:
        searcher = Searcher.from_config(tenant(web, ["searxng"]))
        session = SeenUrls()
        first = await run_searches(SearcherActor(searcher, seen=session),
                                   [SearchRequested(query="q")])
        [a] = answers(first)
        assert isinstance(a, SearchCompleted) and len(a.hits) == 3
        await run_searches(SearcherActor(searcher, seen=session), [], extra=[registered(*a.hits)])
        actor = SearcherActor(searcher, seen=session, close_searcher=True)
        second = await run_searches(actor, [SearchRequested(query="q")])
    [b] = answers(second)
    assert isinstance(b, SearchCompleted) and b.hits == ()  # nothing new for this session
    assert actor.seen_urls == {h.url for h in a.hits}


async def test_a_result_the_run_passed_over_comes_back_and_a_registered_one_does_not() -> None:
    # A search's results under the run's relevance floor are never registered: a later
    # search (e.g. for the bridge entity that names the page) must still return them.
    async with fake_web() as web:
        searcher = Searcher.from_config(tenant(web, ["searxng"]))
        actor = SearcherActor(searcher)  # two runs of one actor: the test closes the searcher
        actor.concurrency = 1  # one mailbox worker: the registration lands between searches
        first = SearchRequested(query="rust async", call_id="s1")
        events = await run_searches(actor, [first])
        [a] = answers(events)
        assert isinstance(a, SearchCompleted) and len(a.hits) == 3
        assert actor.seen_urls == frozenset()  # returned, not yet kept by the run
        kept, passed_over = a.hits[0], a.hits[1:]
        events = await run_searches(actor, [SearchRequested(query="rust async", call_id="s2")],
                                    extra=[registered(kept)])
        await searcher.aclose()
    [b] = answers(events)
    assert isinstance(b, SearchCompleted)
    assert [h.url for h in b.hits] == [h.url for h in passed_over]
    assert actor.seen_urls == {kept.url}


async def test_tenant_blacklist_and_agent_limit_apply() -> None:
    async with fake_web() as web:
        cfg = tenant(web, ["searxng"], blacklist=["*://searxng.test/rust-async/0"],
                     max_results=5, agents={"quick": {"max_results": 1}})
        searcher = Searcher.from_config(cfg, agent="quick")
        events = await run_searches(SearcherActor(searcher, close_searcher=True),
                                    [SearchRequested(query="rust async", k=10)])
    [done] = answers(events)
    assert isinstance(done, SearchCompleted)
    assert [h.url for h in done.hits] == ["https://searxng.test/rust-async/1"]


async def test_a_crashing_searcher_answers_with_search_failed_not_actor_failed() -> None:
    class Exploding(Searcher):
        async def search(self, *a: object, **kw: object) -> object:  # type: ignore[override]
            raise RuntimeError("bug")

    events = await run_searches(SearcherActor(Exploding([])), [SearchRequested(query="q")])
    [failed] = answers(events)
    assert isinstance(failed, SearchFailed) and failed.error.kind == "RuntimeError"
    assert not any(isinstance(e, ActorFailed) for e in events)
