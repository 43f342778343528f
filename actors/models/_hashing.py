"""A deterministic, dependency-free embedder for tests and model-less installs."""

from __future__ import annotations

import hashlib
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ..text import STOPWORDS, stem, tokenize
from ._embedder import FloatMatrix

__all__ = ["HashingEmbedder"]


@lru_cache(maxsize=65536)
def _slot(feature: str, dim: int) -> tuple[int, float]:
    # blake2b, not hash(): Python's string hash is salted per process, and the
    # vectors must be identical across processes (they are cached on disk).
    h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    return h % dim, (1.0 if (h >> 63) & 1 else -1.0)


class HashingEmbedder:
    """Feature hashing of stemmed word unigrams and bigrams into ``dim`` dimensions.

    Lexical only (no synonyms), but texts sharing words really are closer than
    unrelated texts, which is what tests and a no-model fallback need. Signed
    hashing keeps collisions from biasing similarities upwards; counts are
    dampened with ``1 + log(tf)``.

    Args:
        dim: vector size; 512 keeps chance collisions (which look like shared
            words) rare even for short texts, where one collision weighs most.
        bigram_weight: weight of adjacent-word pairs relative to single words.
    """

    def __init__(self, dim: int = 512, *, bigram_weight: float = 0.5) -> None:
        if dim < 8:
            raise ValueError("dim must be >= 8")
        self.dim = dim
        self.name = f"hashing-{dim}"
        self._bigram_weight = bigram_weight

    def _features(self, text: str) -> Counter[str]:
        words = stem(w for w in tokenize(text) if w not in STOPWORDS)
        feats: Counter[str] = Counter(words)
        feats.update(f"{a} {b}" for a, b in itertools.pairwise(words))
        return feats

    def _embed(self, texts: Sequence[str]) -> FloatMatrix:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat, tf in self._features(text).items():
                idx, sign = _slot(feat, self.dim)
                weight = 1.0 + math.log(tf)
                if " " in feat:
                    weight *= self._bigram_weight
                out[row, idx] += sign * weight
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out /= norms
        return out

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        """Same as passages: hashing has no query/passage asymmetry."""
        return self._embed(texts)

    def embed_passages(self, texts: Sequence[str]) -> FloatMatrix:
        """Unit vectors; a text with no content words maps to the zero vector."""
        return self._embed(texts)
