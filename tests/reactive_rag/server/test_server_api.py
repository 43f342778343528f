"""The HTTP API end to end on a real local server: runs, events, resume, cancel, validation."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from reactive_rag.index import CorpusIndex
from reactive_rag.server import PROBLEM_CODES, openapi_document

from .._server_fixtures import (
    QUESTION,
    GatedPlanner,
    auth,
    read_sse,
    serve,
    start_run,
    two_tenants,
)


async def test_a_run_streams_every_event_in_order_then_reports_its_answer(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        resp = await client.post("/v1/runs", json={"question": QUESTION, "collections": ["demo"]})
        assert resp.status == 201
        created = await resp.json()
        run_id = created["run_id"]
        assert created["links"]["events"] == f"/v1/runs/{run_id}/events"
        assert resp.headers["Location"] == f"/v1/runs/{run_id}"
        async with client.get(f"/v1/runs/{run_id}/events") as events:
            assert events.headers["Content-Type"].startswith("text/event-stream")
            read = await read_sse(events)
        assert read.seqs == list(range(1, len(read.seqs) + 1))
        assert read.events[0].event == "run.started" and read.events[-1].event == "run.finished"
        assert all(m.data["seq"] == m.id and m.data["type"] == m.event for m in read.events)
        body = await (await client.get(f"/v1/runs/{run_id}")).json()
        assert body["status"] == "finished" and body["outcome"] == "answered"
        assert body["last_seq"] == read.seqs[-1] and body["question"] == QUESTION
        assert body["answer"] and body["citations"]
        assert body["citations"][0]["title"] in {"Bayer", "Aspirin", "Tea"}
        listing = await (await client.get("/v1/runs")).json()
        assert [r["run_id"] for r in listing["runs"]] == [run_id]


async def test_resume_with_last_event_id_or_after_gives_the_rest_once(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        run_id = await start_run(client)
        async with client.get(f"/v1/runs/{run_id}/events") as resp:
            full = (await read_sse(resp)).seqs
        async with client.get(f"/v1/runs/{run_id}/events",
                              headers={"Last-Event-ID": "5"}) as resp:
            assert (await read_sse(resp)).seqs == full[5:]
        async with client.get(f"/v1/runs/{run_id}/events?after=7") as resp:
            assert (await read_sse(resp)).seqs == full[7:]
        # Holding the end, or a seq the store never had: the end again, never an
        # empty stream (a browser's EventSource would reconnect for ever).
        for after in (full[-1], full[-1] + 100):
            async with client.get(f"/v1/runs/{run_id}/events?after={after}") as resp:
                assert (await read_sse(resp)).seqs == [full[-1]]
        for bad in ("-1", "x", "1e3", "9" * 20):
            resp = await client.get(f"/v1/runs/{run_id}/events", params={"after": bad})
            assert resp.status == 422 and (await resp.json())["code"] == "invalid_parameter"


async def test_a_live_run_is_followed_and_a_client_leaving_does_not_cancel_it(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, planner=GatedPlanner) as client:
            run_id = await start_run(client)
            async with client.get(f"/v1/runs/{run_id}/events") as resp:
                first = await read_sse(resp, limit=2)  # then the client hangs up
            assert first.seqs == [1, 2]
            GatedPlanner.gate.set()
            async with client.get(f"/v1/runs/{run_id}/events",
                                  headers={"Last-Event-ID": "2"}) as resp:
                rest = await read_sse(resp)
            assert rest.seqs[0] == 3 and rest.events[-1].data["outcome"] == "answered"
    finally:
        GatedPlanner.gate = None


async def test_websocket_streams_resumes_and_cancels(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, planner=GatedPlanner) as client:
            run_id = await start_run(client)
            async with client.ws_connect(f"/v1/runs/{run_id}/ws?after=1") as ws:
                first = json.loads((await ws.receive(timeout=10)).data)
                assert first["seq"] == 2
                await ws.send_str(json.dumps({"cancel": True}))
                seen: list[dict[str, Any]] = [first]
                replies = []
                async for msg in ws:
                    data = json.loads(msg.data)
                    (replies if data["type"] == "cancel.result" else seen).append(data)
                assert replies == [{"type": "cancel.result", "cancelled": True}]
                assert [e["seq"] for e in seen] == list(range(2, 2 + len(seen)))
                assert seen[-1]["type"] == "run.finished" and seen[-1]["outcome"] == "cancelled"
                assert ws.close_code == 1000
            body = await (await client.get(f"/v1/runs/{run_id}")).json()
            assert body["outcome"] == "cancelled"
    finally:
        GatedPlanner.gate = None


async def test_a_cancel_right_after_the_start_is_not_lost(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        for _ in range(5):
            run_id = await start_run(client)
            resp = await client.post(f"/v1/runs/{run_id}/cancel")
            assert resp.status == 202
            cancelled = (await resp.json())["cancelled"]
            async with client.get(f"/v1/runs/{run_id}/events") as events:
                last = (await read_sse(events)).events[-1]
            assert cancelled == (last.data["outcome"] == "cancelled")
            again = await client.post(f"/v1/runs/{run_id}/cancel")
            assert (await again.json())["cancelled"] is False


@pytest.mark.parametrize(("body", "status", "code", "field"), [
    ({"question": "q", "colour": "red"}, 422, "validation_failed", "colour"),
    ({"question": ""}, 422, "validation_failed", "question"),
    ({"question": "   "}, 422, "validation_failed", "question"),
    ({"question": "x" * 4001}, 422, "validation_failed", "question"),
    ({"question": 42}, 422, "validation_failed", "question"),
    ({}, 422, "validation_failed", "question"),
    ({"question": "q", "mode": "swarm"}, 422, "validation_failed", "mode"),
    ({"question": "q", "collections": "demo"}, 422, "validation_failed", "collections"),
    ({"question": "q", "collections": ["../etc"]}, 422, "validation_failed", "collections.0"),
    ({"question": "q", "collections": []}, 422, "validation_failed", "collections"),
    ({"question": "q", "budget": {"tool_calls": 3}}, 422, "validation_failed", "budget"),
    ({"question": "q", "budget": {"max_steps": 2.5}}, 422, "validation_failed", "budget"),
    ({"question": "q", "budget": {"wall_s": -1}}, 422, "validation_failed", "budget"),
    ({"question": "q", "budget": {"wall_s": True}}, 422, "validation_failed", "budget"),
    ({"question": "q", "budget": {"compress_context": 1}}, 422, "validation_failed", "budget"),
    ({"question": "q", "budget": {"saturation_overlap": 2.0}}, 422, "run_config", None),
    ({"question": "q", "collections": ["nowhere"]}, 422, "run_config", "collections"),
    (["question"], 422, "validation_failed", None),
])
async def test_bad_bodies_are_refused_with_the_field(
        tmp_path: Path, server_index: CorpusIndex, body: Any, status: int, code: str,
        field: str | None) -> None:
    async with serve(tmp_path, server_index) as client:
        resp = await client.post("/v1/runs", json=body)
        problem = await resp.json()
        assert resp.status == status, problem
        assert resp.headers["Content-Type"].startswith("application/problem+json")
        assert problem["code"] == code and problem["status"] == status
        assert problem["title"] == PROBLEM_CODES[code] and problem["type"].endswith(code)
        if field is not None:
            assert problem["field"].startswith(field)
        assert (await (await client.get("/v1/runs")).json())["runs"] == []


async def test_body_size_type_and_json_errors(tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        big = json.dumps({"question": "q", "pad": "x" * 70_000})
        resp = await client.post("/v1/runs", data=big,
                                 headers={"Content-Type": "application/json"})
        assert resp.status == 413 and (await resp.json())["code"] == "body_too_large"
        resp = await client.post("/v1/runs", data="{not json",
                                 headers={"Content-Type": "application/json"})
        assert resp.status == 400 and (await resp.json())["code"] == "invalid_json"
        resp = await client.post("/v1/runs", data="question=q",
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert resp.status == 415
        resp = await client.get("/v1/nothing")
        assert resp.status == 404 and (await resp.json())["code"] == "route_not_found"
        resp = await client.delete("/v1/runs")
        assert resp.status == 405 and (await resp.json())["code"] == "method_not_allowed"


async def test_runs_are_paged_newest_first(tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        ids = [await start_run(client, mode="rag") for _ in range(5)]
        seen: list[str] = []
        cursor: str | None = None
        while True:
            params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
            page = await (await client.get("/v1/runs", params=params)).json()
            seen += [r["run_id"] for r in page["runs"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == ids[::-1]
        for params in ({"limit": "0"}, {"limit": "x"}, {"cursor": "garbage"}):
            resp = await client.get("/v1/runs", params=params)
            assert resp.status == 422


async def test_rate_limits_answer_429_with_retry_after(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, planner=GatedPlanner,
                         tenants=two_tenants(max_concurrent_runs=2, runs_per_minute=3)) as client:
            await start_run(client, "acme")
            await start_run(client, "acme")
            resp = await client.post("/v1/runs", json={"question": "q"}, headers=auth("acme"))
            assert resp.status == 429 and resp.headers["Retry-After"] == "1"
            assert (await resp.json())["code"] == "too_many_concurrent_runs"
            await start_run(client, "beta")  # limits are per tenant
            GatedPlanner.gate.set()
            await client.app[__import__("reactive_rag.server").server.MANAGER_KEY].wait_all()
            await start_run(client, "acme")
            resp = await client.post("/v1/runs", json={"question": "q"}, headers=auth("acme"))
            assert resp.status == 429 and (await resp.json())["code"] == "too_many_runs_per_minute"
            assert 1 <= int(resp.headers["Retry-After"]) <= 60
    finally:
        GatedPlanner.gate = None


async def test_health_readiness_and_an_openapi_document_covering_every_route(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        assert (await (await client.get("/healthz")).json()) == {"status": "ok"}
        assert (await (await client.get("/readyz")).json()) == {"status": "ready"}
        doc = await (await client.get("/v1/openapi.json")).json()
        base = json.loads(json.dumps(openapi_document()))
        assert set(base["paths"]) <= set(doc["paths"]) and doc["openapi"] == base["openapi"]
        assert doc["openapi"].startswith("3.1")
        routed = set()
        for route in client.app.router.routes():
            info = route.resource.get_info() if route.resource else {}
            path = info.get("path") or info.get("formatter")
            if path and route.method != "HEAD" and path.startswith(("/v1/", "/healthz",
                                                                      "/readyz", "/metrics",
                                                                      "/asyncapi.json")):
                routed.add((path, route.method.lower()))
        documented = {(p, m) for p, ops in doc["paths"].items() for m in ops}
        assert routed == documented
        page = await client.get("/")
        if page.status == 200:  # the web page is installed: served at / with its assets
            assert "text/html" in page.headers["Content-Type"]
        codes = doc["components"]["schemas"]["Problem"]["properties"]["code"]["enum"]
        assert set(codes) >= set(PROBLEM_CODES)


async def test_shutdown_cancels_live_runs_and_closes_websockets(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    from reactive_rag.store import SqliteRunStore

    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, planner=GatedPlanner) as client:
            run_id = await start_run(client)
            ws = await client.ws_connect(f"/v1/runs/{run_id}/ws")
            await ws.receive(timeout=10)
            await client.close()
            msg = await ws.receive(timeout=10)
            assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED,
                                aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.TEXT)
            await ws.close()
    finally:
        GatedPlanner.gate = None
    async with SqliteRunStore(tmp_path / "runs.db") as store:
        record = await store.get_run(run_id)
        assert record.status == "finished" and record.outcome == "cancelled"


def test_public_names_are_exported() -> None:
    import inspect

    import reactive_rag.server as server

    public = {n for n in dir(server) if not n.startswith("_")
              and not inspect.ismodule(getattr(server, n))}
    assert set(server.__all__) == public and len(server.__all__) == len(public)


async def test_a_corrupt_gzip_body_is_a_json_problem_not_a_500(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        resp = await client.post("/v1/runs", data=b"\x1f\x8b\x08\x00 not gzip at all",
                                 headers={"Content-Type": "application/json",
                                          "Content-Encoding": "gzip"})
        assert resp.status == 400
        body = await resp.json(content_type=None)
        assert body["code"] == "invalid_body"


async def test_a_deeply_nested_websocket_frame_gets_an_error_and_the_session_goes_on(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, planner=GatedPlanner) as client:
            run_id = await start_run(client)
            async with client.ws_connect(f"/v1/runs/{run_id}/ws") as ws:
                await ws.send_str("[" * 2000 + "]" * 2000)
                await ws.send_str(json.dumps({"cancel": True}))
                replies = []
                while len(replies) < 2:
                    msg = await ws.receive(timeout=10)
                    assert msg.type is aiohttp.WSMsgType.TEXT, msg
                    data = json.loads(msg.data)
                    if data.get("type") in ("error", "cancel.result"):
                        replies.append(data)
                assert replies[0]["code"] == "invalid_message"
                assert replies[1] == {"type": "cancel.result", "cancelled": True}
    finally:
        GatedPlanner.gate = None


@pytest.mark.parametrize("raw", [
    b"GET /v1/runs?access_token=SECRET-Q1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
    b"SECRET-H1" + b"a" * 9000 + b"\r\n\r\n",
    b"GET /v1/runs?access_token=SECRET-Q2 HTTP/1.1 extra\r\nHost: x\r\n\r\n",
    b"GET /v1/ru\x01ns?access_token=SECRET-Q3 HTTP/1.1\r\nHost: x\r\n\r\n",
])
async def test_a_request_the_http_parser_rejects_never_logs_its_token(
        tmp_path: Path, server_index: CorpusIndex, raw: bytes,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with serve(tmp_path, server_index) as client:
        reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
        writer.write(raw)
        await writer.drain()
        reply = await reader.read(4096)
        writer.close()
    assert reply.startswith(b"HTTP/1.") and b" 400 " in reply.split(b"\r\n")[0]
    assert "Error handling request" in caplog.text  # the rejection is still logged...
    assert "SECRET" not in caplog.text  # ...without the token
