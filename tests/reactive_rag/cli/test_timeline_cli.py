"""``reactive-rag replay RUN_ID --timeline`` on a real stored run, in a process with no TTY."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from actors.providers import ProviderUnavailable
from actors.search import Searcher
from reactive_rag.engine._engine import Engine
from reactive_rag.store import Recorder, RunMeta, SqliteRunStore
from streams import Hit

from .._web_fixtures import SlowProvider, demo_index


class DownProvider:
    """A web provider whose service is down: every search fails."""

    name = "down-web"

    async def search(self, query: str, k: int, deadline: float) -> Sequence[Hit]:
        raise ProviderUnavailable("connection refused", provider=self.name)


async def _stored_run(tmp_path: Path) -> tuple[Path, str, int]:
    """A finished offline run (local corpus + a slow and a broken web provider) in a store."""
    db = tmp_path / "runs.db"
    engine = Engine(demo_index(tmp_path / "index"),
                    web=Searcher([SlowProvider(0.05), DownProvider()]))
    try:
        async with SqliteRunStore(db) as store:
            handle = engine.start("Who founded Bayer and when?", collections=["demo"])
            async with Recorder(store, handle.stream,
                                RunMeta(handle.run_id, "default", "Who founded Bayer and when?")):
                await handle.wait()
            searches = sum(e.type == "search.requested" for e in handle.stream.history())
    finally:
        await engine.aclose()
    return db, handle.run_id, searches


def _replay(db: Path, run_id: str, *flags: str, columns: str | None = None,
            ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run([sys.executable, "-m", "reactive_rag", "replay", run_id, "--store",
                           str(db), *flags], capture_output=True, text=True, timeout=120,
                          check=False, env=env, stdin=subprocess.DEVNULL)


async def test_timeline_draws_a_lane_per_actor_and_marks_the_failing_provider(
        tmp_path: Path) -> None:
    db, run_id, searches = await _stored_run(tmp_path)
    result = _replay(db, run_id, "--timeline")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 100 for line in lines), "wider than the 100-column default"
    lanes = {line.split()[0]: line for line in lines if line[:1].isalpha() and "│" in line}
    for lane in ("planner", "searcher", "search:local", "search:slow-web", "search:down-web",
                 "reranker", "writer", "verifier"):
        assert lane in lanes, f"no {lane} lane in:\n{result.stdout}"
    assert f"{searches} calls" in lanes["searcher"]
    assert "▓" in lanes["search:down-web"] and f"{searches} failed" in lanes["search:down-web"]
    assert "▓" not in lanes["search:local"]
    assert "budget: model steps" in result.stdout and "outcome: answered" in result.stdout
    assert "search.requested" not in result.stdout  # the swimlanes instead of the event list


async def test_timeline_fits_a_narrow_terminal(tmp_path: Path) -> None:
    db, run_id, _ = await _stored_run(tmp_path)
    result = _replay(db, run_id, "--timeline", columns="70")
    assert result.returncode == 0, result.stderr
    assert all(len(line) <= 70 for line in result.stdout.splitlines())
    assert any(line.startswith("searcher") for line in result.stdout.splitlines())


async def test_timeline_of_an_unknown_run_is_a_clear_error(tmp_path: Path) -> None:
    db, _, _ = await _stored_run(tmp_path)
    result = _replay(db, "no-such-run", "--timeline")
    assert result.returncode != 0 and "no-such-run" in result.stderr
