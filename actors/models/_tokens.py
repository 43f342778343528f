"""Contextual token vectors beside the sentence vector, from one forward pass.

A sentence vector says what a text is about; it barely moves when "raises"
becomes "lowers". The token vectors it is pooled from keep each word in its
context, so a caller can align two texts word by word (BERTScore-style). The
verifier's support head (``reactive_rag.judgement.offline._support_head``) needs both for
the same four texts per claim, so one call returns both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["TokenEmbedder", "TokenVectors"]


@dataclass(frozen=True, slots=True)
class TokenVectors:
    """One text's vectors.

    ``sentence`` is the ``(dim,)`` unit vector ``embed_passages`` returns for the
    text; ``tokens`` is ``(n, dim)``, one unit row per word piece (special
    tokens left out; ``n`` is 0 for a text with no word pieces).
    """

    sentence: npt.NDArray[np.float32]
    tokens: npt.NDArray[np.float32]


@runtime_checkable
class TokenEmbedder(Protocol):
    """An embedder that can also return the token vectors its sentence vector pools."""

    @property
    def name(self) -> str:
        """Model identity, as :attr:`~actors.models.Embedder.name`."""
        ...

    def embed_tokens(self, texts: Sequence[str]) -> list[TokenVectors]:
        """One :class:`TokenVectors` per text, input order kept."""
        ...
