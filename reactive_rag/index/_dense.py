"""Dense vectors: exact numpy search for small collections, hnswlib above a threshold.

Below ``exact_threshold`` chunks a matrix-vector product is exact and fast
enough; above it an HNSW graph keeps latency flat. A filter mask is applied
before the top-k: exact search scores only the allowed rows; with a graph, a
selective filter is scored exactly over the allowed rows, a broad one walks the
graph for proportionally more neighbours and masks them (falling back to a
filtered walk if too few survive).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._bm25 import top_k

__all__ = ["DEFAULT_EXACT_THRESHOLD", "DenseStore"]

#: Chunk count from which collections get an HNSW graph. Exact search is memory-bound
#: (a query reads every vector: 15 MB at 10k x 384 float32, ~3-5 ms here; 150 MB at
#: 100k, 30-80 ms), so the graph takes over early.
DEFAULT_EXACT_THRESHOLD = 10_000

#: A filtered search scores the allowed rows exactly when there are at most this many
#: (gathering them beats a graph walk that skips most nodes); broader filters walk the
#: graph for proportionally more neighbours and mask them.
FILTER_EXACT_MAX = DEFAULT_EXACT_THRESHOLD

_HNSW_M = 16
_HNSW_EF_CONSTRUCTION = 100


class DenseStore:
    """Unit vectors (memory-mapped ``.npy``) with optional HNSW graph.

    Args:
        vectors: ``(n, dim)`` float32, unit rows.
        hnsw: an ``hnswlib.Index`` over the same rows (labels are row numbers), or None.
        ef: HNSW search breadth; raised to at least ``k`` per query.
    """

    def __init__(self, vectors: npt.NDArray[np.float32], hnsw: Any | None = None,
                 ef: int = 128) -> None:
        self.vectors = vectors
        self.hnsw = hnsw
        self.ef = ef

    @property
    def size(self) -> int:
        """Number of vectors."""
        return int(self.vectors.shape[0])

    @staticmethod
    def build_hnsw(vectors: npt.NDArray[np.float32], *, threads: int = 2) -> Any:
        """An inner-product HNSW graph over ``vectors`` (labels = row numbers)."""
        import hnswlib

        n, dim = vectors.shape
        index = hnswlib.Index(space="ip", dim=dim)
        index.init_index(max_elements=max(n, 1), M=_HNSW_M, ef_construction=_HNSW_EF_CONSTRUCTION)
        index.set_num_threads(threads)
        if n:
            index.add_items(np.ascontiguousarray(vectors), np.arange(n), num_threads=threads)
        return index

    @staticmethod
    def load_hnsw(path: Path, dim: int, n: int) -> Any:
        """Read a saved HNSW graph fully into memory."""
        import hnswlib

        index = hnswlib.Index(space="ip", dim=dim)
        index.load_index(str(path), max_elements=max(n, 1))
        return index

    def exact_scores(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Cosine similarity of ``query`` to every vector."""
        out: npt.NDArray[np.float32] = self.vectors @ query
        return out

    def search(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        mask: npt.NDArray[np.bool_] | None = None,
        *,
        exact: bool | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Top-``k`` rows (best first) and their similarities, among ``mask``-allowed rows.

        ``exact=None`` picks exact search when there is no graph, or when the mask
        leaves few enough rows that scoring them all is cheaper than a filtered
        graph walk.
        """
        n = self.size
        if n == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        allowed: npt.NDArray[np.int64] | None = None
        if mask is not None:
            allowed = np.flatnonzero(mask).astype(np.int64)
            if allowed.size == 0:
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        use_exact = exact if exact is not None else (
            self.hnsw is None
            or (allowed is not None and allowed.size <= FILTER_EXACT_MAX)
        )
        if use_exact or self.hnsw is None:
            if allowed is None:
                sims = self.exact_scores(query)
                idx = top_k(sims, k)
                return idx, sims[idx]
            sims = self.vectors[allowed] @ query
            sel = top_k(sims, k)
            return allowed[sel], sims[sel]
        if allowed is None:
            return self._knn(query, min(k, n))
        # Broad filter: ask the graph for enough neighbours that k allowed ones survive.
        kk = min(k, int(allowed.size))
        want = min(n, int(np.ceil(kk * n / allowed.size * 1.5)) + 10)
        idx, sims = self._knn(query, want)
        keep = mask[idx] if mask is not None else np.ones(idx.size, dtype=bool)
        if int(keep.sum()) >= kk:
            return idx[keep][:kk], sims[keep][:kk]
        m = mask if mask is not None else np.ones(n, dtype=bool)  # rare: filtered walk

        def flt(label: int) -> bool:
            return bool(m[label])

        return self._knn(query, kk, flt)

    def _knn(self, query: npt.NDArray[np.float32], k: int, flt: Any = None,
             ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        graph = self.hnsw
        assert graph is not None
        graph.set_ef(max(self.ef, k))
        labels, dists = graph.knn_query(query.reshape(1, -1), k=k, num_threads=1, filter=flt)
        idx = labels[0].astype(np.int64)
        sims = (1.0 - dists[0]).astype(np.float32)
        return idx, sims
