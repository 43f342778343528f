"""An operator's view of the store (`runs`, `replay`) never touches a live server's runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reactive_rag.store import RunMeta, StoreReadOnly
from streams import RunStarted

from .._store_fixtures import BACKENDS, drop_namespace, make_store, namespace_of


async def _running_run(store: object, run_id: str = "live1") -> None:
    await store.create_run(RunMeta(run_id, "default", "Who is still running?"))  # type: ignore[attr-defined]
    await store.append(run_id, [RunStarted(question="Who is still running?", run_id=run_id,  # type: ignore[attr-defined]
                                           seq=1, ts=1.0)])


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_read_only_store_recovers_nothing_and_refuses_every_write(
        backend: str, tmp_path: Path) -> None:
    live = make_store(backend, tmp_path)
    await live.open()
    try:
        await _running_run(live)
        viewer = make_store(backend, tmp_path, read_only=True, **namespace_of(live))
        assert await viewer.open() == []  # the live owner's run is not "crashed"
        try:
            assert (await viewer.get_run("live1")).status == "running"
            with pytest.raises(StoreReadOnly):
                await viewer.create_run(RunMeta("other", "default", "q"))
            with pytest.raises(StoreReadOnly):
                await viewer.finish("live1", "failed")
            with pytest.raises(StoreReadOnly):
                await viewer.mark_interrupted()
        finally:
            await viewer.close()
        assert (await live.get_run("live1")).status == "running"
    finally:
        await drop_namespace(live)
        await live.close()


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reactive_rag", *argv], capture_output=True,
                          text=True, timeout=120, check=False)


async def test_runs_and_replay_beside_a_live_owner_leave_its_running_run_running(
        tmp_path: Path) -> None:
    live = make_store("sqlite", tmp_path)
    await live.open()
    try:
        await _running_run(live)
        db = str(tmp_path / "runs.db")
        listed = _cli("runs", "--store", db, "--json")
        assert listed.returncode == 0, listed.stderr
        rows = [json.loads(line) for line in listed.stdout.splitlines()]
        assert [(r["run_id"], r["status"]) for r in rows] == [("live1", "running")]
        replayed = _cli("replay", "live1", "--store", db)
        assert replayed.returncode == 0, replayed.stderr
        assert "still running" in replayed.stdout
        assert (await live.get_run("live1")).status == "running"
        assert [e.type async for e in live.events("live1")] == ["run.started"]
    finally:
        await live.close()


def test_runs_on_a_store_that_does_not_exist_says_so_and_creates_nothing(
        tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "runs.db"
    result = _cli("runs", "--store", str(missing))
    assert result.returncode == 1 and "no run store at" in result.stderr
    assert not missing.parent.exists()
