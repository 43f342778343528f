"""BM25 over chunks with bm25s, scored in full so filters mask before the top-k cut.

bm25s' own ``retrieve`` selects with ``np.argpartition(scores, -k)``, which is
~25x slower than ``np.argpartition(-scores, k)`` on the mostly-zero score
vectors BM25 produces; we take the dense score vector from ``get_scores`` and
select ourselves (see :func:`top_k`).

Tokenisation is versioned (:data:`BM25_TOKENIZER`, recorded in each generation's
manifest): version 1 ran ``bm25s.tokenize`` over the whole text, which turned a
Chinese clause into one token; version 2 gives Latin words the same English
stemming and stopwords but indexes CJK runs as characters and character pairs
(:func:`~actors.text.cjk_ngrams`). A generation keeps being queried with the
tokenisation it was built with, so an index written before version 2 answers as
it did until it is re-indexed.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from actors.text import CJK_RUN, cjk_ngrams

__all__ = ["BM25_TOKENIZER", "Bm25", "bm25_terms", "top_k"]

#: The tokenisation new generations are built with (see the module docstring).
BM25_TOKENIZER = 2

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


def bm25_terms(texts: Sequence[str], stemmer: Any) -> list[list[str]]:
    """Version-2 terms of each text: English stems of its Latin words, n-grams of its CJK runs.

    The Latin part goes through ``bm25s.tokenize`` exactly as version 1 did (CJK runs
    blanked out first), so an English text gets the same terms as before.
    """
    import bm25s

    latin = [CJK_RUN.sub(" ", t) for t in texts]
    words = bm25s.tokenize(latin, stopwords="en", stemmer=stemmer, return_ids=False,
                           show_progress=False)
    out: list[list[str]] = []
    for text, toks in zip(texts, words, strict=True):
        terms = list(toks)
        for m in CJK_RUN.finditer(text):
            terms.extend(cjk_ngrams(m.group()))
        out.append(terms)
    return out


class Bm25:
    """A bm25s index with English stemming and stopwords and CJK n-grams, persisted with
    bm25s' own format.

    Args:
        retriever: the bm25s index.
        n_docs: chunks in it.
        tokenizer: the tokenisation it was built with (1: before CJK support).
    """

    def __init__(self, retriever: Any, n_docs: int, tokenizer: int = BM25_TOKENIZER) -> None:
        if tokenizer not in (1, 2):
            raise ValueError(f"unknown BM25 tokenizer version {tokenizer!r}")
        self._retriever = retriever
        self._stemmer = _stemmer()
        self.n_docs = n_docs
        self.tokenizer = tokenizer

    @classmethod
    def build(cls, texts: Sequence[str]) -> Bm25:
        """Tokenise (stem, drop English stopwords, CJK n-grams) and index ``texts``."""
        import bm25s

        terms = bm25_terms(list(texts), _stemmer())
        retriever = bm25s.BM25()
        if any(terms):
            retriever.index(terms, show_progress=False)
        else:  # bm25s cannot index an empty vocabulary: keep version 1's behaviour
            retriever.index(bm25s.tokenize(list(texts), stopwords="en", stemmer=_stemmer(),
                                           show_progress=False), show_progress=False)
        return cls(retriever, len(texts))

    def save(self, folder: Path) -> None:
        """Write the index (scores as .npy, vocabulary as JSON) into ``folder``."""
        self._retriever.save(str(folder))

    @classmethod
    def load(cls, folder: Path, n_docs: int, tokenizer: int = 1) -> Bm25:
        """Open a saved index; score arrays are memory-mapped, not read into RAM.

        ``tokenizer`` is the version the manifest records (1 when it records none:
        those were built before versions existed).
        """
        import bm25s

        retriever = bm25s.BM25.load(str(folder), mmap=True)
        return cls(retriever, n_docs, tokenizer)

    def tokens(self, query: str) -> list[str]:
        """The stemmed query terms known to the index (unknown terms cannot score)."""
        import bm25s

        with _STEMMER_LOCK:  # PyStemmer objects are not thread-safe
            if self.tokenizer >= 2:
                words = bm25_terms([query], self._stemmer)[0]
            else:
                toks = bm25s.tokenize(
                    [query], stopwords="en", stemmer=self._stemmer, return_ids=False,
                    show_progress=False,
                )
                words = list(toks[0]) if toks else []
        vocab = self._retriever.vocab_dict
        return [w for w in words if w in vocab]

    def scores(self, query: str) -> npt.NDArray[np.float32]:
        """BM25 score of every chunk for ``query`` (zeros when no term is known)."""
        toks = self.tokens(query)
        if not toks:
            return np.zeros(self.n_docs, dtype=np.float32)
        out = np.asarray(self._retriever.get_scores(toks), dtype=np.float32)
        return out
