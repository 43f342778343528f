"""``[observability]``: a real server exports its runs' spans to an OTLP/HTTP collector.

The collector is a small aiohttp server on loopback, started by each test, that takes
``POST /v1/traces`` as OTLP/HTTP does (JSON, the encoding the server sends) and keeps
every request; it can also be told to answer 503, as a collector that is overloaded does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from reactive_rag import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement import Decision, PlannerView, Rejection
from reactive_rag.judgement.offline import OfflinePlanner
from reactive_rag.observability import ObservabilityConfig
from reactive_rag.server import ConfigError, ServerConfig, create_app

from ..._eventually import eventually
from .._server_fixtures import QUESTION, auth, read_sse, start_run, two_tenants

ROOT = "invoke_agent reactive_rag"
REFUSAL = f"search {QUESTION!r} is not allowed here"


class QuotingPlanner:
    """The offline planner, whose first turn also refuses a call with a reason quoting the
    asker's words (as a chat model's refused calls do): ``tool.rejected`` on the span."""

    name = "quoting"

    def __init__(self) -> None:
        self._inner = OfflinePlanner()
        self._quoted = False

    async def decide(self, view: PlannerView) -> Decision:
        decision = await self._inner.decide(view)
        if self._quoted:
            return decision
        self._quoted = True
        return dataclasses.replace(decision, rejected=(Rejection("bad-1", "search", REFUSAL),))


@dataclass
class Collector:
    """What the collector received: one entry per POST."""

    url: str = ""
    requests: list[tuple[Mapping[str, str], dict[str, Any]]] = field(default_factory=list)
    bodies: list[str] = field(default_factory=list)
    failing: bool = False
    refused: list[dict[str, Any]] = field(default_factory=list)
    """The spans of the requests answered 503."""

    def spans(self) -> list[dict[str, Any]]:
        return [span for _, body in self.requests for span in _spans(body)]

    def run_spans(self, run_id: str) -> list[dict[str, Any]]:
        """The spans of the trace whose root span carries ``run_id``."""
        roots = [s for s in self.spans() if _attrs(s).get("reactive_rag.run_id") == run_id]
        if not roots:
            return []
        trace = roots[0]["traceId"]
        return [s for s in self.spans() if s["traceId"] == trace]

    def has_root(self, run_id: str) -> bool:
        return any(s["name"] == ROOT for s in self.run_spans(run_id))


def _spans(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [span for rs in body["resourceSpans"] for ss in rs["scopeSpans"]
            for span in ss["spans"]]


@asynccontextmanager
async def collector() -> AsyncIterator[Collector]:
    seen = Collector()

    async def traces(request: web.Request) -> web.Response:
        if seen.failing:
            seen.refused += _spans(await request.json())
            return web.json_response({"message": "overloaded"}, status=503)
        if request.content_type != "application/json":
            return web.json_response({"message": "unsupported"}, status=415)
        text = await request.text()
        seen.bodies.append(text)
        seen.requests.append((request.headers.copy(), json.loads(text)))  # case-blind
        return web.json_response({})  # an ExportTraceServiceResponse, no partial success

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/traces", traces)
    async with TestServer(app, host="127.0.0.1") as server:
        seen.url = str(server.make_url("/v1/traces"))
        yield seen


@asynccontextmanager
async def serve_traced(tmp_path: Path, index: CorpusIndex, observability: ObservabilityConfig,
                       env: Mapping[str, str] | None = None,
                       ) -> AsyncIterator[TestClient[Any, Any]]:
    """A real server on 127.0.0.1 with two tenants, exporting to ``observability``."""
    cfg = ServerConfig(store=str(tmp_path / "runs.db"), tenants=two_tenants(),
                       default_collections=("demo",), observability=observability)
    app = create_app(cfg, engine=Engine(index, planner=QuotingPlanner), env=env or {})
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


async def _finish(client: TestClient[Any, Any], run_id: str, tenant: str = "acme") -> str:
    """Follow the run to its end; its outcome."""
    async with client.get(f"/v1/runs/{run_id}/events", headers=auth(tenant)) as resp:
        read = await read_sse(resp)
    outcome: str = read.events[-1].data["outcome"]
    return outcome


def _attrs(span: Mapping[str, Any]) -> dict[str, Any]:
    """OTLP attributes (a list of ``{key, value: {xValue}}``) as a plain dict."""
    out: dict[str, Any] = {}
    for kv in span.get("attributes", []):
        (kind, value), = kv["value"].items()
        out[kv["key"]] = int(value) if kind == "intValue" else value
    return out


def _closed_port() -> int:
    with socket.socket() as sock:  # bound then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_a_run_through_serve_reaches_the_collector_as_one_trace(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with collector() as seen:
        config = ObservabilityConfig(endpoint=seen.url, service_name="rag-prod",
                                     headers_env={"x-api-key": "OTLP_KEY"}, batch_delay_s=0.05)
        async with serve_traced(tmp_path, server_index, config,
                                env={"OTLP_KEY": "collector-secret"}) as client:
            run_id = await start_run(client, "acme")
            assert await _finish(client, run_id) == "answered"
            # sent while the server runs, not only at shutdown
            await eventually(lambda: seen.has_root(run_id), "the run's root span at the collector")

    headers, body = seen.requests[0]
    assert headers["x-api-key"] == "collector-secret"  # the variable's value, read at start
    assert headers["Content-Type"] == "application/json"
    resource = _attrs(body["resourceSpans"][0]["resource"])
    assert resource["service.name"] == "rag-prod"

    spans = seen.run_spans(run_id)
    roots = [s for s in spans if "parentSpanId" not in s]
    assert [r["name"] for r in roots] == [ROOT]  # one trace, one root: the run
    root = roots[0]
    assert re.fullmatch(r"[0-9a-f]{32}", root["traceId"])
    assert _attrs(root)["reactive_rag.run_id"] == run_id
    assert _attrs(root)["reactive_rag.tenant"] == "acme"
    assert _attrs(root)["reactive_rag.outcome"] == "answered"
    assert root["status"]["code"] == 0  # unset: not an error
    ids = {s["spanId"] for s in spans}
    assert all(s.get("parentSpanId", root["spanId"]) in ids for s in spans)  # no orphans
    start, end = int(root["startTimeUnixNano"]), int(root["endTimeUnixNano"])
    assert all(start <= int(s["startTimeUnixNano"]) <= int(s["endTimeUnixNano"]) <= end
               for s in spans)
    names = [s["name"] for s in spans]
    assert any(n.startswith("plan round ") for n in names)
    assert "execute_tool search" in names and "write" in names and "verify" in names
    search = next(s for s in spans if s["name"] == "execute_tool search")
    assert _attrs(search)["gen_ai.tool.name"] == "search"
    assert _attrs(search)["reactive_rag.hits"] >= 0
    rejected = [e for s in spans for e in s["events"] if e["name"] == "tool.rejected"]
    assert [_attrs(e)["call_id"] for e in rejected] == ["bad-1"]
    assert "reason" not in _attrs(rejected[0])
    # the question is user content (and so is a reason quoting it): not exported unless
    # the operator turns it on
    assert not any(QUESTION in text for text in seen.bodies)


async def test_spans_still_queued_at_shutdown_are_sent_before_the_server_stops(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with collector() as seen:
        config = ObservabilityConfig(endpoint=seen.url, batch_delay_s=300, record_content=True)
        async with serve_traced(tmp_path, server_index, config) as client:
            run_ids = [await start_run(client, tenant) for tenant in ("acme", "beta")]
            for run_id, tenant in zip(run_ids, ("acme", "beta"), strict=True):
                assert await _finish(client, run_id, tenant) == "answered"
            assert seen.requests == []  # held in the batch (300 s): only shutdown sends it
        # the server has stopped: everything it queued reached the collector
        for run_id, tenant in zip(run_ids, ("acme", "beta"), strict=True):
            spans = seen.run_spans(run_id)
            root = next(s for s in spans if s["name"] == ROOT)
            assert _attrs(root)["reactive_rag.tenant"] == tenant
            assert _attrs(root)["reactive_rag.question"] == QUESTION  # record_content = true
            notes = [_attrs(e) for s in spans for e in s["events"]]
            assert {"call_id": "bad-1", "tool": "search", "reason": REFUSAL} in notes
            assert {s["name"] for s in spans} >= {ROOT, "execute_tool search", "write"}
        assert {s["traceId"] for s in seen.run_spans(run_ids[0])}.isdisjoint(
            {s["traceId"] for s in seen.run_spans(run_ids[1])})  # a trace per run


async def test_a_collector_that_is_down_or_refusing_costs_spans_never_runs(
        tmp_path: Path, server_index: CorpusIndex, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="reactive_rag.observability")
    dead = ObservabilityConfig(endpoint=f"http://127.0.0.1:{_closed_port()}/v1/traces",
                               batch_delay_s=0.05, timeout_s=5)
    async with serve_traced(tmp_path, server_index, dead) as client:
        run_id = await start_run(client, "acme")
        assert await _finish(client, run_id) == "answered"
        await eventually(lambda: "OTLP export to" in caplog.text, "the export failure logged")
        resp = await client.get(f"/v1/runs/{run_id}", headers=auth("acme"))
        assert (await resp.json())["outcome"] == "answered"
        second = await start_run(client, "acme")  # the server goes on taking runs
        assert await _finish(client, second) == "answered"
    assert "failed" in caplog.text and "dropped" in caplog.text

    caplog.clear()
    async with collector() as seen:
        seen.failing = True  # an overloaded collector: 503 to every export
        config = ObservabilityConfig(endpoint=seen.url, batch_delay_s=0.05)
        async with serve_traced(tmp_path, server_index, config) as client:
            lost = await start_run(client, "acme")
            assert await _finish(client, lost) == "answered"
            await eventually(lambda: any(_attrs(s).get("reactive_rag.run_id") == lost
                                         for s in seen.refused), "the run's root refused")
            assert "HTTP 503" in caplog.text
            seen.failing = False  # it recovers: later runs' spans arrive
            kept = await start_run(client, "acme")
            assert await _finish(client, kept) == "answered"
            await eventually(lambda: seen.has_root(kept), "the later run's spans")
        lost_trace = {s["traceId"] for s in seen.refused}
        assert not any(s["traceId"] in lost_trace for s in seen.spans())  # dropped, not resent
        assert "works again" in caplog.text


async def test_a_sample_ratio_of_zero_exports_no_run(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with collector() as seen:
        config = ObservabilityConfig(endpoint=seen.url, sample_ratio=0.0)
        async with serve_traced(tmp_path, server_index, config) as client:
            run_id = await start_run(client, "acme")
            assert await _finish(client, run_id) == "answered"
    assert seen.requests == []  # shutdown flushed, and there was nothing to send


def _load(tmp_path: Path, table: str) -> ServerConfig:
    path = tmp_path / "server.toml"
    path.write_text(f"[observability]\n{table}\n", encoding="utf-8")
    return ServerConfig.load(path, env={})


def test_the_observability_table_loads_from_the_server_config(tmp_path: Path) -> None:
    config = _load(tmp_path, 'endpoint = "https://otel.example.com:4318/v1/traces"\n'
                             'service_name = "rag-eu"\n'
                             'headers_env = { authorization = "OTLP_AUTH" }\n'
                             'timeout_s = 3\nsample_ratio = 0.25')
    obs = config.observability
    assert obs is not None
    assert obs.endpoint == "https://otel.example.com:4318/v1/traces"
    assert (obs.service_name, obs.timeout_s, obs.sample_ratio) == ("rag-eu", 3, 0.25)
    assert obs.record_content is False  # user content stays out unless turned on
    assert ServerConfig.load(None, env={}).observability is None  # no table, no export


def test_the_operator_config_in_the_docs_loads_as_written(tmp_path: Path) -> None:
    page = (Path(__file__).resolve().parents[3] / "docs" / "observability.md").read_text()
    section = page.split("### Exporting traces from `serve`", 1)[1]
    toml = section.split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "server.toml"
    path.write_text(toml, encoding="utf-8")
    obs = ServerConfig.load(path, env={}).observability
    assert obs is not None and obs.endpoint == "http://127.0.0.1:4318/v1/traces"
    assert obs.headers({"OTLP_AUTH_HEADER": "Bearer t"}) == {"authorization": "Bearer t"}
    assert obs.record_content is False


@pytest.mark.parametrize(("table", "says"), [
    ('endpoint = "localhost:4318"', "observability.endpoint: Value error, endpoint "
                                    "'localhost:4318' must be an http:// or https:// URL"),
    ('endpoint = "http://:4318/v1/traces"', "must be an http:// or https:// URL with a host"),
    ('endpoint = "http://127.0.0.1:99999/v1/traces"', "is not a URL"),
    ('endpoint = "http://user:pw@127.0.0.1:4318/v1/traces"', "must not carry credentials"),
    ('endpoint = "http://127.0.0.1:4318/v1/traces"\nendpont = "x"',
     "observability.endpont: Extra inputs are not permitted"),
    ('endpoint = "http://127.0.0.1:4318/v1/traces"\nsample_ratio = 2',
     "observability.sample_ratio"),
    ('endpoint = "http://127.0.0.1:4318/v1/traces"\nheaders_env = { authorization = '
     '"Bearer abc123" }', "is not an environment variable name"),
    ('endpoint = "http://127.0.0.1:4318/v1/traces"\nheaders_env = { "bad header" = "X" }',
     "is not an HTTP header name"),
])
def test_a_bad_observability_table_is_a_config_error_naming_the_key(
        tmp_path: Path, table: str, says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)):
        _load(tmp_path, table)


def test_an_unset_header_variable_stops_the_server_before_it_opens_anything(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    config = ServerConfig(store=str(tmp_path / "runs.db"), observability=ObservabilityConfig(
        endpoint="http://127.0.0.1:4318/v1/traces", headers_env={"x-api-key": "OTLP_KEY"}))
    with pytest.raises(ConfigError, match=r"\[observability\] .*unset environment "
                                          r"variable\(s\): OTLP_KEY"):
        create_app(config, engine=Engine(server_index), env={"OTHER": "x"})
    assert not (tmp_path / "runs.db").exists()


def test_the_config_error_reads_as_the_operator_wrote_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        _load(tmp_path, 'endpoint = "ftp://collector/v1/traces"')
    assert str(raised.value).startswith("invalid server config at observability.endpoint:")


async def test_close_waits_no_longer_than_the_timeout_for_a_stuck_collector(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    """A collector that accepts the connection and never answers does not hold shutdown."""
    hang = asyncio.Event()

    async def stuck(request: web.Request) -> web.Response:
        await hang.wait()
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/v1/traces", stuck)
    async with TestServer(app, host="127.0.0.1") as server:
        config = ObservabilityConfig(endpoint=str(server.make_url("/v1/traces")),
                                     batch_delay_s=300, timeout_s=0.5)
        async with serve_traced(tmp_path, server_index, config) as client:
            run_id = await start_run(client, "acme")
            assert await _finish(client, run_id) == "answered"
        # the server stopped although the collector never answered its last export
        hang.set()
