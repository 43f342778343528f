"""Events declare their replies; the timeline, traces, metrics and the page read that one table.

A request event class says which events answer it, which actor answers it and
what it asks for (class attributes, not wire fields); :func:`streams.reply_table`
gathers them, ``GET /v1/events/replies`` serves it to the page, and none of the
readers keeps a copy of its own.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from reactive_rag.cli._timeline import build_timeline
from reactive_rag.index import CorpusIndex
from reactive_rag.server import openapi_document
from reactive_rag.web import add_web_routes
from streams import (
    EVENT_TYPES,
    ErrorInfo,
    Event,
    RequestInfo,
    SearchRequested,
    decode_json,
    encode_json,
    reply_table,
    request_info,
)

from .._server_fixtures import serve, two_tenants

REPO = Path(__file__).resolve().parents[3]
READERS = ("reactive_rag/cli/_timeline.py", "reactive_rag/observability/_otel.py",
           "reactive_rag/observability/_metrics.py", "reactive_rag/web/timeline.js")


def _expected() -> dict[str, Any]:
    """The table as JSON, built from the event classes here (not from the server's code)."""
    table: dict[str, Any] = {}
    for name, cls in EVENT_TYPES.items():
        if cls.replies:
            table[name] = {
                "type": name, "handled_by": cls.handled_by, "replies": list(cls.replies),
                "failures": [r for r in cls.replies if r.endswith(".failed")],
                "operation": cls.operation, "kind": cls.request_kind}
    return {"requests": table}


def test_every_request_type_declares_replies_that_are_registered_event_types() -> None:
    requests = [name for name in EVENT_TYPES if name.endswith(".requested")]
    assert len(requests) >= 7, requests
    table = reply_table()
    for name in requests:
        info = table.get(name)
        assert info is not None and info.replies, f"{name} declares no replies"
    for name, info in table.items():
        assert EVENT_TYPES[name].replies == info.replies
        unknown = [r for r in info.replies if r not in EVENT_TYPES]
        assert not unknown, f"{name} declares unregistered replies {unknown}"
        assert info.handled_by and info.operation, name
        assert set(info.failures) <= set(info.replies), name
    assert table["search.requested"] == RequestInfo(
        type="search.requested", handled_by="searcher",
        replies=("search.completed", "search.failed"), failures=("search.failed",),
        operation="search", kind="tool")
    assert table["answer.drafted"].replies == ("answer.verified", "verify.failed")  # the verifier
    assert request_info(EVENT_TYPES["run.started"]) is None  # not a request: no replies


def test_the_declarations_are_class_attributes_not_wire_fields() -> None:
    for cls in EVENT_TYPES.values():
        assert not {"replies", "handled_by", "operation", "request_kind"} & set(cls.model_fields)
    event = SearchRequested(query="bayer founded", call_id="c1", seq=3)
    wire = json.loads(encode_json(event))
    assert not {"replies", "handled_by", "operation", "request_kind"} & set(wire)
    assert decode_json(encode_json(event)) == event


def test_no_reader_keeps_its_own_copy_of_the_table() -> None:
    replies = {r for info in reply_table().values() for r in info.replies}
    for path in READERS:
        text = (REPO / path).read_text()
        copied = sorted(r for r in replies if f'"{r}"' in text)
        assert not copied, f"{path} names replies itself: {copied}"
    assert "/v1/events/replies" in (REPO / "reactive_rag/web/timeline.js").read_text()


async def test_any_server_that_serves_the_page_serves_exactly_the_table() -> None:
    app = web.Application()
    add_web_routes(app)  # what a stand-in server mounting the page gets
    async with TestClient(TestServer(app)) as client:
        resp = await client.get("/v1/events/replies")
        assert resp.status == 200
        assert await resp.json() == _expected()


async def test_the_server_serves_the_table_without_a_token_and_documents_it(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        resp = await client.get("/v1/events/replies")  # no tenant data: no token needed
        assert resp.status == 200, await resp.text()
        assert resp.headers["Content-Type"].startswith("application/json")
        body = await resp.json()
    assert body == _expected()
    assert body == {"requests": {name: json.loads(json.dumps(dataclasses.asdict(info)))
                                 for name, info in reply_table().items()}}
    operation = openapi_document()["paths"]["/v1/events/replies"]["get"]
    assert operation["security"] == []
    assert "200" in operation["responses"]


class _ProbeRequested(Event):
    type: Literal["probe.requested"] = "probe.requested"
    replies: ClassVar[tuple[str, ...]] = ("probe.done", "probe.failed")
    handled_by: ClassVar[str] = "prober"
    operation: ClassVar[str] = "probe"
    call_id: str = ""


class _ProbeDone(Event):
    type: Literal["probe.done"] = "probe.done"
    call_id: str = ""


class _ProbeFailed(Event):
    type: Literal["probe.failed"] = "probe.failed"
    call_id: str = ""
    error: ErrorInfo


def test_a_new_request_type_shows_on_the_timeline_by_its_declaration_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in (_ProbeRequested, _ProbeDone, _ProbeFailed):  # registered for this test only
        monkeypatch.setitem(EVENT_TYPES, cls.model_fields["type"].default, cls)
    events = [
        _ProbeRequested(call_id="a", seq=1, ts=10.0),
        _ProbeRequested(call_id="b", seq=2, ts=10.1),
        _ProbeDone(call_id="a", seq=3, ts=10.5, cause=1),
        _ProbeFailed(call_id="b", seq=4, ts=10.6, cause=2,
                     error=ErrorInfo(kind="Timeout", message="no answer")),
    ]
    timeline = build_timeline(events)
    assert [lane.name for lane in timeline.lanes] == ["prober"]
    assert [(b.request_seq, b.status, b.reply_seq) for b in timeline.bars] == \
        [(1, "ok", 3), (2, "failed", 4)]
    assert timeline.bars[1].detail == "Timeout: no answer"
