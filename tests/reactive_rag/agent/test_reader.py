"""Read-on: neighbours of a found passage, only inside the run's collections."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from actors import ActorRun
from actors.models import HashingEmbedder
from reactive_rag.agent._reader import ReaderActor
from reactive_rag.index import ChunkingConfig, CorpusIndex, Document
from streams import ReadCompleted, ReadFailed, ReadRequested


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CorpusIndex]:
    idx = CorpusIndex(tmp_path_factory.mktemp("reader"), HashingEmbedder(),
                      chunking=ChunkingConfig(target_words=12, max_words=20))
    long = " ".join(f"Sentence number {i} talks about the harbour." for i in range(30))
    idx.index_documents("public", [Document(id="harbour", title="Harbour", text=long)])
    idx.index_documents("private", [Document(id="vault", title="Vault",
                                             text="The vault code is 4711. " * 10)])
    yield idx
    idx.close()


async def test_reads_on_within_scope_and_refuses_other_collections(index: CorpusIndex) -> None:
    async with ActorRun("r", [ReaderActor(index, ["public"])]) as run:
        run.publish(ReadRequested(call_id="a", chunk_id="harbour#0", direction="next"))
        run.publish(ReadRequested(call_id="b", chunk_id="vault#0"))
        run.publish(ReadRequested(call_id="c", chunk_id="../private/vault#0"))
        await asyncio.sleep(0.3)
        run.finish("answered")
    events = run.stream.history()
    done = [e for e in events if isinstance(e, ReadCompleted)]
    failed = {e.call_id: e for e in events if isinstance(e, ReadFailed)}
    assert done and done[0].chunks and done[0].chunks[0].id == "harbour#1"
    assert set(failed) == {"b", "c"}
    assert all(f.error.kind == "OutOfScope" for f in failed.values())
    assert not any("4711" in c.text for e in done for c in e.chunks)
