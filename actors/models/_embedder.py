"""The embedder protocol every model adapter implements, and shared helpers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "FloatMatrix", "l2_normalize"]

FloatMatrix = npt.NDArray[np.float32]
"""A ``(n, dim)`` float32 matrix, one L2-normalised row per text."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors whose dot product is their cosine similarity.

    Methods are synchronous and CPU-bound: async callers run them with
    ``asyncio.to_thread`` so the event loop never blocks. Queries and passages
    have separate methods because some models (E5, BGE) embed them with
    different prefixes. ``name`` identifies the model (vectors of different
    names are not comparable; caches key on it).
    """

    @property
    def name(self) -> str:
        """Model identity (read-only for callers; a plain attribute satisfies it)."""
        ...

    @property
    def dim(self) -> int:
        """Vector size (0 only for remote models before their first answer)."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed search queries; returns ``(len(texts), dim)`` float32, unit rows."""
        ...

    def embed_passages(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed passages to be searched; returns ``(len(texts), dim)`` float32, unit rows."""
        ...


def l2_normalize(vectors: npt.ArrayLike) -> FloatMatrix:
    """Rows scaled to unit length (all-zero rows stay zero instead of becoming NaN)."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2:
        raise ValueError(f"expected a 2-d matrix, got shape {v.shape}")
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: FloatMatrix = (v / norms).astype(np.float32, copy=False)
    return out
