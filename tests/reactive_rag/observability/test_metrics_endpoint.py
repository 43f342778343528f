"""``GET /metrics``: the real server's Prometheus metrics, scraped over HTTP and parsed."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from actors.providers import CircuitBreaker, ProviderError, ResilientProvider, RetryPolicy
from actors.search import Searcher
from reactive_rag import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.observability import RunMetrics
from streams import Event, Hit

from .._server_fixtures import (
    QUESTION,
    GatedPlanner,
    SseRead,
    auth,
    read_sse,
    serve,
    start_run,
    two_tenants,
)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _parse(text: str) -> Samples:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def _scrape(client: TestClient[Any, Any]) -> Samples:
    resp = await client.get("/metrics")  # no token: unauthenticated, like /readyz
    assert resp.status == 200, await resp.text()
    assert resp.headers["Content-Type"] == CONTENT_TYPE_LATEST
    return _parse(await resp.text())


async def _events(client: TestClient[Any, Any], run_id: str) -> SseRead:
    async with client.get(f"/v1/runs/{run_id}/events", headers=auth("acme")) as resp:
        return await read_sse(resp)


async def test_metrics_count_runs_by_outcome_latencies_and_live_mailboxes(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, planner=GatedPlanner,
                         tenants=two_tenants()) as client:
            before = await _scrape(client)
            assert _value(before, "reactive_rag_runs_active") == 0
            assert not any(name == "reactive_rag_runs_total" for name, _ in before)

            answered = await start_run(client, "acme")
            cancelled = await start_run(client, "acme")
            for _ in range(200):  # both planners are holding their first request
                held = await _scrape(client)
                if _value(held, "reactive_rag_mailbox_in_flight", actor="planner") == 2:
                    break
                await asyncio.sleep(0.02)
            assert _value(held, "reactive_rag_runs_active") == 2
            assert _value(held, "reactive_rag_mailbox_in_flight", actor="planner") == 2
            assert _value(held, "reactive_rag_mailbox_depth", actor="planner") == 0
            assert _value(held, "reactive_rag_runs_started_total", kind="new") == 2

            resp = await client.post(f"/v1/runs/{cancelled}/cancel", headers=auth("acme"))
            assert (await resp.json())["cancelled"] is True
            assert (await _events(client, cancelled)).events[-1].data["outcome"] == "cancelled"
            GatedPlanner.gate.set()
            log = await _events(client, answered)
            assert log.events[-1].data["outcome"] == "answered"
            after = await _scrape(client)
            body = await (await client.get("/metrics")).text()
    finally:
        GatedPlanner.gate = None

    assert _value(after, "reactive_rag_runs_total", outcome="answered") == 1
    assert _value(after, "reactive_rag_runs_total", outcome="cancelled") == 1
    assert _value(after, "reactive_rag_run_duration_seconds_count", outcome="answered") == 1
    assert _value(after, "reactive_rag_run_duration_seconds_count", outcome="cancelled") == 1
    assert (_value(after, "reactive_rag_run_duration_seconds_sum", outcome="answered")
            or 0) > 0
    assert _value(after, "reactive_rag_runs_active") == 0
    searches = sum(1 for m in log.events if m.event == "search.requested")
    assert searches >= 1
    assert _value(after, "reactive_rag_tool_call_duration_seconds_count",
                  tool="search", status="ok") == searches
    assert _value(after, "reactive_rag_tool_call_duration_seconds_bucket",
                  tool="search", status="ok", le="+Inf") == searches
    assert _value(after, "reactive_rag_mailbox_in_flight", actor="planner") is None  # none live
    # nothing a tenant asked or owns is in what anyone may scrape
    assert QUESTION not in body and answered not in body and "acme" not in body


class BrokenWeb:
    """A web search provider whose API is down."""

    name = "broken-web"

    async def search(self, query: str, k: int, deadline: float) -> list[Hit]:
        raise ProviderError("the web search API answered 503")


async def test_subscriber_detaches_and_provider_health_are_counted(
        index: CorpusIndex) -> None:
    metrics = RunMetrics()
    web = Searcher([ResilientProvider(BrokenWeb(), retry=RetryPolicy(retries=0),
                                      breaker=CircuitBreaker("broken-web", failure_threshold=1))])
    engine = Engine(index, web=web, observers=[metrics])
    handle = engine.start("Who founded Bayer and when?", collections=["demo"])

    def flaky(event: Event) -> None:
        if event.type == "plan.decided":
            raise RuntimeError("the dashboard lost its socket")

    handle.stream.subscribe(flaky, name=f"dashboard:{handle.run_id}")
    try:
        result = await handle.wait()
    finally:
        await web.aclose()
    assert result.count("subscriber.detached") == 1
    assert result.count("provider.health") >= 1
    body, content_type = metrics.exposition()
    assert content_type == CONTENT_TYPE_LATEST
    samples = _parse(body.decode())
    assert _value(samples, "reactive_rag_subscriber_detaches_total", subscriber="dashboard") == 1
    assert _value(samples, "reactive_rag_runs_total", outcome=result.outcome) == 1
    # the web provider's circuit opened at its first failure: not healthy
    assert _value(samples, "reactive_rag_provider_healthy", provider="broken-web") == 0
    assert (_value(samples, "reactive_rag_provider_health_changes_total",
                   provider="broken-web", state="down") or 0) >= 1
    assert handle.run_id not in body.decode()  # the subscriber's kind, not its run id


async def test_an_observer_that_fails_to_attach_is_logged_and_the_run_goes_on(
        index: CorpusIndex, caplog: pytest.LogCaptureFixture) -> None:
    metrics = RunMetrics()

    def broken(run: object) -> None:
        raise RuntimeError("exporter misconfigured")

    engine = Engine(index, observers=[broken, metrics])
    with caplog.at_level(logging.ERROR, logger="reactive_rag"):
        result = await engine.ask("Who founded Bayer and when?", collections=["demo"])
    assert result.outcome == "answered"
    assert "observer" in caplog.text and "exporter misconfigured" in caplog.text
    samples = _parse(metrics.exposition()[0].decode())  # the next observer still attached
    assert _value(samples, "reactive_rag_runs_total", outcome="answered") == 1
