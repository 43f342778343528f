"""Chaos suite (issue 13): real server processes on loopback, killed, starved and shared.

    python bench/chaos.py [--quick] [--kills N] [--outage-s S] [--only NAMES] [--json]

Every scenario runs real processes: ``bench/_chaos_server.py`` (``create_app``
over a small HashingEmbedder index, with a planner that sleeps before each
decision so runs last a few seconds) and, where a scenario needs one, its own
``redis-server`` on a free loopback port with its own folder, ``--appendonly
yes --appendfsync always`` (a write Redis acknowledged is on disk, so a
killed-and-restarted Redis keeps it). Clients are aiohttp SSE readers that
record every event they get (SSE id, type, outcome, full JSON) and reconnect
with ``Last-Event-ID`` after a dropped connection until they get a
``run.finished`` or give up after a bounded time. At the end of each scenario
the store is opened read-only and every event a client got is compared with
what the store holds at that seq.

Scenarios (``--only`` takes a comma-separated subset):

- ``kill9``: SQLite, fixed owner; ``--kills`` cycles of: 3 runs with clients,
  ``kill -9`` of the server at a random moment mid-run, restart (same owner),
  clients reconnect; interrupted runs are resumed (``POST .../resume``, or
  ``resume_interrupted`` at start on odd cycles when the config has it) and
  followed to their end;
- ``redis_outage``: Redis killed (``SIGKILL``; ``--redis-stop shutdown`` for a
  clean ``SHUTDOWN``) mid-run for ``--outage-s`` and restarted on the same port
  and folder; ``/readyz`` and ``POST /v1/runs`` are probed during the outage;
- ``disk_full``: SQLite on a 2 MB tmpfs nearly filled by a filler file; runs
  until the store cannot write; every client must get a terminal, ``POST``
  must answer 503; then the filler is deleted and the endings must be stored;
- ``replicas``: two servers (owners A and B, 3 s lease) on one Redis; runs on
  A, clients on B and on A (failing over to B); ``kill -9`` A; B's sweep must
  interrupt A's runs after the lease expired (not before); resumed on B;
- ``cli_beside_server``: ``reactive-rag runs`` / ``replay`` (``--store`` and
  ``--config`` naming the server's own owner) while runs are live; none may be
  interrupted;
- ``schemathesis``: ``bench/_conformance.py`` against a fresh server.

Figures (``--json``: one JSON object on the last line): ``runs``,
``stuck_running``, ``seq_reused``, ``committed_events_lost``,
``clients_without_terminal``, ``resumed_runs_finished``,
``schemathesis_failures``, ``breaches`` (contract breaches seen, by scenario),
``scenarios`` (per-scenario breakdowns) and ``timings``. Times are reported,
never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import aiohttp  # noqa: E402

from actors.models import HashingEmbedder  # noqa: E402
from reactive_rag.index import CorpusIndex  # noqa: E402
from reactive_rag.server import make_store  # noqa: E402
from streams import encode_json  # noqa: E402
from tests.reactive_rag._corpus import DOCS  # noqa: E402  (the four documents the tests use)

CHILD = REPO / "bench" / "_chaos_server.py"
COLLECTION = "chaos"
SCENARIOS = ("kill9", "redis_outage", "disk_full", "replicas", "cli_beside_server",
             "schemathesis")
QUESTIONS = ("Who founded Bayer and when?", "Who first isolated aspirin, and where?",
             "What is tea prepared from?", "Why are cats kept as pets?")

HTTP_TIMEOUT = aiohttp.ClientTimeout(total=20, sock_connect=3)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def now() -> float:
    return time.monotonic()


# --- processes ------------------------------------------------------------------------------


def spawn(cmd: list[str], log: Path | None, env: dict[str, str] | None
          ) -> subprocess.Popen[bytes]:
    """Start ``cmd`` (output appended to ``log``, or dropped); returns at once."""
    if log is None:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        with log.open("ab") as out:
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out,
                                    stderr=subprocess.STDOUT)
    SPAWNED.append(proc)
    return proc


SPAWNED: list[subprocess.Popen[bytes]] = []
"""Every process this bench started: whatever is still alive at exit is killed."""


def kill_leftovers() -> None:
    for proc in SPAWNED:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


class Server:
    """One ``bench/_chaos_server.py`` process; restartable on the same port and owner."""

    def __init__(self, name: str, folder: Path, index: Path, store: str, *,
                 owner: str | None = None, lease_ttl_s: float | None = None,
                 store_retry_s: float | None = None, delay_s: float = 1.0,
                 token: str | None = None, port: int | None = None) -> None:
        self.name, self.folder, self.index, self.store = name, folder, index, store
        self.owner, self.lease_ttl_s, self.store_retry_s = owner, lease_ttl_s, store_retry_s
        self.delay_s, self.token = delay_s, token
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.start_s: list[float] = []
        self.ignored: list[str] = []
        self.logs: list[Path] = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, *, resume_interrupted: bool = False, timeout_s: float = 60) -> float:
        """Start the process; return the seconds until it accepted connections."""
        self.starts += 1
        port_file = self.folder / f"{self.name}-port-{self.starts}"
        log = self.folder / f"{self.name}-{self.starts}.log"
        self.logs.append(log)
        cmd = [sys.executable, str(CHILD), "--index", str(self.index), "--store", self.store,
               "--port-file", str(port_file), "--port", str(self.port),
               "--delay-s", str(self.delay_s)]
        for flag, value in (("--owner", self.owner), ("--lease-ttl-s", self.lease_ttl_s),
                            ("--store-retry-s", self.store_retry_s), ("--token", self.token)):
            if value is not None:
                cmd += [flag, str(value)]
        if resume_interrupted:
            cmd.append("--resume-interrupted")
        env = {**os.environ, "PYTHONPATH": str(REPO),
               "REACTIVE_RAG_HOME": str(self.folder / "home")}
        begin = now()
        self.proc = spawn(cmd, log, env)
        while not port_file.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"server {self.name} exited ({self.proc.returncode}): "
                                   + log.read_text(errors="replace")[-2000:])
            if now() - begin > timeout_s:
                raise RuntimeError(f"server {self.name} did not start in {timeout_s} s")
            await asyncio.sleep(0.03)
        text = port_file.read_text().split()
        self.ignored = text[1].removeprefix("ignored=").split(",") if len(text) > 1 else []
        elapsed = now() - begin
        self.start_s.append(elapsed)
        return elapsed

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            await asyncio.to_thread(self.proc.wait)

    async def stop(self, timeout_s: float = 30) -> int | None:
        """SIGTERM (a clean shutdown: runs still going end ``cancelled``); SIGKILL after timeout."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(self.proc.wait, timeout_s)
            except subprocess.TimeoutExpired:
                await self.kill9()
                return -9
        return self.proc.returncode

    def log_problems(self) -> list[str]:
        """Tracebacks and ERROR lines of every incarnation's log (first line of each)."""
        found = []
        for log in self.logs:
            if not log.exists():
                continue
            lines = log.read_text(errors="replace").splitlines()
            for i, line in enumerate(lines):
                if line.startswith("Traceback"):
                    tail = next((ln for ln in lines[i + 1:] if ln and not ln.startswith(" ")),
                                "")
                    found.append(f"{log.name}: {tail[:200]}")
                elif " ERROR " in line:
                    found.append(f"{log.name}: {line[:200]}")
        return found


class Redis:
    """Our own redis-server: loopback, free port, own folder, AOF fsynced on every write."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder / "redis"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self, timeout_s: float = 20) -> float:
        begin = now()
        self.proc = spawn(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port),
             "--dir", str(self.folder), "--save", "", "--appendonly", "yes",
             "--appendfsync", "always", "--protected-mode", "yes", "--daemonize", "no",
             "--logfile", str(self.folder / "redis.log")], None, None)
        while not await self.ping():
            if self.proc.poll() is not None or now() - begin > timeout_s:
                raise RuntimeError("redis-server did not start: "
                                   + (self.folder / "redis.log").read_text(errors="replace"))
            await asyncio.sleep(0.05)
        return now() - begin

    async def ping(self) -> bool:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.port), 1)
        except (OSError, TimeoutError):
            return False
        try:
            writer.write(b"PING\r\n")
            await writer.drain()
            return (await asyncio.wait_for(reader.readline(), 1)).startswith(b"+PONG")
        except (OSError, TimeoutError):
            return False
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def stop(self, how: str = "kill") -> None:
        """``kill``: SIGKILL (a crash); ``shutdown``: ``redis-cli shutdown`` (AOF is flushed)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        if how == "shutdown":
            await asyncio.to_thread(subprocess.run, ["redis-cli", "-p", str(self.port),
                                                     "shutdown"], capture_output=True,
                                    timeout=20, check=False)
        else:
            self.proc.send_signal(signal.SIGKILL)
        try:
            await asyncio.to_thread(self.proc.wait, 20)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGKILL)
            await asyncio.to_thread(self.proc.wait)


# --- SSE clients ------------------------------------------------------------------------------


@dataclass(slots=True)
class Got:
    seq: int
    type: str
    outcome: str | None
    data: dict[str, Any]
    conn: int
    at: float


@dataclass
class Follower:
    """An SSE client of one run: records everything, reconnects with ``Last-Event-ID``.

    ``bases``: server roots tried in turn (a dropped connection moves to the next).
    ``until_resumed``: end at a ``run.finished`` only after a ``run.resumed``.
    """

    session: aiohttp.ClientSession
    run_id: str
    bases: Sequence[str]
    after: int = 0
    give_up_s: float = 60.0
    token: str | None = None
    until_resumed: bool = False
    received: list[Got] = field(default_factory=list)
    connects: int = 0
    problems: Counter[str] = field(default_factory=Counter)
    empty_streams: int = 0
    out_of_order: int = 0
    terminal: Got | None = None
    seen_resumed: Got | None = None
    first_after_resume_ok: bool | None = None
    task: asyncio.Task[None] | None = None

    def start(self) -> Follower:
        self.task = asyncio.get_running_loop().create_task(self.run())
        return self

    async def wait(self) -> None:
        if self.task is not None:
            await self.task

    @property
    def last_seq(self) -> int:
        return self.received[-1].seq if self.received else self.after

    async def run(self) -> None:
        deadline = now() + self.give_up_s
        turn = 0
        start_after = self.after
        while now() < deadline:
            base = self.bases[turn % len(self.bases)]
            headers = {"Accept": "text/event-stream"}
            if self.token:
                headers["Authorization"] = f"Bearer {self.token}"
            if self.last_seq:
                headers["Last-Event-ID"] = str(self.last_seq)
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=2, sock_read=45)
            try:
                async with self.session.get(f"{base}/v1/runs/{self.run_id}/events",
                                            headers=headers, timeout=timeout) as resp:
                    self.connects += 1
                    if resp.status != 200:
                        code = ""
                        with contextlib.suppress(Exception):
                            code = (await resp.json(content_type=None)).get("code", "")
                        self.problems[f"HTTP {resp.status} {code}".strip()] += 1
                        if resp.status >= 500:
                            turn += 1
                        await asyncio.sleep(0.3)
                        continue
                    got_any = False
                    prev = self.last_seq
                    async for ident, kind, data in sse_messages(resp.content):
                        if kind == "detached":
                            self.problems[f"detached: {data[:80]}"] += 1
                            got_any = True
                            break
                        if ident is None:
                            continue
                        got_any = True
                        seq = int(ident)
                        body = json.loads(data)
                        got = Got(seq, kind, body.get("outcome"), body, self.connects, now())
                        if seq < prev or (seq == prev and kind != "run.finished"):
                            self.out_of_order += 1
                        prev = seq
                        self.received.append(got)
                        if kind == "run.resumed" and self.seen_resumed is None:
                            self.seen_resumed = got
                            if start_after and self.until_resumed:
                                first = [g for g in self.received if g.seq > start_after]
                                self.first_after_resume_ok = (
                                    first[0] is got and got.seq == start_after + 1)
                        if kind == "run.finished" and (not self.until_resumed
                                                       or self.seen_resumed is not None):
                            self.terminal = got
                            return
                    if not got_any:
                        self.empty_streams += 1
                    self.problems["stream ended without a terminal"] += 1
            except (aiohttp.ClientError, TimeoutError, ConnectionError, ValueError) as exc:
                self.problems[type(exc).__name__] += 1
                turn += 1
            await asyncio.sleep(0.2)
        self.problems["gave up"] += 1


async def sse_messages(content: aiohttp.StreamReader
                       ) -> AsyncIterator[tuple[str | None, str, str]]:
    """(id, event, data) of each SSE message; comments and ``retry`` skipped."""
    buffer = b""
    ident: str | None = None
    kind = "message"
    data: list[str] = []
    async for chunk in content.iter_any():
        buffer += chunk
        while b"\n" in buffer:
            raw, buffer = buffer.split(b"\n", 1)
            line = raw.decode("utf-8", errors="replace").rstrip("\r")
            if not line:
                if data or ident is not None:
                    yield ident, kind, "\n".join(data)
                ident, kind, data = None, "message", []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "id":
                ident = value
            elif name == "event":
                kind = value
            elif name == "data":
                data.append(value)


# --- HTTP helpers -----------------------------------------------------------------------------


def _auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


async def post_run(session: aiohttp.ClientSession, base: str, question: str, *,
                   token: str | None = None) -> tuple[int, str | None, str]:
    """(status, run_id, problem code) of ``POST /v1/runs``; status 0 on a connection error."""
    try:
        async with session.post(f"{base}/v1/runs", json={"question": question},
                                headers=_auth(token), timeout=HTTP_TIMEOUT) as resp:
            body = await resp.json(content_type=None)
            if resp.status == 201:
                return 201, str(body["run_id"]), ""
            return resp.status, None, str(body.get("code", ""))
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return 0, None, type(exc).__name__


async def post_resume(session: aiohttp.ClientSession, base: str, run_id: str
                      ) -> tuple[int, str]:
    try:
        async with session.post(f"{base}/v1/runs/{run_id}/resume",
                                timeout=HTTP_TIMEOUT) as resp:
            body = await resp.json(content_type=None)
            return resp.status, str(body.get("code", "")) if isinstance(body, dict) else ""
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return 0, type(exc).__name__


async def readyz(session: aiohttp.ClientSession, base: str) -> int:
    try:
        async with session.get(f"{base}/readyz",
                               timeout=aiohttp.ClientTimeout(total=10)) as resp:
            await resp.read()
            return resp.status
    except (aiohttp.ClientError, TimeoutError):
        return 0


async def run_status(session: aiohttp.ClientSession, base: str, run_id: str
                     ) -> dict[str, Any] | None:
    try:
        async with session.get(f"{base}/v1/runs/{run_id}", timeout=HTTP_TIMEOUT) as resp:
            return dict(await resp.json()) if resp.status == 200 else None
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None


async def terminal_again(session: aiohttp.ClientSession, base: str, run_id: str,
                         after: int) -> str:
    """What one ``Last-Event-ID: after`` connection to an ended run yields ('terminal')."""
    headers = {"Accept": "text/event-stream", "Last-Event-ID": str(after)}
    try:
        async with session.get(f"{base}/v1/runs/{run_id}/events", headers=headers,
                               timeout=aiohttp.ClientTimeout(total=15)) as resp:
            if resp.status != 200:
                return f"HTTP {resp.status}"
            kinds = [kind async for _, kind, _ in sse_messages(resp.content)]
    except (aiohttp.ClientError, TimeoutError) as exc:
        return type(exc).__name__
    if not kinds:
        return "empty stream"
    return "terminal" if kinds[-1] == "run.finished" else f"ended with {kinds[-1]}"


# --- auditing against the store ---------------------------------------------------------------


@dataclass
class Audit:
    runs: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    stuck_running: int = 0
    seq_reused: int = 0
    committed_events_lost: int = 0
    compared: int = 0
    examples: list[str] = field(default_factory=list)
    settle_s: float = 0.0


async def audit(target: str, run_ids: Sequence[str], followers: Sequence[Follower], *,
                settle_s: float = 20.0) -> Audit:
    """Open the store read-only; wait up to ``settle_s`` for no run to be ``running``; compare."""
    result = Audit(runs=len(run_ids))
    begin = now()
    while True:
        store = make_store(target, read_only=True)
        try:
            await store.open()
            records = {rid: await store.get_run(rid) for rid in run_ids}
            running = [r for r in records.values() if r.status == "running"]
            if running and now() - begin < settle_s:
                await store.close()
                await asyncio.sleep(0.5)
                continue
            stored: dict[str, dict[int, dict[str, Any]]] = {}
            for rid in run_ids:
                stored[rid] = {e.seq: json.loads(encode_json(e))
                               async for e in store.events(rid)}
            break
        except Exception as exc:  # the store is not readable yet (Redis still loading...)
            if now() - begin > settle_s + 30:
                raise RuntimeError(f"cannot audit the store {target}: {exc!r}") from exc
            await store.close()
            await asyncio.sleep(0.5)
    await store.close()
    result.settle_s = now() - begin
    for rec in records.values():
        result.statuses[rec.status] += 1
        result.outcomes[str(rec.outcome)] += 1
    result.stuck_running = len(running)
    for rec in running:
        result.examples.append(f"run {rec.run_id} still running ({rec.last_seq} events)")
    for f in followers:
        events = stored.get(f.run_id, {})
        for got in f.received:
            result.compared += 1
            held = events.get(got.seq)
            if held is None:
                result.committed_events_lost += 1
                if len(result.examples) < 8:
                    result.examples.append(f"run {f.run_id[:8]}: client got seq {got.seq} "
                                           f"({got.type}), the store has no such seq")
            elif held != got.data:
                result.seq_reused += 1
                if len(result.examples) < 8:
                    diff = sorted(k for k in set(held) | set(got.data)
                                  if held.get(k) != got.data.get(k))
                    result.examples.append(
                        f"run {f.run_id[:8]} seq {got.seq}: client got {got.type}, store "
                        f"holds {held.get('type')} (fields differing: {', '.join(diff)})")
    return result


# --- scenario results -------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    skipped: str | None = None
    runs: int = 0
    stuck_running: int = 0
    seq_reused: int = 0
    committed_events_lost: int = 0
    events_compared: int = 0
    clients: int = 0
    clients_without_terminal: int = 0
    resumed: int = 0
    resumed_finished: int = 0
    resumed_outcomes: Counter[str] = field(default_factory=Counter)
    elapsed_s: float = 0.0
    rows: list[tuple[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    breaches: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def take(self, checked: Audit, followers: Sequence[Follower]) -> None:
        self.runs += checked.runs
        self.stuck_running += checked.stuck_running
        self.seq_reused += checked.seq_reused
        self.committed_events_lost += checked.committed_events_lost
        self.events_compared += checked.compared
        self.clients += len(followers)
        self.clients_without_terminal += sum(f.terminal is None for f in followers)
        self.notes += checked.examples
        for f in followers:
            if f.terminal is None:
                self.notes.append(f"client of run {f.run_id[:8]} got no terminal "
                                  f"({dict(f.problems)})")
            if f.empty_streams:
                self.breach(f"run {f.run_id[:8]}: {f.empty_streams} empty SSE stream(s) "
                            "(connected, ended without an event)")
            if f.out_of_order:
                self.breach(f"run {f.run_id[:8]}: {f.out_of_order} event(s) out of seq order")

    def breach(self, text: str) -> None:
        if text not in self.breaches:
            self.breaches.append(text)

    def to_json(self) -> dict[str, Any]:
        return {
            "skipped": self.skipped, "runs": self.runs, "stuck_running": self.stuck_running,
            "seq_reused": self.seq_reused, "committed_events_lost": self.committed_events_lost,
            "events_compared": self.events_compared,
            "clients": self.clients, "clients_without_terminal": self.clients_without_terminal,
            "resumed": self.resumed, "resumed_finished": self.resumed_finished,
            "resumed_outcomes": dict(self.resumed_outcomes),
            "elapsed_s": round(self.elapsed_s, 1), **self.extra,
            "breaches": self.breaches, "notes": self.notes[:20],
        }


def reveals_store(failed: Sequence[Follower], addresses: Sequence[str]) -> int:
    """How many failed terminals' reasons name the store's address or path."""
    return sum(1 for f in failed if f.terminal is not None
               and any(a in str(f.terminal.data.get("reason", "")) for a in addresses))


def _outcomes(followers: Sequence[Follower]) -> dict[str, int]:
    return dict(Counter(str(f.terminal.outcome) if f.terminal else "none" for f in followers))


def _med(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _max(values: Sequence[float]) -> float | None:
    return round(max(values), 2) if values else None


async def start_runs(session: aiohttp.ClientSession, server: Server, n: int,
                     rng: random.Random, res: Result) -> list[str]:
    ids = []
    for _ in range(n):
        status, run_id, code = await post_run(session, server.base, rng.choice(QUESTIONS),
                                              token=server.token)
        if run_id is None:
            res.notes.append(f"POST /v1/runs on {server.name}: {status} {code}")
        else:
            ids.append(run_id)
    return ids


async def resume_runs(session: aiohttp.ClientSession, base: str,
                      interrupted: Sequence[Follower], res: Result, *,
                      give_up_s: float) -> tuple[list[Follower], str | None]:
    """POST resume for each interrupted run and start following it from its terminal.

    Returns the followers (not awaited) and, if the route is missing, why.
    """
    followers: list[Follower] = []
    for f in interrupted:
        assert f.terminal is not None
        status, code = await post_resume(session, base, f.run_id)
        if status == 404 and code == "route_not_found":
            return followers, "POST /v1/runs/{id}/resume answers 404 route_not_found"
        if status != 202:
            res.breach(f"resume of interrupted run {f.run_id[:8]}: HTTP {status} {code}")
            continue
        res.resumed += 1
        followers.append(Follower(session, f.run_id, [base], after=f.terminal.seq,
                                  give_up_s=give_up_s, until_resumed=True).start())
    return followers, None


async def finish_resumed(followers: Sequence[Follower], res: Result) -> None:
    """Wait for resumed runs' followers; count those that reached a terminal."""
    await asyncio.gather(*(r.wait() for r in followers))
    for r in followers:
        if r.terminal is not None:
            res.resumed_finished += 1
            res.resumed_outcomes[str(r.terminal.outcome)] += 1
        if r.first_after_resume_ok is False:
            res.breach(f"run {r.run_id[:8]}: the first event after the interrupted terminal "
                       "was not run.resumed")


async def resume_and_follow(session: aiohttp.ClientSession, base: str,
                            interrupted: Sequence[Follower], res: Result, *,
                            give_up_s: float) -> tuple[list[Follower], str | None]:
    """POST resume for each interrupted run and follow it; (followers, why not available)."""
    followers, missing = await resume_runs(session, base, interrupted, res,
                                           give_up_s=give_up_s)
    await finish_resumed(followers, res)
    return followers, missing


# --- scenarios --------------------------------------------------------------------------------


async def kill9(ctx: Ctx) -> Result:
    res = Result("kill9")
    folder = ctx.folder("kill9")
    store = str(folder / "runs.db")
    server = Server("k", folder, ctx.index, store, owner="chaos-kill9", delay_s=ctx.delay_s)
    rng = random.Random(ctx.seed)
    run_len = 2 * ctx.delay_s + 0.4
    auto_resume = False
    followers: list[Follower] = []
    run_ids: list[str] = []
    to_terminal: list[float] = []
    kill_at: list[float] = []
    resume_na: str | None = None
    terminal_checks: Counter[str] = Counter()
    attempts: Counter[str] = Counter()
    double_kills = 0
    interrupted_total = 0
    async with aiohttp.ClientSession() as session:
        await server.start()
        auto_field = "resume_interrupted" not in server.ignored
        for cycle in range(ctx.kills):
            ids = await start_runs(session, server, 3, rng, res)
            run_ids += ids
            clients = [Follower(session, rid, [server.base], give_up_s=60).start()
                       for rid in ids]
            followers += clients
            moment = rng.uniform(0.15, run_len * 1.3)  # some runs end first
            kill_at.append(moment)
            await asyncio.sleep(moment)
            await server.kill9()
            auto_resume = auto_field and cycle % 2 == 1
            await server.start(resume_interrupted=auto_resume)
            ready = now()
            await asyncio.gather(*(c.wait() for c in clients))
            interrupted = [c for c in clients
                           if c.terminal is not None and c.terminal.outcome == "interrupted"]
            interrupted_total += len(interrupted)
            to_terminal += [c.terminal.at - ready for c in interrupted if c.terminal]
            if auto_resume:
                rs = [Follower(session, c.run_id, [server.base], after=c.terminal.seq,
                               give_up_s=20, until_resumed=True).start()
                      for c in interrupted if c.terminal]
                await asyncio.gather(*(r.wait() for r in rs))
                res.resumed += len(rs)
                await finish_resumed(rs, res)
                followers += rs
                if any(r.seen_resumed is None for r in rs):
                    res.breach("resume_interrupted = true: an interrupted run was not "
                               "resumed at start")
            elif interrupted and resume_na is None:
                rs, resume_na = await resume_runs(session, server.base, interrupted, res,
                                                  give_up_s=40)
                followers += rs
                if rs and cycle % 3 == 2:  # crash again while the resumed runs go on
                    await asyncio.sleep(rng.uniform(0.15, run_len * 0.8))
                    await server.kill9()
                    double_kills += 1
                    await server.start()
                await finish_resumed(rs, res)
                again = [r for r in rs if r.terminal and r.terminal.outcome == "interrupted"]
                if again:
                    rs2, _ = await resume_and_follow(session, server.base, again, res,
                                                     give_up_s=30)
                    followers += rs2
                    for r in rs2:
                        attempt = r.seen_resumed.data.get("attempt") if r.seen_resumed else None
                        attempts[str(attempt)] += 1
                        if attempt is not None and attempt < 2:
                            res.breach(f"run {r.run_id[:8]} resumed a second time says "
                                       f"attempt {attempt}")
            for c in clients:
                if c.terminal is not None:
                    last = await run_status(session, server.base, c.run_id)
                    if last is not None and last["status"] != "running":
                        for after in (last["last_seq"], last["last_seq"] + 7):
                            terminal_checks[await terminal_again(
                                session, server.base, c.run_id, after)] += 1
        rc = await server.stop()
    checked = await audit(store, run_ids, followers)
    res.take(checked, followers)
    own = server.lease_ttl_s or 15.0
    if to_terminal and max(to_terminal) > own * 0.8:
        res.breach(f"a restarted server with the same owner took {max(to_terminal):.1f} s to "
                   "interrupt its previous runs (not at once)")
    bad = {k: v for k, v in terminal_checks.items() if k != "terminal"}
    if bad:
        res.breach(f"Last-Event-ID at/after the last seq of an ended run: {bad}")
    if resume_na:
        res.notes.append(f"resume not available: {resume_na}")
    res.extra.update({
        "kills": ctx.kills, "kills_during_resume": double_kills,
        "second_resume_attempts": dict(attempts), "interrupted": interrupted_total,
        "client_outcomes": _outcomes([f for f in followers if not f.until_resumed]),
        "store_statuses": dict(checked.statuses),
        "resume": "not available" if resume_na else "route"
        + (" + resume_interrupted at start (odd cycles)" if auto_field else ""),
        "terminal_after_restart_s_median": _med(to_terminal),
        "terminal_after_restart_s_max": _max(to_terminal),
        "server_start_s_median": _med(server.start_s),
        "terminal_replays": dict(terminal_checks),
        "reconnects": sum(max(0, f.connects - 1) for f in followers),
        "server_exit": rc, "server_log_problems": server.log_problems()[:10],
    })
    res.rows += [
        ("kill -9 cycles (+ kills while resumed runs went on)",
         f"{ctx.kills} (+{double_kills})"),
        ("runs started / interrupted by the kills", f"{len(run_ids)} / {interrupted_total}"),
        ("client terminals", _outcomes([f for f in followers if not f.until_resumed])),
        ("restart -> interrupted terminal at clients (median / max s)",
         f"{_med(to_terminal)} / {_max(to_terminal)}"),
        ("server start to listening (median s)", _med(server.start_s)),
        ("Last-Event-ID >= last seq of an ended run", dict(terminal_checks)),
        ("resumed / reached a terminal after run.resumed",
         resume_na or f"{res.resumed} / {res.resumed_finished} "
         f"{dict(res.resumed_outcomes)}"),
    ]
    return res


async def redis_outage(ctx: Ctx) -> Result:
    res = Result("redis_outage")
    if shutil.which("redis-server") is None:
        res.skipped = "redis-server is not installed"
        return res
    folder = ctx.folder("redis_outage")
    redis = Redis(folder)
    await redis.start()
    # runs long enough to straddle the outage's start; store_retry_s left at its default
    server = Server("r", folder, ctx.index, redis.url, delay_s=ctx.delay_s * 1.5)
    rng = random.Random(ctx.seed + 1)
    followers: list[Follower] = []
    run_ids: list[str] = []
    polls: list[tuple[float, int]] = []
    posts: list[tuple[float, int, str]] = []
    give_up = ctx.outage_s + 60
    try:
        async with aiohttp.ClientSession() as session:
            await server.start()
            for _ in range(2):  # two waves, so the outage finds runs at different points
                ids = await start_runs(session, server, 2, rng, res)
                run_ids += ids
                followers += [Follower(session, rid, [server.base], give_up_s=give_up).start()
                              for rid in ids]
                await asyncio.sleep(0.6)
            await redis.stop(ctx.redis_stop)
            down = now()
            stop_polling = asyncio.Event()

            async def poll() -> None:
                while not stop_polling.is_set():
                    polls.append((now() - down, await readyz(session, server.base)))
                    await asyncio.sleep(0.5)

            poller = asyncio.get_running_loop().create_task(poll())
            late: list[Follower] = []
            for at in (min(2.0, ctx.outage_s / 3), ctx.outage_s * 2 / 3):
                await asyncio.sleep(max(0.0, down + at - now()))
                status, run_id, code = await post_run(session, server.base, QUESTIONS[0])
                posts.append((now() - down, status, code))
                if run_id is not None:
                    run_ids.append(run_id)
                    followers.append(Follower(session, run_id, [server.base],
                                              give_up_s=give_up).start())
                if not late and run_ids:  # a client arriving in the middle of the outage
                    late = [Follower(session, rid, [server.base], give_up_s=give_up).start()
                            for rid in run_ids[:2]]
                    followers += late
            await asyncio.sleep(max(0.0, down + ctx.outage_s - now()))
            await redis.start()
            up = now() - down
            ready_again: float | None = None
            while now() - down < up + 40:
                if polls and polls[-1][0] > up and polls[-1][1] == 200:
                    ready_again = polls[-1][0] - up
                    break
                await asyncio.sleep(0.2)
            stop_polling.set()
            await poller
            await asyncio.gather(*(f.wait() for f in followers))
            status, run_id, code = await post_run(session, server.base, QUESTIONS[1])
            posts.append((now() - down, status, code))
            if run_id is not None:
                run_ids.append(run_id)
                after = Follower(session, run_id, [server.base], give_up_s=30).start()
                followers.append(after)
                await after.wait()
            checked = await audit(redis.url, run_ids, followers)
            rc = await server.stop()
    finally:
        await server.stop()
        await redis.stop("kill")
    res.take(checked, followers)
    during = [s for t, s in polls if t < up]
    first_503 = next((t for t, s in polls if s == 503 and t < up), None)
    after_first = [s for t, s in polls if first_503 is not None and first_503 <= t < up]
    if not during or 503 not in during:
        res.breach("/readyz never answered 503 while Redis was down")
    elif any(s == 200 for s in after_first):
        res.breach(f"/readyz answered 200 during the outage after a 503 "
                   f"({after_first.count(200)} of {len(after_first)} polls)")
    if ready_again is None:
        res.breach("/readyz not 200 within 40 s after Redis came back")
    for t, status, code in posts:
        if t < up and not (status == 503 and code == "store_unavailable"):
            res.breach(f"POST /v1/runs {t:.1f} s into the outage answered {status} {code} "
                       "(want 503 store_unavailable)")
        if t >= up and status != 201:
            res.breach(f"POST /v1/runs after the outage answered {status} {code}")
    failed = [f for f in followers if f.terminal and f.terminal.outcome == "failed"]
    for f in failed:
        reason = str(f.terminal.data.get("reason", "")) if f.terminal else ""
        if not reason or "Traceback" in reason:
            res.breach(f"run {f.run_id[:8]} failed without a plain reason: {reason!r}")
    revealing = reveals_store(failed, [f"127.0.0.1:{redis.port}", f"localhost:{redis.port}"])
    if revealing:
        res.notes.append(f"observation: {revealing} failed reason(s) sent to clients name the "
                         "store's address (host:port)")
    res.extra.update({
        "reasons_naming_store_address": revealing,
        "outage_s": ctx.outage_s, "redis_stop": ctx.redis_stop,
        "client_outcomes": _outcomes(followers), "store_statuses": dict(checked.statuses),
        "failed_reason_example": str(failed[0].terminal.data.get("reason"))[:200]
        if failed and failed[0].terminal else None,
        "readyz_polls_during_outage": dict(Counter(during)),
        "readyz_first_503_s": None if first_503 is None else round(first_503, 2),
        "readyz_ready_again_s": None if ready_again is None else round(ready_again, 2),
        "posts": [{"at_s": round(t, 1), "status": s, "code": c} for t, s, c in posts],
        "reconnects": sum(max(0, f.connects - 1) for f in followers),
        "server_exit": rc, "server_log_problems": server.log_problems()[:10],
    })
    res.rows += [
        ("outage", f"{ctx.outage_s:g} s ({ctx.redis_stop}), store_retry_s default"),
        ("runs / clients", f"{len(run_ids)} / {len(followers)}"),
        ("client terminals", _outcomes(followers)),
        ("/readyz during the outage", f"{dict(Counter(during))} (first 503 at "
         f"{first_503 if first_503 is None else round(first_503, 1)} s)"),
        ("/readyz 200 again after Redis returned (s)",
         None if ready_again is None else round(ready_again, 2)),
        ("POST /v1/runs during / after", ", ".join(f"{s} {c}".strip() for _, s, c in posts)),
    ]
    return res


async def disk_full(ctx: Ctx) -> Result:
    res = Result("disk_full")
    folder = ctx.folder("disk_full")
    mnt = folder / "tmpfs"
    mnt.mkdir()
    mounted = await asyncio.to_thread(
        subprocess.run, ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
        capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        res.skipped = f"cannot mount a tmpfs: {(mounted.stderr or mounted.stdout).strip()}"
        return res
    store = str(mnt / "runs.db")
    retry_s = 3.0
    server = Server("d", folder, ctx.index, store, store_retry_s=retry_s,
                    delay_s=max(0.2, ctx.delay_s / 4))
    rng = random.Random(ctx.seed + 2)
    followers: list[Follower] = []
    run_ids: list[str] = []
    posts: Counter[str] = Counter()
    posts_full: Counter[str] = Counter()
    ready_full: Counter[int] = Counter()
    filler = mnt / "filler"
    full_at: float | None = None
    try:
        async with aiohttp.ClientSession() as session:
            await server.start()
            # one run first, so the schema and WAL exist; then fill all but ~headroom
            ids = await start_runs(session, server, 1, rng, res)
            run_ids += ids
            followers += [Follower(session, r, [server.base], give_up_s=60).start()
                          for r in ids]
            await asyncio.gather(*(f.wait() for f in followers))
            stat = os.statvfs(mnt)
            free = stat.f_bavail * stat.f_frsize
            with filler.open("wb") as out:
                out.write(b"\0" * max(0, free - ctx.headroom_kb * 1024))
            begin = now()
            while now() - begin < 90:
                status, run_id, code = await post_run(session, server.base,
                                                      rng.choice(QUESTIONS))
                posts[f"{status} {code}".strip()] += 1
                if run_id is not None:
                    run_ids.append(run_id)
                    followers.append(Follower(session, run_id, [server.base],
                                              give_up_s=60).start())
                any_failed = any(f.terminal and f.terminal.outcome == "failed"
                                 for f in followers)
                if status == 503 or any_failed:
                    full_at = now() - begin
                    break
                await asyncio.sleep(0.25)
            # the store is full: POST must be refused, /readyz not ready, every client ends
            await asyncio.gather(*(f.wait() for f in followers))
            probe_end = now() + retry_s + 2
            while now() < probe_end:
                status, run_id, code = await post_run(session, server.base, QUESTIONS[0])
                posts_full[f"{status} {code}".strip()] += 1
                ready_full[await readyz(session, server.base)] += 1
                if run_id is not None:
                    run_ids.append(run_id)
                    followers.append(Follower(session, run_id, [server.base],
                                              give_up_s=60).start())
                await asyncio.sleep(0.5)
            await asyncio.gather(*(f.wait() for f in followers))
            filler.unlink()
            freed = now()
            checked = await audit(store, run_ids, followers, settle_s=30)
            stored_s = now() - freed
            ready_again: float | None = None
            while now() - freed < 40:
                if await readyz(session, server.base) == 200:
                    ready_again = now() - freed
                    break
                await asyncio.sleep(0.25)
            status, run_id, code = await post_run(session, server.base, QUESTIONS[1])
            after_free = f"{status} {code}".strip()
            if run_id is not None:
                run_ids.append(run_id)
                f_after = Follower(session, run_id, [server.base], give_up_s=30).start()
                followers.append(f_after)
                await f_after.wait()
                checked = await audit(store, run_ids, followers, settle_s=30)
            rc = await server.stop()
    finally:
        await server.stop()
        await asyncio.to_thread(subprocess.run, ["umount", "-l", str(mnt)],
                                capture_output=True, check=False)
    res.take(checked, followers)
    if full_at is None:
        res.notes.append(f"the store never filled ({ctx.headroom_kb} KB headroom)")
    failed = [f for f in followers if f.terminal and f.terminal.outcome == "failed"]
    for f in failed:
        reason = str(f.terminal.data.get("reason", "")) if f.terminal else ""
        if not reason or "Traceback" in reason:
            res.breach(f"run {f.run_id[:8]} failed without a plain reason: {reason!r}")
    revealing = reveals_store(failed, [store, str(mnt)])
    if revealing:
        res.notes.append(f"observation: {revealing} failed reason(s) sent to clients name the "
                         "store's path")
    res.extra["reasons_naming_store_address"] = revealing
    wrong = {k: v for k, v in posts_full.items() if k != "503 store_unavailable"}
    if wrong:
        res.breach(f"POST /v1/runs while the store was full answered {wrong}")
    if ready_full.get(200):
        res.breach(f"/readyz answered 200 while the store was full ({dict(ready_full)})")
    if ready_again is None:
        res.breach("/readyz not 200 within 40 s after space was freed")
    if after_free != "201":
        res.breach(f"POST /v1/runs after space was freed answered {after_free}")
    res.extra.update({
        "headroom_kb": ctx.headroom_kb, "store_retry_s": retry_s,
        "full_after_s": None if full_at is None else round(full_at, 1),
        "client_outcomes": _outcomes(followers), "store_statuses": dict(checked.statuses),
        "failed_reason_example": str(failed[0].terminal.data.get("reason"))[:200]
        if failed and failed[0].terminal else None,
        "posts_until_full": dict(posts), "posts_while_full": dict(posts_full),
        "readyz_while_full": {str(k): v for k, v in ready_full.items()},
        "readyz_ready_again_s": None if ready_again is None else round(ready_again, 2),
        "post_after_free": after_free, "endings_stored_s": round(stored_s, 1),
        "server_exit": rc, "server_log_problems": server.log_problems()[:10],
    })
    res.rows += [
        ("tmpfs 2 MB, headroom / store_retry_s", f"{ctx.headroom_kb} KB / {retry_s:g} s"),
        ("runs / store full after (s)", f"{len(run_ids)} / {full_at and round(full_at, 1)}"),
        ("client terminals", _outcomes(followers)),
        ("POST while full", dict(posts_full)),
        ("/readyz while full", dict(ready_full)),
        ("/readyz 200 after space freed (s)", ready_again and round(ready_again, 2)),
        ("POST after space freed", after_free),
        ("no run running any more, after space freed (s)", round(stored_s, 1)),
    ]
    return res


async def replicas(ctx: Ctx) -> Result:
    res = Result("replicas")
    if shutil.which("redis-server") is None:
        res.skipped = "redis-server is not installed"
        return res
    folder = ctx.folder("replicas")
    redis = Redis(folder)
    await redis.start()
    lease = 3.0
    a = Server("a", folder, ctx.index, redis.url, owner="replica-a", lease_ttl_s=lease,
               delay_s=ctx.delay_s * 2)
    b = Server("b", folder, ctx.index, redis.url, owner="replica-b", lease_ttl_s=lease,
               delay_s=ctx.delay_s * 2)
    rng = random.Random(ctx.seed + 3)
    followers: list[Follower] = []
    resumed: list[Follower] = []
    premature = 0
    resume_na: str | None = None
    try:
        async with aiohttp.ClientSession() as session:
            await asyncio.gather(a.start(), b.start())
            run_ids = await start_runs(session, a, ctx.replica_runs, rng, res)
            on_b = [Follower(session, rid, [b.base], give_up_s=lease + 40).start()
                    for rid in run_ids]
            on_a = [Follower(session, rid, [a.base, b.base], give_up_s=lease + 40).start()
                    for rid in run_ids]
            followers = on_b + on_a
            await asyncio.sleep(1.0)
            before = [await run_status(session, b.base, rid) for rid in run_ids]
            running_at_kill = sum(1 for s in before if s and s["status"] == "running")
            await a.kill9()
            killed_wall, killed = time.time(), now()
            await asyncio.gather(*(f.wait() for f in followers))
            times = [f.terminal.at - killed for f in on_b
                     if f.terminal and f.terminal.outcome == "interrupted"]
            for f in on_b:
                if f.terminal and f.terminal.outcome == "interrupted":
                    ts = float(f.terminal.data.get("ts", 0.0))
                    # A's last heartbeat may be one interval (lease / 3) before its kill
                    if ts - killed_wall < lease * 2 / 3 - 0.25:
                        premature += 1
            interrupted = [f for f in on_b if f.terminal and f.terminal.outcome == "interrupted"]
            resumed, resume_na = await resume_and_follow(session, b.base, interrupted, res,
                                                         give_up_s=40)
            followers += resumed
            checked = await audit(redis.url, run_ids, followers)
    finally:
        await asyncio.gather(a.stop(), b.stop())
        await redis.stop("kill")
    res.take(checked, followers)
    if premature:
        res.breach(f"{premature} run(s) of A marked interrupted less than the lease "
                   f"({lease:g} s) after A was killed")
    if resume_na:
        res.notes.append(f"resume not available: {resume_na}")
    res.extra.update({
        "lease_ttl_s": lease, "runs_running_at_kill": running_at_kill,
        "client_outcomes_b": _outcomes(on_b), "client_outcomes_a_then_b": _outcomes(on_a),
        "kill_to_terminal_s_median": _med(times), "kill_to_terminal_s_max": _max(times),
        "premature_interrupts": premature, "store_statuses": dict(checked.statuses),
        "resume": "not available" if resume_na else "route",
        "server_log_problems": (a.log_problems() + b.log_problems())[:10],
    })
    res.rows += [
        ("owners / lease", f"replica-a, replica-b / {lease:g} s"),
        ("runs on A (running at its kill)", f"{len(run_ids)} ({running_at_kill})"),
        ("terminals of clients on B", _outcomes(on_b)),
        ("terminals of clients on A failing over to B", _outcomes(on_a)),
        ("kill -9 of A -> interrupted terminal on B (median / max s)",
         f"{_med(times)} / {_max(times)}"),
        ("interrupted before the lease expired", premature),
        ("resumed on B / finished after run.resumed",
         resume_na or f"{res.resumed} / {res.resumed_finished}"),
    ]
    return res


async def cli_beside_server(ctx: Ctx) -> Result:
    res = Result("cli_beside_server")
    folder = ctx.folder("cli")
    store = str(folder / "runs.db")
    owner = "chaos-cli"
    server = Server("c", folder, ctx.index, store, owner=owner, delay_s=ctx.delay_s * 1.5)
    config = folder / "server.toml"
    config.write_text(f'store = "{store}"\nowner = "{owner}"\n')
    beside = Path(sys.executable).with_name("reactive-rag")
    cli = [str(beside)] if beside.is_file() else [sys.executable, "-m", "reactive_rag"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "REACTIVE_RAG_HOME": str(folder / "home")}
    rng = random.Random(ctx.seed + 4)
    followers: list[Follower] = []
    run_ids: list[str] = []
    calls: Counter[str] = Counter()
    interrupted_after_call: list[str] = []
    live: list[int] = []
    async with aiohttp.ClientSession() as session:
        await server.start()
        for round_no in range(ctx.cli_rounds):
            for args in (["runs", "--store", store, "--json"],
                         ["replay", "RUN", "--store", store, "--json"],
                         ["runs", "--config", str(config)],
                         ["replay", "RUN", "--config", str(config)]):
                ids = await start_runs(session, server, 1, rng, res)  # live during the call
                run_ids += ids
                followers += [Follower(session, r, [server.base], give_up_s=60).start()
                              for r in ids]
                await asyncio.sleep(0.3)
                args = [ids[0] if a == "RUN" and ids else a for a in args]
                statuses = [await run_status(session, server.base, r) for r in run_ids]
                live.append(sum(1 for st in statuses if st and st["status"] == "running"))
                done = await asyncio.to_thread(subprocess.run, cli + args, cwd=folder, env=env,
                                               capture_output=True, text=True, timeout=120,
                                               check=False)
                name = f"{args[0]} {'--config' if '--config' in args else '--store'}"
                calls[f"{name}: rc {done.returncode}"] += 1
                if done.returncode != 0:
                    res.notes.append(f"{' '.join(args[:2])}: rc {done.returncode}: "
                                     f"{done.stderr.strip()[-200:]}")
                elif args[0] == "replay" and "--json" in args and not done.stdout.strip():
                    res.notes.append(f"replay of live run {args[1][:8]} printed nothing")
                for rid in run_ids:
                    st = await run_status(session, server.base, rid)
                    if st is not None and st["status"] == "interrupted":
                        interrupted_after_call.append(f"{rid[:8]} after `{name}` "
                                                      f"(round {round_no + 1})")
        await asyncio.gather(*(f.wait() for f in followers))
        rc = await server.stop()
    checked = await audit(store, run_ids, followers)
    res.take(checked, followers)
    seen = sorted(set(interrupted_after_call))
    if seen or checked.statuses.get("interrupted"):
        res.breach("live runs interrupted beside a CLI call: " + "; ".join(seen[:5]))
    if any(f.terminal and f.terminal.outcome == "interrupted" for f in followers):
        res.breach("a client got run.finished(interrupted) while only the CLI read the store")
    res.extra.update({
        "cli_calls": dict(calls), "interrupted": len(seen),
        "live_runs_at_each_call_min": min(live) if live else None,
        "client_outcomes": _outcomes(followers), "store_statuses": dict(checked.statuses),
        "server_exit": rc, "server_log_problems": server.log_problems()[:10],
    })
    res.rows += [
        ("CLI calls beside live runs", dict(calls)),
        ("live runs when each call started (min / max)",
         f"{min(live) if live else None} / {max(live) if live else None}"),
        ("runs / interrupted", f"{len(run_ids)} / {len(seen)}"),
        ("client terminals", _outcomes(followers)),
    ]
    return res


async def schemathesis(ctx: Ctx) -> Result:
    res = Result("schemathesis")
    path = REPO / "bench" / "_conformance.py"
    if not path.is_file():
        res.skipped = "bench/_conformance.py is not there"
        return res
    spec = importlib.util.spec_from_file_location("_conformance", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    check: Callable[..., Any] | None = getattr(module, "schemathesis_failures", None)
    if check is None:
        res.skipped = "bench/_conformance.py has no schemathesis_failures"
        return res
    folder = ctx.folder("schemathesis")
    token = "chaos-conformance-token"
    server = Server("s", folder, ctx.index, str(folder / "runs.db"), delay_s=0.02,
                    token=token)
    try:
        await server.start()
        try:
            out = await asyncio.to_thread(check, server.base, token, seed=ctx.seed,
                                          max_examples=ctx.st_examples)
        except FileNotFoundError as exc:
            res.skipped = str(exc)
            return res
    finally:
        await server.stop()
    failures, report = (out if isinstance(out, tuple) else (out, ""))
    kept = None
    if failures:  # the scratch folder goes away: keep the report beside it
        kept = Path(tempfile.gettempdir()) / f"chaos-schemathesis-{os.getpid()}.txt"
        kept.write_text(str(report))
    res.extra.update({"failures": int(failures), "max_examples": ctx.st_examples,
                      "report": None if kept is None else str(kept)})
    codes = sorted({line.strip().split(" ", 2)[1] for line in str(report).splitlines()
                    if line.strip().startswith("❌ ST")})
    res.rows += [("failures (unique + errors)", int(failures)),
                 ("failing checks", ", ".join(codes) or "-"),
                 ("examples per operation / seed", f"{ctx.st_examples} / {ctx.seed}")]
    if kept is not None:
        res.notes.append(f"report: {kept}")
        res.notes += [line.strip() for line in str(report).splitlines()
                      if line.strip().startswith("- ") and "[" in line][:5]
    return res


# --- driver -----------------------------------------------------------------------------------


@dataclass
class Ctx:
    root: Path
    index: Path
    seed: int
    kills: int
    outage_s: float
    delay_s: float
    redis_stop: str
    headroom_kb: int
    replica_runs: int
    cli_rounds: int
    st_examples: int

    def folder(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path


def build_index(root: Path) -> Path:
    index = CorpusIndex(root / "index", HashingEmbedder())
    index.index_documents(COLLECTION, DOCS)
    index.close()
    return root / "index"


RUNNERS = {"kill9": kill9, "redis_outage": redis_outage, "disk_full": disk_full,
           "replicas": replicas, "cli_beside_server": cli_beside_server,
           "schemathesis": schemathesis}


def print_table(title: str, rows: Sequence[tuple[str, Any]]) -> None:
    width = max([len(r[0]) for r in rows] + [20])
    print(f"\n{title}")
    print(f"  {'measure':<{width}}  value")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="CI-sized: 4 kills, 8 s outage, fewer CLI rounds and examples")
    parser.add_argument("--kills", type=int, default=None, help="kill -9 cycles (default 20)")
    parser.add_argument("--outage-s", type=float, default=None,
                        help="Redis outage in seconds (default 20)")
    parser.add_argument("--delay-s", type=float, default=1.2,
                        help="planner sleep per decision (runs last about 2x this + 0.4 s)")
    parser.add_argument("--redis-stop", choices=("kill", "shutdown"), default="kill")
    parser.add_argument("--headroom-kb", type=int, default=384,
                        help="disk_full: space left on the tmpfs beside the filler")
    parser.add_argument("--only", default=",".join(SCENARIOS),
                        help=f"comma-separated subset of {', '.join(SCENARIOS)}")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in RUNNERS]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}")

    begin = now()
    root = Path(tempfile.mkdtemp(prefix="chaos-"))
    ctx = Ctx(root=root, index=build_index(root), seed=args.seed,
              kills=args.kills if args.kills is not None else (4 if args.quick else 20),
              outage_s=args.outage_s if args.outage_s is not None else
              (8.0 if args.quick else 20.0),
              delay_s=args.delay_s, redis_stop=args.redis_stop, headroom_kb=args.headroom_kb,
              replica_runs=3 if args.quick else 4, cli_rounds=1 if args.quick else 3,
              st_examples=5 if args.quick else 20)
    print(f"chaos suite: {', '.join(chosen)} (scratch {root})", flush=True)
    results: dict[str, Result] = {}
    for name in chosen:
        started = now()
        print(f"... {name}", flush=True)
        try:
            result = await RUNNERS[name](ctx)
        except Exception as exc:  # a scenario that could not run says why; the rest go on
            result = Result(name, skipped=f"error: {type(exc).__name__}: {exc}"[:500])
        result.elapsed_s = now() - started
        results[name] = result
        rows = [*result.rows, ("stuck running / seq reused / committed lost",
                               f"{result.stuck_running} / {result.seq_reused} / "
                               f"{result.committed_events_lost} (of {result.events_compared} "
                               "events clients got)"),
                              ("clients / without terminal",
                               f"{result.clients} / {result.clients_without_terminal}"),
                              ("elapsed (s)", round(result.elapsed_s, 1))]
        if result.skipped:
            rows = [("skipped", result.skipped), ("elapsed (s)", round(result.elapsed_s, 1))]
        for breach in result.breaches:
            rows.append(("BREACH", breach))
        for note in result.notes[:8]:
            rows.append(("note", note))
        print_table(f"[{name}]", rows)

    ran = [r for r in results.values() if not r.skipped]
    resumed = sum(r.resumed for r in ran)
    st = results.get("schemathesis")
    figures: dict[str, Any] = {
        "runs": sum(r.runs for r in ran),
        "stuck_running": sum(r.stuck_running for r in ran),
        "seq_reused": sum(r.seq_reused for r in ran),
        "committed_events_lost": sum(r.committed_events_lost for r in ran),
        "clients_without_terminal": sum(r.clients_without_terminal for r in ran),
        "resumed_runs_finished": round(sum(r.resumed_finished for r in ran) / resumed, 3)
        if resumed else None,
        "schemathesis_failures": st.extra.get("failures") if st and not st.skipped else None,
        "breaches": {r.name: len(r.breaches) for r in results.values()},
        "scenarios": {name: r.to_json() for name, r in results.items()},
        "timings": {**{f"{name}_s": round(r.elapsed_s, 1) for name, r in results.items()},
                    "total_s": round(now() - begin, 1)},
    }
    print_table("[summary]", [
        ("runs started", figures["runs"]),
        ("stuck_running (must be 0)", figures["stuck_running"]),
        ("seq_reused (must be 0)", figures["seq_reused"]),
        ("committed_events_lost (must be 0)", figures["committed_events_lost"]),
        ("clients_without_terminal (must be 0)", figures["clients_without_terminal"]),
        ("resumed_runs_finished", figures["resumed_runs_finished"]),
        ("schemathesis_failures", figures["schemathesis_failures"]),
        ("contract breaches", sum(len(r.breaches) for r in results.values())),
        ("skipped", ", ".join(f"{r.name} ({r.skipped})" for r in results.values()
                              if r.skipped) or "-"),
        ("total time (s)", figures["timings"]["total_s"]),
    ])
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"scratch kept: {root}")
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    try:
        asyncio.run(main())
    finally:
        kill_leftovers()
