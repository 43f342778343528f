"""The OpenAPI document matches the server exactly: schemathesis, every check, finds nothing.

A real ``python -m reactive_rag serve`` process on loopback (the ``reactive-rag
serve`` code path, over a temp store and the four-document test corpus), once
with a tenant token and once in open mode, against ``schemathesis run`` with a
fixed seed and a bounded number of examples per operation (see
``bench/_conformance.py`` for what it is told about WebSockets). No operation
is excluded: the SSE routes are checked event by event against the document's
event schema, the WebSocket route's handshake answers 101 (or its
400/401/404/422 problems) as documented.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from reactive_rag.index import CorpusIndex
from reactive_rag.server import hash_token
from reactive_rag.server._caps import BUDGET_CAPS
from tests._bench import bench_module

from .._corpus import DOCS

REPO = Path(__file__).resolve().parents[3]
TOKEN = "conformance-token-7f3a"


def _bench_conformance() -> ModuleType:
    return bench_module("_conformance")


@dataclass(frozen=True, slots=True)
class Served:
    """A server process: its base URL and the file its log goes to."""

    base: str
    port: int
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def serve_process(folder: Path, config_toml: str) -> Iterator[Served]:
    """``python -m reactive_rag serve`` with this config on 127.0.0.1; SIGINT at the end."""
    folder.mkdir(parents=True, exist_ok=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = folder / "server.toml"
    config.write_text(config_toml)
    env = {**os.environ, "REACTIVE_RAG_HOME": str(folder / "home"), "PYTHONPATH": str(REPO)}
    served = Served(f"http://127.0.0.1:{port}", port, folder / "server.log")
    with served.log_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reactive_rag", "serve", "--port", str(port), "--config",
             str(config), "--store", str(folder / "runs.db")],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, served.log()
            try:
                with urllib.request.urlopen(f"{served.base}/healthz", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, "server did not come up\n" + served.log()
                time.sleep(0.1)
        yield served
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, served.log()


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The four test documents as collection ``demo``, indexed as the server reads them."""
    root = tmp_path_factory.mktemp("conformance-index")
    index = CorpusIndex(root)
    index.index_documents("demo", DOCS)
    index.close()
    yield root


def _config(corpus_root: Path, *, open_mode: bool) -> str:
    head = (f'index_root = "{corpus_root}"\ndefault_collections = ["demo"]\n'
            "build_default_corpus = false\n")
    # budget caps at the request maximum: a per-tenant cap is not in the document, so a
    # schema-valid budget over it would be a 422 schemathesis could not know
    caps = "".join(f"{name} = 1000000\n" for name in BUDGET_CAPS)
    # no collections created: one made by a fuzzed POST /v1/collections would be allowed
    # but empty, so a run naming it would be a 422 "not indexed" (its writes answer 403)
    writes = "[{}.collection_writes]\ncreate = false\n"
    if open_mode:
        # every tenant allowed only `demo`: another collection name is a 403 whether or not
        # it exists (as for tenants), not a 422 for a name schemathesis could not know
        return head + (f'[open_tenant]\ncollections = ["demo"]\n[open_tenant.caps]\n'
                       f'{caps}{writes.format("open_tenant")}')
    return head + (f'[tenants.acme]\ntoken_sha256 = ["{hash_token(TOKEN)}"]\n'
                   f'collections = ["demo"]\n[tenants.acme.caps]\n'
                   f'{caps}{writes.format("tenants.acme")}')


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["tenant", "open"])
def test_schemathesis_finds_no_disagreement_with_the_openapi_document(
        tmp_path: Path, corpus_root: Path, mode: str) -> None:
    conformance = _bench_conformance()
    open_mode = mode == "open"
    with serve_process(tmp_path / mode, _config(corpus_root, open_mode=open_mode)) as served:
        failures, report = conformance.schemathesis_failures(
            served.base, None if open_mode else TOKEN, seed=1, max_examples=25)
    print(report)
    assert failures == 0, report
    assert TOKEN not in served.log()  # sent with every request, never logged
