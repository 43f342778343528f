"""Per-hop overhead of the actor runtime, run throughput and codec cost.

    python bench/bus.py [--json] [--hops 20000] [--repeat 7]

Every figure is the median of ``--repeat`` rounds, measured side by side in one
process with its floor:
- floor_subject_us: a bare reactivex Subject ``on_next`` to 3 no-op subscribers;
- floor_asyncio_us: a bare asyncio hop (``Queue.put_nowait`` -> ``await get()`` in
  another task), the least a mailbox hop can cost;
- hop_total_us: publish -> mailbox -> handler -> publish through ``ActorRun``
  with 3 passive subscribers attached; ``hop_us`` = hop_total_us - floor_asyncio_us
  (the runtime's marginal overhead; it can be negative: a worker that is already
  running takes its next message without the event-loop round trip the floor's
  queue handoff always pays);
- runs_per_s_100: trivial 10-step runs (10 handler calls), 100 at a time, each
  with its own stream, actor, worker task and terminal claim;
  floor_runs_per_s_100 the same runs in bare asyncio (a worker task, a queue and
  an event per run), and stream_floor_runs_per_s_100 those bare runs with their
  11 events built and published on a RunStream (what events and stream cost
  without the actor layer); all three in alternating rounds;
- codec_roundtrip_us: msgpack encode + decode of a typical event (10 fields, one
  500-character string); json_roundtrip_us the same through JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

from reactivex.subject import Subject

from actors import Actor, ActorContext, ActorRun
from streams import (
    Event,
    PlanDecided,
    RunFinished,
    RunStream,
    ToolCall,
    decode_json,
    decode_msgpack,
    encode_json,
    encode_msgpack,
    register_event,
)


@register_event
class Ping(Event):
    """A bench-only event: one hop of a chain."""

    type: Literal["bench.ping"] = "bench.ping"
    n: int


class Relay(Actor):
    """Answers ping n with ping n+1; the ``steps``-th ping it handles ends the run.

    A run of ``steps`` steps is ``steps`` handler calls: the application's
    ping 0, then ``steps - 1`` pings the relay publishes, then ``run.finished``.
    """

    name = "relay"
    handles = ("bench.ping",)

    def __init__(self, steps: int) -> None:
        self.steps = steps

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        n = msg.n  # type: ignore[attr-defined]
        if n + 1 >= self.steps:
            ctx.finish("answered")
            return None
        return [Ping(n=n + 1)]


def _median(f: Callable[[], float], repeat: int) -> float:
    values = []
    for _ in range(repeat):
        gc.collect()
        values.append(f())
    return statistics.median(values)


def floor_subject_us(n: int = 200_000) -> float:
    subject: Subject[int] = Subject()
    for _ in range(3):
        subject.subscribe(lambda _v: None)
    t0 = time.perf_counter()
    for i in range(n):
        subject.on_next(i)
    return (time.perf_counter() - t0) / n * 1e6


async def _asyncio_hop(n: int) -> float:
    a: asyncio.Queue[int] = asyncio.Queue()
    b: asyncio.Queue[int] = asyncio.Queue()

    async def echo() -> None:
        while True:
            v = await a.get()
            b.put_nowait(v)

    task = asyncio.create_task(echo())
    t0 = time.perf_counter()
    for i in range(n):
        a.put_nowait(i)
        await b.get()
    elapsed = time.perf_counter() - t0
    task.cancel()
    return elapsed / (2 * n) * 1e6  # two handoffs per round trip


def floor_asyncio_us(n: int = 50_000) -> float:
    return asyncio.run(_asyncio_hop(n))


async def _chain(hops: int, subscribers: int) -> float:
    run = ActorRun("bench", [Relay(hops)])
    for _ in range(subscribers):
        run.stream.events.subscribe(lambda _e: None)
    async with run:
        t0 = time.perf_counter()
        run.publish(Ping(n=0))
        await run.wait()
        elapsed = time.perf_counter() - t0
    return elapsed / hops * 1e6


def hop_total_us(hops: int) -> float:
    return asyncio.run(_chain(hops, subscribers=3))


async def _runs_per_s(one: Callable[[int], Awaitable[None]], concurrent: int,
                      batches: int) -> float:
    """Runs/s of ``one(i)``, ``concurrent`` at a time under gather, ``batches`` times."""
    t0 = time.perf_counter()
    for b in range(batches):
        await asyncio.gather(*(one(b * concurrent + i) for i in range(concurrent)))
    return concurrent * batches / (time.perf_counter() - t0)


def runs_per_s(concurrent: int = 100, batches: int = 10, steps: int = 10) -> float:
    """Trivial ``steps``-step runs through ActorRun."""

    async def one(i: int) -> None:
        run = ActorRun(f"run-{i}", [Relay(steps)])
        async with run:
            run.publish(Ping(n=0))
            await run.wait()

    return asyncio.run(_runs_per_s(one, concurrent, batches))


def floor_runs_per_s(concurrent: int = 100, batches: int = 10, steps: int = 10) -> float:
    """The same runs in bare asyncio: one worker task + queue + done event per run."""

    async def one(i: int) -> None:
        queue: asyncio.Queue[int] = asyncio.Queue()
        done = asyncio.Event()

        async def worker() -> None:
            while True:
                n = await queue.get()
                if n + 1 >= steps:
                    done.set()
                    return
                queue.put_nowait(n + 1)

        task = asyncio.create_task(worker())
        queue.put_nowait(0)
        await done.wait()
        await task

    return asyncio.run(_runs_per_s(one, concurrent, batches))


def stream_floor_runs_per_s(concurrent: int = 100, batches: int = 10, steps: int = 10) -> float:
    """The bare runs, plus the run's events built and published on a RunStream (no actors)."""

    async def one(i: int) -> None:
        stream = RunStream(f"run-{i}")
        queue: asyncio.Queue[Event] = asyncio.Queue()
        done = asyncio.Event()

        async def worker() -> None:
            while True:
                msg = await queue.get()
                n = msg.n  # type: ignore[attr-defined]
                if n + 1 >= steps:
                    stream.try_publish(RunFinished(outcome="answered"), actor="runtime")
                    done.set()
                    return
                sent = stream.try_publish(Ping(n=n + 1), actor="relay", cause=msg.seq)
                assert sent is not None
                queue.put_nowait(sent)

        task = asyncio.create_task(worker())
        queue.put_nowait(stream.publish(Ping(n=0)))
        await done.wait()
        await task

    return asyncio.run(_runs_per_s(one, concurrent, batches))


def _interleaved_medians(fs: Sequence[Callable[[], float]], repeat: int) -> list[float]:
    """Median of each measure over rounds that alternate them (machine drift hits all alike)."""
    values: list[list[float]] = [[] for _ in fs]
    for _ in range(repeat):
        for f, out in zip(fs, values, strict=True):
            gc.collect()
            out.append(f())
    return [statistics.median(v) for v in values]


def _typical_event() -> PlanDecided:
    call = ToolCall(id="p1-0", tool="search", args={"query": "q", "k": 10})
    return PlanDecided(action="search", reason="x" * 500, calls=(call,),
                       run_id="run-1234", seq=42, ts=time.time(), actor="planner", cause=41)


def codec_us(kind: str, n: int = 20_000) -> float:
    event = _typical_event()
    enc, dec = ((encode_msgpack, decode_msgpack) if kind == "msgpack"
                else (encode_json, decode_json))
    assert dec(enc(event)) == event  # type: ignore[operator]
    t0 = time.perf_counter()
    for _ in range(n):
        dec(enc(event))  # type: ignore[operator]
    return (time.perf_counter() - t0) / n * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="end with one JSON object")
    parser.add_argument("--hops", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)

    sub_us = _median(floor_subject_us, args.repeat)
    aio_us = _median(floor_asyncio_us, args.repeat)
    total_us = _median(lambda: hop_total_us(args.hops), args.repeat)
    hop_us = total_us - aio_us
    runs, floor_runs, stream_runs = _interleaved_medians(
        [runs_per_s, floor_runs_per_s, stream_floor_runs_per_s], args.repeat)
    mp_us = _median(lambda: codec_us("msgpack"), args.repeat)
    js_us = _median(lambda: codec_us("json"), args.repeat)

    rows = [
        ("floor: Subject.on_next, 3 subscribers", f"{sub_us:.2f} µs", "", ""),
        ("floor: bare asyncio hop (queue handoff)", f"{aio_us:.2f} µs", "", ""),
        ("actor hop, 3 passive subscribers (total)", f"{total_us:.2f} µs",
         f"{total_us / aio_us:.1f}x asyncio floor", ""),
        ("actor hop, marginal over asyncio floor", f"{hop_us:.2f} µs", "", "<= 20 µs"),
        ("floor: the same runs in bare asyncio", f"{floor_runs:,.0f} runs/s", "", ""),
        ("  + their events built, published on a RunStream", f"{stream_runs:,.0f} runs/s",
         f"{stream_runs / floor_runs:.2f}x asyncio floor", ""),
        ("trivial 10-step runs, 100 concurrent", f"{runs:,.0f} runs/s",
         f"{runs / floor_runs:.2f}x asyncio, {runs / stream_runs:.2f}x stream", ">= 10,000/s"),
        ("codec round trip, msgpack", f"{mp_us:.2f} µs", "", "<= 20 µs"),
        ("codec round trip, JSON", f"{js_us:.2f} µs", f"{js_us / mp_us:.2f}x msgpack", ""),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{f'measure (median of {args.repeat})':<{width}}  {'value':>14}  "
          f"{'ratio':<30} target")
    for name, value, ratio, target in rows:
        print(f"{name:<{width}}  {value:>14}  {ratio:<30} {target}")
    if args.json:
        print(json.dumps({
            "hop_us": round(hop_us, 3),
            "hop_total_us": round(total_us, 3),
            "floor_subject_us": round(sub_us, 3),
            "floor_asyncio_us": round(aio_us, 3),
            "runs_per_s_100": round(runs, 1),
            "floor_runs_per_s_100": round(floor_runs, 1),
            "runs_vs_floor": round(runs / floor_runs, 3),
            "stream_floor_runs_per_s_100": round(stream_runs, 1),
            "runs_vs_stream_floor": round(runs / stream_runs, 3),
            "codec_roundtrip_us": round(mp_us, 3),
            "json_roundtrip_us": round(js_us, 3),
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
