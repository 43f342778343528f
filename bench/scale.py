"""Scale-out on Ray: embedding-bound runs local vs on 1 and 2 Ray workers, and a hop's cost.

    .venv/bin/python bench/scale.py                  # table
    .venv/bin/python bench/scale.py --json           # ... and one JSON object on the last line
    .venv/bin/python bench/scale.py --runs 48 --concurrency 8 --rounds 3

A run is one ``ActorRun`` with one reranker actor answering one
``rerank.requested`` of 20 SciFact abstracts (``../shared/data/scifact`` or
``$REACTIVE_RAG_DATA`` / ``--data``) with the real MiniLM int8 embedder, nothing
cached: every run embeds its query and 20 passages (cut at ``--chars``, 400 by
default: a long web snippet, the passages that are reranked cold in a real run),
so runs are embedding-bound.
The same requests run three ways, in rounds alternating the three, in one process:

* ``local``: the actor in this process (its scoring in a thread, as always);
* ``ray1``: the actor on one Ray worker (``RayPlacement``, 1 replica);
* ``ray2``: on two Ray workers (2 replicas; calls go to the least-loaded one).

MiniLM gets one onnxruntime thread everywhere and a Ray replica serves one
call at a time (``max_concurrency=1``), so a replica is one core's worth of
embedding: ``ray2 / ray1`` is what a second worker adds. ``local`` runs its
runs' scoring in concurrent threads of one process, so it may use both cores.
The hop figures time a no-op actor (request -> reply event, sequential) in
process and on a Ray worker; the difference is the remote hop's overhead.

On this 2-core machine a "cluster" of 2 workers is two processes sharing the
two cores with the driver, Ray's own daemons and whatever else runs: the
speedup shows what the placement lets through, not what 2 nodes would give.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from actors import (  # noqa: E402
    Actor,
    ActorContext,
    ActorRun,
    RayOptions,
    RayPlacement,
    init_ray,
    ray_module,
)
from actors.models import MiniLMEmbedder  # noqa: E402
from actors.rerank import Reranker, RerankerActor, rerank_failure  # noqa: E402
from streams import Event, EvidenceChunk, RerankCompleted, RerankRequested  # noqa: E402

CANDIDATES = 20


def data_dir(arg: str | None) -> Path:
    base = Path(arg or os.environ.get("REACTIVE_RAG_DATA") or ROOT.parent / "shared" / "data")
    return base / "scifact" if (base / "scifact").is_dir() else base


def make_requests(path: Path, n: int, chars: int, seed: int = 7) -> list[RerankRequested]:
    """``n`` requests: a SciFact query with 20 abstracts (title + text, cut at ``chars``)."""
    docs: list[EvidenceChunk] = []
    with open(path / "corpus.jsonl", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= 2000:
                break
            d = json.loads(line)
            text = f"{d['title']}. {d['text']}"[:chars]
            docs.append(EvidenceChunk(id=f"c{d['_id']}", text=text, doc_id=d["_id"],
                                      score=1.0, source="scifact"))
    with open(path / "queries.jsonl", encoding="utf-8") as f:
        queries = [json.loads(line)["text"] for line in f][:n]
    rng = random.Random(seed)
    return [RerankRequested(call_id=f"q{i}", query=queries[i % len(queries)],
                            candidates=tuple(rng.sample(docs, CANDIDATES)), k=5)
            for i in range(n)]


def minilm_reranker() -> RerankerActor:
    """The reranker actor over MiniLM on one onnxruntime thread (built in each worker)."""
    embedder = MiniLMEmbedder(intra_op_threads=1)
    return RerankerActor(Reranker(embedder, floor=0.0))


class NoopActor(Actor):
    """Answers at once: what remains of a hop is the runtime's (and Ray's) cost."""

    name = "noop"
    handles = ("rerank.requested",)

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        assert isinstance(msg, RerankRequested)
        return [RerankCompleted(call_id=msg.call_id, query=msg.query)]


ANSWERS = ("rerank.completed", "rerank.failed", "actor.failed")


async def one_run(run_id: str, actor: Actor, req: RerankRequested) -> tuple[float, Event]:
    """One run to its answer; (seconds, answer event)."""
    t0 = time.perf_counter()
    loop = asyncio.get_running_loop()
    async with ActorRun(run_id, [actor], deadline_s=300) as run:
        got: asyncio.Future[Event] = loop.create_future()
        run.stream.tap(ANSWERS, lambda e: got.done() or got.set_result(e), name="bench")
        run.publish(req)
        answer = await got
        run.finish("answered")
    return time.perf_counter() - t0, answer


async def batch(make_actor: Callable[[], Actor], reqs: Sequence[RerankRequested],
                concurrency: int, tag: str) -> dict[str, Any]:
    """All ``reqs`` as runs, ``concurrency`` at a time: runs/s, latency p50/p95, answers."""
    sem = asyncio.Semaphore(concurrency)

    async def guarded(i: int, req: RerankRequested) -> tuple[float, Event]:
        async with sem:
            return await one_run(f"{tag}-{i}", make_actor(), req)

    t0 = time.perf_counter()
    results = await asyncio.gather(*(guarded(i, r) for i, r in enumerate(reqs)))
    wall = time.perf_counter() - t0
    lat = sorted(r[0] for r in results)
    failed = [r[1] for r in results if not isinstance(r[1], RerankCompleted)]
    if failed:
        raise RuntimeError(f"{tag}: {len(failed)} runs failed, first: {failed[0]}")
    answers = [tuple(c.id for c in r[1].chunks) for r in results
               if isinstance(r[1], RerankCompleted)]
    return {"runs_per_s": len(reqs) / wall, "p50_ms": _pct(lat, 50) * 1e3,
            "p95_ms": _pct(lat, 95) * 1e3, "answers": answers}


async def busy_share(placement: RayPlacement) -> float:
    """Share of 5 ms samples in which every replica had a call in flight (until cancelled).

    Near 1.0 means the dispatcher kept both workers fed, so a speedup below 2x
    is the cores, not the placement.
    """
    busy = total = 0
    try:
        while True:
            await asyncio.sleep(0.005)
            total += 1
            busy += all(n > 0 for n in placement.in_flight())
    except asyncio.CancelledError:
        return busy / total if total else 0.0


def _pct(sorted_values: Sequence[float], p: float) -> float:
    i = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[i]


async def hop_ms(actor: Actor, n: int) -> list[float]:
    """Sequential request -> reply latencies (ms) through one run with ``actor``."""
    loop = asyncio.get_running_loop()
    out: list[float] = []
    async with ActorRun("hop", [actor]) as run:
        waiting: list[asyncio.Future[Event]] = []
        run.stream.tap(ANSWERS, lambda e: waiting[-1].done() or waiting[-1].set_result(e),
                       name="bench")
        for i in range(n):
            waiting.append(loop.create_future())
            t0 = time.perf_counter()
            run.publish(RerankRequested(call_id=f"h{i}", query="ping", candidates=()))
            await waiting[-1]
            out.append((time.perf_counter() - t0) * 1e3)
        run.finish("answered")
    return out[n // 10:]  # the first tenth warms up


def _load() -> float:
    return os.getloadavg()[0]


def _machine_busy_s() -> float | None:
    """CPU seconds every process on the machine used so far (Linux ``/proc/stat``; else None)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    reqs = make_requests(data_dir(args.data), args.runs, args.chars)
    warm = reqs[: args.concurrency]
    load_start = _load()
    shared = minilm_reranker()  # local runs share one model, as an engine does
    local_actor = functools.partial(RerankerActor, shared.reranker)
    ray1 = RayOptions(replicas=1, num_cpus=1, max_concurrency=1)
    ray2 = RayOptions(replicas=2, num_cpus=1, max_concurrency=1)
    results: dict[str, list[dict[str, Any]]] = {"local": [], "ray1": [], "ray2": []}
    both_busy: list[float] = []
    cpu_per_run: list[float] = []  # worker CPU seconds per run (1 worker)
    cores_got: list[float] = []  # CPU the 2 workers got, in cores (CPU seconds / wall seconds)
    driver_cpu: list[float] = []  # this process's CPU seconds per run (2 workers)
    machine_cores: list[float] = []  # CPU the whole machine used, in cores (2 workers)
    await batch(local_actor, warm, args.concurrency, "warm")
    # Placements are started per round (a 2-CPU cluster holds 2 one-CPU replicas at once).
    for rnd in range(args.rounds):
        results["local"].append(await batch(local_actor, reqs, args.concurrency, f"l{rnd}"))
        async with RayPlacement(minilm_reranker, ray1, on_failure=rerank_failure) as p1:
            await batch(p1.actor, warm, args.concurrency, f"w1-{rnd}")
            cpu0 = await p1.cpu_seconds()
            results["ray1"].append(await batch(p1.actor, reqs, args.concurrency, f"r1-{rnd}"))
            cpu_per_run.append((sum(await p1.cpu_seconds()) - sum(cpu0)) / len(reqs))
        async with RayPlacement(minilm_reranker, ray2, on_failure=rerank_failure) as p2:
            await batch(p2.actor, warm, args.concurrency, f"w2-{rnd}")
            sampler = asyncio.create_task(busy_share(p2))
            cpu0 = await p2.cpu_seconds()
            machine0, driver0 = _machine_busy_s(), time.process_time()
            results["ray2"].append(await batch(p2.actor, reqs, args.concurrency, f"r2-{rnd}"))
            driver_cpu.append((time.process_time() - driver0) / len(reqs))
            machine1 = _machine_busy_s()
            cpu = sum(await p2.cpu_seconds()) - sum(cpu0)
            sampler.cancel()
            both_busy.append(await sampler)
            per_wall_s = results["ray2"][-1]["runs_per_s"] / len(reqs)  # 1 / the batch's wall
            cores_got.append(cpu * per_wall_s)
            if machine0 is not None and machine1 is not None:
                machine_cores.append((machine1 - machine0) * per_wall_s)
    same = all(r["answers"] == results["local"][0]["answers"]
               for rs in results.values() for r in rs)

    local_hops = await hop_ms(NoopActor(), args.hops)
    async with RayPlacement(NoopActor, RayOptions(num_cpus=0.1)) as pn:
        remote_hops = await hop_ms(pn.actor(), args.hops)
        pings = []
        for _ in range(args.hops):
            t0 = time.perf_counter()
            await pn.ping()
            pings.append((time.perf_counter() - t0) * 1e3)

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name])

    out: dict[str, Any] = {}
    for name in ("local", "ray1", "ray2"):
        out[f"runs_per_s_{name}"] = med(name, "runs_per_s")
        out[f"p50_ms_{name}"] = med(name, "p50_ms")
        out[f"p95_ms_{name}"] = med(name, "p95_ms")
    # each round's own ratio (its ray1 and ray2 ran back to back, under the same load)
    out["speedup_2_workers"] = statistics.median(
        r2["runs_per_s"] / r1["runs_per_s"] for r1, r2 in zip(results["ray1"], results["ray2"],
                                                               strict=True))
    out["ray2_both_workers_busy"] = statistics.median(both_busy)
    out["worker_cpu_ms_per_run"] = statistics.median(cpu_per_run) * 1e3
    out["ray2_cores_used"] = statistics.median(cores_got)
    out["ray2_driver_cpu_ms_per_run"] = statistics.median(driver_cpu) * 1e3
    # the machine's busy cores during the 2-worker batches (None off Linux); what is
    # neither the workers nor this process is Ray's daemons and every other job
    out["ray2_machine_cores_busy"] = statistics.median(machine_cores) if machine_cores else None
    out["ray1_vs_local"] = out["runs_per_s_ray1"] / out["runs_per_s_local"]
    out["local_hop_ms_p50"] = statistics.median(local_hops)
    out["remote_hop_total_ms_p50"] = statistics.median(remote_hops)
    out["remote_hop_ms_p50"] = out["remote_hop_total_ms_p50"] - out["local_hop_ms_p50"]
    out["remote_hop_ms_p95"] = _pct(sorted(remote_hops), 95) - out["local_hop_ms_p50"]
    out["ray_ping_ms_p50"] = statistics.median(pings)
    out["worker_ms_per_run"] = 1e3 / out["runs_per_s_ray1"]
    out["same_answers"] = same
    out["runs"] = args.runs
    out["chars"] = args.chars
    out["concurrency"] = args.concurrency
    out["rounds"] = args.rounds
    out["cpus"] = os.cpu_count() or 0
    out["load_avg_start"] = load_start
    out["load_avg_end"] = _load()
    out["per_round_runs_per_s"] = {k: [round(r["runs_per_s"], 2) for r in v]
                                   for k, v in results.items()}
    return out


def print_table(o: dict[str, Any]) -> None:
    print(f"{o['runs']} runs x {CANDIDATES} candidates of {o['chars']} chars "
          "(MiniLM int8, nothing cached), "
          f"{o['concurrency']} concurrent, median of {o['rounds']} rounds; "
          f"{o['cpus']} CPUs, load average {o['load_avg_start']:.1f} -> {o['load_avg_end']:.1f}")
    print(f"{'placement':<28}{'runs/s':>9}{'p50 ms':>10}{'p95 ms':>10}{'vs ray1':>9}")
    labels = {"local": "local (threads, 1 process)", "ray1": "Ray, 1 worker",
              "ray2": "Ray, 2 workers"}
    for name, label in labels.items():
        rps = o[f"runs_per_s_{name}"]
        print(f"{label:<28}{rps:>9.2f}{o[f'p50_ms_{name}']:>10.0f}{o[f'p95_ms_{name}']:>10.0f}"
              f"{rps / o['runs_per_s_ray1']:>8.2f}x")
    print(f"per round runs/s: {o['per_round_runs_per_s']}")
    print(f"speedup 2 workers / 1 worker (median of the rounds' ratios): "
          f"{o['speedup_2_workers']:.2f}x (target >= 1.6x)")
    busy = o["ray2_both_workers_busy"]
    print(f"both Ray workers had a call in flight {busy:.0%} of the 2-worker time "
          + ("(the dispatch kept both fed: a shortfall from 2x is the cores)" if busy >= 0.9
             else "(a worker sat idle: the dispatch, not only the cores, limits the speedup)"))
    print(f"answers identical local / ray1 / ray2: {o['same_answers']}")
    print(f"hop, no-op actor: local {o['local_hop_ms_p50']:.3f} ms, remote "
          f"{o['remote_hop_total_ms_p50']:.3f} ms p50 -> overhead {o['remote_hop_ms_p50']:.3f} ms "
          f"p50 / {o['remote_hop_ms_p95']:.3f} ms p95 (target <= 2 ms p50); "
          f"bare Ray actor call {o['ray_ping_ms_p50']:.3f} ms")
    print(f"worker time per run (1 / ray1 runs/s): {o['worker_ms_per_run']:.0f} ms wall, "
          f"{o['worker_cpu_ms_per_run']:.0f} ms CPU; the 2 workers got "
          f"{o['ray2_cores_used']:.2f} cores between them")
    driver_cores = o["ray2_driver_cpu_ms_per_run"] / 1e3 * o["runs_per_s_ray2"]
    line = (f"2 workers: this process (the runs and Ray's driver side) used "
            f"{o['ray2_driver_cpu_ms_per_run']:.1f} ms CPU per run ({driver_cores:.2f} cores)")
    machine = o["ray2_machine_cores_busy"]
    if machine is not None:
        rest = machine - o["ray2_cores_used"] - driver_cores
        line += (f"; the machine was busy {machine:.2f} of {o['cpus']} cores, "
                 f"{rest:.2f} of them neither the workers nor this process")
    print(line)
    if o["cpus"] <= 2:
        print("note: 2 Ray workers here share 2 cores with the driver, Ray's daemons and other "
              "jobs; the speedup is a floor for 2 real nodes, not a forecast.")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=24, help="runs per placement per round")
    ap.add_argument("--concurrency", type=int, default=4, help="runs in flight at once")
    ap.add_argument("--rounds", type=int, default=3, help="rounds alternating the placements")
    ap.add_argument("--chars", type=int, default=400,
                    help="characters kept of each abstract (400: a long web snippet)")
    ap.add_argument("--hops", type=int, default=300, help="requests timed per hop figure")
    ap.add_argument("--data", help="BEIR SciFact folder (default ../shared/data/scifact)")
    ap.add_argument("--json", action="store_true", help="end with one JSON object")
    args = ap.parse_args()
    if min(args.runs, args.concurrency, args.rounds, args.chars) < 1 or args.hops < 10:
        ap.error("--runs, --concurrency, --rounds, --chars >= 1 and --hops >= 10")
    init_ray(num_cpus=2, log_to_driver=False)
    try:
        out = asyncio.run(main_async(args))
    finally:
        ray_module().shutdown()
    print_table(out)
    if args.json:
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}))


if __name__ == "__main__":
    main()
