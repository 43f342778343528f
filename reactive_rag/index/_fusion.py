"""Fusing lexical and dense rankings.

Two methods: reciprocal-rank fusion (RRF, k=60; rank-only, needs no score
calibration) and a linear fusion of min-max normalised scores. Chosen on the
SciFact *train* queries (809, never the test queries) with MiniLM + BM25,
nDCG@10: RRF 0.718; linear alpha 0.3/0.4/0.5/0.6/0.7 = 0.727/0.734/0.733/0.725/0.719.
So the default is linear fusion with ``alpha=0.4`` (dense weight);
``bench/beir.py --tune`` reproduces the comparison.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = ["DEFAULT_ALPHA", "DEFAULT_FUSION", "RRF_K", "Fusion", "fuse"]

Fusion = Literal["linear", "rrf"]

#: Reciprocal-rank fusion constant from Cormack et al. (2009).
RRF_K = 60
#: Weight of the dense score in the linear fusion (1 - alpha goes to BM25).
DEFAULT_ALPHA = 0.4
#: The fusion used when a search names none.
DEFAULT_FUSION: Fusion = "linear"


def _minmax(scores: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    if scores.size == 0:
        return scores
    lo = float(scores.min())
    hi = float(scores.max())
    if hi - lo <= 1e-12:
        return np.ones_like(scores) if hi > 0 else np.zeros_like(scores)
    out: npt.NDArray[np.float32] = ((scores - lo) / (hi - lo)).astype(np.float32)
    return out


def fuse(
    lexical: tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]],
    dense: tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]],
    *,
    method: Fusion = DEFAULT_FUSION,
    alpha: float = DEFAULT_ALPHA,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Merge two ranked candidate lists ``(ids best first, scores)`` into one.

    Linear: each list's scores are min-max scaled to [0, 1] over its own
    candidates; a candidate missing from a list gets 0 for that list. RRF:
    ``sum 1 / (RRF_K + rank)``, ranks from 1. Returns all candidates, best first.
    """
    if method not in ("linear", "rrf"):
        raise ValueError(f"unknown fusion {method!r}; use 'linear' or 'rrf'")
    lex_ids, lex_scores = lexical
    den_ids, den_scores = dense
    ids = np.unique(np.concatenate([lex_ids, den_ids]))
    if ids.size == 0:
        return ids.astype(np.int64), np.zeros(0, dtype=np.float32)
    fused = np.zeros(ids.size, dtype=np.float32)
    if method == "rrf":
        parts = [
            (lex_ids, 1.0 / (RRF_K + np.arange(1, lex_ids.size + 1, dtype=np.float32))),
            (den_ids, 1.0 / (RRF_K + np.arange(1, den_ids.size + 1, dtype=np.float32))),
        ]
    else:
        parts = [(lex_ids, (1.0 - alpha) * _minmax(lex_scores)),
                 (den_ids, alpha * _minmax(den_scores))]
    for part_ids, part_scores in parts:
        if part_ids.size:
            pos = np.searchsorted(ids, part_ids)
            np.add.at(fused, pos, part_scores.astype(np.float32))
    order = np.argsort(-fused, kind="stable")
    return ids[order].astype(np.int64), fused[order]
