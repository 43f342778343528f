"""BM25 over chunks with bm25s, scored in full so filters mask before the top-k cut.

bm25s' own ``retrieve`` selects with ``np.argpartition(scores, -k)``, which is
~25x slower than ``np.argpartition(-scores, k)`` on the mostly-zero score
vectors BM25 produces; we take the dense score vector from ``get_scores`` and
select ourselves (see :func:`top_k`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Bm25", "top_k"]

_STEMMER_LOCK = threading.Lock()


def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


def top_k(scores: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.int64]:
    """Indices of the ``k`` largest scores, best first (``-inf`` entries never win ties)."""
    n = scores.shape[0]
    if k <= 0 or n == 0:
        return np.zeros(0, dtype=np.int64)
    if k >= n:
        idx = np.argsort(-scores, kind="stable")
    else:
        part = np.argpartition(-scores, k - 1)[:k]
        idx = part[np.argsort(-scores[part], kind="stable")]
    return idx.astype(np.int64, copy=False)


class Bm25:
    """A bm25s index with English stemming and stopwords, persisted with bm25s' own format."""

    def __init__(self, retriever: Any, n_docs: int) -> None:
        self._retriever = retriever
        self._stemmer = _stemmer()
        self.n_docs = n_docs

    @classmethod
    def build(cls, texts: Sequence[str]) -> Bm25:
        """Tokenise (stem, drop English stopwords) and index ``texts``."""
        import bm25s

        stemmer = _stemmer()
        tokens = bm25s.tokenize(
            list(texts), stopwords="en", stemmer=stemmer, show_progress=False
        )
        retriever = bm25s.BM25()
        retriever.index(tokens, show_progress=False)
        return cls(retriever, len(texts))

    def save(self, folder: Path) -> None:
        """Write the index (scores as .npy, vocabulary as JSON) into ``folder``."""
        self._retriever.save(str(folder))

    @classmethod
    def load(cls, folder: Path, n_docs: int) -> Bm25:
        """Open a saved index; score arrays are memory-mapped, not read into RAM."""
        import bm25s

        retriever = bm25s.BM25.load(str(folder), mmap=True)
        return cls(retriever, n_docs)

    def tokens(self, query: str) -> list[str]:
        """The stemmed query terms known to the index (unknown terms cannot score)."""
        import bm25s

        with _STEMMER_LOCK:  # PyStemmer objects are not thread-safe
            toks = bm25s.tokenize(
                [query], stopwords="en", stemmer=self._stemmer, return_ids=False,
                show_progress=False,
            )
        words: list[str] = list(toks[0]) if toks else []
        vocab = self._retriever.vocab_dict
        return [w for w in words if w in vocab]

    def scores(self, query: str) -> npt.NDArray[np.float32]:
        """BM25 score of every chunk for ``query`` (zeros when no term is known)."""
        toks = self.tokens(query)
        if not toks:
            return np.zeros(self.n_docs, dtype=np.float32)
        out = np.asarray(self._retriever.get_scores(toks), dtype=np.float32)
        return out
