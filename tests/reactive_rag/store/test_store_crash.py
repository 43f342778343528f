"""kill -9 of a process that is writing runs: the store must reopen clean every time."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
from pathlib import Path

import pytest

from reactive_rag.store import RunRecord, SqliteRunStore
from streams import RunFinished

from .._store_child import run_child
from .._store_fixtures import (
    NO_POSTGRES,
    NO_REDIS,
    POSTGRES_URL,
    REDIS_URL,
    AnyStore,
    drop_namespace,
    make_store,
)

_CTX = multiprocessing.get_context("forkserver")
# Children fork from a server that has imported the store already: a cycle
# then costs milliseconds instead of a Python start-up and its imports.
_CTX.set_forkserver_preload(["tests.reactive_rag._store_child"])


class _Child:
    """A writer process and the lines it reported (``created``/``finished``)."""

    def __init__(self, *args: object) -> None:
        self._recv, send = _CTX.Pipe(duplex=False)
        self.proc = _CTX.Process(target=run_child, args=(send, *args), daemon=True)
        self.proc.start()
        send.close()
        self.created: list[str] = []
        self.finished: dict[str, int] = {}

    def _take(self) -> bool:
        while self._recv.poll():
            try:
                line = self._recv.recv()
            except (EOFError, OSError):
                return False
            word, run_id, *rest = line.split()
            if word == "created":
                self.created.append(run_id)
            else:
                self.finished[run_id] = int(rest[0])
        return True

    async def wait_finished(self, count: int) -> None:
        while len(self.finished) < count:
            if not self._take() or not self.proc.is_alive():
                raise AssertionError(f"child ended early (exit code {self.proc.exitcode})")
            await asyncio.sleep(0.002)

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL
        self.proc.join(10)
        self._take()  # what it said before dying
        self._recv.close()
        self.proc.close()


async def _all_runs(store: AnyStore) -> dict[str, RunRecord]:
    runs: dict[str, RunRecord] = {}
    before = None
    while True:
        page = await store.list_runs("acme", limit=100, before=before)
        runs.update((run.run_id, run) for run in page.runs)
        if page.next_before is None:
            return runs
        before = page.next_before


async def _check_run(store: AnyStore, run: RunRecord) -> None:
    events = [event async for event in store.events(run.run_id)]
    assert [e.seq for e in events] == list(range(1, run.last_seq + 1)), run.run_id
    assert isinstance(events[-1], RunFinished)
    assert events[-1].outcome == run.outcome
    assert sum(isinstance(e, RunFinished) for e in events) == 1


async def _crash_cycles(backend: str, tmp_path: Path, cycles: int) -> None:
    rng = random.Random(6)
    target = {"sqlite": str(tmp_path / "runs.db"), "redis": str(REDIS_URL),
              "postgres": str(POSTGRES_URL)}[backend]
    prefix = f"crash-{os.getpid()}-{tmp_path.name}:"
    expected_finished: dict[str, int] = {}
    all_created: set[str] = set()
    for cycle in range(cycles):
        child = _Child(backend, target, prefix, f"{prefix}c{cycle}-", 1000,
                       rng.randint(10, 80), 0.0002)
        try:
            await asyncio.wait_for(child.wait_finished(rng.randint(1, 2)), timeout=60)
            await asyncio.sleep(rng.uniform(0.0, 0.02))  # land the kill mid-run
            assert child.proc.exitcode is None
        finally:
            exitcode = child.proc.exitcode
            child.kill()
        assert exitcode is None  # it was still writing when killed
        created, finished = child.created, child.finished
        expected_finished.update(finished)
        all_created.update(created)

        store = make_store(backend, tmp_path, owner="child", prefix=prefix)
        interrupted = await store.open()
        try:
            if isinstance(store, SqliteRunStore):
                assert await store.integrity_check() == "ok"
            # Only the run the killed child was writing can have been left running
            # (it may have died between creating a run and saying so).
            assert len(interrupted) <= 1
            assert all(run_id.startswith(f"{prefix}c{cycle}-") for run_id in interrupted)
            stored = await _all_runs(store)
            assert set(all_created) <= set(stored)
            for run_id, run in stored.items():
                if run_id in expected_finished:
                    assert (run.status, run.outcome) == ("finished", "answered")
                    assert run.last_seq == expected_finished[run_id]
                else:
                    assert run.status in ("finished", "interrupted")
                await _check_run(store, run)
        finally:
            if cycle == cycles - 1:
                await drop_namespace(store)
            await store.close()
    assert len(expected_finished) >= cycles


@pytest.mark.slow
async def test_kill_9_sqlite_writer_20_times(tmp_path: Path) -> None:
    await _crash_cycles("sqlite", tmp_path, cycles=20)


@pytest.mark.skipif(REDIS_URL is None, reason=NO_REDIS)
async def test_kill_9_redis_writer(tmp_path: Path) -> None:
    await _crash_cycles("redis", tmp_path, cycles=3)


@pytest.mark.skipif(POSTGRES_URL is None, reason=NO_POSTGRES)
async def test_kill_9_postgres_writer(tmp_path: Path) -> None:
    await _crash_cycles("postgres", tmp_path, cycles=3)
