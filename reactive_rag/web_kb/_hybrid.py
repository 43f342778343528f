"""A hybrid (BM25 + dense) session index on top of the corpus index, in a temporary folder.

Each passage the session adds becomes one corpus document (chunked with a size
larger than any passage, so it stays whole), which keeps the scraper's and the
searcher's chunk ids, neighbours and URLs exactly as they were: a search
result maps back to the passage that was added. Adds are buffered and indexed
in one generation on the next search (vectors of passages already indexed are
reused, never recomputed), off the event loop. The folder is removed on close.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from reactive_rag.index import ChunkingConfig, CorpusIndex, Document, EmbedderLike, SearchMode
from streams import EvidenceChunk

__all__ = ["HybridWebKbIndex"]

_COLLECTION = "session"
# one passage -> one chunk: passages are at most a few hundred words
_WHOLE = ChunkingConfig(target_words=5000, overlap_ratio=0.0, max_words=10000)


class HybridWebKbIndex:
    """Hybrid search over a session's passages with the corpus index.

    Args:
        embedder: passage/query vectors; share one across sessions (loading a
            model per session would dominate the cost).
        mode: ``hybrid`` (default), ``bm25`` or ``dense``.
        root: parent of the temporary folder (system temp dir by default).
    """

    def __init__(self, embedder: EmbedderLike, *, mode: SearchMode = "hybrid",
                 root: str | Path | None = None) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="reactive-rag-session-", dir=root))
        self._index = CorpusIndex(self._dir, embedder, chunking=_WHOLE)
        self._mode: SearchMode = mode
        self._chunks: dict[str, EvidenceChunk] = {}
        self._pending: list[Document] = []
        self._indexed = 0

    @property
    def path(self) -> Path:
        """The temporary folder (gone after :meth:`close`)."""
        return self._dir

    def __len__(self) -> int:
        return len(self._chunks)

    async def add(self, chunks: Sequence[EvidenceChunk]) -> None:
        for c in chunks:
            self._chunks[c.id] = c
            self._pending.append(Document(id=c.id, text=c.text, title=c.title, url=c.url))

    async def search(self, query: str, k: int) -> list[EvidenceChunk]:
        if self._pending:
            docs = list(self._pending)
            await asyncio.to_thread(self._index.index_documents, _COLLECTION, docs, mode="add")
            self._pending.clear()  # only once indexed: a failed build is retried next time
            self._indexed += len(docs)
        if not self._indexed or k <= 0:
            return []
        results = await asyncio.to_thread(
            self._index.search, query, collection=_COLLECTION, k=k, mode=self._mode)
        out: list[EvidenceChunk] = []
        for r in results:
            original = self._chunks.get(r.chunk.doc_id)
            if original is not None:
                out.append(original.model_copy(update={"score": float(r.score)}))
        return out

    async def close(self) -> None:
        self._chunks.clear()
        self._pending.clear()
        await asyncio.to_thread(self._close_sync)

    def _close_sync(self) -> None:
        self._index.close()
        shutil.rmtree(self._dir, ignore_errors=True)
