"""The per-session temporary index: a small protocol and an in-memory BM25 implementation.

The session knowledge base only needs "add passages" and "search them"; any
index with those two coroutines fits (the corpus index's hybrid search can be
plugged in through :class:`WebKbIndex`). The default keeps everything in
memory and rebuilds its bm25s index lazily, on the first search after adds:
a session holds hundreds of passages, for which a rebuild costs milliseconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from streams import EvidenceChunk

__all__ = ["Bm25WebKbIndex", "WebKbIndex"]

_THREAD_ABOVE = 5_000  # passages: rebuild off the event loop above this


@runtime_checkable
class WebKbIndex(Protocol):
    """What the session knowledge base needs from an index."""

    async def add(self, chunks: Sequence[EvidenceChunk]) -> None:
        """Index passages (ids are unique; the caller never re-adds an id)."""
        ...

    async def search(self, query: str, k: int) -> list[EvidenceChunk]:
        """Up to ``k`` passages, best first, each with its ``score`` set."""
        ...

    async def close(self) -> None:
        """Release everything the index holds."""
        ...

    def __len__(self) -> int: ...


class Bm25WebKbIndex:
    """In-memory BM25 (bm25s, English stemming and stopwords) over a session's passages."""

    def __init__(self) -> None:
        self._chunks: list[EvidenceChunk] = []
        self._retriever: Any = None
        self._stemmer: Any = None
        self._built_for = 0

    def __len__(self) -> int:
        return len(self._chunks)

    async def add(self, chunks: Sequence[EvidenceChunk]) -> None:
        self._chunks.extend(chunks)

    def _build(self, texts: list[str]) -> tuple[Any, Any]:
        import bm25s
        import Stemmer

        stemmer = Stemmer.Stemmer("english")
        tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
        retriever = bm25s.BM25()
        retriever.index(tokens, show_progress=False)
        return retriever, stemmer

    async def search(self, query: str, k: int) -> list[EvidenceChunk]:
        if not self._chunks or k <= 0:
            return []
        n = len(self._chunks)
        if self._retriever is None or self._built_for != n:
            texts = [f"{c.title}\n{c.text}" for c in self._chunks]
            if n > _THREAD_ABOVE:
                self._retriever, self._stemmer = await asyncio.to_thread(self._build, texts)
            else:
                self._retriever, self._stemmer = self._build(texts)
            self._built_for = n
        import bm25s

        toks = bm25s.tokenize([query], stopwords="en", stemmer=self._stemmer,
                              return_ids=False, show_progress=False)
        vocab = self._retriever.vocab_dict
        words = [w for w in (toks[0] if toks else []) if w in vocab]
        if not words:
            return []
        scores = np.asarray(self._retriever.get_scores(words), dtype=np.float32)
        order = np.argsort(-scores, kind="stable")[:k]
        return [self._chunks[i].model_copy(update={"score": float(scores[i])})
                for i in order if scores[i] > 0]

    async def close(self) -> None:
        self._chunks = []
        self._retriever = None
