"""HTTP service benchmark: SSE fan-out throughput, publish->client latency, idle memory.

    python bench/serve.py [--runs R] [--idle N] [--json]

Rows (all measured in this run, on this machine, server and clients on loopback):
- events/s delivered to N SSE subscribers (N = 1, 10, 100) spread over R live
  runs, and the runs' own wall time against the same runs with no subscriber
  (the ratio says how much watching costs the runs);
- p50/p99 latency from an event's publish time (its ``ts``) to its arrival at
  the client, over every event of every subscriber. The subscribers run in a
  separate process (``bench/_sse_client.py``, aiohttp), which stamps each chunk
  with ``time.time()`` as it is read and parses only after the streams end, so
  the server's process does no client work (same machine clock for both);
- events/s when N clients replay a finished run from the store (the server's
  own delivery rate, not bounded by how fast a run produces events);
- memory per idle subscriber: server RSS growth over N idle SSE connections
  (opened by a separate client process, so only the server side is counted).

With ``--json`` the last line is one JSON object with ``sse_events_per_s``
(at N=100), ``event_latency_p50_ms``, ``event_latency_p99_ms``,
``kb_per_idle_subscriber``, ``replay_events_per_s`` and the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiohttp import ClientSession, TCPConnector, web

from actors.models import HashingEmbedder
from reactive_rag import Engine
from reactive_rag.index import CorpusIndex, Document
from reactive_rag.judgement import Decision, PlannerView
from reactive_rag.judgement.offline import OfflinePlanner
from reactive_rag.server import MANAGER_KEY, ServerConfig, TenantConfig, create_app

DOCS = [
    Document(id="aspirin", title="Aspirin", text=(
        "Aspirin is a medication used to reduce pain, fever, or inflammation. "
        "Aspirin was first isolated by Felix Hoffmann, a chemist at Bayer, in 1897.")),
    Document(id="bayer", title="Bayer", text=(
        "Bayer AG is a German multinational pharmaceutical and biotechnology company. "
        "Bayer was founded in Barmen in 1863 by Friedrich Bayer and Johann Friedrich Weskott.")),
    Document(id="tea", title="Tea", text=(
        "Tea is an aromatic beverage prepared by pouring hot water over cured leaves of "
        "Camellia sinensis. After water, it is the most widely consumed drink in the world.")),
]

GATE: asyncio.Event | None = None
SSE_CLIENT = Path(__file__).resolve().parent / "_sse_client.py"

IDLE_CLIENT = r"""
import asyncio, sys
async def main(port, n, run_id):
    conns = []
    for _ in range(n):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(f"GET /v1/runs/{run_id}/events HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await w.drain()
        conns.append((r, w))
    for r, _ in conns:  # wait for each response head (the server holds the stream)
        await r.readuntil(b"\r\n\r\n")
    print("ready", flush=True)
    sys.stdin.readline()
asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
"""


class GatedPlanner:
    name = "gated"

    def __init__(self) -> None:
        self._inner = OfflinePlanner()

    async def decide(self, view: PlannerView) -> Decision:
        if GATE is not None:
            await GATE.wait()
        return await self._inner.decide(view)


def rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def start_runs(session: ClientSession, base: str, n: int) -> list[str]:
    ids = []
    for _ in range(n):
        async with session.post(f"{base}/v1/runs",
                                json={"question": "Who founded Bayer and when?"}) as resp:
            ids.append((await resp.json())["run_id"])
    return ids


async def fan_out(app: web.Application, session: ClientSession, base: str, runs: int,
                  subscribers: int, port: int, client_procs: int = 1) -> dict[str, Any]:
    """Gated runs, ``subscribers`` SSE clients attached from a separate process, then
    released and timed. Latency = client receive time (stamped in the client process
    as each chunk is read) minus the event's ``ts``, for events published after the gate."""
    global GATE
    GATE = asyncio.Event()
    ids = await start_runs(session, base, runs)
    procs = []
    if subscribers:
        nproc = max(1, min(client_procs, subscribers))
        for k in range(nproc):  # subscriber i of process k reads run ids[(k + j*nproc) % runs]
            share = len(range(k, subscribers, nproc))
            proc = await asyncio.create_subprocess_exec(
                sys.executable, str(SSE_CLIENT), str(port), str(share),
                *[ids[i % runs] for i in range(k, subscribers, nproc)],
                stdout=subprocess.PIPE, limit=2**28)
            procs.append(proc)
        for proc in procs:
            assert proc.stdout is not None
            line = await proc.stdout.readline()
            if line.strip() != b"ready":
                raise RuntimeError(f"SSE client failed to start: {line!r}")
        await asyncio.sleep(0.2)  # every subscriber has its stored tail (run.started)
    gate_ts = time.time()
    t0 = time.perf_counter()
    GATE.set()
    await app[MANAGER_KEY].wait_all()
    runs_s = time.perf_counter() - t0
    latencies: list[float] = []
    last_recv = gate_ts
    events = 0
    for proc in procs:
        assert proc.stdout is not None
        out = json.loads((await proc.stdout.read()).strip().splitlines()[-1])
        await proc.wait()
        events += sum(out["counts"])
        for recv, ts in out["events"]:
            if ts >= gate_ts:
                latencies.append(recv - ts)
                last_recv = max(last_recv, recv)
    GATE = None
    lat_ms = sorted(x * 1000 for x in latencies)
    span = last_recv - gate_ts
    return {
        "subscribers": subscribers, "events": events, "timed_events": len(latencies),
        "runs_s": runs_s,
        "events_per_s": len(latencies) / span if subscribers and span > 0 else 0.0,
        "p50_ms": statistics.median(lat_ms) if lat_ms else 0.0,
        "p99_ms": lat_ms[int(0.99 * (len(lat_ms) - 1))] if lat_ms else 0.0,
    }


async def replay(session: ClientSession, base: str, run_id: str, subscribers: int,
                 rounds: int) -> dict[str, Any]:
    """``subscribers`` clients each reading a finished run's stored events ``rounds`` times."""
    async def one() -> int:
        count = 0
        for _ in range(rounds):
            async with session.get(f"{base}/v1/runs/{run_id}/events") as resp:
                async for raw in resp.content:
                    count += raw.startswith(b"id: ")
        return count

    t0 = time.perf_counter()
    counts = await asyncio.gather(*(one() for _ in range(subscribers)))
    elapsed = time.perf_counter() - t0
    return {"subscribers": subscribers, "events": sum(counts),
            "events_per_s": sum(counts) / elapsed}


async def idle_memory(app: web.Application, session: ClientSession, base: str, port: int,
                      n: int) -> float:
    global GATE
    GATE = asyncio.Event()
    (run_id,) = await start_runs(session, base, 1)
    await asyncio.sleep(0.2)
    before = rss_kb()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", IDLE_CLIENT, str(port), str(n), run_id,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    await proc.stdout.readline()
    await asyncio.sleep(0.5)
    after = rss_kb()
    proc.stdin.write(b"\n")
    await proc.stdin.drain()
    await proc.wait()
    GATE.set()
    await app[MANAGER_KEY].wait_all()
    GATE = None
    return (after - before) / n


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        index = CorpusIndex(Path(tmp) / "index", HashingEmbedder())
        index.index_documents("demo", DOCS)
        config = ServerConfig(store=str(Path(tmp) / "runs.db"), default_collections=("demo",),
                              open_tenant=TenantConfig(max_concurrent_runs=10_000,
                                                       runs_per_minute=1_000_000),
                              keepalive_s=60)
        app = create_app(config, engine=Engine(index, planner=GatedPlanner))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=2048)
        await site.start()
        port = runner.addresses[0][1]
        base = f"http://127.0.0.1:{port}"
        rows = []
        async with ClientSession(connector=TCPConnector(limit=0)) as session:
            await fan_out(app, session, base, args.runs, 0, port)  # warm-up: models, caches
            baseline = await fan_out(app, session, base, args.runs, 0, port)
            for n in (1, 10, 100):
                rows.append(await fan_out(app, session, base, args.runs, n, port,
                                         args.client_procs))
            (finished,) = await start_runs(session, base, 1)
            await app[MANAGER_KEY].wait_all()
            replays = [await replay(session, base, finished, n, max(1, 200 // n))
                       for n in (1, 10, 100)]
            kb = await idle_memory(app, session, base, port, args.idle)
        await runner.cleanup()
        index.close()
    print(f"{args.runs} live runs per row; runs alone took {baseline['runs_s']:.2f}s; SSE "
          f"subscribers in {args.client_procs} separate client process(es), latency = client "
          "receive time - event ts")
    print(f"{'subscribers':>11} {'events':>7} {'events/s':>10} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'runs s':>7} {'vs alone':>8}")
    for r in rows:
        print(f"{r['subscribers']:>11} {r['events']:>7} {r['events_per_s']:>10.0f} "
              f"{r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['runs_s']:>7.2f} "
              f"{r['runs_s'] / baseline['runs_s']:>7.2f}x")
    print("replay of a stored run (the server's delivery rate, no run producing):")
    print(f"{'subscribers':>11} {'events':>7} {'events/s':>10} {'vs 1':>6}")
    for r in replays:
        print(f"{r['subscribers']:>11} {r['events']:>7} {r['events_per_s']:>10.0f} "
              f"{r['events_per_s'] / replays[0]['events_per_s']:>5.2f}x")
    print(f"memory per idle SSE subscriber: {kb:.1f} KB (server RSS over {args.idle} "
          f"connections)")
    top = rows[-1]
    return {
        "sse_events_per_s": round(top["events_per_s"], 1),
        "event_latency_p50_ms": round(top["p50_ms"], 3),
        "event_latency_p99_ms": round(top["p99_ms"], 3),
        "kb_per_idle_subscriber": round(kb, 2),
        "runs": args.runs, "client_procs": args.client_procs,
        "rows": [{k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}
                 for r in rows],
        "runs_alone_s": round(baseline["runs_s"], 3),
        "replay_events_per_s": round(max(r["events_per_s"] for r in replays), 1),
        "replay_rows": [{k: round(v, 1) if isinstance(v, float) else v for k, v in r.items()}
                        for r in replays],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="live runs per measurement")
    parser.add_argument("--idle", type=int, default=1000, help="idle SSE connections")
    parser.add_argument("--client-procs", type=int, default=1,
                        help="processes the SSE subscribers are spread over (default 1)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(main(args))
    if args.json:
        print(json.dumps(result))
