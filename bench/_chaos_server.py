"""A real server process for ``bench/chaos.py``: ``python bench/_chaos_server.py ARGS``.

Serves a small HashingEmbedder index (``--index``, built by the bench) through
``create_app`` with a planner that sleeps ``--delay-s`` before each decision,
so runs last a few seconds and are mid-way when the bench kills something.
Binds 127.0.0.1 on ``--port`` (0: a free one) and writes the bound port to
``--port-file`` (atomically) once it accepts connections. SIGTERM / SIGINT
shut it down cleanly (runs still going end ``cancelled``); SIGKILL is the crash.

Options that the library may not have yet (``resume_interrupted``) are passed
to ``ServerConfig`` only when it has the field; the port file then says which
were ignored (``PORT ignored=NAME,...``) so the bench can report it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiohttp import web

from actors.models import HashingEmbedder
from reactive_rag import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement import Decision, PlannerView
from reactive_rag.judgement.offline import OfflinePlanner
from reactive_rag.server import (
    BUDGET_CAPS,
    BUDGET_LIMIT,
    CollectionWritesConfig,
    ServerConfig,
    TenantCaps,
    TenantConfig,
    create_app,
    hash_token,
)

COLLECTION = "chaos"


class SleepyPlanner:
    """The offline planner, sleeping ``delay_s`` before each decision."""

    name = "sleepy"
    delay_s = 0.3

    def __init__(self) -> None:
        self._inner = OfflinePlanner()

    async def decide(self, view: PlannerView) -> Decision:
        await asyncio.sleep(SleepyPlanner.delay_s)
        return await self._inner.decide(view)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--index", required=True, help="index root (HashingEmbedder, collection chaos)")
    p.add_argument("--store", required=True, help="SQLite path or redis:// URL")
    p.add_argument("--port-file", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--owner", default=None, help="store owner (default: unique per process)")
    p.add_argument("--lease-ttl-s", type=float, default=None)
    p.add_argument("--store-retry-s", type=float, default=None)
    p.add_argument("--resume-interrupted", action="store_true")
    p.add_argument("--delay-s", type=float, default=0.3, help="planner sleep per decision")
    p.add_argument("--token", default=None, help="one tenant 'bench' with this bearer token")
    p.add_argument("--max-concurrent", type=int, default=64)
    return p.parse_args(argv)


def make_config(args: argparse.Namespace) -> tuple[ServerConfig, list[str]]:
    fields = ServerConfig.model_fields
    # the fuzzer sends any budget the API document allows: caps at the request limit
    # (a tenant's cap is not in the document), quotas out of the way of a long chaos run
    caps = TenantCaps(**{name: BUDGET_LIMIT for name in BUDGET_CAPS},
                      runs_per_hour=10**9, runs_per_day=10**9, tokens_per_day=10**12)
    # a collection the fuzzer creates is empty: a run naming it is a 422 "not indexed"
    writes = CollectionWritesConfig(create=False)
    wanted: dict[str, Any] = {
        "store": args.store, "port": 0, "default_collections": (COLLECTION,),
        "build_default_corpus": False, "owner": args.owner,
        "lease_ttl_s": args.lease_ttl_s, "store_retry_s": args.store_retry_s,
        # one collection per tenant: another name is a 403 whether or not it exists
        "open_tenant": TenantConfig(collections=(COLLECTION,),
                                    max_concurrent_runs=args.max_concurrent,
                                    runs_per_minute=10_000, caps=caps, collection_writes=writes),
    }
    if args.resume_interrupted:
        wanted["resume_interrupted"] = True
    if args.token:
        wanted["tenants"] = {"bench": TenantConfig(
            token_sha256=(hash_token(args.token),), collections=(COLLECTION,),
            max_concurrent_runs=args.max_concurrent,
            runs_per_minute=10_000, caps=caps, collection_writes=writes)}
    ignored = [k for k in wanted if k not in fields]
    config = ServerConfig(**{k: v for k, v in wanted.items()
                             if k in fields and v is not None})
    return config, ignored


def publish_port(port_file: str, text: str) -> None:
    """Write ``text`` to ``port_file`` atomically (the bench polls for the file)."""
    tmp = Path(port_file + ".tmp")
    tmp.write_text(text)
    tmp.replace(port_file)


async def main(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    SleepyPlanner.delay_s = args.delay_s
    config, ignored = make_config(args)
    engine = Engine(CorpusIndex(args.index, HashingEmbedder()), planner=SleepyPlanner)
    runner = web.AppRunner(create_app(config, engine=engine), handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port, reuse_address=True)
    await site.start()
    port = runner.addresses[0][1]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    publish_port(args.port_file, str(port) + (f" ignored={','.join(ignored)}" if ignored else ""))
    await stop.wait()
    await runner.cleanup()
    await engine.aclose()


if __name__ == "__main__":
    asyncio.run(main(parse()))
