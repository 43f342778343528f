"""Ctrl-C as a user presses it: ``ask`` cancels its run and keeps it, a build stops.

Every command runs as a real subprocess (its own ``$REACTIVE_RAG_HOME``) and gets a
real SIGINT once it is where the user would press Ctrl-C: the run waiting on its chat
model, the build between two embedding batches. Each waits on a condition (the model
server got the request; the embedder reached its second batch), never on a duration.
The exit status is 130, stderr holds one ``cancelled`` line and no traceback.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.models import HashingEmbedder
from reactive_rag.index import CorpusIndex

pytestmark = pytest.mark.slow  # a subprocess per command, as a user runs them

REPO = Path(__file__).resolve().parents[3]
WAIT_S = 120  # an upper bound for a condition that comes in well under a second or two


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("REACTIVE_RAG_", "COLUMNS", "LINES"))}
    env.update(REACTIVE_RAG_HOME=str(home), PYTHONPATH=str(REPO), COLUMNS="200",
               PYTHONUNBUFFERED="1")
    return env


def _cli(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reactive_rag", *argv], cwd=REPO,
                          env=_env(home), capture_output=True, text=True, timeout=WAIT_S)


def _interrupted(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    """SIGINT to ``proc``, then its exit status, stdout and stderr."""
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=WAIT_S)
    return proc.returncode, out, err


def _one_cancelled_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "cancelled" in line]
    assert len(lines) == 1, err
    return lines[0]


class _SilentModel:
    """A chat server that takes each request and never answers: the run waits on it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.asked = threading.Event()
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            try:
                if conn.recv(65536):  # the request has come (it is never answered)
                    self.asked.set()
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()
        for conn in self._conns:
            conn.close()


@pytest.fixture
def silent_model() -> Iterator[_SilentModel]:
    server = _SilentModel()
    yield server
    server.close()


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index (``--root``) holding one small collection, ``notes``."""
    folder = tmp_path_factory.mktemp("notes")
    (folder / "raft.md").write_text(
        "# Raft\n\nRaft is a consensus algorithm designed to be easy to understand. "
        "Raft was designed by Diego Ongaro and John Ousterhout at Stanford.\n")
    root = tmp_path_factory.mktemp("root")
    done = _cli(tmp_path_factory.mktemp("home"), "index", str(folder), "--collection", "notes",
                "--root", str(root))
    assert done.returncode == 0, done.stderr
    return root


def test_ctrl_c_during_ask_cancels_the_run_keeps_it_and_exits_130(
        notes: Path, tmp_path: Path, silent_model: _SilentModel) -> None:
    home = tmp_path / "home"
    proc = subprocess.Popen(
        [sys.executable, "-m", "reactive_rag", "ask", "Who designed Raft?", "-c", "notes",
         "--root", str(notes), "--model-url", f"http://127.0.0.1:{silent_model.port}/v1"],
        cwd=REPO, env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert silent_model.asked.wait(WAIT_S), "the run never asked its chat model"
        code, out, err = _interrupted(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert code == 130, (code, out, err)
    line = _one_cancelled_line(err)
    assert "run.started" in out  # the live view showed the run until then
    listed = _cli(home, "runs", "--json")
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    runs = [json.loads(row) for row in listed.stdout.splitlines()]
    assert len(runs) == 1 and runs[0]["outcome"] == "cancelled", runs
    run_id = runs[0]["run_id"]
    assert line == f"cancelled (run {run_id} kept; see reactive-rag replay {run_id})"
    replayed = _cli(home, "replay", run_id, "--json")
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout.splitlines()[-1])["type"] == "run.finished"


# A child process running the real CLI with an embedder that, at its second batch, says so
# on stderr and waits until the test lets it go (after the SIGINT): the build is then
# certainly between two batches when Ctrl-C comes. Without $BLOCK_AT it embeds freely.
_CHILD = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from actors.models import HashingEmbedder
    from reactive_rag.index import _index
    from reactive_rag.cli import main

    class Embedder:
        def __init__(self):
            self.inner = HashingEmbedder()
            self.name, self.dim, self.batches = self.inner.name, self.inner.dim, 0

        def embed_queries(self, texts):
            return self.inner.embed_queries(texts)

        def embed_passages(self, texts):
            self.batches += 1
            release = os.environ.get("BLOCK_AT")
            if release and self.batches == 2:
                print("EMBEDDING", file=sys.stderr, flush=True)
                while not Path(release).exists():
                    time.sleep(0.01)
            return self.inner.embed_passages(texts)

    _index.default_embedder = lambda root: Embedder()
    sys.exit(main(sys.argv[1:]))
""")


def _child(home: Path, release: Path | None, *argv: str) -> subprocess.Popen[str]:
    env = _env(home)
    if release is not None:
        env["BLOCK_AT"] = str(release)
    return subprocess.Popen([sys.executable, "-c", _CHILD, *argv], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _interrupt_at_second_batch(proc: subprocess.Popen[str], release: Path) -> tuple[int, str]:
    """Wait for the build's second batch, press Ctrl-C, let the batch end; code and stderr."""
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if line.strip() == "EMBEDDING":
                break
        else:
            raise AssertionError(f"the build never reached its second batch: {''.join(seen)}")
        proc.send_signal(signal.SIGINT)
        release.touch()
        _, err = proc.communicate(timeout=WAIT_S)
    finally:
        release.touch()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, "".join(seen) + err


def _folder(path: Path, files: int, tag: str) -> Path:
    path.mkdir()
    for i in range(files):
        (path / f"note{i:03d}.txt").write_text(
            f"Note {i} ({tag}) is about item{i} and the {tag} version of it.\n")
    return path


def test_ctrl_c_during_an_index_build_stops_it_and_keeps_the_last_generation(
        tmp_path: Path) -> None:
    home, root = tmp_path / "home", tmp_path / "root"
    first = _folder(tmp_path / "v1", 3, "first")
    built = _child(home, None, "index", str(first), "-c", "notes", "--root", str(root))
    _, err = built.communicate(timeout=WAIT_S)
    assert built.returncode == 0, err
    second = _folder(tmp_path / "v2", 200, "second")  # 200 chunks: four batches of 64
    proc = _child(home, tmp_path / "release", "index", str(second), "-c", "notes", "--sync",
                  "--root", str(root))
    code, err = _interrupt_at_second_batch(proc, tmp_path / "release")
    assert code == 130, err
    assert "nothing written" in _one_cancelled_line(err)
    coll = root / "notes"
    assert sorted(p.name for p in coll.iterdir() if p.name.startswith(("gen-", ".building"))) \
        == ["gen-000001"]
    with CorpusIndex(root, HashingEmbedder()) as index:
        assert index.collection_info("notes").generation == 1
        hits = index.search("item1 first version", collection="notes", k=3, mode="bm25")
        assert hits and all("first" in h.chunk.text for h in hits)


def test_ctrl_c_during_the_first_run_indexing_stops_before_writing(tmp_path: Path) -> None:
    home, root, release = tmp_path / "home", tmp_path / "root", tmp_path / "release"
    proc = _child(home, release, "demo", "--root", str(root))
    code, err = _interrupt_at_second_batch(proc, release)
    assert code == 130, err
    assert "nothing written" in _one_cancelled_line(err)
    stdlib = root / "stdlib"
    written = [p.name for p in stdlib.glob("*") if p.name.startswith(("CURRENT", "gen-",
                                                                      ".building"))]
    assert written == []
    assert _cli(home, "runs", "--json").stdout == ""  # no run was started
