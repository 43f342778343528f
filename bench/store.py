"""Run-store benchmark: how fast the recorder makes events durable, and attach latency.

    python bench/store.py [--events N] [--runs R] [--json]

Rows (all measured in this run, on this machine):
- publish cost with and without a recorder subscribed (the run must not feel it);
- events/s made durable by the batching recorder, vs the baseline of one
  transaction per event (SQLite), and the same on Redis and PostgreSQL when a
  server is reachable (``REACTIVE_RAG_TEST_REDIS_URL``/``_POSTGRES_URL``, else
  ``scripts/start-test-services.sh`` is tried);
- attach latency: from ``attach(after_seq=0)`` on a live run with a stored
  tail until the attacher has caught up with the live edge;
- the cost of commit-before-deliver: p50/p99 ms from publish to a client for
  events taken straight off the stream (the baseline) and for committed events
  through ``attach`` (what clients get), the same events of one run.

With ``--json`` the last line is one JSON object with ``sqlite_events_per_s``,
``redis_events_per_s``/``postgres_events_per_s`` (null without a server),
``attach_ms`` and the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reactive_rag.store import (
    PostgresRunStore,
    Recorder,
    RedisRunStore,
    RunMeta,
    RunStore,
    SqliteRunStore,
)
from streams import Event, EventBridge, RunFinished, RunStarted, RunStream, SearchRequested

REPO = Path(__file__).resolve().parents[1]


def redis_url() -> str | None:
    return service_url("REACTIVE_RAG_TEST_REDIS_URL")


def postgres_url() -> str | None:
    return service_url("REACTIVE_RAG_TEST_POSTGRES_URL")


def service_url(variable: str) -> str | None:
    """A test server's URL: from the environment, else from start-test-services.sh."""
    url = os.environ.get(variable)
    if url:
        return url
    try:
        out = subprocess.run(
            ["bash", str(REPO / "scripts" / "start-test-services.sh")],
            capture_output=True, text=True, timeout=300, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        if f"{variable}=" in line:
            return line.split("=", 1)[1].strip()
    return None


def publish_cost_us(events: int, store: RunStore | None) -> float:
    """Mean microseconds per publish (no awaits: the recorder's writer cannot run)."""
    stream = RunStream(f"pub-{uuid.uuid4().hex}", keep_history=False)
    if store is not None:
        recorder = Recorder(store, stream, RunMeta(stream.run_id, "bench", "q"))
        # subscribe without starting the writer: measures the on_next path only
        stream.subscribe(recorder._on_next, name="recorder")
    event = SearchRequested(query="benchmark query")
    start = time.perf_counter()
    for _ in range(events):
        stream.publish(event)
    return (time.perf_counter() - start) / events * 1e6


async def recorder_events_per_s(store: RunStore, runs: int, events: int) -> float:
    """Events/s made durable with ``runs`` concurrent runs publishing ``events`` each."""
    tag = uuid.uuid4().hex[:8]
    streams = [RunStream(f"bench-{tag}-{i}", keep_history=False) for i in range(runs)]
    recorders = [
        await Recorder(store, s, RunMeta(s.run_id, "bench", "q")).start() for s in streams
    ]
    start = time.perf_counter()

    async def produce(stream: RunStream) -> None:
        stream.publish(RunStarted(question="q"))
        for i in range(events):
            stream.publish(SearchRequested(query=f"q{i}"))
            if i % 64 == 0:
                await asyncio.sleep(0)
        stream.publish(RunFinished(outcome="answered"))

    await asyncio.gather(*(produce(s) for s in streams))
    for recorder in recorders:
        await recorder.aclose()
    elapsed = time.perf_counter() - start
    return runs * (events + 2) / elapsed


async def per_event_baseline(store: RunStore, events: int) -> float:
    """Events/s with one append (one transaction) per event: what batching saves."""
    run_id = f"base-{uuid.uuid4().hex[:8]}"
    await store.create_run(RunMeta(run_id, "bench", "q"))
    stream = RunStream(run_id, keep_history=False)
    stamped = [stream.publish(SearchRequested(query=f"q{i}")) for i in range(events)]
    start = time.perf_counter()
    for event in stamped:
        await store.append(run_id, [event])
    return events / (time.perf_counter() - start)


async def attach_ms(store: RunStore, tail: int, samples: int) -> list[float]:
    """ms from attach(0) on a live run with ``tail`` stored events to the live edge."""
    times = []
    for _ in range(samples):
        stream = RunStream(f"att-{uuid.uuid4().hex[:8]}", keep_history=False)
        recorder = await Recorder(store, stream, RunMeta(stream.run_id, "bench", "q")).start()
        for i in range(tail):
            stream.publish(SearchRequested(query=f"q{i}"))
        await recorder.flush()
        edge = stream.last_seq
        start = time.perf_counter()
        events = store.attach(stream.run_id, 0)
        async with contextlib.aclosing(events):  # type: ignore[type-var]
            async for event in events:
                if event.seq == edge:
                    break
        times.append((time.perf_counter() - start) * 1000)
        stream.publish(RunFinished(outcome="answered"))
        await recorder.aclose()
    return times


async def delivery_latency_ms(store: RunStore, events: int) -> dict[str, float]:
    """p50/p99 ms from publish to a client, committed-only vs straight off the stream.

    One run, two consumers at once: one takes events off the stream before
    they are stored (what a client got before commit-before-deliver), the
    other through ``store.attach`` (committed events only, today's contract).
    Events are published in bursts of 5 with 1 ms pauses, like a busy run.
    """
    stream = RunStream(f"lat-{uuid.uuid4().hex[:8]}", keep_history=False)
    published: dict[int, float] = {}
    seen: dict[str, dict[int, float]] = {"uncommitted": {}, "committed": {}}
    async with Recorder(store, stream, RunMeta(stream.run_id, "bench", "q")) as recorder:
        stream.publish(RunStarted(question="q"))
        await recorder.flush()
        bridge: EventBridge[Event] = EventBridge(events + 10)
        subscription = stream.subscribe(bridge.push, name="uncommitted")

        async def uncommitted() -> None:
            while (event := await bridge.get()) is not None:
                seen["uncommitted"][event.seq] = time.perf_counter()
                if isinstance(event, RunFinished):
                    return

        async def committed() -> None:
            attached = store.attach(stream.run_id, 1)
            async with contextlib.aclosing(attached):  # type: ignore[type-var]
                async for event in attached:
                    seen["committed"][event.seq] = time.perf_counter()

        consumers = [asyncio.create_task(uncommitted()), asyncio.create_task(committed())]
        await asyncio.sleep(0.05)
        for i in range(events):
            event = stream.publish(SearchRequested(query=f"q{i}"))
            published[event.seq] = time.perf_counter()
            if i % 5 == 4:
                await asyncio.sleep(0.001)
        end = stream.publish(RunFinished(outcome="answered"))
        published[end.seq] = time.perf_counter()
        await asyncio.gather(*consumers)
        subscription.dispose()
    result = {}
    for name, times in seen.items():
        lags = sorted((times[seq] - t0) * 1000 for seq, t0 in published.items())
        result[f"{name}_p50_ms"] = lags[len(lags) // 2]
        result[f"{name}_p99_ms"] = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
    return result


async def replay_events_per_s(store: RunStore, events: int) -> float:
    stream = RunStream(f"rep-{uuid.uuid4().hex[:8]}", keep_history=False)
    async with Recorder(store, stream, RunMeta(stream.run_id, "bench", "q")):
        for i in range(events):
            stream.publish(SearchRequested(query=f"q{i}"))
        stream.publish(RunFinished(outcome="answered"))
    start = time.perf_counter()
    count = len([e async for e in store.events(stream.run_id)])
    return count / (time.perf_counter() - start)


async def bench_backend(store: RunStore, args: argparse.Namespace) -> dict[str, float]:
    async with store:
        result = {
            "baseline_per_event_events_per_s": await per_event_baseline(
                store, min(args.events, 2000)),
            "events_per_s": await recorder_events_per_s(store, args.runs, args.events),
            "replay_events_per_s": await replay_events_per_s(store, args.events),
        }
        times = await attach_ms(store, args.tail, args.samples)
        result["attach_ms"] = statistics.median(times)
        result.update(await delivery_latency_ms(store, args.latency_events))
        if isinstance(store, RedisRunStore) and store._client is not None:
            keys = [k async for k in store._client.scan_iter(match=f"{store.prefix}*")]
            for i in range(0, len(keys), 500):
                await store._client.delete(*keys[i:i + 500])
        if isinstance(store, PostgresRunStore):
            schema = store.schema
            await store._autocommit(
                lambda conn: conn.execute(f'DROP SCHEMA "{schema}" CASCADE'))
    return result


def latency_rows(backend: str, figures: dict[str, float]) -> list[tuple[str, float, float | None]]:
    """Delivery latency rows: before commit is the baseline, committed-only the ratio."""
    rows: list[tuple[str, float, float | None]] = []
    for q in ("p50", "p99"):
        before, after = figures[f"uncommitted_{q}_ms"], figures[f"committed_{q}_ms"]
        rows += [(f"{backend}: event to client, before commit, {q} (ms)", before, 1.0),
                 (f"{backend}: event to client, committed only, {q} (ms)", after,
                  after / before if before else None)]
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000, help="events per run")
    parser.add_argument("--runs", type=int, default=8, help="concurrent runs")
    parser.add_argument("--tail", type=int, default=1000, help="stored tail for attach")
    parser.add_argument("--samples", type=int, default=15, help="attach samples")
    parser.add_argument("--latency-events", type=int, default=2000,
                        help="events of the delivery-latency run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    bare = publish_cost_us(50_000, None)
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_store = SqliteRunStore(Path(tmp) / "bench.db")
        recorded = 0.0
        async with sqlite_store:
            recorded = publish_cost_us(50_000, sqlite_store)
        sqlite = await bench_backend(SqliteRunStore(Path(tmp) / "bench.db"), args)
    url = redis_url()
    redis = await bench_backend(
        RedisRunStore(url, prefix=f"bench-{uuid.uuid4().hex[:8]}:"), args) if url else None
    pg_url = postgres_url()
    postgres = await bench_backend(
        PostgresRunStore(pg_url, schema=f"bench_{uuid.uuid4().hex[:8]}"), args) \
        if pg_url else None

    rows = [
        ("publish, no subscriber (us/event)", bare, 1.0),
        ("publish, recorder subscribed (us/event)", recorded, recorded / bare),
        ("sqlite: 1 txn per event (events/s)", sqlite["baseline_per_event_events_per_s"], 1.0),
        ("sqlite: recorder, batched (events/s)", sqlite["events_per_s"],
         sqlite["events_per_s"] / sqlite["baseline_per_event_events_per_s"]),
        ("sqlite: replay (events/s)", sqlite["replay_events_per_s"], None),
        (f"sqlite: attach to live edge, {args.tail} stored (ms)", sqlite["attach_ms"], None),
        *latency_rows("sqlite", sqlite),
    ]
    if redis is not None:
        rows += [
            ("redis: 1 call per event (events/s)", redis["baseline_per_event_events_per_s"], 1.0),
            ("redis: recorder, batched (events/s)", redis["events_per_s"],
             redis["events_per_s"] / redis["baseline_per_event_events_per_s"]),
            ("redis: replay (events/s)", redis["replay_events_per_s"], None),
            (f"redis: attach to live edge, {args.tail} stored (ms)", redis["attach_ms"], None),
            *latency_rows("redis", redis),
        ]
    if postgres is not None:
        rows += [
            ("postgres: 1 txn per event (events/s)",
             postgres["baseline_per_event_events_per_s"], 1.0),
            ("postgres: recorder, batched (events/s)", postgres["events_per_s"],
             postgres["events_per_s"] / postgres["baseline_per_event_events_per_s"]),
            ("postgres: replay (events/s)", postgres["replay_events_per_s"], None),
            (f"postgres: attach to live edge, {args.tail} stored (ms)", postgres["attach_ms"],
             None),
            *latency_rows("postgres", postgres),
        ]
    print(f"run store benchmark: {args.runs} concurrent runs x {args.events} events")
    print(f"{'measure':<52} {'value':>12} {'ratio':>8}")
    for name, value, ratio in rows:
        print(f"{name:<52} {value:>12,.1f} {'' if ratio is None else f'{ratio:.2f}x':>8}")
    if redis is None:
        print("redis: no server (set REACTIVE_RAG_TEST_REDIS_URL or install redis-server)")
    if postgres is None:
        print("postgres: no server (set REACTIVE_RAG_TEST_POSTGRES_URL or install postgresql)")
    if args.json:
        print(json.dumps({
            "sqlite_events_per_s": round(sqlite["events_per_s"], 1),
            "sqlite_per_event_baseline_events_per_s": round(
                sqlite["baseline_per_event_events_per_s"], 1),
            "redis_events_per_s": None if redis is None else round(redis["events_per_s"], 1),
            "attach_ms": round(sqlite["attach_ms"], 2),
            "redis_attach_ms": None if redis is None else round(redis["attach_ms"], 2),
            "postgres_events_per_s": None if postgres is None else round(
                postgres["events_per_s"], 1),
            "postgres_attach_ms": None if postgres is None else round(postgres["attach_ms"], 2),
            "sqlite_replay_events_per_s": round(sqlite["replay_events_per_s"], 1),
            "publish_us_bare": round(bare, 3),
            "publish_us_with_recorder": round(recorded, 3),
            **{f"{backend}_{key}": round(value, 3)
               for backend, figures in (("sqlite", sqlite), ("redis", redis or {}),
                                        ("postgres", postgres or {}))
               for key, value in figures.items() if key.startswith(("uncommitted", "committed"))},
        }))


if __name__ == "__main__":
    asyncio.run(main())
