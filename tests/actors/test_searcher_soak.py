"""Fault soak: 3 providers failing 30% of the time (429/5xx/timeouts/garbage), 500 searches."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from actors import ActorRun
from actors.providers import TenantSearchConfig
from actors.search import Searcher, SearcherActor
from actors.text._urls import normalize_url
from streams import Event, ProviderHealth, SearchCompleted, SearchFailed, SearchRequested

from ._web_fixtures import FAULTS, default_results, fake_web

SEARCHES = 500
PROVIDERS = ("searxng", "brave", "tavily")
ALLOWED = {("up", "down"), ("down", "probing"), ("probing", "up"), ("probing", "down")}


class SoakSearcher(SearcherActor):
    concurrency = 12


@pytest.mark.slow
async def test_fault_soak_keeps_every_search_answered_and_breakers_cycling() -> None:
    async with fake_web(seed=1234) as web:
        web.slow_s = 3.0
        for p in PROVIDERS:
            web.random_faults[p] = 0.3
        cfg = TenantSearchConfig(providers={
            p: web.settings(p, timeout_s=1.0, retries=1, backoff_s=0.002, max_backoff_s=0.01,
                            breaker_threshold=3, breaker_cool_down_s=0.03)
            for p in PROVIDERS})
        searcher = Searcher.from_config(cfg)
        searcher.provider_timeout_s = 2.5
        answers: dict[str, Event] = {}
        done = asyncio.Event()
        async with ActorRun("soak", [SoakSearcher(searcher, close_searcher=True)],
                            deadline_s=100) as run:
            def collect(event: Event) -> None:
                if event.type in ("search.completed", "search.failed", "actor.failed"):
                    answers[getattr(event, "query", f"?{event.seq}")] = event
                    if len(answers) == SEARCHES:
                        done.set()

            run.stream.subscribe(collect, name="soak")
            for i in range(SEARCHES):
                run.publish(SearchRequested(query=f"soak query {i}"))
            await asyncio.wait_for(done.wait(), 90)
            run.finish("answered", answer="soak done")
            await run.wait()
        events = run.stream.history()
        served = defaultdict(set)
        for provider, query in web.served_ok:
            served[query].add(provider)
        faults = web.faults_served

    # every search answered, none crashed
    assert len(answers) == SEARCHES
    assert all(isinstance(a, SearchCompleted | SearchFailed) for a in answers.values())
    assert not [e for e in events if e.type == "actor.failed"]
    # every kind of fault was really injected
    for kind in FAULTS:
        assert sum(n for (p, f), n in faults.items() if f == kind) > 0, kind
    # results of providers that answered are always delivered
    completed = 0
    for query, answer in answers.items():
        healthy = served.get(query, set())
        if isinstance(answer, SearchFailed):
            assert not healthy, (query, healthy, answer.error)
            assert answer.error.kind == "AllProvidersFailed"
            continue
        completed += 1
        assert isinstance(answer, SearchCompleted)
        assert healthy <= set(answer.providers), (query, healthy, answer.providers, answer.errors)
        urls = {h.url for h in answer.hits}
        for provider in healthy:
            expected = {normalize_url(r.url) for r in default_results(provider, query)}
            assert expected <= urls, (query, provider)
    # No floor on how many complete: that depends on how long breakers stay open
    # relative to the request flow, i.e. on machine speed (CI saw 51%, a quiet machine
    # 86-98%). The exact property above (a search fails only when no provider served
    # it) is what matters; here: every provider's results really reached searches.
    assert completed > 0
    for provider in PROVIDERS:
        assert any(provider in a.providers for a in answers.values()
                   if isinstance(a, SearchCompleted)), provider
    # breakers opened and closed again, in the specified order, and were reported
    health = defaultdict(list)
    for e in events:
        if isinstance(e, ProviderHealth):
            health[e.provider].append(e.state)
    for provider in PROVIDERS:
        states = health[provider]
        assert "down" in states and "up" in states, (provider, states)
        assert states[0] == "down"
        assert all((a, b) in ALLOWED for a, b in zip(["up", *states], states, strict=False)), states
