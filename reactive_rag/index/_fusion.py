"""Fusing lexical and dense rankings.

Three methods:

- ``"linear"`` (the default): each signal's scores are z-scored over the union of
  both candidate lists and blended, ``(1 - alpha) * bm25_z + alpha * dense_z``. A
  candidate that only one signal retrieved gets its real score from the other
  signal when the caller can look it up (the collection can: BM25 scores every
  chunk and dense scores are one dot product), else that list's lowest score.
- ``"minmax"``: the fusion used before issue 26, kept for comparison: min-max
  scaling over each list's own candidates, a candidate missing from a list gets 0.
- ``"rrf"``: reciprocal-rank fusion (k=60; rank-only, needs no score calibration).

Chosen on the SciFact *train* queries only (809; ``bench/beir.py --tune`` reruns the
grid), MiniLM int8 + BM25, 300 candidates per signal, nDCG@10: minmax alpha 0.4 (the
old default) 0.7336, RRF 0.7176; z-scored with filled-in scores alpha 0.4/0.5/0.6 =
0.7322/0.7361/0.7362 at 100 candidates and 0.7320/0.7390/0.7368 at 300. Filling in the
missing scores is most of the gain (min-max with them: 0.7358 at alpha 0.5); z-scores
let the blend sit at the middle, alpha 0.5. A BM25 k1/b grid (0.6-2.0 x 0.5-1.0) gained
at most 0.003, less than the spread between two halves of train, so BM25 keeps bm25s'
defaults. Test, scored once after the choice: 0.7367 (old default 0.7271).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = ["DEFAULT_ALPHA", "DEFAULT_FUSION", "RRF_K", "Fusion", "ScoreLookup", "fuse"]

Fusion = Literal["linear", "minmax", "rrf"]

#: A signal's score of any rows (for candidates only the other signal retrieved).
ScoreLookup = Callable[[npt.NDArray[np.int64]], npt.NDArray[np.float32]]

#: Reciprocal-rank fusion constant from Cormack et al. (2009).
RRF_K = 60
#: Weight of the dense score in the linear fusions (1 - alpha goes to BM25).
DEFAULT_ALPHA = 0.5
#: The fusion used when a search names none.
DEFAULT_FUSION: Fusion = "linear"

_METHODS = ("linear", "minmax", "rrf")


def _minmax(scores: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    if scores.size == 0:
        return scores
    lo = float(scores.min())
    hi = float(scores.max())
    if hi - lo <= 1e-12:
        return np.ones_like(scores) if hi > 0 else np.zeros_like(scores)
    out: npt.NDArray[np.float32] = ((scores - lo) / (hi - lo)).astype(np.float32)
    return out


def _zscore(scores: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Scores in standard deviations from their mean; all zeros when they do not vary
    (a signal that cannot tell the candidates apart must not sway the blend)."""
    sd = float(scores.std())
    if scores.size == 0 or sd <= 1e-12:
        return np.zeros_like(scores, dtype=np.float32)
    out: npt.NDArray[np.float32] = ((scores - float(scores.mean())) / sd).astype(np.float32)
    return out


def _over(
    ids: npt.NDArray[np.int64],
    part: tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]],
    lookup: ScoreLookup | None,
) -> npt.NDArray[np.float32]:
    """One signal's score of every fused candidate ``ids`` (sorted)."""
    if lookup is not None:
        return np.asarray(lookup(ids), dtype=np.float32)
    part_ids, part_scores = part
    if part_ids.size == 0:
        return np.zeros(ids.size, dtype=np.float32)
    out = np.full(ids.size, float(part_scores.min()), dtype=np.float32)
    out[np.searchsorted(ids, part_ids)] = part_scores
    return out


def fuse(
    lexical: tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]],
    dense: tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]],
    *,
    method: Fusion = DEFAULT_FUSION,
    alpha: float = DEFAULT_ALPHA,
    lexical_scores: ScoreLookup | None = None,
    dense_scores: ScoreLookup | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Merge two ranked candidate lists ``(ids best first, scores)`` into one.

    ``lexical_scores`` / ``dense_scores`` give a signal's score of rows it did not
    retrieve (used by ``"linear"`` only; see the module docstring). Returns all
    candidates, best first; ``"linear"`` scores lie in (0, 1), 0.5 for an average
    candidate.
    """
    if method not in _METHODS:
        raise ValueError(f"unknown fusion {method!r}; use 'linear', 'minmax' or 'rrf'")
    lex_ids, lex_scores = lexical
    den_ids, den_scores = dense
    ids = np.unique(np.concatenate([lex_ids, den_ids])).astype(np.int64)
    if ids.size == 0:
        return ids, np.zeros(0, dtype=np.float32)
    if method == "linear":
        blend = ((1.0 - alpha) * _zscore(_over(ids, lexical, lexical_scores))
                 + alpha * _zscore(_over(ids, dense, dense_scores))).astype(np.float32)
        # Same order, shown on (0, 1) by a logistic: z-scores go negative and callers sort
        # evidence with a missing score counted as 0. Not rescaled per list, so hits
        # merged from several collections still compare (a standout stays near 1).
        order = np.argsort(-blend, kind="stable")  # before float32 saturates near 1
        shown = (1.0 / (1.0 + np.exp(-blend.astype(np.float64)))).astype(np.float32)
        return ids[order], shown[order]
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
    return ids[order], fused[order]
