"""Evidence of a conversation's earlier turns, searchable again in a follow-up run."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from actors.text import content_terms
from streams import EvidenceChunk, Hit, SearchFilters

__all__ = ["PRIOR_PROVIDER", "PriorEvidenceProvider"]

PRIOR_PROVIDER = "session"
"""The provider name prior-turn hits carry in ``search.completed``."""


class PriorEvidenceProvider:
    """A search provider over the chunks earlier turns registered (BM25-style, in memory).

    A follow-up's searches run against it next to the corpus (and the web);
    its hits keep the chunks' ids, texts and neighbours, so they register in
    the new run exactly as the original search would have registered them.
    """

    name = PRIOR_PROVIDER
    supported_filters: frozenset[str] | None = frozenset()

    def __init__(self, chunks: Sequence[EvidenceChunk], *, k1: float = 1.2,
                 b: float = 0.75) -> None:
        self._chunks = list({c.id: c for c in chunks}.values())
        self._terms = [Counter(content_terms(f"{c.title}\n{c.text}")) for c in self._chunks]
        self._k1, self._b = k1, b
        lengths = [sum(t.values()) for t in self._terms]
        self._avg = (sum(lengths) / len(lengths)) if lengths else 1.0
        df: Counter[str] = Counter()
        for terms in self._terms:
            df.update(terms.keys())
        n = len(self._chunks)
        self._idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}

    def __len__(self) -> int:
        return len(self._chunks)

    async def search(self, query: str, k: int, deadline: float | None, *,
                     filters: SearchFilters | None = None) -> Sequence[Hit]:
        wanted = set(content_terms(query))
        scored: list[tuple[float, int]] = []
        for i, terms in enumerate(self._terms):
            length = sum(terms.values()) or 1
            score = 0.0
            for term in wanted & terms.keys():
                tf = terms[term]
                score += self._idf[term] * tf * (self._k1 + 1) / (
                    tf + self._k1 * (1 - self._b + self._b * length / self._avg))
            if score > 0:
                scored.append((score, i))
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        return [_hit(self._chunks[i], score) for score, i in scored[:k]]


def _hit(chunk: EvidenceChunk, score: float) -> Hit:
    return Hit(url=chunk.url, title=chunk.title, snippet=chunk.text[:300],
               content=None if chunk.snippet else chunk.text, source=chunk.source,
               score=round(score, 4), doc_id=chunk.doc_id or None, chunk_id=chunk.id,
               position=chunk.position, prev_id=chunk.prev_id, next_id=chunk.next_id)
