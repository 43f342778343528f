"""Reranking of fused candidates: dense + keyword coverage + fusion prior (+ an optional
cross-encoder, + source credibility), a relevance floor, source diversity and
position-aware ordering.
"""

from ._credibility import DEFAULT_COLLECTION_WEIGHTS, DEFAULT_DOMAIN_WEIGHTS, Credibility
from ._cross_encoder import CrossEncoder
from ._exceptions import CrossEncoderError, RerankError
from ._reranker_actor import RerankerActor, rerank_failure
from ._scoring import (
    Diversity,
    Reranker,
    RerankResult,
    RerankWeights,
    ScoredCandidate,
    diversity_key,
    edges_order,
    round_robin,
)

__all__ = [
    "DEFAULT_COLLECTION_WEIGHTS",
    "DEFAULT_DOMAIN_WEIGHTS",
    "Credibility",
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
    "rerank_failure",
    "round_robin",
]
