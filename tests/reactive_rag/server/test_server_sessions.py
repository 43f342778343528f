"""Conversation sessions over HTTP: turns, follow-ups, tenants, busy, restarts, expiry, delete."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from reactive_rag.index import CorpusIndex
from reactive_rag.server import (
    AUTH_KEY,
    MANAGER_KEY,
    SESSIONS_KEY,
    STORE_KEY,
    openapi_document,
)
from reactive_rag.server._models import RunRequest
from reactive_rag.store import SessionNotFound, SqliteRunStore, StoreUnavailable

from ..._eventually import eventually
from .._server_fixtures import GatedPlanner, auth, read_sse, serve, two_tenants

Client = TestClient[Any, Any]


async def create(client: Client, tenant: str | None = None, **body: Any) -> dict[str, Any]:
    resp = await client.post("/v1/sessions", json=body or None,
                             headers=auth(tenant) if tenant else None)
    assert resp.status == 201, await resp.text()
    created: dict[str, Any] = await resp.json()
    assert resp.headers["Location"] == created["links"]["self"]
    return created


async def ask(client: Client, session_id: str, question: str, tenant: str | None = None,
              **body: Any) -> dict[str, Any]:
    """One turn: start it, then follow its events to run.finished."""
    resp = await client.post(f"/v1/sessions/{session_id}/runs",
                             json={"question": question, **body},
                             headers=auth(tenant) if tenant else None)
    assert resp.status == 201, await resp.text()
    started: dict[str, Any] = await resp.json()
    assert resp.headers["Location"] == f"/v1/runs/{started['run_id']}"
    async with client.get(started["links"]["events"],
                          headers=auth(tenant) if tenant else None) as events:
        read = await read_sse(events)
    assert read.events[-1].event == "run.finished"
    started["events"] = read.events
    return started


async def detail(client: Client, session_id: str, tenant: str | None = None) -> dict[str, Any]:
    resp = await client.get(f"/v1/sessions/{session_id}",
                            headers=auth(tenant) if tenant else None)
    assert resp.status == 200, await resp.text()
    body: dict[str, Any] = await resp.json()
    return body


async def test_two_turns_the_second_read_against_the_first(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        before = time.time()
        created = await create(client)
        sid = created["session_id"]
        assert created["links"] == {"self": f"/v1/sessions/{sid}",
                                    "runs": f"/v1/sessions/{sid}/runs"}
        assert before + 3600 - 5 < created["expires"] <= time.time() + 3600
        empty = await detail(client, sid)
        assert empty["turns"] == [] and empty["summary"] == "" and empty["busy"] is False

        first = await ask(client, sid, "Who founded Bayer?")
        assert first["session_id"] == sid
        assert first["question"] == first["standalone"] == "Who founded Bayer?"
        assert set(first["links"]) == {"self", "events", "ws", "cancel"}
        second = await ask(client, sid, "When was it founded?")
        assert second["question"] == "When was it founded?"
        assert second["standalone"] != second["question"] and "Bayer" in second["standalone"]
        rewritten = [e for e in second["events"] if e.event == "query.rewritten"]
        assert rewritten and rewritten[0].data["standalone"] == second["standalone"]

        body = await detail(client, sid)
        assert [t["run_id"] for t in body["turns"]] == [first["run_id"], second["run_id"]]
        assert [t["question"] for t in body["turns"]] == ["Who founded Bayer?",
                                                          "When was it founded?"]
        assert body["turns"][1]["standalone"] == second["standalone"]
        assert all(t["outcome"] == "answered" and t["answer"] for t in body["turns"])
        assert body["busy"] is False and body["updated"] >= body["created"]
        run = await (await client.get(f"/v1/runs/{second['run_id']}")).json()
        assert run["question"] == second["standalone"]  # the run was asked the rewrite


async def test_another_tenant_gets_the_same_404_as_for_no_session(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        sid = (await create(client, "acme"))["session_id"]
        nobody = "0" * 32
        answers = []
        for target in (sid, nobody):
            for method, path, body in (("GET", "", None), ("DELETE", "", None),
                                       ("POST", "/runs", {"question": "Who founded Bayer?"})):
                resp = await client.request(method, f"/v1/sessions/{target}{path}",
                                            json=body, headers=auth("beta"))
                answers.append((resp.status, await resp.json()))
        assert answers[:3] == answers[3:]
        assert {status for status, _ in answers} == {404}
        assert {a["code"] for _, a in answers} == {"session_not_found"}
        assert (await detail(client, sid, "acme"))["turns"] == []  # still there, untouched
        resp = await client.get(f"/v1/sessions/{sid}")
        assert resp.status == 401


async def test_one_run_at_a_time_per_session(tmp_path: Path, server_index: CorpusIndex) -> None:
    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, planner=GatedPlanner) as client:
            sid = (await create(client))["session_id"]
            other = (await create(client))["session_id"]
            resp = await client.post(f"/v1/sessions/{sid}/runs",
                                     json={"question": "Who founded Bayer?"})
            assert resp.status == 201
            run_id = (await resp.json())["run_id"]
            again = await client.post(f"/v1/sessions/{sid}/runs",
                                      json={"question": "When was it founded?"})
            assert again.status == 409 and (await again.json())["code"] == "session_busy"
            assert (await detail(client, sid))["busy"] is True
            parallel = await client.post(f"/v1/sessions/{other}/runs",  # other sessions go on
                                         json={"question": "Who founded Bayer?"})
            assert parallel.status == 201
            GatedPlanner.gate.set()
            async with client.get(f"/v1/runs/{run_id}/events") as events:
                await read_sse(events)
            follow_up = await ask(client, sid, "When was it founded?")  # at once: no 409
            body = await detail(client, sid)
            assert body["busy"] is False
            assert [t["run_id"] for t in body["turns"]] == [run_id, follow_up["run_id"]]
    finally:
        GatedPlanner.gate = None


async def test_sessions_and_their_turns_survive_a_server_restart(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        sid = (await create(client))["session_id"]
        first = await ask(client, sid, "Who founded Bayer?")
    async with serve(tmp_path, server_index) as client:  # a new app on the same SQLite file
        body = await detail(client, sid)
        assert [t["run_id"] for t in body["turns"]] == [first["run_id"]]
        second = await ask(client, sid, "When was it founded?")
        assert "Bayer" in second["standalone"]  # the history came back with the session
        assert len((await detail(client, sid))["turns"]) == 2


async def test_a_run_going_at_shutdown_is_kept_as_a_cancelled_turn(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, planner=GatedPlanner) as client:
            sid = (await create(client))["session_id"]
            resp = await client.post(f"/v1/sessions/{sid}/runs",
                                     json={"question": "Who founded Bayer?"})
            run_id = (await resp.json())["run_id"]
    finally:
        GatedPlanner.gate = None
    async with serve(tmp_path, server_index) as client:
        turns = (await detail(client, sid))["turns"]
        assert [(t["run_id"], t["outcome"]) for t in turns] == [(run_id, "cancelled")]


async def test_the_turn_is_saved_with_no_client_watching(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        sid = (await create(client))["session_id"]
        resp = await client.post(f"/v1/sessions/{sid}/runs",
                                 json={"question": "Who founded Bayer?"})
        run_id = (await resp.json())["run_id"]
        resp.close()  # nobody follows the run
        await client.app[MANAGER_KEY].wait_all()
        sessions = client.app[SESSIONS_KEY]
        async with asyncio.timeout(10):
            while sessions.busy(sid):  # noqa: ASYNC110 - the turn is saved in the background
                await asyncio.sleep(0.01)
        stored = await client.app[STORE_KEY].get_session(sid, touch=False)
        turns: Any = stored.data["turns"]
        assert [t["run_id"] for t in turns] == [run_id]


async def test_a_client_leaving_while_its_turn_starts_loses_nothing(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        sid = (await create(client))["session_id"]
        sessions = client.app[SESSIONS_KEY]
        tenant = client.app[AUTH_KEY].tenant("default")
        request = asyncio.ensure_future(sessions.start_turn(
            tenant, sid, RunRequest(question="Who founded Bayer?"), ("demo",)))
        await asyncio.sleep(0)
        request.cancel()  # as aiohttp cancels a handler whose client hung up
        with pytest.raises(asyncio.CancelledError):
            await request
        async with asyncio.timeout(20):
            while not (await detail(client, sid))["turns"]:  # noqa: ASYNC110 - polling the API
                await asyncio.sleep(0.05)
        body = await detail(client, sid)
        assert [t["question"] for t in body["turns"]] == ["Who founded Bayer?"]
        assert body["busy"] is False


async def test_an_idle_session_expires_and_one_in_use_lives_on(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, session_ttl_s=0.6,
                     session_max_ttl_s=0.6) as client:
        idle = (await create(client))["session_id"]
        used = (await create(client))["session_id"]
        for _ in range(6):  # 1.2 s, twice the TTL: each GET is a use
            await asyncio.sleep(0.2)
            await detail(client, used)
        for method, path in (("GET", ""), ("DELETE", ""), ("POST", "/runs")):
            resp = await client.request(method, f"/v1/sessions/{idle}{path}",
                                        json={"question": "Who founded Bayer?"})
            assert resp.status == 404, (method, path)
            assert (await resp.json())["code"] == "session_not_found"
        store = client.app[STORE_KEY]
        assert isinstance(store, SqliteRunStore)
        rows = await store._read(lambda conn: conn.execute(
            "SELECT session_id FROM sessions").fetchall())
        assert rows == [(used,)]  # the sweep deleted the idle one

        async def expired() -> bool:  # read without touching: a GET would slide the TTL
            try:
                await store.get_session(used, touch=False)
            except SessionNotFound:
                return True
            return False

        await eventually(expired, "the session no longer used to expire", timeout_s=10)
        assert (await client.get(f"/v1/sessions/{used}")).status == 404


async def test_a_requested_ttl_is_kept_within_the_configured_bounds(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, session_ttl_s=60,
                     session_max_ttl_s=120) as client:
        now = time.time()
        default = await create(client)
        assert now + 55 < default["expires"] < now + 65
        asked = await create(client, ttl_s=90)
        assert now + 85 < asked["expires"] < now + 95
        capped = await create(client, ttl_s=100000)
        assert now + 115 < capped["expires"] < now + 125
        bad: Any
        for bad in ({"ttl_s": 0}, {"ttl_s": "60"}, {"ttl_s": True}, {"ttl_s": 1e9},
                    {"ttl": 60}, [], "x"):
            resp = await client.post("/v1/sessions", json=bad)
            assert resp.status == 422, bad
            assert (await resp.json())["code"] == "validation_failed"
        resp = await client.post("/v1/sessions", data=b"{not json",
                                 headers={"Content-Type": "application/json"})
        assert resp.status == 400
        resp = await client.post("/v1/sessions")  # no body at all: the defaults
        assert resp.status == 201


async def test_deleting_a_session(tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        sid = (await create(client))["session_id"]
        await ask(client, sid, "Who founded Bayer?")
        resp = await client.delete(f"/v1/sessions/{sid}")
        assert resp.status == 204 and await resp.read() == b""
        assert (await client.get(f"/v1/sessions/{sid}")).status == 404
        assert (await client.delete(f"/v1/sessions/{sid}")).status == 404
        assert (await client.post(f"/v1/sessions/{sid}/runs",
                                  json={"question": "When?"})).status == 404


@pytest.mark.parametrize("bad", ["x" * 129, "a.b", "%C3%BC", "a%20b"])
async def test_a_malformed_session_id_is_a_session_that_does_not_exist(
        tmp_path: Path, server_index: CorpusIndex, bad: str) -> None:
    async with serve(tmp_path, server_index) as client:
        resp = await client.get(f"/v1/sessions/{bad}")
        assert resp.status == 404 and (await resp.json())["code"] == "session_not_found"


async def test_a_turn_is_checked_like_a_run_before_anything_starts(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        sid = (await create(client, "acme"))["session_id"]
        for body, status, code in (
                ({"question": " "}, 422, "validation_failed"),
                ({"question": "Who?", "extra": 1}, 422, "validation_failed"),
                ({"question": "Who?", "collections": ["secret"]}, 403, "collection_forbidden"),
                ({"question": "Who?", "budget": {"nope": 1}}, 422, "validation_failed")):
            resp = await client.post(f"/v1/sessions/{sid}/runs", json=body,
                                     headers=auth("acme"))
            assert (resp.status, (await resp.json())["code"]) == (status, code), body
        body = await detail(client, sid, "acme")
        assert body["turns"] == [] and body["busy"] is False
        assert (await client.get("/v1/runs", headers=auth("acme"))).status == 200
        assert (await (await client.get("/v1/runs", headers=auth("acme"))).json())["runs"] == []


class SaveFails(SqliteRunStore):
    """A store that cannot save sessions (every other call works)."""

    async def save_session(self, session_id: str, data: dict[str, Any], *,
                           tenant: str | None = None) -> Any:
        raise StoreUnavailable("disk full")


async def test_a_store_error_while_saving_a_turn_is_logged_and_the_server_goes_on(
        tmp_path: Path, server_index: CorpusIndex, caplog: pytest.LogCaptureFixture) -> None:
    store = SaveFails(tmp_path / "runs.db")
    with caplog.at_level(logging.WARNING, logger="reactive_rag.server"):
        async with serve(tmp_path, server_index, store=store) as client:
            sid = (await create(client))["session_id"]
            await ask(client, sid, "Who founded Bayer?")
            body = await detail(client, sid)
            assert body["turns"] == [] and body["busy"] is False
            again = await ask(client, sid, "Who founded Bayer?")  # the session still works
            assert again["run_id"]
    assert any("was not saved" in r.getMessage() and "disk full" in r.getMessage()
               for r in caplog.records)


async def test_the_document_describes_the_session_routes(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    doc = openapi_document()
    assert {"/v1/sessions", "/v1/sessions/{session_id}",
            "/v1/sessions/{session_id}/runs"} <= set(doc["paths"])
    codes = doc["components"]["schemas"]["Problem"]["properties"]["code"]["enum"]
    assert {"session_not_found", "session_busy"} <= set(codes)
    async with serve(tmp_path, server_index) as client:
        served = await (await client.get("/v1/openapi.json")).json()
        assert served["paths"]["/v1/sessions/{session_id}"].keys() == {"get", "delete"}
