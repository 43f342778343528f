"""The CLI as a user chains it: ``ask`` prints a run id, ``runs`` lists it whole, ``replay``
takes a prefix of it; ``--json`` prints only JSON; a taken port is one line.

Every command runs as a real subprocess, with its own ``$REACTIVE_RAG_HOME`` (so its
own default run store), as a user would run it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reactive_rag.store import RunMeta, SqliteRunStore
from streams import Event, RunFinished, RunStarted, decode_json

pytestmark = pytest.mark.slow  # a subprocess per command, as a user runs them

REPO = Path(__file__).resolve().parents[3]
QUESTION = "Who designed Raft?"


def cli(home: Path, *argv: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("REACTIVE_RAG_", "COLUMNS", "LINES"))}
    env.update(REACTIVE_RAG_HOME=str(home), PYTHONPATH=str(REPO), COLUMNS=str(columns))
    return subprocess.run([sys.executable, "-m", "reactive_rag", *argv], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=110)


def one_json_object(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.stderr == "", done.stderr
    parsed = json.loads(done.stdout)  # the whole of stdout is one JSON document
    assert isinstance(parsed, dict)
    return parsed


def json_lines(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert done.stderr == "", done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines and all(isinstance(line, dict) for line in lines)
    return lines


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An indexed notes folder (``--root``) and an empty home (the default store's place)."""
    folder = tmp_path_factory.mktemp("notes")
    (folder / "raft.md").write_text(
        "# Raft\n\nRaft is a consensus algorithm designed to be easy to understand. "
        "Raft was designed by Diego Ongaro and John Ousterhout at Stanford.\n")
    root = tmp_path_factory.mktemp("root")
    home = tmp_path_factory.mktemp("home")
    done = cli(home, "index", str(folder), "--collection", "notes", "--root", str(root))
    assert done.returncode == 0, done.stderr
    return root, home


@pytest.fixture(scope="module")
def asked(setup: tuple[Path, Path]) -> dict[str, Any]:
    """``ask --json`` once; its JSON object."""
    root, home = setup
    done = cli(home, "ask", QUESTION, "-c", "notes", "--root", str(root), "--json")
    assert done.returncode == 0, done.stderr
    return one_json_object(done)


def test_the_id_ask_prints_replays_from_the_default_store(
        setup: tuple[Path, Path], asked: dict[str, Any]) -> None:
    _, home = setup
    run_id = asked["run_id"]
    replayed = cli(home, "replay", run_id, "--json")
    json_lines(replayed)
    events = [decode_json(line) for line in replayed.stdout.splitlines()]
    assert isinstance(events[0], RunStarted) and events[0].question == QUESTION
    assert isinstance(events[-1], RunFinished) and events[-1].outcome == asked["outcome"]
    assert len(events) == asked["events"] and {e.run_id for e in events} == {run_id}
    shown = cli(home, "replay", run_id[:4])  # the rendered view, from a prefix
    assert shown.returncode == 0 and "run.finished" in shown.stdout
    assert "Ongaro" in shown.stdout


def test_runs_lists_whole_ids_even_in_a_narrow_terminal(
        setup: tuple[Path, Path], asked: dict[str, Any], tmp_path: Path) -> None:
    _, home = setup
    long_id = "f" * 32  # as the server names its runs
    asyncio.run(_store_run(home / "runs.db", long_id, "a question " * 20))
    done = cli(home, "runs", columns=40)
    assert done.returncode == 0, done.stderr
    assert long_id in done.stdout and asked["run_id"] in done.stdout
    listed = {line["run_id"] for line in json_lines(cli(home, "runs", "--json"))}
    assert {long_id, asked["run_id"]} <= listed


def test_an_ambiguous_prefix_is_one_line_listing_the_candidates(
        setup: tuple[Path, Path], tmp_path: Path) -> None:
    home = tmp_path / "home"
    for run_id in ("abc123", "abc999", "abd000"):
        asyncio.run(_store_run(home / "runs.db", run_id, "q"))
    done = cli(home, "replay", "ab")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "ambiguous" in done.stderr
    for candidate in ("abc123", "abc999", "abd000"):
        assert candidate in done.stderr
    unique = cli(home, "replay", "abd", "--json")
    assert unique.returncode == 0 and json_lines(unique)[0]["run_id"] == "abd000"


def test_an_unknown_id_is_one_clear_line_and_exit_2(setup: tuple[Path, Path]) -> None:
    _, home = setup
    done = cli(home, "replay", "nosuchrun")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "no run 'nosuchrun'" in done.stderr


def test_no_store_keeps_the_run_out_of_the_store(
        setup: tuple[Path, Path], tmp_path: Path) -> None:
    root, _ = setup
    home = tmp_path / "home"
    out = one_json_object(cli(home, "ask", QUESTION, "-c", "notes", "--root", str(root),
                              "--json", "--no-store"))
    assert out["outcome"] == "answered"
    assert not (home / "runs.db").exists()


def test_a_store_that_cannot_be_written_still_prints_the_answer_with_one_warning(
        setup: tuple[Path, Path], tmp_path: Path) -> None:
    root, home = setup
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    done = cli(home, "ask", QUESTION, "-c", "notes", "--root", str(root), "--json",
               "--store", str(blocker / "runs.db"))
    assert done.returncode == 0
    out = json.loads(done.stdout)
    assert out["outcome"] == "answered" and "Ongaro" in out["answer"]
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("warning:")
    assert out["run_id"] in done.stderr and "not stored" in done.stderr
    plain = cli(home, "ask", QUESTION, "-c", "notes", "--root", str(root), "--quiet",
                "--store", str(blocker / "runs.db"))
    assert plain.returncode == 0 and "Ongaro" in plain.stdout
    assert plain.stderr.count("\n") == 1 and "not stored" in plain.stderr


@pytest.mark.parametrize("command", ["index", "search", "ask", "demo", "runs", "replay",
                                     "resume"])
def test_json_writes_only_json_to_stdout_and_nothing_to_stderr(
        setup: tuple[Path, Path], asked: dict[str, Any], tmp_path: Path, command: str) -> None:
    root, home = setup
    notes = tmp_path / "more"
    notes.mkdir()
    (notes / "paxos.txt").write_text("Leslie Lamport first described Paxos in 1989.\n")
    if command == "index":
        out = one_json_object(cli(home, "index", str(notes), "-c", "more", "--root",
                                  str(tmp_path / "root"), "--json"))
        assert out["documents"] == 1
    elif command == "search":
        done = cli(home, "search", "Raft", "-c", "notes", "--root", str(root), "--json")
        assert done.returncode == 0
        hits = json.loads(done.stdout)  # one JSON list of hits
        assert done.stderr == "" and isinstance(hits, list) and hits[0]["title"] == "Raft"
    elif command in ("ask", "demo"):
        out = one_json_object(cli(home, command, QUESTION, "-c", "notes", "--root", str(root),
                                  "--json"))
        assert out["outcome"] == "answered"
    elif command == "runs":
        assert any(r["run_id"] == asked["run_id"]
                   for r in json_lines(cli(home, "runs", "--json")))
    elif command == "replay":
        lines = json_lines(cli(home, "replay", asked["run_id"], "--json"))
        assert lines[-1]["type"] == "run.finished"
    else:
        run_id = asyncio.run(_interrupted_copy(home / "runs.db", asked["run_id"]))
        out = one_json_object(cli(home, "resume", run_id[:8], "--root", str(root), "--json"))
        assert out["run_id"] == run_id and out["outcome"] == "answered"


def test_verbose_json_shows_the_live_view_on_stderr(setup: tuple[Path, Path]) -> None:
    root, home = setup
    done = cli(home, "ask", QUESTION, "-c", "notes", "--root", str(root), "--json",
               "--verbose", "--no-store")
    assert json.loads(done.stdout)["outcome"] == "answered"
    assert "run.started" in done.stderr and "run.finished" in done.stderr


def test_serve_on_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        done = cli(tmp_path / "home", "serve", "--port", str(port),
                   "--store", str(tmp_path / "store" / "runs.db"))
    finally:
        taken.close()
    assert done.returncode == 2
    assert done.stderr == f"error: port {port} on 127.0.0.1 is in use; pick another with --port\n"
    assert done.stdout == ""
    assert not (tmp_path / "store").exists()  # refused before the store was opened


async def _store_run(path: Path, run_id: str, question: str) -> None:
    events: list[Event] = [
        RunStarted(question=question, run_id=run_id, seq=1, ts=1.0),
        RunFinished(outcome="no_evidence", run_id=run_id, seq=2, ts=2.0),
    ]
    async with SqliteRunStore(path) as store:
        await store.create_run(RunMeta(run_id=run_id, tenant="default", question=question))
        await store.append(run_id, events)


async def _interrupted_copy(path: Path, run_id: str) -> str:
    """A copy of a stored run cut before its end, as a crash leaves it (then recovered)."""
    copy = "c0ffee" + run_id
    async with SqliteRunStore(path) as store:
        stored = [e async for e in store.events(run_id)]
        prefix = [e.model_copy(update={"run_id": copy}) for e in stored[:3]]
        await store.create_run(RunMeta(run_id=copy, tenant="default", question=QUESTION))
        await store.append(copy, prefix)
        assert await store.mark_interrupted() == [copy]
    return copy
