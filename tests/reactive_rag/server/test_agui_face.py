"""The AG-UI face on a real server: ``GET /v1/runs/{id}/agui`` for an answered, a cancelled
and a failed run. Every event is parsed with the official ``ag-ui-protocol`` models, the
stream keeps the order rules a client relies on, its text is the verified answer, its
state patches apply, and a reconnect with Last-Event-ID resumes with no gap and no
duplicate; the face is tenant-scoped exactly like ``/events``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from actors.models import HashingEmbedder
from reactive_rag.index import CorpusIndex
from reactive_rag.server._agui import DETACHED, serve_agui
from reactive_rag.server._agui_mapping import AguiMapper
from reactive_rag.server._feed import EventFeed
from streams import Event, RunStarted

from .._corpus import DOCS
from .._server_fixtures import (
    QUESTION,
    GatedPlanner,
    auth,
    read_sse,
    serve,
    start_run,
    two_tenants,
)
from ._agui_client import Client, Message, read_agui


async def _native(client: TestClient[Any, Any], run_id: str) -> list[dict[str, Any]]:
    """The run's own events (``/events``), as JSON."""
    async with client.get(f"/v1/runs/{run_id}/events") as resp:
        return [m.data for m in (await read_sse(resp)).events]


async def _agui(client: TestClient[Any, Any], run_id: str,
                headers: dict[str, str] | None = None, query: str = "") -> list[Message]:
    async with client.get(f"/v1/runs/{run_id}/agui{query}", headers=headers) as resp:
        return await read_agui(resp)


def _whole(messages: list[Message]) -> Client:
    """A client that read ``messages`` from the start: one run, begun and ended."""
    seen = Client().apply_all(messages)
    assert messages[0].type == "RUN_STARTED" and messages[1].type == "STATE_SNAPSHOT"
    assert seen.end is messages[-1], "the stream does not end with its one terminal event"
    return seen


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


async def test_an_answered_run_is_a_whole_agui_run_with_the_verified_answer_as_text(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        run_id = await start_run(client)
        messages = await _agui(client, run_id)
        native = await _native(client, run_id)
        body = await (await client.get(f"/v1/runs/{run_id}")).json()
    seen = _whole(messages)
    started = messages[0].event
    assert started.run_id == started.thread_id == run_id
    assert started.input.messages[0].content == QUESTION
    # Every message carries the seq of a run event, in the run's order.
    ids = [m.id for m in messages]
    assert all(i is not None for i in ids) and ids == sorted(ids)  # type: ignore[type-var]
    assert set(ids) <= {e["seq"] for e in native}
    # The text is the verified answer, one assistant message; the end says the outcome.
    verified = _of(native, "answer.verified")[-1]["text"]
    assert len(seen.texts) == 1 and seen.text == verified == body["answer"]
    end = seen.end
    assert end is not None and end.type == "RUN_FINISHED" and end.event.outcome is None
    assert end.event.result == {"outcome": "answered", "answer": body["answer"],
                                "citations": body["citations"], "reason": body["reason"]}
    # Each search is a tool call with its arguments and its hits.
    searches = _of(native, "search.requested")
    assert {c: (v.name, json.loads(v.args)) for c, v in seen.calls.items()} == {
        s["call_id"]: ("search", {"query": s["query"], "collections": ["demo"]})
        for s in searches}
    for search in _of(native, "search.completed"):
        result = seen.calls[search["call_id"]].result
        assert result is not None
        assert [h["url"] for h in json.loads(result)["hits"]] == [h["url"] for h in
                                                                  search["hits"]]
    # Plan rounds and the answer are steps; the state is the run's budget and evidence.
    rounds = [e["round"] for e in _of(native, "plan.requested")]
    assert seen.step_log == [f"plan round {r}" for r in rounds] + ["answer"]
    tick = _of(native, "budget.tick")[-1]
    assert seen.state == {
        "round": rounds[-1],
        "evidence_count": len({c["id"] for e in _of(native, "evidence.registered")
                               for c in e["chunks"]}),
        "budget": {k: v for k, v in tick.items()
                   if k not in ("type", "v", "run_id", "seq", "ts", "actor", "cause")}}
    # Nothing of the run is lost: what has no AG-UI event of its own is a CUSTOM one.
    custom = [m.event.value for m in messages if m.type == "CUSTOM"]
    assert custom == [e for e in native if e["type"] in {c["type"] for c in custom}]
    assert "answer.drafted" in {c["type"] for c in custom}


async def test_a_reconnect_with_last_event_id_resumes_with_no_gap_and_no_duplicate(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        run_id = await start_run(client)
        full = await _agui(client, run_id)
        whole, last = _whole(full), full[-1].id
        assert last is not None
        for n in range(1, last + 1):
            query, headers = ("", {"Last-Event-ID": str(n)}) if n % 2 else (f"?after={n}", {})
            resumed = await _agui(client, run_id, headers, query)
            snapshot, rest = resumed[0], resumed[1:]
            # First the state as of N, exactly what a client that read up to N holds...
            assert snapshot.type == "STATE_SNAPSHOT" and snapshot.id == n
            holder = Client().apply_all([m for m in full if m.id is not None and m.id <= n])
            assert snapshot.event.snapshot == holder.state
            if n == last:  # a client holding the end gets the end again, never nothing
                assert [(m.id, m.data) for m in rest] == [(last, full[-1].data)]
                continue
            # ...then every AG-UI event of the run events after N, once, in order.
            after = [(m.id, m.data) for m in full if m.id is not None and m.id > n]
            assert [(m.id, m.data) for m in rest] == after
            # The resumed client ends with the whole run: its text, its end, its state.
            holder.apply_all(resumed)
            assert holder.end is not None and holder.end.data == full[-1].data
            assert holder.state == whole.state and holder.text == whole.text


async def test_a_cancelled_run_ends_cancelled_and_a_client_cut_mid_run_resumes_live(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, planner=GatedPlanner) as client:
            run_id = await start_run(client)

            def planning(messages: list[Message]) -> bool:
                state = Client().apply_all(messages).state
                return state is not None and state["budget"]["steps"] == 1

            async with client.get(f"/v1/runs/{run_id}/agui") as stays:  # to the end
                live = await read_agui(stays, until=planning)
                async with client.get(f"/v1/runs/{run_id}/agui") as resp:
                    first = await read_agui(resp, until=planning)  # then this one hangs up
                resp = await client.post(f"/v1/runs/{run_id}/cancel")
                assert resp.status == 202 and (await resp.json())["cancelled"] is True
                live += await read_agui(stays)
            cut = Client().apply_all(first)
            assert cut.steps == ["plan round 1"] and cut.end is None
            rest = await _agui(client, run_id, {"Last-Event-ID": str(first[-1].id)})
            stored = await _agui(client, run_id)
            body = await (await client.get(f"/v1/runs/{run_id}")).json()
    finally:
        GatedPlanner.gate = None
    assert rest[0].type == "STATE_SNAPSHOT" and rest[0].event.snapshot == cut.state
    cut.resumed = True
    cut.apply_all(rest[1:])
    end = cut.end
    assert end is not None and end is rest[-1] and end.type == "RUN_FINISHED"
    assert end.data["outcome"] == {"type": "cancelled"}
    assert end.event.result["outcome"] == "cancelled" == body["outcome"]
    assert end.event.result["reason"] == body["reason"]
    # The cut client saw exactly what a client that never left saw, and what is stored.
    seen = [(m.id, m.data) for m in first + rest[1:]]
    assert seen == [(m.id, m.data) for m in live] == [(m.id, m.data) for m in stored]
    assert _whole(stored).text == ""  # nothing was verified: no text at all


class _BrokenIndex(CorpusIndex):
    """An index whose searches fail (its disk went away): every tool call of a run fails."""

    def search(self, query: str, **kwargs: Any) -> Any:
        raise OSError("the index disk is gone")


async def test_a_failed_run_ends_with_run_error_and_each_failed_search_is_a_result(
        tmp_path: Path) -> None:
    index = _BrokenIndex(tmp_path / "idx", HashingEmbedder())
    index.index_documents("demo", DOCS)
    try:
        async with serve(tmp_path, index) as client:
            run_id = await start_run(client)
            messages = await _agui(client, run_id)
            native = await _native(client, run_id)
    finally:
        index.close()
    seen = _whole(messages)
    end = seen.end
    finished = native[-1]
    assert finished["outcome"] == "failed"
    assert end is not None and end.type == "RUN_ERROR"
    assert end.event.code == "failed" and end.event.message == finished["reason"]
    assert "every tool call failed" in end.event.message
    assert not any(m.type == "RUN_FINISHED" for m in messages) and seen.texts == {}
    failed = _of(native, "search.failed")
    assert failed and {s["call_id"] for s in failed} == set(seen.calls)
    for search in failed:
        result = seen.calls[search["call_id"]].result
        assert result is not None
        assert json.loads(result)["error"]["kind"] == search["error"]["kind"]


async def test_the_stream_is_tenant_scoped_and_checks_its_resume_point_like_events(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        run_id = await start_run(client, "acme")
        url = f"/v1/runs/{run_id}/agui"
        other = await client.get(url, headers=auth("beta"))
        assert other.status == 404 and (await other.json())["code"] == "run_not_found"
        anonymous = await client.get(url)
        assert anonymous.status == 401
        for bad in ({"Last-Event-ID": "x"}, {"Last-Event-ID": "-1"}):
            resp = await client.get(url, headers={**auth("acme"), **bad})
            assert resp.status == 422 and (await resp.json())["code"] == "invalid_parameter"
        messages = await _agui(client, run_id, auth("acme"))
        assert _whole(messages).end is not None


async def test_a_client_whose_feed_fails_gets_keep_alives_then_a_detached_event() -> None:
    gate = asyncio.Event()

    async def source() -> AsyncIterator[Event]:
        yield RunStarted(question="q", run_id="r1", seq=1, ts=1.0)
        await gate.wait()  # the run is quiet: keep-alives flow
        raise ConnectionError("the store went away")

    async def handler(request: web.Request) -> web.StreamResponse:
        async with EventFeed(source(), maxsize=8) as feed:
            return await serve_agui(request, feed, AguiMapper("r1"), keepalive_s=0.01,
                                    write_timeout_s=5)

    app = web.Application()
    app.router.add_get("/agui", handler)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client, \
            client.get("/agui") as resp:
        opening = await read_agui(resp, until=lambda ms: len(ms) == 2)
        assert [m.type for m in opening] == ["RUN_STARTED", "STATE_SNAPSHOT"]
        while (await resp.content.readline()) != b": keep-alive\n":
            pass
        gate.set()
        closing = await read_agui(resp)
    assert [(m.id, m.type) for m in closing] == [(None, "CUSTOM")]  # no id: resume at 1
    assert closing[0].event.name == DETACHED
    assert closing[0].event.value == {"reason": "event source failed: ConnectionError"}
