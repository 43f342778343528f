"""``reactive-rag chat`` as a user drives it: a real process, questions piped to its stdin.

A follow-up with a pronoun is read as a standalone question (the live view says so),
``/history`` lists the turns, ``/new`` forgets them; unknown commands and empty lines do
not end the conversation; Ctrl-C at the prompt leaves cleanly.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO

import pytest

from reactive_rag.cli._main import main

REPO = Path(__file__).resolve().parents[3]
TIMEOUT_S = 120


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("chat-notes")
    (folder / "raft.md").write_text(
        "# Raft\n\nRaft is a consensus algorithm designed to be easy to understand. "
        "A Raft cluster elects a leader, and the leader replicates the log to followers. "
        "Raft was designed by Diego Ongaro and John Ousterhout at Stanford.\n")
    (folder / "paxos.txt").write_text(
        "Paxos is a family of protocols for solving consensus in a network of unreliable "
        "processors. Leslie Lamport first described Paxos in 1989.\n")
    root = tmp_path_factory.mktemp("chat-root")
    assert main(["index", str(folder), "--collection", "notes", "--root", str(root)]) == 0
    return root


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("REACTIVE_RAG_CHAT", "REACTIVE_RAG_ENTAILMENT"))}
    env["COLUMNS"] = "200"  # piped output: rich would cut the live view's lines at 80
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _argv(root: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "reactive_rag", "chat", "--collection", "notes",
            "--root", str(root), *extra]


def chat(root: Path, lines: list[str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_argv(root, *extra), input="".join(f"{x}\n" for x in lines),
                          capture_output=True, text=True, cwd=REPO, env=_env(),
                          timeout=TIMEOUT_S, check=False)


def test_a_follow_up_is_read_from_the_earlier_turn_and_history_lists_both(root: Path) -> None:
    proc = chat(root, ["What is Raft?", "Who designed it?", "/history", "/new", "/history",
                       "/quit", "What is Paxos?"])
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr
    # the follow-up, in the live view
    assert re.search(r"query\.rewritten\s+follow-up read as: “Who designed Raft\?”", out), out
    assert out.count("follow-up read as") == 1  # the first question needs no rewriting
    # two runs, each with its rendered answer
    assert out.count("run.finished") == 2
    assert len(re.findall(r"^─+ answered in ", out, re.MULTILINE)) == 2, out
    first, second = out.split("run.finished")[1:3]
    assert "consensus algorithm" in first
    assert "Ongaro" in second and "[1]" in second
    # /history: question -> how it was read, outcome, answer
    history = out.split("/history", 1)[1].split("/new", 1)[0]
    assert re.search(r"1\. What is Raft\?\s+\[answered\]", history), history
    assert re.search(r"2\. Who designed it\? -> “Who designed Raft\?”\s+\[answered\]", history)
    assert "Ongaro" in history
    # /new forgets; /quit leaves before the line after it is asked
    after_new = out.split("/new", 1)[1]
    assert "new conversation" in after_new and "no turns yet" in after_new
    assert "Paxos" not in after_new


def test_unknown_commands_and_empty_lines_do_not_end_the_conversation(root: Path) -> None:
    proc = chat(root, ["", "   ", "/frobnicate", "/history now", "/help", "Who designed Raft?"])
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr  # end of input leaves like /quit
    assert "unknown command /frobnicate; the commands are /new, /history, /help, /quit" in out
    assert "/history takes no argument" in out
    assert "Ctrl-C cancels a run" in out  # /help
    assert out.count("run.finished") == 1 and "Ongaro" in out
    assert "follow-up read as" not in out


def test_quiet_chat_still_says_how_a_follow_up_was_read(root: Path) -> None:
    proc = chat(root, ["What is Raft?", "Who designed it?"], "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "run.finished" not in proc.stdout
    assert "follow-up read as: “Who designed Raft?”" in proc.stdout
    assert "Ongaro" in proc.stdout


def test_each_turn_is_kept_in_the_run_store_and_replays(root: Path, tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    proc = chat(root, ["What is Raft?", "Who designed it?"], "--quiet", "--store", str(store))
    assert proc.returncode == 0, proc.stderr
    shown = re.findall(r"\(run ([0-9a-f]+)\)", proc.stdout)
    assert len(shown) == 2, proc.stdout  # each turn prints the id of its own run
    listed = subprocess.run([sys.executable, "-m", "reactive_rag", "runs", "--json",
                             "--store", str(store)], capture_output=True, text=True,
                            cwd=REPO, env=_env(), timeout=TIMEOUT_S, check=False)
    assert listed.returncode == 0, listed.stderr
    assert set(shown) <= set(re.findall(r'"run_id": "([0-9a-f]+)"', listed.stdout))
    replayed = subprocess.run([sys.executable, "-m", "reactive_rag", "replay", shown[1],
                               "--store", str(store)], capture_output=True, text=True,
                              cwd=REPO, env=_env(), timeout=TIMEOUT_S, check=False)
    assert replayed.returncode == 0, replayed.stderr
    assert "Ongaro" in replayed.stdout  # the follow-up's answer, read back from the store


def test_no_store_and_an_unwritable_store_keep_the_conversation_going(
        root: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**_env(), "REACTIVE_RAG_HOME": str(home)}
    kept_out = subprocess.run([*_argv(root, "--quiet", "--no-store")], input="What is Raft?\n",
                              capture_output=True, text=True, cwd=REPO, env=env,
                              timeout=TIMEOUT_S, check=False)
    assert kept_out.returncode == 0 and "consensus algorithm" in kept_out.stdout
    assert not (home / "runs.db").exists()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    proc = chat(root, ["What is Raft?", "Who designed it?"], "--quiet",
                "--store", str(blocker / "runs.db"))
    assert proc.returncode == 0
    assert "Ongaro" in proc.stdout  # the second turn still ran and answered
    assert proc.stderr.count("not stored") == 2, proc.stderr  # one warning per turn


@pytest.mark.parametrize(("argv", "message"), [
    (["--collection", "nope"], "unknown collection(s) ['nope']"),
    (["--budget", "tools=3"], "unknown budget field"),
    (["--budget", "max_tool_calls"], "NAME=VALUE"),
])
def test_bad_options_are_refused_before_the_prompt(root: Path, argv: list[str],
                                                   message: str) -> None:
    proc = subprocess.run([*_argv(root), *argv], input="What is Raft?\n",
                          capture_output=True, text=True, cwd=REPO, env=_env(),
                          timeout=TIMEOUT_S, check=False)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "you>" not in proc.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_at_the_prompt_leaves(root: Path) -> None:
    with subprocess.Popen(_argv(root), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, cwd=REPO, env=_env()) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            banner = proc.stdout.readline()  # the prompt is up once the banner is out
            assert "/help lists the commands" in banner
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)  # stdin stays open: the reading thread is still blocked
            err = proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err


class _SlowSearch(BaseHTTPRequestHandler):
    """A SearXNG stand-in that takes its time and finds nothing: a run that lasts."""

    def do_GET(self) -> None:
        time.sleep(3)
        body = b'{"results": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def slow_web() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowSearch)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _read_until(stream: IO[str], needle: str, limit_s: float = 60) -> str:
    seen = ""
    end = time.monotonic() + limit_s
    while needle not in seen and time.monotonic() < end:
        line = stream.readline()
        if not line:
            break
        seen += line
    return seen


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_during_a_run_cancels_the_run_not_the_conversation(
        root: Path, slow_web: str) -> None:
    env = {**_env(), "REACTIVE_RAG_SEARXNG_URL": slow_web}
    env.pop("REACTIVE_RAG_SEARCH_CONFIG", None)
    with subprocess.Popen([*_argv(root), "--web"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                          env=env) as proc:
        try:
            assert proc.stdin is not None and proc.stdout is not None
            assert proc.stderr is not None
            proc.stdin.write("What is Raft?\n")
            proc.stdin.flush()
            assert "search.requested" in _read_until(proc.stdout, "search.requested")
            proc.send_signal(signal.SIGINT)  # the web search is still waiting
            cancelled = _read_until(proc.stdout, "cancelled in")
            assert "cancelling the run" in cancelled and "run.finished" in cancelled
            proc.stdin.write("/history\n/quit\n")
            proc.stdin.flush()
            out = proc.stdout.read()
            proc.wait(timeout=30)
            err = proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err
    assert re.search(r"1\. What is Raft\?\s+\[cancelled\]", out), out
