"""Web benchmark: search fan-out wall time (and, from ``_web_scrape``, scraper throughput).

    .venv/bin/python bench/web.py            # tables
    .venv/bin/python bench/web.py --json     # ... and one JSON object on the last line
    .venv/bin/python bench/web.py --no-scrape  # fan-out only

Fan-out: three local SearXNG-format providers answering after 100, 200 and
300 ms. Baseline, measured in the same run: each provider alone, and the three
asked one after the other (what a naive loop costs). The searcher asks all of
them at once and waits for all (all-settled), so its wall time should stay
within 10% of the slowest provider, not approach the sum. Median of ``--runs``.

JSON keys: ``fanout_wall_ms``, ``slowest_provider_ms`` (fan-out), and the
scraper's ``pages_per_s``, ``html_ms_per_page`` (merged from ``_web_scrape``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from actors.providers import ProviderSettings, SearxngProvider
from actors.search import Searcher

LATENCIES_MS = {"p100": 100, "p200": 200, "p300": 300}


def _app() -> web.Application:
    app = web.Application()

    def handler(name: str, delay_ms: int) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def search(request: web.Request) -> web.Response:
            await asyncio.sleep(delay_ms / 1000)
            q = request.query.get("q", "")
            return web.json_response({"query": q, "number_of_results": 10, "results": [
                {"url": f"https://{name}.test/{i}?q={q}", "title": f"{name} {i}",
                 "content": f"{name} result {i} for {q} " + " ".join(
                     f"w{name}{i}x{j}" for j in range(12)),
                 "engine": "bench", "score": 1.0 / (i + 1)}
                for i in range(10)], "unresponsive_engines": []})
        return search

    for name, ms in LATENCIES_MS.items():
        app.router.add_get(f"/{name}/search", handler(name, ms))
    return app


async def _timed(fn: Callable[[], Awaitable[Any]], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


async def bench_fanout_async(runs: int = 15) -> dict[str, Any]:
    runner = web.AppRunner(_app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    providers = {n: SearxngProvider(ProviderSettings(kind="searxng",
                                                     base_url=f"http://127.0.0.1:{port}/{n}"),
                                    name=n)
                 for n in LATENCIES_MS}
    searcher = Searcher(providers, max_results=30)
    try:
        for p in providers.values():  # warm the connection pools
            await p.search("warm", 10, None)
        alone = {n: await _timed(lambda p=p: p.search("q", 10, None), runs)  # type: ignore[misc]
                 for n, p in providers.items()}

        async def sequential() -> None:
            for p in providers.values():
                await p.search("q", 10, None)

        seq_ms = await _timed(sequential, max(3, runs // 3))
        fan_ms = await _timed(lambda: searcher.search("q", k=30), runs)
        fan3_ms = await _timed(lambda: searcher.search(["q1", "q2", "q3"], k=30), runs)
        check = await searcher.search("q", k=30)
        assert check.providers == tuple(LATENCIES_MS), check.errors
    finally:
        for p in providers.values():
            await p.aclose()
        await runner.cleanup()
    slowest = max(alone.values())
    return {
        "fanout_wall_ms": round(fan_ms, 1),
        "slowest_provider_ms": round(slowest, 1),
        "fanout_ratio": round(fan_ms / slowest, 3),
        "fanout_3q_wall_ms": round(fan3_ms, 1),
        "sequential_ms": round(seq_ms, 1),
        "alone_ms": {n: round(v, 1) for n, v in alone.items()},
        "fanout_within_10pct": fan_ms <= 1.10 * slowest,
        "runs": runs,
    }


def bench_fanout(runs: int = 15) -> dict[str, Any]:
    """Fan-out wall time against 3 local providers (100/200/300 ms) and its baselines."""
    return asyncio.run(bench_fanout_async(runs))


def print_fanout(r: dict[str, Any]) -> None:
    slowest = r["slowest_provider_ms"]
    print(f"Search fan-out (3 local SearXNG-format providers, median of {r['runs']} runs)")
    print()
    print(f"{'case':<44}{'wall ms':>10}{'x slowest':>11}")
    print("-" * 65)
    for name, ms in r["alone_ms"].items():
        label = f"provider {name} alone ({LATENCIES_MS[name]} ms server latency)"
        print(f"{label:<44}{ms:>10.1f}{ms / slowest:>11.2f}")
    rows = [("sequential, one after the other (baseline)", r["sequential_ms"]),
            ("fan-out, 1 query x 3 providers", r["fanout_wall_ms"]),
            ("fan-out, 3 queries x 3 providers", r["fanout_3q_wall_ms"])]
    for label, ms in rows:
        print(f"{label:<44}{ms:>10.1f}{ms / slowest:>11.2f}")
    verdict = "met" if r["fanout_within_10pct"] else "MISSED"
    print()
    print(f"target: fan-out within 10% of the slowest provider -> {verdict} "
          f"({(r['fanout_ratio'] - 1) * 100:+.1f}%); sequential costs "
          f"{r['sequential_ms'] / r['fanout_wall_ms']:.2f}x the fan-out")


# --- scraper part --------------------------------------------------------------------------
# HOOK: the scraper benchmark lives in bench/_web_scrape.py (``bench_scraper() -> dict`` with
# ``pages_per_s`` and ``html_ms_per_page`` at the top level, ``print_table(result)`` for its
# table). It is merged here when present; this file runs without it.


def run_scraper() -> dict[str, Any] | None:
    try:
        import _web_scrape
    except ImportError:
        return None
    result: dict[str, Any] = _web_scrape.bench_scraper()
    printer = getattr(_web_scrape, "print_table", None)
    if printer is not None:
        print()
        printer(result)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON object")
    parser.add_argument("--runs", type=int, default=15, help="repetitions per case")
    parser.add_argument("--no-scrape", action="store_true", help="fan-out only")
    args = parser.parse_args(argv)
    fanout = bench_fanout(args.runs)
    print_fanout(fanout)
    out: dict[str, Any] = dict(fanout)
    if not args.no_scrape:
        scraped = run_scraper()
        if scraped is not None:
            out.update(scraped)
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
