"""The local corpus as a search provider, like any web API.

It applies every structured filter inside the search (the mask is set before
any top-k cut, so a selective filter still yields ``k`` hits), and each hit
names its neighbour chunks so the agent can read on from it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from urllib.parse import quote

from actors.providers import (
    FILTER_NAMES,
    ProviderError,
    ProviderNotConfigured,
    ProviderTimeout,
    ProviderUnavailable,
    UnappliedFilter,
    time_left,
)
from streams import Hit, SearchFilters

from ._collection import Chunk, SearchMode, SearchResult, document_language
from ._exceptions import CollectionNotFound, CorpusError
from ._filters import SearchFilter
from ._index import CorpusIndex

__all__ = ["LocalCorpusProvider", "chunk_url"]

_SNIPPET_CHARS = 300


def chunk_url(chunk: Chunk) -> str:
    """The document's own URL, else a stable ``corpus://COLLECTION/DOC_ID`` address."""
    return chunk.url or f"corpus://{chunk.collection}/{quote(chunk.doc_id, safe='/')}"


def _hit(result: SearchResult) -> Hit:
    c = result.chunk
    snippet = c.text if len(c.text) <= _SNIPPET_CHARS else c.text[:_SNIPPET_CHARS].rstrip() + "…"
    return Hit(
        url=chunk_url(c), title=c.title, snippet=snippet, content=c.text,
        source=f"local:{c.collection}", published_at=c.date, score=result.score,
        doc_id=c.doc_id, chunk_id=c.id, position=c.position, prev_id=c.prev_id,
        next_id=c.next_id,
    )


class LocalCorpusProvider:
    """Hybrid search over one or more collections of a :class:`CorpusIndex`.

    Model and index work runs in ``asyncio.to_thread`` so the event loop never
    blocks. Results of several collections are merged by fused score.

    Args:
        index: The corpus index.
        collections: Collection name(s) to search.
        name: Provider name in the registry and in events.
        filters: Metadata filters applied to every search (``collections`` in it
            narrows ``collections`` further); a request's ``filters=`` must
            hold as well.
        mode: "hybrid" (default), "bm25" or "dense".
    """

    supported_filters: frozenset[str] = FILTER_NAMES

    def __init__(
        self,
        index: CorpusIndex,
        collections: str | Sequence[str],
        *,
        name: str = "local",
        filters: SearchFilter | None = None,
        mode: SearchMode = "hybrid",
    ) -> None:
        self.index = index
        self.collections = [collections] if isinstance(collections, str) else list(collections)
        if not self.collections:
            raise ValueError("LocalCorpusProvider needs at least one collection")
        self.name = name
        self.filters = filters
        self.mode: SearchMode = mode
        self._unlabelled: set[str] = set()  # collections seen to lack language metadata

    def _search_sync(self, query: str, k: int, request: SearchFilters | None = None
                     ) -> list[Hit]:
        extra = (SearchFilter.from_request(request)
                 if request is not None and not request.is_empty else None)
        combined = self.filters
        if extra is not None:  # both must hold
            combined = extra if combined is None else combined & extra
        results: list[SearchResult] = []
        for coll in self.collections:
            if combined is not None and not combined.allows_collection(coll):
                continue
            found = self.index.search(query, collection=coll, k=k, mode=self.mode,
                                      filters=combined)
            if extra is not None and extra.languages and found:
                # A collection without language metadata is not narrowed by a
                # language: its hits come back unlabelled, and unapplied() says so.
                if any(not document_language(r.chunk.metadata) for r in found):
                    self._unlabelled.add(coll)
                else:
                    self._unlabelled.discard(coll)
            results.extend(found)
        results.sort(key=lambda r: r.score, reverse=True)
        return [_hit(r) for r in results[:k]]

    def unapplied(self, filters: SearchFilters) -> tuple[UnappliedFilter, ...]:
        """Only ``language``, for collections whose documents carry no language metadata."""
        if not filters.language:
            return ()
        bare = sorted(c for c in self.collections if c in self._unlabelled)
        if not bare:
            return ()
        return (UnappliedFilter("language", f"no language metadata in {', '.join(bare)}"),)

    def _translate(self, exc: CorpusError) -> ProviderError:
        if isinstance(exc, CollectionNotFound):
            return ProviderNotConfigured(str(exc), provider=self.name)
        return ProviderUnavailable(str(exc), provider=self.name)

    async def search(self, query: str, k: int, deadline: float | None, *,
                     filters: SearchFilters | None = None) -> Sequence[Hit]:
        """Up to ``k`` chunks as hits under ``filters``, best first.

        Each hit carries ``doc_id``, ``chunk_id``, ``position`` and its
        neighbours ``prev_id``/``next_id`` (ids :meth:`read` and the index read).

        Raises:
            ProviderTimeout: the deadline passed first.
            ProviderNotConfigured: a collection does not exist.
            ProviderUnavailable: the index is corrupt or the embedder does not match.
        """
        if k <= 0 or not query.strip():
            return []
        left = time_left(deadline)
        if left is not None and left <= 0:
            raise ProviderTimeout("deadline already passed", provider=self.name)
        try:
            async with asyncio.timeout(left):
                return await asyncio.to_thread(self._search_sync, query, k, filters)
        except TimeoutError as exc:
            raise ProviderTimeout(f"no result within {left:.3f}s", provider=self.name) from exc
        except CorpusError as exc:
            raise self._translate(exc) from exc
