"""Piped output closes quietly: every command that prints, its reader gone, stops with no
traceback and exit status 141 (128 + SIGPIPE, :data:`EXIT_BROKEN_PIPE`).

Each command runs as a real subprocess whose stdout is a pipe with no reader left: the
read end is closed before the command starts, so its first write meets the broken pipe
(a reader that closes after reading some bytes, as ``head -c 10`` does, races with a
short output that fits the pipe's buffer). One test pipes into a real ``head``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reactive_rag.cli._main import EXIT_BROKEN_PIPE, main

pytestmark = pytest.mark.slow  # a subprocess per command, as a user runs them

REPO = Path(__file__).resolve().parents[3]
QUESTION = "Who designed Raft?"


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A notes folder, its index, a question file and a store holding one run."""
    work = tmp_path_factory.mktemp("pipe")
    notes = work / "notes"
    notes.mkdir()
    (notes / "raft.md").write_text("# Raft\n\nRaft is a consensus algorithm. It was designed "
                                   "by Diego Ongaro and John Ousterhout.\n")
    qa = work / "qa.jsonl"
    qa.write_text(json.dumps({"question": QUESTION, "answers": ["Ongaro"]}) + "\n")
    root, store = work / "root", work / "runs.db"
    assert main(["index", str(notes), "-c", "notes", "--root", str(root), "--quiet"]) == 0
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["ask", QUESTION, "-c", "notes", "--root", str(root), "--store", str(store),
                     "--json"]) == 0
    return {"notes": str(notes), "qa": str(qa), "root": str(root), "store": str(store),
            "home": str(work / "home"), "run_id": json.loads(out.getvalue())["run_id"]}


def _env(home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REACTIVE_RAG_", "COLUMNS"))}
    env.update(REACTIVE_RAG_HOME=home, PYTHONPATH=str(REPO))
    return env


COMMANDS = {
    "replay --json": ["replay", "{run_id}", "--json", "--store", "{store}"],
    "replay": ["replay", "{run_id}", "--store", "{store}"],
    "runs": ["runs", "--store", "{store}"],
    "runs --json": ["runs", "--json", "--store", "{store}"],
    "index --json": ["index", "{notes}", "-c", "notes", "--root", "{root}", "--json"],
    "search --json": ["search", "raft", "-c", "notes", "--root", "{root}", "--json"],
    "ask --json": ["ask", QUESTION, "-c", "notes", "--root", "{root}", "--no-store", "--json"],
    "ask (live view)": ["ask", QUESTION, "-c", "notes", "--root", "{root}", "--no-store"],
    "eval --json": ["eval", "{qa}", "-c", "notes", "--root", "{root}", "--no-store", "--json"],
    "eval (table)": ["eval", "{qa}", "-c", "notes", "--root", "{root}", "--no-store"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_command_whose_reader_is_gone_exits_141_without_a_traceback(
        place: dict[str, str], name: str) -> None:
    argv = [a.format(**place) for a in COMMANDS[name]]
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first write
    try:
        done = subprocess.run([sys.executable, "-m", "reactive_rag", *argv], cwd=REPO,
                              env=_env(place["home"]), stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == EXIT_BROKEN_PIPE, done.stderr
    if "--json" in argv:
        assert done.stderr == ""


def test_replay_json_into_head_ends_quietly(place: dict[str, str]) -> None:
    head = shutil.which("head")
    if head is None:
        pytest.skip("no head on this machine")
    with subprocess.Popen([sys.executable, "-m", "reactive_rag", "replay", place["run_id"],
                           "--json", "--store", place["store"]], cwd=REPO,
                          env=_env(place["home"]), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as cli:
        assert cli.stdout is not None and cli.stderr is not None
        first = subprocess.run([head, "-c", "10"], stdin=cli.stdout, capture_output=True,
                               text=True, timeout=60)
        cli.stdout.close()  # only head reads it, and head has gone
        err = cli.stderr.read()
        code = cli.wait(timeout=60)
    assert first.stdout.startswith("{") and len(first.stdout) == 10  # head read its 10
    assert err == "", err
    # all of it fitted the pipe before head left (0), or a write met the closed pipe (141)
    assert code in (0, EXIT_BROKEN_PIPE)
