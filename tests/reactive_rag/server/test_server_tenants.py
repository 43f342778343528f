"""Tenants: tokens, run isolation, collection scope, forged ids — and nothing leaks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reactive_rag.index import CorpusIndex
from reactive_rag.judgement import Decision, PlannerView
from reactive_rag.server import ConfigError, ServerConfig, hash_token
from streams import ToolCall

from .._server_fixtures import (
    SECRET,
    TOKENS,
    auth,
    read_sse,
    serve,
    start_run,
    two_tenants,
)


async def test_requests_without_a_valid_token_are_refused_alike(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        bodies = []
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic x"},
                        {"Authorization": f"Bearer {hash_token(TOKENS['acme'])}"},
                        {"Authorization": "Bearer"}):
            resp = await client.get("/v1/runs", headers=headers)
            assert resp.status == 401 and resp.headers["WWW-Authenticate"].startswith("Bearer")
            bodies.append(await resp.json())
        assert all(body == bodies[0] for body in bodies)
        assert (await client.get("/healthz")).status == 200  # health needs no token
        ok = await client.get("/v1/runs", params={"access_token": TOKENS["acme"]})
        assert ok.status == 200


async def test_a_tenant_never_sees_another_tenants_runs_or_events(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        beta_run = await start_run(client, "beta", collections=["secret"],
                                   question="What is the vault combination?")
        async with client.get(f"/v1/runs/{beta_run}/events", headers=auth("beta")) as resp:
            assert (await read_sse(resp)).events[-1].event == "run.finished"
        missing = "0" * 32
        probes = [
            ("GET", f"/v1/runs/{beta_run}"), ("GET", f"/v1/runs/{beta_run}/events"),
            ("GET", f"/v1/runs/{beta_run}/events?after=3"), ("GET", f"/v1/runs/{beta_run}/ws"),
            ("POST", f"/v1/runs/{beta_run}/cancel"),
        ]
        for method, path in probes:
            theirs = await client.request(method, path, headers=auth("acme"))
            nobody = await client.request(method, path.replace(beta_run, missing),
                                          headers=auth("acme"))
            assert theirs.status == nobody.status == 404
            body = await theirs.text()
            assert body == (await nobody.text()).replace(missing, beta_run)
            assert beta_run not in body and "beta" not in body and "vault" not in body.lower()
        listing = await (await client.get("/v1/runs", headers=auth("acme"))).json()
        assert listing["runs"] == []
        # a cursor naming beta's run does not reveal its runs either
        beta_page = await (await client.get("/v1/runs", headers=auth("beta"))).json()
        cursor = beta_page["runs"][0]["links"]["self"]
        resp = await client.get("/v1/runs", params={"cursor": cursor}, headers=auth("acme"))
        assert resp.status in (200, 422)
        assert beta_run not in await resp.text()
        detail = await (await client.get(f"/v1/runs/{beta_run}", headers=auth("beta"))).json()
        assert detail["status"] == "finished"


async def test_collections_outside_the_tenants_scope_are_refused_the_same_way(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        answers = []
        for name in ("secret", "no-such-collection"):
            resp = await client.post("/v1/runs", headers=auth("acme"),
                                     json={"question": "vault combination", "collections": [name]})
            assert resp.status == 403
            body = await resp.json()
            assert body["code"] == "collection_forbidden"
            answers.append(body["detail"].replace(repr(name), "<name>"))
        assert answers[0] == answers[1]
        resp = await client.post("/v1/runs", headers=auth("acme"),
                                 json={"question": "q", "collections": ["demo", "secret"]})
        assert resp.status == 403
        assert (await (await client.get("/v1/runs", headers=auth("acme"))).json())["runs"] == []


class ForgingPlanner:
    """A 'model' that reads a chunk id of a collection outside the run (made up or leaked)."""

    name = "forging"

    def __init__(self) -> None:
        self.turn = 0

    async def decide(self, view: PlannerView) -> Decision:
        self.turn += 1
        if self.turn == 1:
            return Decision(action="read", calls=(
                ToolCall(id="r1", tool="read", args={"chunk_id": "vault#0"}),
                ToolCall(id="r2", tool="read", args={"chunk_id": "../secret/vault#0"}),
                ToolCall(id="s1", tool="search", args={"query": "vault combination"}),
                ToolCall(id="s2", tool="search",
                         args={"query": "vault", "collections": ["secret"]})))
        return Decision(action="answer")


async def test_forged_ids_never_leak_another_collections_text(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants(),
                     planner=ForgingPlanner) as client:
        run_id = await start_run(client, "acme", collections=["demo"],
                                 question="What is the vault combination?")
        async with client.get(f"/v1/runs/{run_id}/events", headers=auth("acme")) as resp:
            read = await read_sse(resp)
        raw = json.dumps([m.data for m in read.messages])
        assert read.events[-1].event == "run.finished"
        assert "4-8-15-16-23-42" not in raw and SECRET not in raw
        assert any(m.event == "tool.rejected" for m in read.events)
        detail = await (await client.get(f"/v1/runs/{run_id}", headers=auth("acme"))).text()
        assert "4-8-15-16-23-42" not in detail


def test_config_with_tenants_from_toml_and_open_mode_binds_loopback(tmp_path: Path) -> None:
    path = tmp_path / "server.toml"
    path.write_text(f"""
host = "0.0.0.0"
port = 9000
[tenants.acme]
token_sha256 = ["{hash_token('a')}"]
collections = ["demo"]
max_concurrent_runs = 2
""")
    cfg = ServerConfig.load(path, env={"REACTIVE_RAG_SERVER_PORT": "9100"})
    assert cfg.port == 9100 and cfg.bind_host == "0.0.0.0" and not cfg.open_mode
    assert cfg.tenants["acme"].max_concurrent_runs == 2
    open_cfg = ServerConfig.load(None, env={"REACTIVE_RAG_SERVER_HOST": "0.0.0.0"})
    assert open_cfg.open_mode and open_cfg.bind_host == "127.0.0.1"
    assert open_cfg.store_target().endswith("runs.db")
    path.write_text('[tenants.acme]\ntoken_sha256 = ["plaintext-token"]\n')
    with pytest.raises(ConfigError, match="token_sha256"):
        ServerConfig.load(path, env={})
    path.write_text('[tenants.acme]\ntoken = "x"\n')
    with pytest.raises(ConfigError, match=r"tenants\.acme\.token"):
        ServerConfig.load(path, env={})
    with pytest.raises(ConfigError, match="cannot read"):
        ServerConfig.load(tmp_path / "missing.toml", env={})
