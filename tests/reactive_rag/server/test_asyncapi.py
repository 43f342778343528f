"""The AsyncAPI document of a run's event stream: generated from the event models, kept
current in docs/, served at /asyncapi.json, and true of what a real server sends.

No package installed here ships the official AsyncAPI 3.0 JSON Schema, so the
document's structure is checked by hand (version, info, every reference resolves,
operations only name their channel's messages, addresses match parameters, payloads
are JSON Schemas an AsyncAPI Schema Object accepts); its payloads are checked against
every event of real runs of each outcome, over SSE and over a WebSocket.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestClient, TestServer
from jsonschema import Draft202012Validator
from pydantic import create_model
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import streams._events as event_models
from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement import Decision, PlannerView
from reactive_rag.judgement.offline import OfflinePlanner
from reactive_rag.server import EventFeed
from reactive_rag.server._asyncapi import (
    SSE_CHANNEL,
    WS_CHANNEL,
    asyncapi_document,
    asyncapi_json,
    run_event_types,
)
from reactive_rag.server._sse import serve_sse
from reactive_rag.server._ws import serve_ws
from reactive_rag.server.asyncapi import REGENERATE, main
from reactive_rag.store import RunMeta, SqliteRunStore
from streams import (
    EVENT_TYPES,
    Event,
    RunFinished,
    RunStarted,
    ToolCall,
    encode_json,
    event_from_dict,
)

from .._server_fixtures import QUESTION, SseRead, auth, read_sse, serve, start_run, two_tenants

DOC_PATH = Path(__file__).resolve().parents[3] / "docs" / "asyncapi.json"
DOC_URI = "urn:reactive-rag:asyncapi"

NO_EVIDENCE = "quantum chromodynamics lattice gluon"
BROKEN = "What changed between the two dates?"  # its only search is refused: failed
HELD = "Hold on to this question until it is cancelled."


class ScriptedPlanner:
    """The offline planner, except for two questions: one whose every search fails, and one
    it never decides on (held until the run is cancelled)."""

    name = "scripted"

    def __init__(self) -> None:
        self._inner = OfflinePlanner()
        self._turn = 0

    async def decide(self, view: PlannerView) -> Decision:
        self._turn += 1
        if view.question == HELD:
            await asyncio.Event().wait()
        if view.question == BROKEN:
            if self._turn > 1:
                return Decision(action="answer")
            inverted = {"date_from": "2020-01-01", "date_to": "2010-01-01"}
            return Decision(action="search", calls=(ToolCall(
                id="s1", tool="search", args={"query": "Bayer", "filters": inverted}),))
        return await self._inner.decide(view)


class Checker:
    """Validates a message against the document's payload schema for its name on a channel
    (Draft 2020-12, references resolved in the document)."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        resource = Resource.from_contents(doc, default_specification=DRAFT202012)
        self._registry: Registry[Any] = Registry().with_resource(DOC_URI, resource)
        self._validators: dict[str, Draft202012Validator] = {}
        self.seen: set[str] = set()

    def errors(self, channel: str, name: str, data: Any) -> list[str]:
        messages = self.doc["channels"][channel]["messages"]
        if name not in messages:
            return [f"the {channel} channel has no message {name!r}"]
        pointer = messages[name]["$ref"]
        validator = self._validators.get(pointer)
        if validator is None:
            validator = self._validators[pointer] = Draft202012Validator(
                {"$ref": f"{DOC_URI}{pointer}/payload"}, registry=self._registry)
        self.seen.add(name)
        return [f"{'/'.join(map(str, e.absolute_path)) or '(payload)'}: {e.message}"
                for e in validator.iter_errors(data)]

    def check_sse(self, read: SseRead, what: str) -> None:
        assert read.messages, f"{what}: nothing was streamed"
        for m in read.messages:
            if m.id is not None:
                assert (m.data.get("seq"), m.data.get("type")) == (m.id, m.event), (what, m)
            problems = self.errors(SSE_CHANNEL, m.event, m.data)
            assert not problems, f"{what}: SSE `{m.event}` id {m.id} breaks the document: " \
                                 f"{problems}"

    def check_ws(self, data: Any, what: str, *, name: str | None = None) -> None:
        name = name or str(data.get("type", ""))
        problems = self.errors(WS_CHANNEL, name, data)
        assert not problems, f"{what}: WebSocket message {name!r} seq {data.get('seq')} " \
                             f"breaks the document: {problems}"


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return asyncapi_document()


# --- the committed document follows the models ---------------------------------------------


def test_docs_asyncapi_json_is_the_document_the_models_give() -> None:
    stale = f"docs/asyncapi.json is stale: an event model changed; regenerate it with " \
            f"`{REGENERATE}` and commit it"
    committed = DOC_PATH.read_text(encoding="utf-8")
    assert json.loads(committed) == asyncapi_document(), stale
    assert committed == asyncapi_json(), stale + " (same content, other formatting)"
    assert asyncapi_json() == asyncapi_json()  # the same models, the same bytes


def test_a_changed_event_model_makes_the_committed_document_stale(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    committed = DOC_PATH.read_text(encoding="utf-8")
    changed = create_model("RunFinished", __base__=RunFinished, __module__=RunFinished.__module__,
                           mood=(str, ""))
    monkeypatch.setitem(EVENT_TYPES, "run.finished", changed)
    schema = asyncapi_document()["components"]["schemas"]["RunFinished"]
    assert "mood" in schema["properties"] and "mood" in schema["required"]
    assert asyncapi_json() != committed
    copy = tmp_path / "asyncapi.json"
    copy.write_text(committed, encoding="utf-8")
    assert main(["--check", str(copy)]) == 1
    assert REGENERATE in capsys.readouterr().err
    assert main([str(copy)]) == 0 and main(["--check", str(copy)]) == 0
    assert "mood" in json.loads(copy.read_text())["components"]["schemas"]["RunFinished"][
        "properties"]


def _model_types() -> dict[str, type[Event]]:
    """Every event class the streams package defines, found in its module, not its registry."""
    found: dict[str, type[Event]] = {}
    for value in vars(event_models).values():
        if isinstance(value, type) and issubclass(value, Event) and value is not Event:
            default = value.model_fields["type"].default
            assert isinstance(default, str) and default, value
            found[default] = value
    return found


def test_every_event_model_is_a_message_on_both_channels_and_nothing_else_is(
        doc: dict[str, Any]) -> None:
    models = _model_types()
    assert len(models) > 40 and set(models) == set(run_event_types())
    assert all(EVENT_TYPES[name] is cls for name, cls in models.items())
    sse = set(doc["channels"][SSE_CHANNEL]["messages"])
    ws = set(doc["channels"][WS_CHANNEL]["messages"])
    assert sse - set(models) == {"detached"}
    assert ws - set(models) == {"stream.detached", "cancel.result", "error", "cancel"}
    assert set(models) <= sse and set(models) <= ws
    assert "task.finished" not in sse  # a background task's stream, not a run's
    messages = doc["components"]["messages"]
    for name, cls in models.items():
        message = messages[name]
        assert message["name"] == name and message["title"] == cls.__name__
        payload = doc["components"]["schemas"][message["payload"]["$ref"].rpartition("/")[2]]
        assert payload["properties"]["type"]["const"] == name
        assert set(payload["properties"]) == set(cls.model_fields) == set(payload["required"])
        assert message["x-priority"] == cls.priority.name.lower()
        assert message.get("x-replies", []) == list(cls.replies)


def _example(doc: dict[str, Any], schema: dict[str, Any], *, nulls: bool) -> Any:
    """A value ``schema`` accepts: every field set (``nulls``: null where allowed, arrays
    and maps empty); strings are an ISO date, which every string field takes."""
    if "$ref" in schema:
        return _example(doc, _resolve(doc, schema["$ref"]), nulls=nulls)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][-1]
    if "anyOf" in schema:
        if nulls and {"type": "null"} in schema["anyOf"]:
            return None
        branch = next(b for b in schema["anyOf"] if b != {"type": "null"})
        return _example(doc, branch, nulls=nulls)
    kind = schema.get("type")
    if kind == "object" and "properties" in schema:
        return {k: _example(doc, v, nulls=nulls) for k, v in schema["properties"].items()}
    if kind == "object":
        return {} if nulls else {"key": _example(doc, schema.get("additionalProperties") or {},
                                                 nulls=nulls)}
    if kind == "array":
        return [] if nulls else [_example(doc, schema.get("items", {}), nulls=nulls)]
    if kind == "integer":
        return schema.get("maximum", 2)
    return {"string": "2024-01-01", "number": 1.5, "boolean": True, None: "any"}[kind]


def test_every_event_model_encodes_to_exactly_what_its_payload_schema_describes(
        doc: dict[str, Any]) -> None:
    checker = Checker(doc)
    for name in run_event_types():
        payload = _resolve(doc, doc["components"]["messages"][name]["payload"]["$ref"])
        for nulls in (False, True):
            data = _example(doc, payload, nulls=nulls)
            wire = json.loads(encode_json(event_from_dict(data)))  # the model takes it...
            assert wire == data, (name, nulls)  # ...and encodes it field for field, same names
            assert not checker.errors(SSE_CHANNEL, name, wire), (name, nulls)


def test_what_the_wire_must_not_carry_fails_validation(doc: dict[str, Any]) -> None:
    checker = Checker(doc)
    finished = json.loads(encode_json(RunFinished(outcome="answered", run_id="r1", seq=9)))
    assert not checker.errors(SSE_CHANNEL, "run.finished", finished)
    for broken in ({**finished, "mood": "good"}, {**finished, "outcome": "won"},
                   {**finished, "seq": 0}, {**finished, "v": 2},
                   {k: v for k, v in finished.items() if k != "answer"}):
        assert checker.errors(SSE_CHANNEL, "run.finished", broken), broken
    assert checker.errors(SSE_CHANNEL, "run.unheard_of", finished)
    assert checker.errors(SSE_CHANNEL, "cancel.result", {"type": "cancel.result",
                                                          "cancelled": True})


# --- the document is AsyncAPI 3.0 -----------------------------------------------------------


def _walk(node: Any, path: str = "#") -> Iterator[tuple[str, Any]]:
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{path}/{i}")


def _resolve(doc: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), f"only local references: {ref}"
    node: Any = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        assert isinstance(node, dict) and part in node, f"{ref} does not resolve"
        node = node[part]
    return node


_KEY = re.compile(r"^[a-zA-Z0-9.\-_]+$")
_NOT_DRAFT_07 = {"$defs", "prefixItems", "dependentSchemas", "dependentRequired",
                 "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$dynamicAnchor"}


def test_the_document_has_the_structure_asyncapi_3_requires(doc: dict[str, Any]) -> None:
    assert doc["asyncapi"] == "3.0.0"
    assert doc["info"]["title"] and doc["info"]["version"] == version("reactive-rag")
    refs = [(path, node["$ref"]) for path, node in _walk(doc)
            if isinstance(node, dict) and isinstance(node.get("$ref"), str)]
    assert len(refs) > 100
    for _, ref in refs:
        _resolve(doc, ref)
    for section in ("channels", "operations", *(f"components/{k}" for k in doc["components"])):
        keys = _resolve(doc, f"#/{section}")
        assert all(_KEY.match(key) for key in keys), (section, [k for k in keys
                                                               if not _KEY.match(k)])
    for name, server in doc["servers"].items():
        assert server["protocol"] in ("http", "ws"), name
        assert set(re.findall(r"{(\w+)}", server["host"])) == set(server.get("variables", {}))
    for name, channel in doc["channels"].items():
        assert set(re.findall(r"{(\w+)}", channel["address"])) == set(channel["parameters"])
        for server in channel["servers"]:
            assert server["$ref"].startswith("#/servers/"), name
    for name, operation in doc["operations"].items():
        assert operation["action"] in ("send", "receive"), name
        for part in (operation, operation.get("reply") or operation):
            channel = part["channel"]["$ref"]
            assert channel.startswith("#/channels/"), name
            for message in part["messages"]:  # an operation names only its channel's messages
                assert message["$ref"].startswith(f"{channel}/messages/"), (name, message)
    for name, message in doc["components"]["messages"].items():
        assert message["name"] == name
        payload = _resolve(doc, message["payload"]["$ref"])
        Draft202012Validator.check_schema(payload)
    keywords = {key for _, node in _walk(doc["components"]["schemas"]) if isinstance(node, dict)
                for key in node}
    assert not keywords & _NOT_DRAFT_07  # an AsyncAPI Schema Object is a Draft 07 superset


# --- served -----------------------------------------------------------------------------------


async def test_the_server_serves_the_document_without_a_token(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        assert (await client.get("/v1/runs")).status == 401  # the API itself needs one
        resp = await client.get("/asyncapi.json")
        assert resp.status == 200 and resp.content_type == "application/json"
        assert await resp.json() == asyncapi_document()


# --- real runs validate ---------------------------------------------------------------------


async def _crashed_run(store_path: Path, index: CorpusIndex, upto: int = 12) -> str:
    """A run whose server died after ``upto`` stored events (the next server interrupts it)."""
    log = list((await Engine(index).ask(QUESTION, collections=["demo"])).events)
    run_id = log[0].run_id
    async with SqliteRunStore(store_path, owner="crashed-server") as store:
        await store.create_run(RunMeta(run_id=run_id, tenant="acme", question=QUESTION,
                                       mode="agent"))
        await store.append(run_id, log[:upto])
    return run_id


async def _events(client: TestClient[Any, Any], run_id: str, **params: Any) -> SseRead:
    async with client.get(f"/v1/runs/{run_id}/events", headers=auth("acme"),
                          params=params) as resp:
        assert resp.status == 200
        return await asyncio.wait_for(read_sse(resp), 60)


async def test_every_event_of_runs_of_each_outcome_validates_against_the_document(
        tmp_path: Path, server_index: CorpusIndex, doc: dict[str, Any]) -> None:
    checker = Checker(doc)
    crashed = await _crashed_run(tmp_path / "runs.db", server_index)
    async with serve(tmp_path, server_index, tenants=two_tenants(),
                     planner=ScriptedPlanner) as client:
        outcomes: dict[str, SseRead] = {}
        for question in (QUESTION, NO_EVIDENCE, BROKEN):
            read = await _events(client, await start_run(client, "acme", question=question))
            outcomes[read.events[-1].data["outcome"]] = read
        held = await start_run(client, "acme", question=HELD)
        async with client.get(f"/v1/runs/{held}/events", headers=auth("acme")) as resp:
            first = await read_sse(resp, limit=2)  # run.started, then the held plan.requested
            cancel = await client.post(f"/v1/runs/{held}/cancel", headers=auth("acme"))
            assert (await cancel.json())["cancelled"] is True
            rest = await asyncio.wait_for(read_sse(resp), 60)
        outcomes["cancelled"] = SseRead(first.messages + rest.messages)
        outcomes["interrupted"] = await _events(client, crashed)
        resumed = await client.post(f"/v1/runs/{crashed}/resume", headers=auth("acme"))
        assert resumed.status == 202
        whole = await _events(client, crashed)  # from seq 1, across the resume, to the end
        ends = [m.data["outcome"] for m in whole.events if m.event == "run.finished"]
        assert ends == ["interrupted", "answered"] and whole.events[-1].event == "run.finished"
        assert whole.seqs == list(range(1, len(whole.seqs) + 1))
        again = await _events(client, crashed, after=whole.seqs[-1])  # at the end: the end again
        assert [m.id for m in again.events] == [whole.seqs[-1]]
        assert set(outcomes) == {"answered", "no_evidence", "failed", "cancelled", "interrupted"}
        assert "every tool call failed" in outcomes["failed"].events[-1].data["reason"]
        for outcome, read in [*outcomes.items(), ("resumed", whole), ("the end again", again)]:
            assert read.events[-1].event == "run.finished", outcome
            checker.check_sse(read, f"a run ending {outcome}")
    assert {"run.started", "plan.requested", "plan.decided", "search.requested",
            "search.completed", "search.failed", "evidence.registered", "answer.delta",
            "answer.verified", "run.cancel_requested", "run.resumed",
            "run.finished"} <= checker.seen


async def test_a_websocket_runs_messages_and_its_cancel_validate_against_the_document(
        tmp_path: Path, server_index: CorpusIndex, doc: dict[str, Any]) -> None:
    checker = Checker(doc)
    async with serve(tmp_path, server_index, tenants=two_tenants(),
                     planner=ScriptedPlanner) as client:
        answered = await start_run(client, "acme")
        async with client.ws_connect(f"/v1/runs/{answered}/ws", headers=auth("acme")) as ws:
            seen = [json.loads(msg.data) async for msg in ws]
        assert seen[-1]["type"] == "run.finished" and seen[-1]["outcome"] == "answered"
        assert ws.close_code == 1000
        held = await start_run(client, "acme", question=HELD)
        async with client.ws_connect(f"/v1/runs/{held}/ws?after=1", headers=auth("acme")) as ws:
            seen.append(json.loads((await ws.receive(timeout=30)).data))
            await ws.send_str(json.dumps({"hello": "server"}))  # answered by `error`
            cancel = {"cancel": True}
            checker.check_ws(cancel, "the client's cancel", name="cancel")
            await ws.send_str(json.dumps(cancel))
            seen.extend([json.loads(msg.data) async for msg in ws])
        assert [m["type"] for m in seen if m["type"] in ("error", "cancel.result")] == [
            "error", "cancel.result"]
        assert seen[-1]["type"] == "run.finished" and seen[-1]["outcome"] == "cancelled"
        for data in seen:
            checker.check_ws(data, "a WebSocket run")
    assert {"error", "cancel.result", "cancel", "run.cancel_requested"} <= checker.seen


async def test_a_detached_client_is_told_why_as_the_document_says(
        doc: dict[str, Any]) -> None:
    checker = Checker(doc)
    started = RunStarted(question="q", run_id="r1", seq=1, ts=1.0, actor="run")

    async def failing() -> AsyncIterator[Event]:  # the store fails mid-stream
        yield started
        raise RuntimeError("the store went away")

    async def sse(request: web.Request) -> web.StreamResponse:
        async with EventFeed(failing()) as feed:
            return await serve_sse(request, feed, keepalive_s=5, write_timeout_s=5)

    async def ws(request: web.Request) -> web.StreamResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        async with EventFeed(failing()) as feed:
            await serve_ws(request, socket, feed, cancel=lambda: False, write_timeout_s=5)
        return socket

    app = web.Application()
    app.router.add_get("/events", sse)
    app.router.add_get("/ws", ws)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        async with client.get("/events") as resp:
            read = await read_sse(resp)
        assert [m.event for m in read.messages] == ["run.started", "detached"]
        checker.check_sse(read, "a detached SSE client")
        async with client.ws_connect("/ws") as socket:
            got = [json.loads(m.data) async for m in socket if m.type is WSMsgType.TEXT]
        assert [m["type"] for m in got] == ["run.started", "stream.detached"]
        assert socket.close_code == 1013
        for data in got:
            checker.check_ws(data, "a detached WebSocket client")

