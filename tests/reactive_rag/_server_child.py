"""A real server process for the kill -9 tests: ``python -m tests.reactive_rag._server_child``.

Args: INDEX_ROOT STORE_PATH PORT_FILE. Serves the HashingEmbedder index with a
planner that sleeps before each decision (so runs are mid-way when killed),
and writes its port to PORT_FILE once it accepts connections.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from aiohttp import web

from actors.models import HashingEmbedder
from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement import Decision, PlannerView
from reactive_rag.judgement.offline import OfflinePlanner
from reactive_rag.server import ServerConfig, create_app

DELAY_S = float(os.environ.get("CHILD_PLANNER_DELAY_S", "0.3"))
OWNER = "crash-child"
"""The child's configured store owner: a store opened with it recovers the killed child's runs."""


class SleepyPlanner:
    name = "sleepy"

    def __init__(self) -> None:
        self._inner = OfflinePlanner()

    async def decide(self, view: PlannerView) -> Decision:
        await asyncio.sleep(DELAY_S)
        return await self._inner.decide(view)


async def main(index_root: str, store_path: str, port_file: str) -> None:
    engine = Engine(CorpusIndex(index_root, HashingEmbedder()), planner=SleepyPlanner)
    config = ServerConfig(store=store_path, port=0, default_collections=("demo",),
                          owner=OWNER)
    await serve_forever(config, engine, port_file)


async def serve_forever(config: ServerConfig, engine: Engine, port_file: str) -> None:
    """Serve on a free loopback port, write it to ``port_file`` (atomically), run until killed."""
    runner = web.AppRunner(create_app(config, engine=engine))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    _publish_port(runner.addresses[0][1], port_file)
    await asyncio.Event().wait()


def _publish_port(port: int, port_file: str) -> None:
    tmp = Path(port_file + ".tmp")
    tmp.write_text(str(port))
    tmp.replace(port_file)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
