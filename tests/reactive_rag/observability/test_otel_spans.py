"""A run's events as OpenTelemetry spans: real runs traced into the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.trace import StatusCode
from prometheus_client.parser import text_string_to_metric_families

from actors.models import OpenAIChatClient
from actors.providers import ProviderError
from actors.search import Searcher
from reactive_rag import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement.model import ChatPlanner, ChatWriter
from reactive_rag.observability import RunMetrics, RunTracer
from streams import Hit, SearchRequested
from tests.actors._openai_fixtures import FakeOpenAI, Status, fake_openai, stream_reply

from .._server_fixtures import GatedPlanner


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    yield spans
    spans.clear()


@pytest.fixture
def tracer(exporter: InMemorySpanExporter) -> Iterator[RunTracer]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield RunTracer(provider)
    provider.shutdown()


@pytest.fixture
async def model_server() -> AsyncIterator[FakeOpenAI]:
    async with fake_openai() as fake:
        yield fake


def _by_id(spans: Sequence[ReadableSpan]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in spans}


def _parent(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan | None:
    return None if span.parent is None else _by_id(spans)[span.parent.span_id]


def _named(spans: Sequence[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name.startswith(prefix)),
                  key=lambda s: s.start_time or 0)


def _root(spans: Sequence[ReadableSpan]) -> ReadableSpan:
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 1, [s.name for s in roots]
    return roots[0]


async def test_an_offline_run_is_one_trace_under_its_run_span(
        index: CorpusIndex, tracer: RunTracer, exporter: InMemorySpanExporter) -> None:
    engine = Engine(index, observers=[tracer])
    result = await engine.ask("Who founded Bayer and when?", collections=["demo"])
    spans = exporter.get_finished_spans()

    root = _root(spans)
    assert root.name == "invoke_agent reactive_rag"
    assert root.attributes is not None
    assert root.attributes["reactive_rag.run_id"] == result.run_id
    assert root.attributes["reactive_rag.outcome"] == result.outcome
    assert root.attributes[gen_ai.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert root.status.status_code is StatusCode.UNSET  # answered: not an error
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}
    ids = _by_id(spans)
    assert all(s.parent is None or s.parent.span_id in ids for s in spans)  # no orphans
    assert root.start_time is not None and root.end_time is not None
    for span in spans:  # every span inside the run's, and ordered in itself
        assert span.start_time is not None and span.end_time is not None
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time

    rounds = _named(spans, "plan round ")
    assert len(rounds) == result.count("plan.requested") >= 1
    assert all(_parent(r, spans) is root for r in rounds)
    for step in rounds:  # each round holds its planner call
        planner = [s for s in spans if s.name == "plan" and _parent(s, spans) is step]
        assert len(planner) == 1
        assert planner[0].attributes is not None
        assert gen_ai.GEN_AI_USAGE_INPUT_TOKENS not in planner[0].attributes  # no model

    searches = _named(spans, "execute_tool search")
    requested = [e for e in result.events if isinstance(e, SearchRequested)]
    assert len(searches) == len(requested) >= 1
    assert {s.attributes[gen_ai.GEN_AI_TOOL_CALL_ID] for s in searches  # type: ignore[index]
            } == {e.call_id for e in requested}
    assert all(_parent(s, spans) in rounds for s in searches)
    assert all(s.status.status_code is StatusCode.UNSET for s in searches)
    assert all(s.attributes["reactive_rag.hits"] >= 0 for s in searches)  # type: ignore[index,operator]
    writes = _named(spans, "write")
    assert len(writes) == result.count("answer.requested") and all(
        _parent(w, spans) is root for w in writes)
    verifies = _named(spans, "verify")
    assert verifies and verifies[-1].attributes is not None
    assert verifies[-1].attributes["reactive_rag.verified"] is True
    assert engine.runs == {}


def _claims(*claims: tuple[str, str, str]) -> str:
    return json.dumps({"claims": [{"statement": s, "source_id": i, "quote": q}
                                  for s, i, q in claims]})


async def test_chat_model_calls_carry_genai_model_and_token_counts(
        index: CorpusIndex, tracer: RunTracer, exporter: InMemorySpanExporter,
        model_server: FakeOpenAI) -> None:
    model_server.script(
        stream_reply(tool_calls=[("c1", "search", '{"query": "Bayer founded"}')], usage=(50, 8)),
        stream_reply(tool_calls=[("c2", "answer", "{}")], usage=(80, 4)),
        stream_reply(_claims(("Bayer was founded in 1863.", "bayer#0",
                              "Bayer was founded in Barmen in 1863")), usage=(120, 30)),
    )
    client = OpenAIChatClient(model_server.base_url, model="fake-7b", max_retries=0)
    metrics = RunMetrics()  # the same counts reach /metrics
    engine = Engine(index, planner=lambda: ChatPlanner(client),
                    writer=lambda: ChatWriter(client), observers=[tracer, metrics])
    try:
        result = await engine.ask("When was Bayer founded?", collections=["demo"])
    finally:
        await client.aclose()
    assert result.outcome == "answered", result.reason
    spans = exporter.get_finished_spans()

    calls = _named(spans, "chat ")
    assert [s.name for s in calls] == ["chat fake-7b"] * 3
    usage = [(s.attributes[gen_ai.GEN_AI_USAGE_INPUT_TOKENS],  # type: ignore[index]
              s.attributes[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS])  # type: ignore[index]
             for s in calls]
    assert usage == [(50, 8), (80, 4), (120, 30)]  # what the server reported, per call
    tokens = {(s.labels["role"], s.labels["type"]): s.value
              for f in text_string_to_metric_families(metrics.exposition()[0].decode())
              for s in f.samples if s.name == "reactive_rag_model_tokens_total"}
    assert tokens == {("planner", "input"): 130, ("planner", "output"): 12,
                      ("writer", "input"): 120, ("writer", "output"): 30}
    for span in calls:
        assert span.attributes is not None
        assert span.attributes[gen_ai.GEN_AI_OPERATION_NAME] == "chat"
        assert span.attributes[gen_ai.GEN_AI_REQUEST_MODEL] == "fake-7b"
    root = _root(spans)
    planner_calls, writer_call = calls[:2], calls[2]
    assert [_parent(s, spans).name for s in planner_calls] == [  # type: ignore[union-attr]
        "plan round 1", "plan round 2"]
    assert _parent(writer_call, spans) is root
    search = _named(spans, "execute_tool search")
    assert len(search) == 1 and search[0].attributes is not None
    assert search[0].attributes[gen_ai.GEN_AI_TOOL_CALL_ID] == "c1"
    assert _parent(search[0], spans) is _parent(planner_calls[0], spans)


async def test_a_failing_model_server_marks_the_planner_call_as_an_error(
        index: CorpusIndex, tracer: RunTracer, exporter: InMemorySpanExporter,
        model_server: FakeOpenAI) -> None:
    model_server.script(Status(500, '{"error": {"message": "model crashed"}}'))
    client = OpenAIChatClient(model_server.base_url, model="fake-7b", max_retries=0)
    engine = Engine(index, planner=lambda: ChatPlanner(client), observers=[tracer])
    try:
        result = await engine.ask("When was Bayer founded?", collections=["demo"])
    finally:
        await client.aclose()
    spans = exporter.get_finished_spans()
    failed = [s for s in spans if s.status.status_code is StatusCode.ERROR]
    assert failed, [(s.name, s.status) for s in spans]
    planner = failed[0]
    assert planner.name == "plan" and _parent(planner, spans).name == "plan round 1"  # type: ignore[union-attr]
    assert planner.attributes is not None and planner.attributes["error.type"]
    assert result.count("actor.failed") >= 1
    # the run went on without its planner (fallback), and its span says how it ended
    root = _root(spans)
    assert root.attributes is not None
    assert root.attributes["reactive_rag.outcome"] == result.outcome
    assert (root.status.status_code is StatusCode.ERROR) == (result.outcome == "failed")


class BrokenWeb:
    """A web search provider whose API is down."""

    name = "broken-web"

    async def search(self, query: str, k: int, deadline: float) -> Sequence[Hit]:
        raise ProviderError("the web search API answered 503")


async def test_a_failing_search_provider_shows_on_the_search_span(
        index: CorpusIndex, tracer: RunTracer, exporter: InMemorySpanExporter) -> None:
    web = Searcher([BrokenWeb()])
    engine = Engine(index, web=web, observers=[tracer])
    try:
        result = await engine.ask("Who founded Bayer and when?", collections=["demo"])
    finally:
        await web.aclose()
    spans = exporter.get_finished_spans()
    searches = _named(spans, "execute_tool search")
    assert searches and len(searches) == result.count("search.requested")
    errors = [e for s in searches for e in s.events if e.name == "provider.error"]
    assert errors and all(e.attributes is not None and e.attributes["error.type"]
                          for e in errors)
    assert any("503" in str(e.attributes["message"]) for e in errors  # type: ignore[index]
               )
    # the local corpus still answered: the call itself did not fail
    assert all(s.status.status_code is StatusCode.UNSET for s in searches)


async def test_a_cancelled_run_closes_the_call_it_cut_short_and_is_not_an_error(
        index: CorpusIndex, tracer: RunTracer, exporter: InMemorySpanExporter) -> None:
    GatedPlanner.gate = asyncio.Event()  # the planner holds its first request
    try:
        engine = Engine(index, planner=GatedPlanner, observers=[tracer])
        handle = engine.start("Who founded Bayer and when?", collections=["demo"])
        asked = asyncio.Event()
        handle.stream.subscribe(lambda e: asked.set() if e.type == "plan.requested" else None,
                                name="test")
        await asyncio.wait_for(asked.wait(), 10)
        handle.cancel("the user left")
        result = await handle.wait()
    finally:
        GatedPlanner.gate = None
    assert result.outcome == "cancelled"
    spans = exporter.get_finished_spans()
    root = _root(spans)
    assert root.attributes is not None and root.attributes["reactive_rag.outcome"] == "cancelled"
    assert root.status.status_code is StatusCode.UNSET  # a cancel is not a failure
    cut = [s for s in spans if s.name == "plan"]
    assert len(cut) == 1 and cut[0].status.status_code is StatusCode.ERROR
    assert cut[0].status.description == "the run ended before this was answered"
    assert cut[0].end_time == root.end_time


async def test_a_failed_run_is_an_error_span_saying_why(
        index: CorpusIndex, tracer: RunTracer, exporter: InMemorySpanExporter) -> None:
    GatedPlanner.gate = asyncio.Event()
    try:
        engine = Engine(index, planner=GatedPlanner, observers=[tracer])
        handle = engine.start("Who founded Bayer and when?", collections=["demo"])
        asked = asyncio.Event()
        handle.stream.subscribe(lambda e: asked.set() if e.type == "plan.requested" else None,
                                name="test")
        await asyncio.wait_for(asked.wait(), 10)
        handle.fail("the run store stopped taking this run's events")
        result = await handle.wait()
    finally:
        GatedPlanner.gate = None
    assert result.outcome == "failed"
    root = _root(exporter.get_finished_spans())
    assert root.status.status_code is StatusCode.ERROR
    assert root.status.description == "the run store stopped taking this run's events"
