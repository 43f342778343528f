"""Semantic loop detection over query embeddings.

(Round saturation is the run's rule: :func:`reactive_rag.run.saturated`.)

A planner (especially a small model) that got nothing new from a search tends
to ask the same thing again in other words. Exact-duplicate checks miss that;
comparing query embeddings catches it. A refused query comes back to the
planner with a reason, and refusals in a row end the search phase.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from actors.models import Embedder, FloatMatrix
from actors.text import tokenize
from streams import QueryStat

__all__ = ["LoopGuard", "LoopVerdict", "normalize_query"]


def normalize_query(query: str) -> str:
    """Lower-cased word tokens, single-spaced: what "the same query" means."""
    return " ".join(tokenize(query))


@dataclass(frozen=True, slots=True)
class LoopVerdict:
    """Whether a query may run; when not, why and which earlier query it repeats."""

    ok: bool
    reason: str = ""
    nearest_query: str | None = None
    similarity: float = 0.0


class LoopGuard:
    """Refuses queries that repeat earlier ones which brought nothing new.

    Exact (normalised) duplicates of any earlier query are always refused. A
    query whose embedding is within ``threshold`` cosine similarity of an
    earlier query that returned no new evidence is refused as a semantic loop.
    After ``max_refusals`` refusals in a row, :attr:`should_stop_searching` is
    true: the planner is going round in circles and should answer.

    Args:
        embedder: query embedder (unit vectors; dot product = cosine).
        threshold: cosine similarity at or above which two queries are "the same".
        max_refusals: consecutive refusals that end the search phase.
    """

    def __init__(
        self, embedder: Embedder, threshold: float = 0.92, *, max_refusals: int = 2
    ) -> None:
        if not -1.0 <= threshold <= 1.0:
            raise ValueError("threshold must be a cosine similarity in [-1, 1]")
        if max_refusals < 1:
            raise ValueError("max_refusals must be >= 1")
        self._embedder = embedder
        self.threshold = threshold
        self.max_refusals = max_refusals
        self._records: list[QueryStat] = []
        self._seen: set[str] = set()
        self._vectors: dict[str, FloatMatrix] = {}
        self._refusals = 0

    @property
    def consecutive_refusals(self) -> int:
        """Refusals since the last accepted query."""
        return self._refusals

    @property
    def should_stop_searching(self) -> bool:
        """True once ``max_refusals`` queries in a row were refused."""
        return self._refusals >= self.max_refusals

    def record(self, record: QueryStat) -> None:
        """Remember a search that ran and how much new evidence it brought."""
        self._records.append(record)
        self._seen.add(normalize_query(record.query))

    def sync(self, records: Iterable[QueryStat]) -> None:
        """Record whatever of ``records`` (a run's full query log) is not recorded yet."""
        records = list(records)
        for record in records[len(self._records) :]:
            self.record(record)

    async def prepare(self, queries: Iterable[str]) -> None:
        """Embed, in a worker thread, what checking ``queries`` will compare.

        That is each query and every search that brought nothing new. The vectors
        are cached, so the :meth:`check` calls that follow stay off the model and
        the event loop keeps serving other actors while the embedder works (as
        the reranker does). The same vectors as embedding inline: same verdicts.
        """
        texts = [normalize_query(q) for q in queries]
        texts += [normalize_query(r.query) for r in self._records if r.new_evidence == 0]
        missing = list(dict.fromkeys(t for t in texts if t and t not in self._vectors))
        if not missing:
            return
        vectors = await asyncio.to_thread(lambda: [self._embed(t) for t in missing])
        self._vectors.update(zip(missing, vectors, strict=True))

    def _embed(self, text: str) -> FloatMatrix:
        # one query a call, as _vector does: a batch could round differently
        vec: FloatMatrix = np.asarray(self._embedder.embed_queries([text]), dtype=np.float32)[0]
        return vec

    def _vector(self, text: str) -> FloatMatrix:
        vec = self._vectors.get(text)
        if vec is None:
            vec = self._vectors[text] = self._embed(text)
        return vec

    def check(self, query: str) -> LoopVerdict:
        """Decide whether ``query`` may run; a refusal counts towards stopping."""
        verdict = self._verdict(query)
        self._refusals = 0 if verdict.ok else self._refusals + 1
        return verdict

    def _verdict(self, query: str) -> LoopVerdict:
        norm = normalize_query(query)
        if not norm:
            return LoopVerdict(False, "empty query")
        if norm in self._seen:
            return LoopVerdict(
                False,
                f"duplicate query: {query!r} was already searched",
                nearest_query=next(
                    r.query for r in self._records if normalize_query(r.query) == norm
                ),
                similarity=1.0,
            )
        barren = [r for r in self._records if r.new_evidence == 0]
        if not barren:
            return LoopVerdict(True)
        vec = self._vector(norm)
        best: QueryStat | None = None
        best_sim = -1.0
        for r in barren:
            sim = float(np.dot(vec, self._vector(normalize_query(r.query))))
            if sim > best_sim:
                best, best_sim = r, sim
        if best is not None and best_sim >= self.threshold:
            return LoopVerdict(
                False,
                f"semantic loop: {query!r} is too close to {best.query!r} "
                f"(similarity {best_sim:.2f}), which found nothing new; change the angle or answer",
                nearest_query=best.query,
                similarity=best_sim,
            )
        return LoopVerdict(
            True, nearest_query=best.query if best else None, similarity=max(best_sim, 0.0)
        )
