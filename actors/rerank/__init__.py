"""Reranking of fused candidates: dense + keyword coverage + fusion prior (+ an optional
cross-encoder), a relevance floor, source diversity and position-aware ordering.
"""

from ._cross_encoder import CrossEncoder
from ._exceptions import CrossEncoderError, RerankError
from ._reranker_actor import RerankerActor
from ._scoring import (
    Diversity,
    Reranker,
    RerankResult,
    RerankWeights,
    ScoredCandidate,
    diversity_key,
    edges_order,
)

__all__ = [
    "CrossEncoder",
    "CrossEncoderError",
    "Diversity",
    "RerankError",
    "RerankResult",
    "RerankWeights",
    "Reranker",
    "RerankerActor",
    "ScoredCandidate",
    "diversity_key",
    "edges_order",
]
