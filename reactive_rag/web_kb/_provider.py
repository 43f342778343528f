"""The "compression: rag" mode as a search provider wrapper.

Web hits of a session go into its temporary knowledge base; the search's own
query then runs against that base and the passages come back round-robin
across URLs, so one site cannot fill the context and passages of earlier
searches of the session compete too.
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.providers import (
    SearchProvider,
    UnappliedFilter,
    search_with,
    supported_filters,
    unapplied_filters,
)
from streams import Hit, SearchFilters

from ._kb import WebKnowledgeBase

__all__ = ["CompressingProvider"]


class CompressingProvider:
    """Wraps a web provider: hits in, best session passages out (as hits with chunk ids)."""

    def __init__(self, inner: SearchProvider, kb: WebKnowledgeBase) -> None:
        self.inner = inner
        self.kb = kb
        self.name = inner.name

    @property
    def supported_filters(self) -> frozenset[str] | None:
        """The wrapped provider's filters: the web search is where they apply."""
        return supported_filters(self.inner)

    def unapplied(self, filters: SearchFilters | None) -> tuple[UnappliedFilter, ...]:
        return unapplied_filters(self.inner, filters)

    async def search(self, query: str, k: int, deadline: float | None, *,
                     filters: SearchFilters | None = None) -> Sequence[Hit]:
        hits = await search_with(self.inner, query, k, deadline, filters)
        passages = await self.kb.compress(query, hits, k)
        return [
            Hit(url=p.url, title=p.title, snippet=p.text[:300], content=p.text,
                source=p.source or self.name, score=p.score, doc_id=p.doc_id, chunk_id=p.id)
            for p in passages
        ]
