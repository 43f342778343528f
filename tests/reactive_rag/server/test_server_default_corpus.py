"""The first start of ``serve`` indexes the default corpus in the background; a shutdown
during that build stops it (a thread cannot be cancelled, so it is asked to) before it
writes anything, instead of holding the exit until minutes of embedding are done."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from reactive_rag.index import STDLIB_COLLECTION, CorpusIndex
from reactive_rag.server import CORPUS_TASK_KEY, ServerConfig, create_app
from reactive_rag.server._app import CorpusBuildStopped


async def test_a_shutdown_stops_the_first_start_indexing_before_it_writes(
        tmp_path: Path) -> None:
    config = ServerConfig(store=str(tmp_path / "runs.db"), index_root=tmp_path / "index")
    assert STDLIB_COLLECTION in config.default_collections and config.build_default_corpus
    app = create_app(config)
    runner = web.AppRunner(app)
    await runner.setup()
    building = app[CORPUS_TASK_KEY]  # started in the background by the first start
    assert not building.done()
    await runner.cleanup()  # what SIGINT/SIGTERM run
    assert building.done()
    assert isinstance(building.exception(), CorpusBuildStopped)
    # nothing half-built is left to be mistaken for the corpus: the next start builds it
    index = CorpusIndex(tmp_path / "index")
    assert not index.exists(STDLIB_COLLECTION)
    assert not list((tmp_path / "index").glob(f"{STDLIB_COLLECTION}/gen-*"))
    index.close()
