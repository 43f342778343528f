"""Per-hop cost and run throughput: our actor runtime beside LangGraph and LlamaIndex Workflows.

    pip install -e '.[bench]'
    python bench/frameworks.py --json [--hops 2000] [--repeat 5] [--batches 5]

Two shapes, each measured for every installed framework in the same process, the
frameworks alternating within each round; every figure is the median of
``--repeat`` rounds:
- hop_us: one run of a chain of ``--hops`` steps, each step receiving an int n and
  passing n+1 on until n reaches the end; total run time / steps. Ours is
  ``bus._chain(hops, subscribers=0)`` (a ``Relay`` actor in an ``ActorRun``);
  LangGraph a ``StateGraph`` with one node looping back to itself through a
  conditional edge, compiled once and called with ``ainvoke`` (recursion_limit set
  above the chain length); LlamaIndex a ``Workflow`` with one ``@step`` answering
  each event with the next one, or ``StopEvent`` at the end (``timeout=None``).
  For the two frameworks the timed span covers the whole ``ainvoke`` / ``run``, so
  their per-run start-up is included (spread over ``--hops`` steps).
- runs_per_s_100: trivial 10-step runs of the same shape, 100 at a time under
  ``asyncio.gather``, ``--batches`` batches; ours via ``bus.runs_per_s``; the
  compiled graph / workflow is built once per round and reused for every run.

A framework that is not installed is reported as "not installed" (null in JSON).
"""

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from importlib import metadata
from typing import Any, TypedDict

import bus  # bench/bus.py: the script's own directory is on sys.path

RunOnce = Callable[[], Awaitable[int]]
"""Runs one chain from n=0 and returns the final n (the number of steps taken)."""

Builder = Callable[[int], RunOnce]
"""Builds (compiles) a chain of the given number of steps once; returns its runner."""


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


# --------------------------------------------------------------------------- LangGraph


class ChainState(TypedDict):
    n: int


def langgraph_builder(steps: int) -> RunOnce:
    """One node ``hop`` (n -> n+1) looping back to itself until n reaches ``steps``."""
    from langgraph.graph import END, START, StateGraph

    async def hop(state: ChainState) -> dict[str, int]:
        return {"n": state["n"] + 1}

    async def route(state: ChainState) -> str:  # a sync router would add a thread-pool hop
        return END if state["n"] >= steps else "hop"

    graph: Any = StateGraph(ChainState)
    graph.add_node("hop", hop)
    graph.add_edge(START, "hop")
    graph.add_conditional_edges("hop", route, ["hop", END])
    app = graph.compile()
    # Every node execution is one superstep; the default limit (25) would stop the chain.
    config = {"recursion_limit": steps + 10}

    async def run() -> int:
        final = await app.ainvoke({"n": 0}, config=config)
        return int(final["n"])

    return run


# ------------------------------------------------------------------ LlamaIndex Workflows


def llamaindex_builder(steps: int) -> RunOnce:
    """One ``@step`` answering n with ``Hop(n+1)``, or ``StopEvent`` after ``steps`` steps."""
    # No ``from __future__ import annotations`` in this module: the step's signature
    # must hold real classes for the workflow to validate it.
    from llama_index.core.workflow import Event, StartEvent, StopEvent, Workflow, step

    class Hop(Event):
        n: int

    class Chain(Workflow):
        @step
        async def hop(self, ev: StartEvent | Hop) -> Hop | StopEvent:
            n = int(ev.n)
            if n + 1 >= steps:
                return StopEvent(result=n + 1)
            return Hop(n=n + 1)

    wf = Chain(timeout=None)  # no per-step or loop limit to raise in this library

    async def run() -> int:
        return int(await wf.run(n=0))

    return run


# ------------------------------------------------------------------------- measuring


async def _chain_us(build: Builder, hops: int) -> float:
    run = build(hops)
    t0 = time.perf_counter()
    n = await run()
    elapsed = time.perf_counter() - t0
    assert n == hops, f"chain ended at n={n}, expected {hops}"
    return elapsed / hops * 1e6


async def _runs_per_s(build: Builder, concurrent: int, batches: int, steps: int) -> float:
    run = build(steps)

    async def one(_i: int) -> None:
        n = await run()
        assert n == steps, f"run ended at n={n}, expected {steps}"

    return await bus._runs_per_s(one, concurrent, batches)  # the scaffold ours is timed with


def _timed(f: Callable[[], float]) -> float:
    gc.collect()
    return f()


def _ratio(value: float | None, ours: float) -> str:
    return "" if value is None else f"{value / ours:.2f}x"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="end with one JSON object")
    parser.add_argument("--hops", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--concurrent", type=int, default=100)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="steps per run for runs/s")
    args = parser.parse_args(argv)

    frameworks: dict[str, tuple[str | None, Builder | None]] = {"ours": (None, None)}
    for name, dist, builder in (("langgraph", "langgraph", langgraph_builder),
                                ("llamaindex", "llama-index-core", llamaindex_builder)):
        version = _version(dist)
        frameworks[name] = (version, builder if version else None)

    def hop_once(name: str) -> float:
        builder = frameworks[name][1]
        if builder is None:
            return asyncio.run(bus._chain(args.hops, subscribers=0))
        return asyncio.run(_chain_us(builder, args.hops))

    def runs_once(name: str) -> float:
        builder = frameworks[name][1]
        if builder is None:
            return bus.runs_per_s(args.concurrent, args.batches, args.steps)
        return asyncio.run(_runs_per_s(builder, args.concurrent, args.batches, args.steps))

    present = [n for n, (v, _) in frameworks.items() if n == "ours" or v]
    for name in present:  # warm-up: lazy imports, first compile
        builder = frameworks[name][1]
        if builder is not None:
            asyncio.run(_chain_us(builder, 50))

    hops: dict[str, list[float]] = {n: [] for n in present}
    runs: dict[str, list[float]] = {n: [] for n in present}
    for r in range(args.repeat):
        order = present if r % 2 == 0 else present[::-1]  # alternate who goes first
        for name in order:
            hops[name].append(_timed(partial(hop_once, name)))
        for name in order:
            runs[name].append(_timed(partial(runs_once, name)))

    hop_med = {n: statistics.median(v) for n, v in hops.items()}
    runs_med = {n: statistics.median(v) for n, v in runs.items()}
    ours_hop, ours_runs = hop_med["ours"], runs_med["ours"]

    labels = {"ours": "ours (ActorRun, no subscribers)", "langgraph": "LangGraph",
              "llamaindex": "LlamaIndex Workflows"}
    print(f"median of {args.repeat} rounds; hop = {args.hops}-step chain; runs/s = "
          f"{args.concurrent} concurrent {args.steps}-step runs x {args.batches} batches")
    header = ("framework", "hop µs", "hop vs ours", f"runs/s ({args.concurrent})",
              "runs/s vs ours")
    rows: list[tuple[str, ...]] = []
    for name, (version, _) in frameworks.items():
        label = labels[name] + (f" {version}" if version else "")
        if name not in present:
            rows.append((labels[name], "not installed", "", "", ""))
            continue
        rows.append((label, f"{hop_med[name]:.2f}", _ratio(hop_med[name], ours_hop),
                     f"{runs_med[name]:,.0f}", _ratio(runs_med[name], ours_runs)))
    width = max(len(r[0]) for r in (header, *rows))
    for row in (header, *rows):
        line = f"{row[0]:<{width}}  {row[1]:>13}  {row[2]:>11}  {row[3]:>13}  {row[4]:>14}"
        print(line.rstrip())

    if args.json:
        out: dict[str, float | None] = {}
        for name in frameworks:
            out[f"{name}_hop_us"] = round(hop_med[name], 3) if name in present else None
        for name in frameworks:
            out[f"{name}_runs_per_s_{args.concurrent}"] = (
                round(runs_med[name], 1) if name in present else None)
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
