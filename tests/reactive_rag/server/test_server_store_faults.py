"""A store that stops taking writes under a live server: runs end ``failed`` for every
client, the server says it is not ready and refuses new runs, reads do not wait, and
the stored state is repaired when the store comes back."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reactive_rag.index import CorpusIndex
from reactive_rag.store import RunMeta, RunRecord, SqliteRunStore, StoreUnavailable
from streams import Event

from ..._eventually import eventually
from .._server_fixtures import GatedPlanner, SseRead, read_sse, serve, start_run


class FailingStore(SqliteRunStore):
    """A real SQLite store whose writes fail while ``down`` (reads still work, as on a full
    disk)."""

    down = False

    def _check_down(self) -> None:
        if self.down:
            raise StoreUnavailable("SQLite: database or disk is full")

    async def append(self, run_id: str, events: Sequence[Event]) -> int:
        self._check_down()
        return await super().append(run_id, events)

    async def create_run(self, meta: RunMeta) -> RunRecord:
        self._check_down()
        return await super().create_run(meta)

    async def heartbeat(self) -> None:
        self._check_down()
        await super().heartbeat()


async def test_a_store_that_stops_writing_fails_the_run_for_clients_and_is_repaired(
    tmp_path: Path, server_index: CorpusIndex
) -> None:
    store = FailingStore(tmp_path / "faulty.db")
    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, planner=GatedPlanner, store=store,
                         store_retry_s=0.4, lease_ttl_s=0.3) as client:
            run_id = await start_run(client)

            attached: list[SseRead] = []

            async def follow() -> SseRead:
                async with client.get(f"/v1/runs/{run_id}/events") as resp:
                    first = await read_sse(resp, limit=1)  # a stored event: it is attached
                    attached.append(first)
                    rest = await read_sse(resp)
                    return SseRead(first.messages + rest.messages, first.comments + rest.comments)

            clients = [asyncio.create_task(follow()) for _ in range(3)]
            await eventually(lambda: len(attached) == 3, "every client to have a stored event")
            store.down = True
            GatedPlanner.gate.set()  # the run goes on while nothing can be stored
            reads = await asyncio.wait_for(asyncio.gather(*clients), 30)
            for read in reads:
                end = read.events[-1]
                assert end.event == "run.finished"
                assert end.data["outcome"] == "failed"
                assert "run store stopped taking this run's events" in end.data["reason"]
                assert read.seqs == list(range(1, end.id + 1))  # nothing skipped before it
            ready = await client.get("/readyz")
            assert ready.status == 503 and (await ready.json())["code"] == "not_ready"
            refused = await client.post("/v1/runs", json={"question": "anything?"})
            assert refused.status == 503
            assert (await refused.json())["code"] == "store_unavailable"
            listing = await client.get("/v1/runs")  # reads answer from what is stored
            assert listing.status == 200
            assert [r["status"] for r in (await listing.json())["runs"]] == ["running"]
            store.down = False

            async def repaired() -> bool:
                body = await (await client.get(f"/v1/runs/{run_id}")).json()
                return bool(body["status"] == "finished" and body["outcome"] == "failed")

            await eventually(repaired, "the failed ending is stored", timeout_s=10, interval_s=0.02)
            await eventually(lambda: _status(client, "/readyz", 200), "ready again", timeout_s=10,
                             interval_s=0.02)
            async with client.get(f"/v1/runs/{run_id}/events",
                                  headers={"Last-Event-ID": str(reads[0].seqs[-1])}) as resp:
                again = await read_sse(resp)
            assert again.events[-1].data == reads[0].events[-1].data  # the same ending
            await start_run(client)  # new runs are taken again
    finally:
        GatedPlanner.gate = None


async def test_a_run_the_store_cannot_create_is_refused_with_503_and_nothing_runs(
    tmp_path: Path, server_index: CorpusIndex
) -> None:
    store = FailingStore(tmp_path / "faulty.db")
    async with serve(tmp_path, server_index, store=store, lease_ttl_s=30) as client:
        store.down = True
        resp = await client.post("/v1/runs", json={"question": "Who founded Bayer?"})
        assert resp.status == 503
        body = await resp.json()
        assert body["code"] == "store_unavailable" and resp.headers["Retry-After"]
        store.down = False
        assert (await client.get("/v1/runs")).status == 200
        assert (await (await client.get("/v1/runs")).json())["runs"] == []


async def _status(client: Any, path: str, expected: int) -> bool:
    return bool((await client.get(path)).status == expected)
