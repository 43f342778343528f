"""Retention and export over HTTP, against a real server: ``DELETE /v1/runs/{id}`` (tenant
scope, a running run refused with 409 until cancelled), ``GET /v1/runs/{id}/export``
(NDJSON, the stored events exactly), and the retention sweeper (old ended runs deleted,
newer and running ones kept, a store error survived)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from reactive_rag.index import CorpusIndex
from reactive_rag.server import RetentionConfig, RetentionSweeper, ServerConfig
from reactive_rag.store import (
    RunMeta,
    RunNotFound,
    RunStillRunning,
    SqliteRunStore,
    StoreUnavailable,
)
from streams import Event, RunStarted, decode_json
from tests._eventually import eventually

from .._server_fixtures import (
    GatedPlanner,
    auth,
    read_sse,
    serve,
    start_run,
    two_tenants,
)
from .._store_fixtures import Clock, finished, searches, stamped

DAY = 86400.0
GUIDE = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


async def stored_events(path: Path, run_id: str) -> list[Event]:
    store = SqliteRunStore(path, read_only=True)
    await store.open()
    try:
        return [event async for event in store.events(run_id)]
    finally:
        await store.close()


async def ended(client: Any, run_id: str, tenant: str | None = None) -> list[dict[str, Any]]:
    """Follow the run until its run.finished; its events' JSON."""
    async with client.get(f"/v1/runs/{run_id}/events",
                          headers=auth(tenant) if tenant else None) as resp:
        return [m.data for m in (await read_sse(resp)).events]


async def test_delete_removes_an_ended_run_everywhere_and_only_for_its_tenant(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        run_id = await start_run(client, "acme")
        kept = await start_run(client, "acme")
        await ended(client, run_id, "acme")
        await ended(client, kept, "acme")
        refused = await client.delete(f"/v1/runs/{run_id}", headers=auth("beta"))
        assert refused.status == 404 and (await refused.json())["code"] == "run_not_found"
        assert (await client.get(f"/v1/runs/{run_id}", headers=auth("acme"))).status == 200
        assert (await client.delete(f"/v1/runs/{run_id}")).status == 401

        deleted = await client.delete(f"/v1/runs/{run_id}", headers=auth("acme"))
        assert deleted.status == 204 and await deleted.read() == b""
        for path in (f"/v1/runs/{run_id}", f"/v1/runs/{run_id}/events",
                     f"/v1/runs/{run_id}/export"):
            gone = await client.get(path, headers=auth("acme"))
            assert gone.status == 404, path
        listing = await (await client.get("/v1/runs", headers=auth("acme"))).json()
        assert [r["run_id"] for r in listing["runs"]] == [kept]
        again = await client.delete(f"/v1/runs/{run_id}", headers=auth("acme"))
        assert again.status == 404
    assert await stored_events(tmp_path / "runs.db", kept)  # the other run is untouched
    with pytest.raises(RunNotFound):
        await stored_events(tmp_path / "runs.db", run_id)


async def test_a_running_run_is_refused_with_409_until_cancelled_then_deletes(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, planner=GatedPlanner) as client:
            run_id = await start_run(client)
            refused = await client.delete(f"/v1/runs/{run_id}")
            assert refused.status == 409
            problem = await refused.json()
            assert problem["code"] == "run_still_running"
            assert f"POST /v1/runs/{run_id}/cancel" in problem["detail"]
            assert (await (await client.get(f"/v1/runs/{run_id}")).json())["status"] == "running"

            assert (await client.post(f"/v1/runs/{run_id}/cancel")).status == 202
            events = await ended(client, run_id)
            assert events[-1]["outcome"] == "cancelled"
            # at once after its run.finished: the end is stored, so the delete goes through
            assert (await client.delete(f"/v1/runs/{run_id}")).status == 204
            assert (await client.get(f"/v1/runs/{run_id}")).status == 404
            # nothing kept in memory brings it back
            assert (await (await client.get("/v1/runs")).json())["runs"] == []
    finally:
        GatedPlanner.gate = None


async def test_export_is_the_stored_events_as_ndjson_for_its_tenant_only(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        run_id = await start_run(client, "acme")
        live = await ended(client, run_id, "acme")
        resp = await client.get(f"/v1/runs/{run_id}/export", headers=auth("acme"))
        assert resp.status == 200
        assert resp.headers["Content-Type"] == "application/x-ndjson"
        assert f'filename="{run_id}.ndjson"' in resp.headers["Content-Disposition"]
        body = await resp.read()
        other = await client.get(f"/v1/runs/{run_id}/export", headers=auth("beta"))
        assert other.status == 404
    assert body.endswith(b"\n")
    exported = [decode_json(line) for line in body.splitlines()]
    assert exported == await stored_events(tmp_path / "runs.db", run_id)
    assert [e.model_dump(mode="json") for e in exported] == live  # as SSE gave them
    assert exported[-1].type == "run.finished"


class _FailingReplay(SqliteRunStore):
    """A store whose replays break after a few events (a backend dying mid-export)."""

    async def events(self, run_id: str, after_seq: int = 0, *,
                     tenant: str | None = None) -> AsyncIterator[Event]:
        replay = super().events(run_id, after_seq, tenant=tenant)
        async with contextlib.aclosing(replay):  # type: ignore[type-var]
            async for event in replay:
                if event.seq > 3:
                    raise StoreUnavailable("the store went away")
                yield event


async def test_an_export_cut_by_a_store_failure_never_looks_complete(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    store = _FailingReplay(tmp_path / "runs.db")
    async with serve(tmp_path, server_index, store=store) as client:
        run_id = await start_run(client)
        await ended(client, run_id)
        resp = await client.get(f"/v1/runs/{run_id}/export")
        assert resp.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await resp.read()
        assert (await client.get("/healthz")).status == 200  # the server goes on


async def test_the_served_openapi_document_has_delete_next_to_get_and_the_export(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        paths = (await (await client.get("/v1/openapi.json")).json())["paths"]
    assert set(paths["/v1/runs/{run_id}"]) == {"get", "delete"}
    assert set(paths["/v1/runs/{run_id}"]["delete"]["responses"]) == {"204", "404", "409", "503"}
    export = paths["/v1/runs/{run_id}/export"]["get"]["responses"]["200"]
    assert set(export["content"]) == {"application/x-ndjson"}


# --- the retention sweeper -------------------------------------------------------------


async def write_run(path: Path, run_id: str, tenant: str, *, at: float) -> None:
    """An ended run stored at Unix time ``at`` (as a server then would have)."""
    clock = Clock()
    clock.now = at
    store = SqliteRunStore(path, clock=clock)
    await store.open()
    try:
        await store.create_run(RunMeta(run_id=run_id, tenant=tenant, question="why?"))
        await store.append(run_id, stamped(run_id, [RunStarted(question="why?"), *searches(2),
                                                    finished()]))
    finally:
        await store.close()


def guide_retention() -> RetentionConfig:
    """The ``[retention]`` example of docs/configuration.md, loaded as the server loads it."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("### Retention"):]
    found = re.search(r"```toml\n(.*?)```", section, re.S)
    assert found is not None, "the Retention section has no TOML example"
    return ServerConfig.model_validate(tomllib.loads(found.group(1))).retention


async def swept(path: Path, run_id: str) -> bool:
    try:
        await stored_events(path, run_id)
    except RunNotFound:
        return True
    return False


async def test_the_server_sweeps_runs_past_each_tenants_period_and_keeps_the_rest(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    now = time.time()
    path = tmp_path / "runs.db"
    ages = {  # run id -> (tenant, age in days, swept?) under the guide's example
        "acmeold": ("acme", 40, True), "acmerecent": ("acme", 20, False),  # days = 30
        "betaold": ("beta", 31, True),  # a served tenant without its own period: days
        "globexold": ("globex", 100, True), "globexrecent": ("globex", 40, False),  # 90
        "initechold": ("initech", 2, True),  # a former tenant: 1 day
    }
    for run_id, (tenant, age, _) in ages.items():
        await write_run(path, run_id, tenant, at=now - age * DAY)
    guide = guide_retention()
    assert guide.days == 30 and guide.sweep_interval_s == 3600
    async with serve(tmp_path, server_index, tenants=two_tenants(),
                     retention=guide) as client:  # (its one sweep in the test: at start-up)
        for run_id, (_, _, gone) in ages.items():
            if gone:
                await eventually(lambda r=run_id: swept(path, r), f"{run_id} swept",
                                 timeout_s=30)
        gone_here = await client.get("/v1/runs/acmeold", headers=auth("acme"))
        assert gone_here.status == 404
        for run_id, (tenant, _, gone) in ages.items():
            if not gone and tenant in ("acme", "beta"):
                assert (await client.get(f"/v1/runs/{run_id}", headers=auth(tenant))).status \
                    == 200
        fresh = await start_run(client, "acme")  # a run of today stays too
        await ended(client, fresh, "acme")
    for run_id, (_, _, gone) in ages.items():
        assert await swept(path, run_id) is gone, run_id
    assert not await swept(path, fresh)


class _FlakyDeletes(SqliteRunStore):
    """Deletes by age fail the first ``failures`` times (a store briefly down)."""

    failures = 2

    async def delete_runs_before(self, tenant: str, before_ts: float, *,
                                 limit: int = 100) -> list[str]:
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("the store is down for a moment")
        return await super().delete_runs_before(tenant, before_ts, limit=limit)


async def test_the_sweeper_survives_a_store_error_and_deletes_at_a_later_sweep(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    store = _FlakyDeletes(tmp_path / "runs.db", clock=clock)
    await store.open()
    try:
        for i in range(3):
            await store.create_run(RunMeta(run_id=f"old{i}", tenant="acme", question="q"))
            await store.append(f"old{i}", stamped(f"old{i}", [finished()]))
        clock.advance(10 * DAY)
        await store.create_run(RunMeta(run_id="new", tenant="acme", question="q"))
        await store.append("new", stamped("new", [finished()]))
        config = RetentionConfig(days=5, sweep_interval_s=0.01, batch=2)
        sweeper = RetentionSweeper(store, config, ["acme"], clock=clock).start()
        async def only_new_left() -> bool:
            return [r.run_id for r in (await store.list_runs("acme")).runs] == ["new"]

        try:
            await eventually(only_new_left, "the old runs swept", timeout_s=30)
        finally:
            await sweeper.aclose()
        assert sweeper.sweeps >= 3  # two failed, then one deleted the three old runs
        assert [r.run_id for r in (await store.list_runs("acme")).runs] == ["new"]
        assert "retention sweep failed" in caplog.text and "StoreUnavailable" in caplog.text
    finally:
        await store.close()


async def test_no_period_means_no_sweeper_and_running_runs_are_never_swept(
        tmp_path: Path) -> None:
    clock = Clock()
    store = SqliteRunStore(tmp_path / "runs.db", clock=clock)
    await store.open()
    try:
        await store.create_run(RunMeta(run_id="live", tenant="acme", question="q"))
        clock.advance(100 * DAY)
        idle = RetentionSweeper(store, RetentionConfig(), ["acme"], clock=clock).start()
        assert idle.periods == {} and await idle.sweep() == []
        sweeper = RetentionSweeper(store, RetentionConfig(days=1), ["acme"], clock=clock)
        assert await sweeper.sweep() == []
        assert (await store.get_run("live")).status == "running"
        with pytest.raises(RunStillRunning):
            await store.delete_run("live")
        await idle.aclose()
    finally:
        await store.close()


def test_retention_config_is_checked_when_loaded() -> None:
    from reactive_rag.server import ConfigError, ServerConfig

    loaded = ServerConfig.model_validate(
        {"retention": {"days": 30, "tenants": {"acme": 7}}})
    assert loaded.retention.periods(["acme", "beta"]) == {"acme": 7 * DAY, "beta": 30 * DAY}
    for bad in ({"days": 0}, {"days": -1}, {"tenants": {"acme": 0}},
                {"tenants": {"no spaces": 1}}, {"sweep_interval_s": 0}, {"unknown": 1}):
        with pytest.raises(ConfigError):
            ServerConfig.load(None, env={}, retention=bad)

