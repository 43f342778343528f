"""A real server process for the crash-resume tests: ``python -m tests.reactive_rag._resume_child``.

Args: INDEX_ROOT STORE_PATH PORT_FILE. Serves the index (its default
embedder, as ``reactive-rag serve`` and ``reactive-rag resume`` open it) with a
planner that sleeps ``CHILD_PLANNER_DELAY_S`` before each decision, under the
fixed store owner :data:`OWNER`, resuming the runs its start-up recovery
interrupted when ``CHILD_RESUME_INTERRUPTED=1``; writes its port to PORT_FILE
once it accepts connections.
"""

from __future__ import annotations

import asyncio
import os
import sys

from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.server import ServerConfig

from ._server_child import SleepyPlanner, serve_forever

OWNER = "resume-child"
"""The child's configured owner: a restarted child interrupts its crashed runs at once."""


async def main(index_root: str, store_path: str, port_file: str) -> None:
    engine = Engine(CorpusIndex(index_root), planner=SleepyPlanner)
    config = ServerConfig(store=store_path, port=0, default_collections=("demo",), owner=OWNER,
                          resume_interrupted=os.environ.get("CHILD_RESUME_INTERRUPTED") == "1")
    await serve_forever(config, engine, port_file)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
