"""Semantic loop detection over query embeddings, and round saturation.

A planner (especially a small model) that got nothing new from a search tends
to ask the same thing again in other words. Exact-duplicate checks miss that;
comparing query embeddings catches it. A refused query comes back to the
planner with a reason, and refusals in a row end the search phase.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from actors.models import Embedder, FloatMatrix
from actors.text import tokenize

from ._policy import QueryRecord

__all__ = ["LoopGuard", "LoopVerdict", "normalize_query", "saturated"]


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
        self._records: list[QueryRecord] = []
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

    def record(self, record: QueryRecord) -> None:
        """Remember a search that ran and how much new evidence it brought."""
        self._records.append(record)
        self._seen.add(normalize_query(record.query))

    def sync(self, records: Iterable[QueryRecord]) -> None:
        """Record whatever of ``records`` (a run's full query log) is not recorded yet."""
        records = list(records)
        for record in records[len(self._records) :]:
            self.record(record)

    def _vector(self, text: str) -> FloatMatrix:
        vec = self._vectors.get(text)
        if vec is None:
            vec = np.asarray(self._embedder.embed_queries([text]), dtype=np.float32)[0]
            self._vectors[text] = vec
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
        best: QueryRecord | None = None
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


def _jaccard(a: set[str], b: set[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def saturated(rounds: Sequence[set[str]], threshold: float = 0.8, *, consecutive: int = 1) -> bool:
    """Whether the last rounds of search brought back mostly the same evidence.

    ``rounds[i]`` is the set of evidence ids round ``i`` returned. A round is
    *stale* when its ids overlap the previous round's with Jaccard >= ``threshold``
    or when it returned nothing that earlier rounds had not already returned.
    Empty rounds are never stale (empty results are handled by rewriting the
    query, not by giving up). The search phase is saturated when the last
    ``consecutive`` rounds are all stale, i.e. ``consecutive + 1`` consecutive
    rounds overlap.
    """
    if consecutive < 1:
        raise ValueError("consecutive must be >= 1")
    if len(rounds) < consecutive + 1:
        return False
    for i in range(len(rounds) - consecutive, len(rounds)):
        current = rounds[i]
        if not current:
            return False
        old: set[str] = set().union(*rounds[:i])
        if not (current <= old or _jaccard(current, rounds[i - 1]) >= threshold):
            return False
    return True
