"""``reactive-rag replay --from-file``: a run exported over HTTP (``GET /v1/runs/{id}/export``)
replays elsewhere, with no store, exactly as ``replay RUN_ID`` shows it from the store; a
damaged export is one line naming the bad line.

The export comes from a real server; every command runs as a real subprocess with its own
``$REACTIVE_RAG_HOME``, as a user would run it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reactive_rag.index import CorpusIndex
from streams import decode_json

from .._server_fixtures import read_sse, serve, start_run

pytestmark = pytest.mark.slow  # a subprocess per command, as a user runs them

REPO = Path(__file__).resolve().parents[3]


def cli(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("REACTIVE_RAG_", "COLUMNS", "LINES"))}
    env.update(REACTIVE_RAG_HOME=str(home), PYTHONPATH=str(REPO), COLUMNS="120")
    return subprocess.run([sys.executable, "-m", "reactive_rag", *argv], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=110)


@pytest.fixture
async def exported(tmp_path: Path, server_index: CorpusIndex) -> tuple[str, Path, Path]:
    """A finished run in the store at ``tmp_path/runs.db`` and its export: (id, store, file)."""
    async with serve(tmp_path, server_index) as client:
        run_id = await start_run(client)
        async with client.get(f"/v1/runs/{run_id}/events") as resp:
            await read_sse(resp)
        resp = await client.get(f"/v1/runs/{run_id}/export")
        assert resp.status == 200
        export = tmp_path / "elsewhere" / f"{run_id}.ndjson"
        export.parent.mkdir()
        export.write_bytes(await resp.read())
    return run_id, tmp_path / "runs.db", export


def test_an_export_replays_exactly_as_the_stored_run(
        exported: tuple[str, Path, Path], tmp_path: Path) -> None:
    run_id, store, export = exported
    home = tmp_path / "empty-home"  # no store there: the file is all it needs
    for flags in ((), ("--json",), ("--timeline",)):
        stored = cli(home, "replay", run_id, "--store", str(store), *flags)
        from_file = cli(home, "replay", "--from-file", str(export), *flags)
        assert stored.returncode == 0 and stored.stderr == "", stored.stderr
        assert from_file.returncode == 0 and from_file.stderr == "", from_file.stderr
        assert from_file.stdout == stored.stdout, flags
    as_json = cli(home, "replay", "--from-file", str(export), "--json")
    events = [decode_json(line) for line in as_json.stdout.splitlines()]
    assert events == [decode_json(line) for line in export.read_text().splitlines()]
    assert events[0].type == "run.started" and events[-1].type == "run.finished"
    assert run_id in cli(home, "replay", "--from-file", str(export)).stdout  # the result line


def test_a_damaged_export_is_one_line_naming_the_bad_line(
        exported: tuple[str, Path, Path], tmp_path: Path) -> None:
    _, _, export = exported
    lines = export.read_text().splitlines()
    cases = {
        "truncated": ([*lines[:2], lines[2][:len(lines[2]) // 2], *lines[3:]], "line 3"),
        "unknown type": ([lines[0], '{"type": "no.such", "run_id": "x", "seq": 2}', *lines[2:]],
                         "line 2"),
        "out of order": ([lines[1], lines[0], *lines[2:]], "line 2: seq 1 after seq 2"),
    }
    for name, (content, where) in cases.items():
        bad = tmp_path / f"{name.replace(' ', '-')}.ndjson"
        bad.write_text("\n".join(content) + "\n")
        done = cli(tmp_path, "replay", "--from-file", str(bad))
        assert done.returncode == 1, name
        assert done.stdout == "", name  # nothing half-replayed
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert done.stderr.startswith("error: ") and where in done.stderr, done.stderr
        assert str(bad) in done.stderr.replace("\n", "")


def test_replay_wants_a_run_id_or_a_file_not_both_and_says_a_missing_file(
        tmp_path: Path) -> None:
    both = cli(tmp_path, "replay", "abc", "--from-file", str(tmp_path / "x.ndjson"))
    assert both.returncode == 2 and "one of them" in both.stderr
    missing = cli(tmp_path, "replay", "--from-file", str(tmp_path / "nope.ndjson"))
    assert missing.returncode == 1
    assert len(missing.stderr.strip().splitlines()) == 1 and "cannot read" in missing.stderr
    empty = tmp_path / "empty.ndjson"
    empty.write_text("\n")
    done = cli(tmp_path, "replay", "--from-file", str(empty))
    assert done.returncode == 1 and "no events" in done.stderr
