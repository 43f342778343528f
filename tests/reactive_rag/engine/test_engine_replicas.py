"""Two engine replicas on Ray and one Redis store: any process streams any run, with resume."""

from __future__ import annotations

import functools
import uuid
from pathlib import Path
from typing import Any

import pytest

from actors import RayOptions
from actors.models import HashingEmbedder
from reactive_rag.engine._replicas import EngineReplicas
from reactive_rag.index import CorpusIndex
from reactive_rag.store import RedisRunStore
from streams import Event, RunFinished

from ..._eventually import eventually
from .._replica_fixtures import demo_engine, demo_index
from .._server_fixtures import read_sse, serve
from .._store_fixtures import NEEDS_REDIS, REDIS_URL

pytestmark = [pytest.mark.slow, NEEDS_REDIS]


async def _events(store: RedisRunStore, run_id: str, after: int = 0) -> list[Event]:
    return [e async for e in store.attach(run_id, after)]


async def test_runs_spread_over_replicas_and_stream_from_another_process_with_resume(
    ray: Any, tmp_path: Path,
) -> None:
    root = tmp_path / "idx"
    demo_index(root)
    assert REDIS_URL is not None
    prefix = f"test-{uuid.uuid4().hex}:"
    stores = functools.partial(RedisRunStore, REDIS_URL, prefix=prefix)
    pool = EngineReplicas(functools.partial(demo_engine, str(root)), stores, replicas=2,
                          options=RayOptions(num_cpus=0.1, max_restarts=0))
    reader = RedisRunStore(REDIS_URL, prefix=prefix, read_only=True)  # "another server"
    async with pool:
        await reader.open()
        try:
            first = await pool.start_run("Who founded Bayer and when?", collections=["demo"])
            second = await pool.start_run("Who isolated aspirin?", collections=["demo"])
            assert first.replica != second.replica and first.owner != second.owner
            for run in (first, second):
                events = await _events(reader, run.run_id)
                assert [e.seq for e in events] == list(range(1, len(events) + 1))
                finished = events[-1]
                assert isinstance(finished, RunFinished) and finished.outcome == "answered"
                resumed = await _events(reader, run.run_id, after=3)  # Last-Event-ID: 3
                assert [e.model_dump() for e in resumed] == [e.model_dump() for e in events[3:]]
            record = await reader.get_run(first.run_id)
            assert record.question == "Who founded Bayer and when?"
            assert record.status == "finished"
            full = [e.seq for e in await _events(reader, first.run_id)]
        finally:
            await reader.close()
        # a server of its own (not the one that ran it) streams it over SSE, resuming
        server_index = CorpusIndex(root, HashingEmbedder())
        try:
            async with serve(tmp_path / "server", server_index,
                             store=RedisRunStore(REDIS_URL, prefix=prefix)) as client:
                body = await (await client.get(f"/v1/runs/{first.run_id}")).json()
                assert (body["status"], body["outcome"]) == ("finished", "answered")
                async with client.get(f"/v1/runs/{first.run_id}/events",
                                      headers={"Last-Event-ID": "3"}) as resp:
                    assert resp.status == 200
                    read = await read_sse(resp)
        finally:
            server_index.close()
        assert read.seqs == full[3:]
        assert read.events[-1].event == "run.finished"
    assert await pool.loads() == []  # closed: no replica left


async def test_a_dead_replica_leaves_its_run_interrupted_and_new_runs_go_to_the_others(
    ray: Any, tmp_path: Path,
) -> None:
    root = tmp_path / "idx"
    demo_index(root)
    assert REDIS_URL is not None
    prefix = f"test-{uuid.uuid4().hex}:"
    # a short lease, so the survivor's sweep finds the dead replica's lapsed one soon
    stores = functools.partial(RedisRunStore, REDIS_URL, prefix=prefix, lease_ttl_s=1.5)
    pool = EngineReplicas(functools.partial(demo_engine, str(root)), stores, replicas=2,
                          options=RayOptions(num_cpus=0.1, max_restarts=0))
    reader = RedisRunStore(REDIS_URL, prefix=prefix, read_only=True)
    async with pool:
        await reader.open()
        try:
            stuck = await pool.start_run("hang: who founded Bayer?", collections=["demo"])

            async def recorded() -> bool:
                return (await reader.get_run(stuck.run_id)).last_seq > 0

            await eventually(recorded, interval_s=0.05)
            ray.kill(pool.ray_handles[stuck.replica], no_restart=True)

            async def interrupted() -> bool:
                return (await reader.get_run(stuck.run_id)).status == "interrupted"

            # marked by the surviving replica's lease sweep
            await eventually(interrupted, interval_s=0.05)
            after = await pool.start_run("Who isolated aspirin?", collections=["demo"])
            assert after.replica != stuck.replica
            events = await _events(reader, after.run_id)
            finished = events[-1]
            assert isinstance(finished, RunFinished) and finished.outcome == "answered"
        finally:
            await reader.close()


async def test_cancelling_through_the_pool_ends_the_run_on_its_replica(
    ray: Any, tmp_path: Path,
) -> None:
    root = tmp_path / "idx"
    demo_index(root)
    assert REDIS_URL is not None
    prefix = f"test-{uuid.uuid4().hex}:"
    stores = functools.partial(RedisRunStore, REDIS_URL, prefix=prefix)
    pool = EngineReplicas(functools.partial(demo_engine, str(root)), stores, replicas=1,
                          options=RayOptions(num_cpus=0.1, max_restarts=0))
    reader = RedisRunStore(REDIS_URL, prefix=prefix, read_only=True)
    async with pool:
        await reader.open()
        try:
            run = await pool.start_run("hang until cancelled", collections=["demo"])
            assert await pool.loads() == [1]
            assert await pool.cancel(run.run_id, "user pressed stop")
            events = await _events(reader, run.run_id)
            finished = events[-1]
            assert isinstance(finished, RunFinished) and finished.outcome == "cancelled"
            assert "user pressed stop" in finished.reason
            assert not await pool.cancel("no-such-run")
        finally:
            await reader.close()
