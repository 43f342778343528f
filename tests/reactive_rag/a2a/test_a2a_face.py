"""The A2A face: the official ``a2a-sdk`` client against a real server on loopback.

Two tenants as in the other server tests: ``acme`` may use ``demo``, ``beta`` also
``secret``. A task is a stored run of its tenant; the client authenticates with the
SDK's ``AuthInterceptor``, which sends the token only because the card asks for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import (
    A2ACardResolver,
    A2AClientError,
    AuthInterceptor,
    Client,
    ClientCallContext,
    ClientConfig,
    ClientFactory,
    CredentialService,
)
from a2a.helpers.proto_helpers import get_data_parts, new_data_part, new_text_message
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    ContentTypeNotSupportedError,
    GetTaskRequest,
    InvalidParamsError,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
    UnsupportedOperationError,
)
from aiohttp.test_utils import TestClient, TestServer
from google.protobuf.struct_pb2 import Struct

from reactive_rag import Engine
from reactive_rag.a2a import mount_a2a
from reactive_rag.events import RunStarted
from reactive_rag.index import CorpusIndex
from reactive_rag.server import MANAGER_KEY, STORE_KEY, ServerConfig, TenantConfig, create_app
from reactive_rag.store import RunMeta, SqliteRunStore

from .._server_fixtures import QUESTION, TOKENS, GatedPlanner, auth, two_tenants

WORKING = TaskState.TASK_STATE_WORKING
COMPLETED = TaskState.TASK_STATE_COMPLETED


@asynccontextmanager
async def serve(tmp_path: Path, index: CorpusIndex, *,
                tenants: dict[str, TenantConfig] | None = None,
                planner: Callable[[], Any] | None = None,
                ) -> AsyncIterator[TestClient[Any, Any]]:
    """A real server on 127.0.0.1 as ``reactive-rag serve`` builds it: the API and A2A."""
    config = ServerConfig(store=str(tmp_path / "runs.db"), tenants=tenants or {},
                          default_collections=("demo",))
    app = create_app(config, engine=Engine(index, planner=planner))
    mount_a2a(app)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


class Token(CredentialService):
    """One bearer token for whatever scheme the card names."""

    def __init__(self, token: str) -> None:
        self.token = token

    async def get_credentials(self, security_scheme_name: str,
                              context: ClientCallContext | None) -> str | None:
        return self.token


@asynccontextmanager
async def a2a(server: TestClient[Any, Any], token: str | None, *, streaming: bool = True,
              legacy: bool = False) -> AsyncIterator[Client]:
    """The SDK's client for the server's card (``legacy``: its A2A 0.3 interface only)."""
    async with httpx.AsyncClient(timeout=60) as http:
        card = await A2ACardResolver(http, str(server.make_url(""))).get_agent_card()
        if legacy:
            only = AgentCard()
            only.CopyFrom(card)
            del only.supported_interfaces[:]
            only.supported_interfaces.extend(
                i for i in card.supported_interfaces if i.protocol_version == "0.3")
            card = only
        factory = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http))
        client = factory.create(card, [AuthInterceptor(Token(token))] if token else [])
        try:
            yield client
        finally:
            await client.close()


def ask(text: str = QUESTION, *, immediately: bool = False,
        **metadata: Any) -> SendMessageRequest:
    request = SendMessageRequest(message=new_text_message(text, role=Role.ROLE_USER),
                                 configuration=SendMessageConfiguration(
                                     return_immediately=immediately))
    if metadata:
        request.metadata.CopyFrom(_struct(metadata))
    return request


def _struct(values: dict[str, Any]) -> Struct:
    struct = Struct()
    struct.update(values)
    return struct


async def collect(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in stream]


async def the_task(client: Client) -> Task:
    [response] = await collect(client.send_message(ask()))
    assert response.HasField("task")
    return response.task


def answer_text(task: Task) -> str:
    [artifact] = task.artifacts
    return "".join(p.text for p in artifact.parts if p.HasField("text"))


def streamed_text(events: list[StreamResponse]) -> str:
    return "".join(p.text for e in events if e.HasField("artifact_update")
                   for p in e.artifact_update.artifact.parts if p.HasField("text"))


async def test_the_card_names_the_skills_the_endpoint_and_the_bearer_scheme(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as server:
        async with httpx.AsyncClient() as http:  # no token: the card is public
            card = await A2ACardResolver(http, str(server.make_url(""))).get_agent_card()
        endpoint = str(server.make_url("/a2a"))
    assert {s.id for s in card.skills} == {"research", "search"}
    assert card.capabilities.streaming and not card.capabilities.push_notifications
    assert {(i.url, i.protocol_binding, i.protocol_version)
            for i in card.supported_interfaces} == {(endpoint, "JSONRPC", "1.0"),
                                                    (endpoint, "JSONRPC", "0.3")}
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "bearer"
    assert [list(r.schemes) for r in card.security_requirements] == [["bearer"]]
    assert list(card.default_input_modes) == ["text/plain"]


async def test_open_mode_asks_for_no_token(tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as server:
        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, str(server.make_url(""))).get_agent_card()
        async with a2a(server, None, streaming=False) as client:
            task = await the_task(client)
    assert not card.security_requirements and not card.security_schemes
    assert "open mode" in card.description
    assert task.status.state == COMPLETED and "1863" in answer_text(task)


async def test_a_message_gets_the_completed_task_with_the_verified_answer_and_citations(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as server:
        async with a2a(server, TOKENS["acme"], streaming=False) as client:
            task = await the_task(client)
            again = await client.get_task(GetTaskRequest(id=task.id))
        stored = await (await server.get(f"/v1/runs/{task.id}", headers=auth("acme"))).json()
        mine = await (await server.get("/v1/runs", headers=auth("acme"))).json()
        theirs = await (await server.get("/v1/runs", headers=auth("beta"))).json()
    assert task.status.state == COMPLETED and task.context_id == task.id
    assert answer_text(task) == stored["answer"] and "1863" in stored["answer"]
    [citations] = get_data_parts(task.artifacts[0].parts)
    assert [c["quote"] for c in citations["citations"]] == [
        c["quote"] for c in stored["citations"]]
    assert task.history[0].parts[0].text == QUESTION
    assert again == task  # GetTask folds the same stored run
    assert [r["run_id"] for r in mine["runs"]] == [task.id]  # a run of its tenant only
    assert theirs["runs"] == []


async def test_a_streamed_message_shows_working_then_the_verified_text_then_completed(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as server:
        async with a2a(server, TOKENS["acme"]) as client:
            events = await collect(client.send_message(ask()))
            task = await client.get_task(GetTaskRequest(id=events[0].task.id))
        stored = await (await server.get(f"/v1/runs/{task.id}", headers=auth("acme"))).json()
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task" and kinds[-1] == "status_update"
    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    assert states[0] == WORKING and states[-1] == COMPLETED
    assert set(states[:-1]) == {WORKING}
    first_chunk = kinds.index("artifact_update")
    assert kinds.index("status_update") < first_chunk < len(kinds) - 1
    assert streamed_text(events) == stored["answer"] == answer_text(task)
    last = [e.artifact_update for e in events if e.HasField("artifact_update")][-1]
    assert last.last_chunk and get_data_parts(last.artifact.parts)[0]["citations"]
    assert task.status.state == COMPLETED


async def test_cancel_a_running_task(tmp_path: Path, server_index: CorpusIndex) -> None:
    GatedPlanner.gate = asyncio.Event()  # every planner decision waits: the run holds
    try:
        async with serve(tmp_path, server_index, tenants=two_tenants(),
                         planner=GatedPlanner) as server, \
                a2a(server, TOKENS["acme"], streaming=False) as client:
            [started] = await collect(client.send_message(ask(immediately=True)))
            task_id = started.task.id
            assert started.task.status.state in (TaskState.TASK_STATE_SUBMITTED, WORKING)
            cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
            again = await client.get_task(GetTaskRequest(id=task_id))
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=task_id))
            stored = await (await server.get(f"/v1/runs/{task_id}",
                                             headers=auth("acme"))).json()
    finally:
        GatedPlanner.gate = None
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert again.status.state == TaskState.TASK_STATE_CANCELED
    assert (stored["status"], stored["outcome"]) == ("finished", "cancelled")


async def test_resubscribe_to_a_running_task_gets_it_then_its_updates_to_the_end(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, tenants=two_tenants(),
                         planner=GatedPlanner) as server, \
                a2a(server, TOKENS["acme"]) as client:
            async with a2a(server, TOKENS["acme"], streaming=False) as sender:
                [started] = await collect(sender.send_message(ask(immediately=True)))
            stream = client.subscribe(SubscribeToTaskRequest(id=started.task.id))
            first = await anext(stream)
            GatedPlanner.gate.set()
            events = [first, *await collect(stream)]
            task = await client.get_task(GetTaskRequest(id=started.task.id))
    finally:
        GatedPlanner.gate = None
    assert first.HasField("task") and first.task.id == started.task.id
    assert first.task.status.state in (TaskState.TASK_STATE_SUBMITTED, WORKING)
    assert events[-1].status_update.status.state == COMPLETED
    assert streamed_text(events) == answer_text(task) and "1863" in answer_text(task)


async def test_another_tenant_cannot_see_get_cancel_or_follow_a_task(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as server:
        async with a2a(server, TOKENS["acme"], streaming=False) as acme:
            task = await the_task(acme)
        async with a2a(server, TOKENS["beta"]) as beta:
            for call in (beta.get_task(GetTaskRequest(id=task.id)),
                         beta.get_task(GetTaskRequest(id="nosuchtask")),
                         beta.cancel_task(CancelTaskRequest(id=task.id)),
                         collect(beta.subscribe(SubscribeToTaskRequest(id=task.id)))):
                with pytest.raises(TaskNotFoundError):
                    await call


async def test_a_wrong_or_missing_token_is_refused_with_the_apis_401(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as server:
        for token in ("not-a-token", None):
            async with a2a(server, token, streaming=False) as client:
                with pytest.raises(A2AClientError, match="401"):
                    await the_task(client)
        raw = await server.post("/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                              "params": {"id": "x"}})
        assert raw.status == 401 and (await raw.json())["code"] == "unauthorized"
        assert raw.headers["WWW-Authenticate"].startswith("Bearer")
        listed = await (await server.get("/v1/runs", headers=auth("acme"))).json()
    assert listed["runs"] == []  # nothing started


async def test_scope_budget_and_rate_limit_are_the_apis(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants(runs_per_minute=2)) as server:
        async with a2a(server, TOKENS["acme"], streaming=False) as client:
            with pytest.raises(A2AClientError, match=r"403.*may not search collection 'secret'"):
                await collect(client.send_message(ask(collections=["secret"])))
            with pytest.raises(InvalidParamsError, match=r"budget max_steps must be > 0"):
                await collect(client.send_message(ask(budget={"max_steps": 10**9})))
            with pytest.raises(InvalidParamsError, match="skill"):
                await collect(client.send_message(ask(skill="dance")))
            follow_up = ask()
            follow_up.message.context_id = "an-earlier-context"
            with pytest.raises(InvalidParamsError, match="contextId"):
                await collect(client.send_message(follow_up))
            with_data = ask()
            with_data.message.parts.append(new_data_part({"k": 1}))
            with pytest.raises(ContentTypeNotSupportedError, match="only text parts"):
                await collect(client.send_message(with_data))
            [small] = await collect(client.send_message(ask(budget={"max_tool_calls": 1},
                                                            skill="search")))
            [other] = await collect(client.send_message(ask()))
            with pytest.raises(A2AClientError, match=r"JSON-RPC Error 429: .*per minute"):
                await collect(client.send_message(ask()))
        events = [e async for e in server.app[STORE_KEY].events(small.task.id)]
    started = events[0]
    assert isinstance(started, RunStarted)
    assert started.mode == "rag" and started.options["budget"]["max_tool_calls"] == 1
    assert other.task.status.state == COMPLETED


async def test_malformed_json_rpc_gets_the_spec_errors(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    headers = auth("acme")
    async with serve(tmp_path, server_index, tenants=two_tenants()) as server:
        async def post(body: Any, *, raw: bytes | None = None) -> Any:
            resp = await server.post("/a2a", headers=headers,
                                     **({"data": raw} if raw is not None else {"json": body}))
            assert resp.status == 200
            return await resp.json()

        parse = await post(None, raw=b"{not json")
        batch = await post([{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}])
        no_method = await post({"jsonrpc": "2.0", "id": 2})
        old_rpc = await post({"jsonrpc": "1.0", "id": 3, "method": "GetTask"})
        unknown = await post({"jsonrpc": "2.0", "id": 4, "method": "tasks/dance"})
        bad_params = await post({"jsonrpc": "2.0", "id": 5, "method": "GetTask",
                                 "params": {"id": 7, "historyLength": "many"}})
        no_task = await post({"jsonrpc": "2.0", "id": "six", "method": "GetTask",
                              "params": {"id": "nosuchtask"}})
        no_list = await post({"jsonrpc": "2.0", "id": 8, "method": "ListTasks", "params": {}})
    assert (parse["id"], parse["error"]["code"]) == (None, -32700)
    assert batch["error"]["code"] == -32600
    assert (no_method["id"], no_method["error"]["code"]) == (2, -32600)
    assert old_rpc["error"]["code"] == -32600
    assert (unknown["id"], unknown["error"]["code"]) == (4, -32601)
    assert (bad_params["id"], bad_params["error"]["code"]) == (5, -32602)
    assert (no_task["id"], no_task["error"]["code"]) == ("six", -32001)
    assert no_list["error"]["code"] == -32004


async def test_the_a2a_0_3_method_names_reach_the_same_runs(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as server:
        async with a2a(server, TOKENS["acme"], streaming=False, legacy=True) as client:
            task = await the_task(client)
            again = await client.get_task(GetTaskRequest(id=task.id))
        async with a2a(server, TOKENS["acme"], legacy=True) as client:
            events = await collect(client.send_message(ask()))
        stored = await (await server.get(f"/v1/runs/{task.id}", headers=auth("acme"))).json()
    assert task.status.state == again.status.state == COMPLETED
    assert answer_text(again) == stored["answer"] and "1863" in stored["answer"]
    assert events[-1].status_update.status.state == COMPLETED
    assert "1863" in streamed_text(events)


async def crashed_run(store_path: Path, index: CorpusIndex, *, upto: int = 12) -> str:
    """A run of acme whose server died after ``upto`` stored events."""
    log = list((await Engine(index).ask(QUESTION, collections=["demo"])).events)
    run_id = log[0].run_id
    async with SqliteRunStore(store_path, owner="crashed-server") as store:
        await store.create_run(RunMeta(run_id=run_id, tenant="acme", question=QUESTION,
                                       mode="agent"))
        await store.append(run_id, log[:upto])
    return run_id  # the next writer's recovery marks it interrupted


async def test_an_interrupted_task_needs_input_and_a_message_naming_it_resumes_it(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    run_id = await crashed_run(tmp_path / "runs.db", server_index)
    async with serve(tmp_path, server_index, tenants=two_tenants()) as server:
        async with a2a(server, TOKENS["acme"], streaming=False) as client:
            paused = await client.get_task(GetTaskRequest(id=run_id))
            follow_up = ask("go on")
            follow_up.message.task_id = run_id
            [resumed] = await collect(client.send_message(follow_up))
            with pytest.raises(UnsupportedOperationError, match="only an interrupted task"):
                await collect(client.send_message(follow_up))
        await server.app[MANAGER_KEY].wait_all()
        stored = await (await server.get(f"/v1/runs/{run_id}", headers=auth("acme"))).json()
    assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "resume" in paused.status.message.parts[0].text
    assert resumed.task.status.state == COMPLETED
    assert answer_text(resumed.task) == stored["answer"] and stored["status"] == "finished"


async def test_a_client_that_leaves_a_stream_leaves_the_run_going(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, tenants=two_tenants(),
                         planner=GatedPlanner) as server, \
                a2a(server, TOKENS["acme"]) as client:
            stream = client.send_message(ask())
            first = await anext(stream)
            with contextlib.suppress(Exception):
                await stream.aclose()  # type: ignore[attr-defined]
            GatedPlanner.gate.set()
            await server.app[MANAGER_KEY].wait_all()
            task = await client.get_task(GetTaskRequest(id=first.task.id))
    finally:
        GatedPlanner.gate = None
    assert task.status.state == COMPLETED and "1863" in answer_text(task)


async def test_a_question_without_evidence_completes_saying_so_without_an_answer(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as server, \
            a2a(server, TOKENS["acme"]) as client:
        events = await collect(client.send_message(ask("What is the capital of Mars?")))
        task = await client.get_task(GetTaskRequest(id=events[0].task.id))
        stored = await (await server.get(f"/v1/runs/{task.id}", headers=auth("acme"))).json()
    assert stored["outcome"] == "no_evidence"
    assert task.status.state == COMPLETED and not task.artifacts
    assert task.status.message.parts[0].text == stored["reason"]
    assert not any(e.HasField("artifact_update") for e in events)
    assert task.metadata["outcome"] == "no_evidence"


def _mounted(monkeypatch: pytest.MonkeyPatch, config: ServerConfig) -> list[Any]:
    """The mounts ``reactive_rag.serve`` hands the server (the server is not started)."""
    import reactive_rag
    import reactive_rag.server

    seen: list[Any] = []
    monkeypatch.setattr(reactive_rag.server, "serve",
                        lambda config, *, mounts=(): seen.extend(mounts))
    reactive_rag.serve(config)
    return seen


async def test_serve_mounts_the_a2a_face_and_says_so_when_its_sdk_is_missing(
        tmp_path: Path, server_index: CorpusIndex, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    config = ServerConfig(store=str(tmp_path / "runs.db"), tenants=two_tenants(),
                          default_collections=("demo",))
    with_sdk = create_app(config, engine=Engine(server_index))
    for mount in _mounted(monkeypatch, config):
        mount(with_sdk)
    for name in [n for n in sys.modules if n == "a2a" or n.startswith("a2a.")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if a2a-sdk were not installed
    for name in [n for n in sys.modules if n.startswith("reactive_rag.a2a")]:
        monkeypatch.delitem(sys.modules, name)
    without = create_app(config, engine=Engine(server_index))
    with caplog.at_level(logging.INFO, logger="reactive_rag.server"):
        for mount in _mounted(monkeypatch, config):
            mount(without)
    async with TestClient(TestServer(with_sdk, host="127.0.0.1")) as server:
        card = await server.get("/.well-known/agent-card.json")
        assert card.status == 200 and (await card.json())["name"] == "reactive-rag"
    async with TestClient(TestServer(without, host="127.0.0.1")) as server:
        assert (await server.get("/.well-known/agent-card.json")).status == 404
        assert (await server.post("/mcp", json={}, headers=auth("acme"))).status != 404
    assert "no A2A agent (/a2a, /.well-known/agent-card.json): the A2A SDK is not " \
           "installed (pip install 'reactive-rag[a2a]')" in caplog.text
