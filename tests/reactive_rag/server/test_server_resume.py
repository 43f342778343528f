"""``POST /v1/runs/{id}/resume``: an interrupted run goes on from its stored events.

A run is recorded as a crashed server leaves it (its events up to the crash,
status ``running``, the owner's lease gone); the server's store marks it
``interrupted`` on open, and a resume carries it on to one new terminal event,
stored after the old ones and streamed from the interrupted seq.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.server import MANAGER_KEY, STORE_KEY
from reactive_rag.store import RunMeta, SqliteRunStore

from .._server_fixtures import (
    QUESTION,
    GatedPlanner,
    auth,
    read_sse,
    serve,
    start_run,
    two_tenants,
)


async def crashed_run(store_path: Path, index: CorpusIndex, *, tenant: str = "acme",
                      upto: int = 12) -> tuple[str, int]:
    """A run whose process died after ``upto`` stored events; returns (run id, that seq)."""
    log = list((await Engine(index).ask(QUESTION, collections=["demo"])).events)
    run_id = log[0].run_id
    async with SqliteRunStore(store_path, owner="crashed-server") as store:
        await store.create_run(RunMeta(run_id=run_id, tenant=tenant, question=QUESTION,
                                       mode="agent"))
        await store.append(run_id, log[:upto])
    # closing dropped the lease: the next writer's recovery interrupts the run
    return run_id, upto


async def test_an_interrupted_run_resumes_to_one_terminal_streamed_after_it(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    run_id, upto = await crashed_run(tmp_path / "runs.db", server_index)
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        record = await (await client.get(f"/v1/runs/{run_id}", headers=auth("acme"))).json()
        assert (record["status"], record["outcome"], record["last_seq"]) == (
            "interrupted", "interrupted", upto + 1)
        other = await client.post(f"/v1/runs/{run_id}/resume", headers=auth("beta"))
        assert other.status == 404 and (await other.json())["code"] == "run_not_found"
        missing = await client.post("/v1/runs/nosuchrun/resume", headers=auth("acme"))
        assert missing.status == 404
        resp = await client.post(f"/v1/runs/{run_id}/resume", headers=auth("acme"))
        assert resp.status == 202, await resp.text()
        body = await resp.json()
        assert body == {"run_id": run_id, "resumed": True,
                        "links": {"self": f"/v1/runs/{run_id}",
                                  "events": f"/v1/runs/{run_id}/events",
                                  "ws": f"/v1/runs/{run_id}/ws",
                                  "cancel": f"/v1/runs/{run_id}/cancel"}}
        again = await client.post(f"/v1/runs/{run_id}/resume", headers=auth("acme"))
        assert again.status == 409 and (await again.json())["code"] == "run_not_resumable"
        events = await client.get(f"/v1/runs/{run_id}/events?after={upto + 1}",
                                  headers=auth("acme"))
        read = await asyncio.wait_for(read_sse(events), 20)
        types = [m.event for m in read.events]
        assert types[0] == "run.resumed" and types.count("run.finished") == 1
        assert types[-1] == "run.finished" and read.events[-1].data["outcome"] == "answered"
        assert read.seqs == list(range(upto + 2, upto + 2 + len(read.seqs)))
        assert read.events[0].data["after_seq"] == upto + 1
        await client.app[MANAGER_KEY].wait_all()
        final = await (await client.get(f"/v1/runs/{run_id}", headers=auth("acme"))).json()
        assert (final["status"], final["outcome"]) == ("finished", "answered")
        assert final["citations"] and final["last_seq"] == read.seqs[-1]
        done = await client.post(f"/v1/runs/{run_id}/resume", headers=auth("acme"))
        assert done.status == 409 and "finished" in (await done.json())["detail"]


async def test_resume_takes_a_slot_like_a_start_and_a_closed_store_is_503(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    run_id, _ = await crashed_run(tmp_path / "runs.db", server_index)
    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, planner=GatedPlanner,
                         tenants=two_tenants(max_concurrent_runs=1)) as client:
            await start_run(client, "acme")  # holds acme's only slot at the gate
            busy = await client.post(f"/v1/runs/{run_id}/resume", headers=auth("acme"))
            assert busy.status == 429 and busy.headers["Retry-After"]
            stored: Any = await client.app[STORE_KEY].get_run(run_id)
            assert stored.status == "interrupted"  # a refused resume changes nothing
            GatedPlanner.gate.set()
            await client.app[MANAGER_KEY].wait_all()
            await client.app[STORE_KEY].close()
            down = await client.post(f"/v1/runs/{run_id}/resume", headers=auth("acme"))
            assert down.status == 503 and (await down.json())["code"] == "store_unavailable"
    finally:
        GatedPlanner.gate = None


async def test_resume_interrupted_resumes_the_crashed_runs_at_start_up(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    run_id, upto = await crashed_run(tmp_path / "runs.db", server_index, upto=5)
    async with serve(tmp_path, server_index, tenants=two_tenants(),
                     resume_interrupted=True) as client:
        await client.app[MANAGER_KEY].wait_all()
        final = await (await client.get(f"/v1/runs/{run_id}", headers=auth("acme"))).json()
        assert (final["status"], final["outcome"]) == ("finished", "answered")
        events = await client.get(f"/v1/runs/{run_id}/events", headers=auth("acme"))
        read = await asyncio.wait_for(read_sse(events), 20)
        types = [m.event for m in read.events]
        assert types[upto:upto + 2] == ["run.finished", "run.resumed"]
        assert types.count("run.finished") == 2 and read.seqs == list(range(1, len(types) + 1))
