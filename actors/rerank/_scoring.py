"""Re-scoring fused candidates: dense + keyword coverage (+ cross-encoder) + fusion prior.

The score (weights in :class:`RerankWeights`, tuned on SciFact *train* queries
over BM25 top-30 candidates with MiniLM, see ``bench/rerank.py --tune``)::

    relevance = w_dense * cos(query, passage) + w_coverage * keyword_coverage
    relevance = (1 - w_cross) * relevance + w_cross * cross    # only with a CrossEncoder
    score     = relevance + w_prior / sqrt(1 + fusion_rank)
    score    += w_credibility * ln(credibility)                 # only with a Credibility table

``relevance`` says how well the text answers the query on its own; the
relevance floor applies to it alone, so a candidate the fusion ranked first is
still dropped when nothing in it matches (the agent then sees "nothing
relevant" instead of padding). The prior keeps the information in the incoming
fusion order (BM25 + dense agreement) that a single bi-encoder would lose.
The credibility term (see :class:`Credibility`) is 0 for a weight of 1.0, so an
all-1.0 table leaves the ranking as it was; a .gov page (1.3) gains 0.04, a
content farm (0.5) loses 0.10. It never touches the floor.

Selection then enforces diversity (round-robin over documents/URLs/sources, or
MMR) so one document cannot fill the context, and :func:`edges_order` puts the
strongest passages at both ends of a prompt ("lost in the middle").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import numpy as np
import numpy.typing as npt

from streams import EvidenceChunk

from ..models import Embedder
from ..text import content_terms, normalize_url
from ._credibility import Credibility
from ._cross_encoder import CrossEncoder
from ._exceptions import CrossEncoderError

__all__ = [
    "Diversity",
    "RerankResult",
    "RerankWeights",
    "Reranker",
    "ScoredCandidate",
    "diversity_key",
    "edges_order",
    "round_robin",
]

_T = TypeVar("_T")

Diversity = Literal["round_robin", "mmr", "none"]


@dataclass(frozen=True, slots=True)
class RerankWeights:
    """Weights of the linear score (see the module docstring for the formula)."""

    dense: float = 0.8
    coverage: float = 0.3
    prior: float = 0.1
    cross: float = 0.7
    credibility: float = 0.15


@dataclass(frozen=True, slots=True)
class ScoredCandidate:
    """One candidate with every signal that went into its score (for logs and tuning)."""

    chunk: EvidenceChunk
    score: float
    relevance: float
    dense: float
    coverage: float
    fusion_rank: int
    cross: float | None = None
    credibility: float = 1.0


@dataclass(frozen=True, slots=True)
class RerankResult:
    """What the reranker kept, best first; empty when nothing cleared the floor.

    Attributes:
        chunks: kept candidates best first, ``score`` replaced by the rerank score.
        scored: the same, with each signal.
        below_floor: candidates dropped as irrelevant.
        considered: candidates scored.
        all_scored: every candidate with its signals, in input order (for
            tuning and for explaining why something was dropped).
    """

    query: str
    chunks: tuple[EvidenceChunk, ...] = ()
    scored: tuple[ScoredCandidate, ...] = ()
    below_floor: int = 0
    considered: int = 0
    all_scored: tuple[ScoredCandidate, ...] = field(default=(), repr=False)

    @property
    def nothing_relevant(self) -> bool:
        """True when candidates were given but none cleared the floor."""
        return self.considered > 0 and not self.chunks

    @property
    def context(self) -> tuple[EvidenceChunk, ...]:
        """The kept chunks in prompt order: most relevant first and last."""
        return tuple(edges_order(self.chunks))


def diversity_key(chunk: EvidenceChunk) -> str:
    """What counts as "the same source": the document, else the normalised URL, else the source."""
    if chunk.doc_id:
        return "doc:" + chunk.doc_id
    if chunk.url:
        try:
            return "url:" + normalize_url(chunk.url)
        except ValueError:
            return "url:" + chunk.url
    if chunk.source:
        return "src:" + chunk.source
    return "id:" + chunk.id


def round_robin(ranked: Sequence[_T], k: int, key: Callable[[_T], str],
                cap: int | None = None) -> list[_T]:
    """Take ``k`` items from a best-first list, one source at a time.

    Sources (``key``) take turns in the order of their best item; in each turn a
    source gives its next-best item, so one source cannot fill the list. ``cap``
    limits any source outright.
    """
    groups: dict[str, list[_T]] = {}
    for item in ranked:  # best first, so groups are ordered by their best
        groups.setdefault(key(item), []).append(item)
    out: list[_T] = []
    depth = 0
    while len(out) < k and (cap is None or depth < cap):
        took = False
        for members in groups.values():
            if depth < len(members):
                out.append(members[depth])
                took = True
                if len(out) == k:
                    break
        if not took:
            break
        depth += 1
    return out


def edges_order(items: Sequence[_T]) -> list[_T]:
    """Best-first items rearranged so the best sit at both ends: 1, 3, 5, ..., 6, 4, 2.

    Models attend most to the start and end of a long context and least to its
    middle (Liu et al. 2023, "Lost in the Middle"), so the weakest go there.
    """
    return list(items[0::2]) + list(items[1::2])[::-1]


def _sigmoid_if_logits(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    if x.size and (x.min() < 0.0 or x.max() > 1.0):
        out: npt.NDArray[np.float64] = 1.0 / (1.0 + np.exp(-np.clip(x, -50, 50)))
        return out
    return x


class Reranker:
    """Re-scores fused candidates and keeps the best ``k``, diverse and above a floor.

    Synchronous and thread-safe as far as its embedder is (MiniLM and
    :class:`~actors.models.CachedEmbedder` are): call :meth:`rerank` directly in
    benchmarks, or through :class:`RerankerActor`, which runs it in a thread.

    Args:
        embedder: embeds the query and (unless vectors are passed) the passages;
            wrap it in a ``CachedEmbedder`` to reuse the index's passage vectors.
        cross_encoder: optional joint scorer blended in with ``weights.cross``.
        weights: the linear formula's weights.
        floor: minimum ``relevance`` to keep a candidate, set for MiniLM with
            the default weights, leaning to recall: every retrieved SciFact gold
            abstract scored >= 0.31 (full text), but short snippets of relevant
            text go down to ~0.2, while off-topic questions (NQ over SciFact)
            peak at 0.23 in the median (``bench/rerank.py`` reports the share
            returned as nothing relevant). Other embedders need their own.
        diversity: ``"round_robin"`` over :func:`diversity_key` (default),
            ``"mmr"`` (maximal marginal relevance on passage vectors), or ``"none"``.
        max_per_source: cap of kept chunks sharing one key (``None``: no cap).
        mmr_lambda: relevance vs novelty trade-off for ``"mmr"``.
        passage_text: the text embedded for a chunk; must match what the index
            embedded for cached vectors to be reused.
        key: the diversity key function.
        credibility: source weights (collection / URL domain) added to the
            score as ``weights.credibility * ln(weight)``; ``None``: no term.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        cross_encoder: CrossEncoder | None = None,
        weights: RerankWeights | None = None,
        floor: float = 0.25,
        diversity: Diversity = "round_robin",
        max_per_source: int | None = None,
        mmr_lambda: float = 0.7,
        passage_text: Callable[[EvidenceChunk], str] | None = None,
        key: Callable[[EvidenceChunk], str] = diversity_key,
        credibility: Credibility | None = None,
    ) -> None:
        if diversity not in ("round_robin", "mmr", "none"):
            raise ValueError(f"unknown diversity {diversity!r}")
        if max_per_source is not None and max_per_source < 1:
            raise ValueError("max_per_source must be >= 1 or None")
        if not 0.0 <= mmr_lambda <= 1.0:
            raise ValueError("mmr_lambda must be in [0, 1]")
        self.embedder = embedder
        self.cross_encoder = cross_encoder
        self.weights = weights or RerankWeights()
        self.floor = floor
        self.diversity: Diversity = diversity
        self.max_per_source = max_per_source
        self.mmr_lambda = mmr_lambda
        self._passage_text = passage_text or (lambda c: c.text)
        self._key = key
        self.credibility = credibility

    def rerank(
        self,
        query: str,
        candidates: Sequence[EvidenceChunk],
        k: int = 5,
        *,
        passage_vectors: npt.ArrayLike | None = None,
    ) -> RerankResult:
        """Score ``candidates`` for ``query`` and keep up to ``k``, best first.

        Args:
            query: the search query.
            candidates: fused candidates; their ``score`` (if all have one) or
                else their order gives the fusion rank.
            k: how many to keep at most.
            passage_vectors: the candidates' unit vectors from the same
                embedder, if the caller has them (skips passage embedding).
        """
        if k < 1:
            raise ValueError("k must be >= 1")
        cands = list(candidates)
        if not cands:
            return RerankResult(query=query)
        n = len(cands)
        ranks = self._fusion_ranks(cands)
        qv = np.asarray(self.embedder.embed_queries([query]), dtype=np.float32)[0]
        if passage_vectors is None:
            pv = np.asarray(
                self.embedder.embed_passages([self._passage_text(c) for c in cands]),
                dtype=np.float32,
            )
        else:
            pv = np.asarray(passage_vectors, dtype=np.float32)
        if pv.shape != (n, qv.shape[0]):
            raise ValueError(f"passage vectors have shape {pv.shape}, expected {(n, qv.shape[0])}")
        dense = np.clip(pv @ qv, -1.0, 1.0).astype(np.float64)

        wanted = set(content_terms(query))
        if wanted:
            coverage = np.array(
                [len(wanted & set(content_terms(self._passage_text(c)))) / len(wanted)
                 for c in cands],
                dtype=np.float64,
            )
        else:
            coverage = np.zeros(n)

        w = self.weights
        relevance = w.dense * dense + w.coverage * coverage
        cross: npt.NDArray[np.float64] | None = None
        if self.cross_encoder is not None:
            cross = self._cross_scores(query, cands)
            relevance = (1.0 - w.cross) * relevance + w.cross * cross
        prior = w.prior / np.sqrt(1.0 + ranks)
        score = relevance + prior
        cred = np.ones(n)
        if self.credibility is not None:
            cred = np.array([self.credibility.weight(c) for c in cands], dtype=np.float64)
            score = score + w.credibility * np.log(cred)

        scored = [
            ScoredCandidate(
                chunk=c,
                score=float(score[i]),
                relevance=float(relevance[i]),
                dense=float(dense[i]),
                coverage=float(coverage[i]),
                fusion_rank=int(ranks[i]),
                cross=None if cross is None else float(cross[i]),
                credibility=float(cred[i]),
            )
            for i, c in enumerate(cands)
        ]
        keep = [i for i in range(n) if relevance[i] >= self.floor]
        below = n - len(keep)
        keep.sort(key=lambda i: -score[i])
        keys = [self._key(c) for c in cands]
        chosen = self._select(keep, score, pv, k, keys)
        chosen.sort(key=lambda i: -score[i])
        kept = tuple(scored[i] for i in chosen)
        return RerankResult(
            query=query,
            chunks=tuple(s.chunk.model_copy(update={"score": s.score}) for s in kept),
            scored=kept,
            below_floor=below,
            considered=n,
            all_scored=tuple(scored),
        )

    # --- pieces --------------------------------------------------------------------------

    @staticmethod
    def _fusion_ranks(cands: list[EvidenceChunk]) -> npt.NDArray[np.float64]:
        n = len(cands)
        if all(c.score is not None and math.isfinite(c.score) for c in cands):
            order = sorted(range(n), key=lambda i: -(cands[i].score or 0.0))
        else:
            order = list(range(n))
        ranks = np.empty(n, dtype=np.float64)
        ranks[order] = np.arange(n, dtype=np.float64)
        return ranks

    def _cross_scores(self, query: str, cands: list[EvidenceChunk]) -> npt.NDArray[np.float64]:
        assert self.cross_encoder is not None
        name = getattr(self.cross_encoder, "name", type(self.cross_encoder).__name__)
        try:
            raw = self.cross_encoder.score(query, [self._passage_text(c) for c in cands])
            scores = np.asarray(raw, dtype=np.float64).reshape(-1)
        except Exception as exc:
            raise CrossEncoderError(f"cross-encoder {name!r} failed: {exc}") from exc
        if scores.shape[0] != len(cands) or not np.all(np.isfinite(scores)):
            raise CrossEncoderError(
                f"cross-encoder {name!r} returned {scores.shape[0]} scores "
                f"(finite: {bool(np.all(np.isfinite(scores)))}) for {len(cands)} passages"
            )
        return _sigmoid_if_logits(scores)

    def _select(
        self,
        ranked: list[int],
        score: npt.NDArray[np.float64],
        pv: npt.NDArray[np.float32],
        k: int,
        keys: list[str],
    ) -> list[int]:
        cap = self.max_per_source
        if self.diversity == "mmr":
            return self._mmr(ranked, score, pv, k, keys)
        if self.diversity == "none":
            out: list[int] = []
            per: dict[str, int] = {}
            for i in ranked:
                if cap is not None and per.get(keys[i], 0) >= cap:
                    continue
                per[keys[i]] = per.get(keys[i], 0) + 1
                out.append(i)
                if len(out) == k:
                    break
            return out
        return round_robin(ranked, k, keys.__getitem__, cap)

    def _mmr(
        self,
        ranked: list[int],
        score: npt.NDArray[np.float64],
        pv: npt.NDArray[np.float32],
        k: int,
        keys: list[str],
    ) -> list[int]:
        lam = self.mmr_lambda
        cap = self.max_per_source
        left = list(ranked)
        out: list[int] = []
        per: dict[str, int] = {}
        while left and len(out) < k:
            best, best_val = -1, -math.inf
            for i in left:
                if cap is not None and per.get(keys[i], 0) >= cap:
                    continue
                redundancy = max((float(pv[i] @ pv[j]) for j in out), default=0.0)
                val = lam * float(score[i]) - (1.0 - lam) * redundancy
                if val > best_val:
                    best, best_val = i, val
            if best < 0:
                break
            out.append(best)
            left.remove(best)
            per[keys[best]] = per.get(keys[best], 0) + 1
        return out
