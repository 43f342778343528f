"""The protocol for a plug-in cross-encoder (a model server, a local model file)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["CrossEncoder"]


@runtime_checkable
class CrossEncoder(Protocol):
    """Scores (query, passage) pairs jointly; stronger than comparing two embeddings.

    No cross-encoder ships offline with this project, so this is
    the seam for a user's own: ``score`` is synchronous (the reranker calls it
    in a worker thread) and returns one relevance per passage, either a
    probability in [0, 1] or a raw logit (the reranker applies a sigmoid when
    any score falls outside [0, 1]).
    """

    name: str

    def score(self, query: str, passages: Sequence[str]) -> npt.NDArray[np.floating]:
        """One relevance score per passage, in passage order."""
        ...
