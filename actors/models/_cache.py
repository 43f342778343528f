"""An on-disk vector cache in front of any embedder: a text is embedded once."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Literal, Self

import numpy as np

from .._sqlite import enable_wal
from ._embedder import Embedder, FloatMatrix

__all__ = ["CachedEmbedder"]

_Kind = Literal["query", "passage"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    model TEXT NOT NULL,
    kind TEXT NOT NULL,
    sha256 BLOB NOT NULL,
    dim INTEGER NOT NULL,
    vec BLOB NOT NULL,
    PRIMARY KEY (model, kind, sha256)
) WITHOUT ROWID
"""

_BUSY_TIMEOUT_S = 30.0  # how long a writer waits for another process
_LOOKUP_CHUNK = 500  # stay far below SQLite's bound-parameter limit


class CachedEmbedder:
    """Wraps an :class:`Embedder` with a SQLite cache keyed by (model, kind, sha256(text)).

    Only texts not in the cache reach the model, deduplicated and in one batch
    call, so re-indexing unchanged text never re-embeds it. SQLite in WAL mode
    with a busy timeout makes the file safe to share between threads and
    processes (concurrent writers of the same text store identical bytes;
    ``INSERT OR IGNORE`` keeps the first). Query and passage vectors are kept
    apart because some models embed them differently.

    Args:
        inner: the embedder doing the work.
        path: the SQLite file (created with its parent folder if missing).

    Attributes:
        hits, misses: texts served without the model / sent to it (they sum to
            all texts asked for; a text repeated within one call is one miss).
        model_calls: batch calls made to ``inner``.
    """

    def __init__(self, inner: Embedder, path: str | os.PathLike[str]) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, check_same_thread=False)
        try:
            enable_wal(self._db, _BUSY_TIMEOUT_S)  # (other processes may be opening it too)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
            self._db.commit()
        except sqlite3.Error:
            self._db.close()
            raise
        self.hits = 0
        self.misses = 0
        self.model_calls = 0

    @property
    def dim(self) -> int:
        """The inner model's dimension (some remote models learn it on first call)."""
        return self.inner.dim

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        """Cached :meth:`Embedder.embed_queries`."""
        return self._embed(texts, "query")

    def embed_passages(self, texts: Sequence[str]) -> FloatMatrix:
        """Cached :meth:`Embedder.embed_passages`."""
        return self._embed(texts, "passage")

    def close(self) -> None:
        """Close the database (idempotent)."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _embed(self, texts: Sequence[str], kind: _Kind) -> FloatMatrix:
        keys = [hashlib.sha256(t.encode("utf-8")).digest() for t in texts]
        found = self._lookup(keys, kind)
        missing: dict[bytes, int] = {}
        for i, key in enumerate(keys):
            if key not in found and key not in missing:
                missing[key] = i
        self.hits += len(texts) - len(missing)
        if missing:
            batch = [texts[i] for i in missing.values()]
            fn = self.inner.embed_queries if kind == "query" else self.inner.embed_passages
            vectors = np.asarray(fn(batch), dtype=np.float32)
            self.model_calls += 1
            self.misses += len(batch)
            if vectors.shape[0] != len(batch):
                raise ValueError(
                    f"{self.inner.name} returned {vectors.shape[0]} vectors for {len(batch)} texts"
                )
            rows = []
            for key, vec in zip(missing, vectors, strict=True):
                found[key] = vec
                rows.append((self.name, kind, key, int(vec.shape[0]), vec.tobytes()))
            with self._lock:
                self._db.executemany(
                    "INSERT OR IGNORE INTO vectors (model, kind, sha256, dim, vec) "
                    "VALUES (?, ?, ?, ?, ?)",
                    rows,
                )
                self._db.commit()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def _lookup(self, keys: list[bytes], kind: _Kind) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(unique), _LOOKUP_CHUNK):
                part = unique[start : start + _LOOKUP_CHUNK]
                marks = ",".join("?" * len(part))
                cur = self._db.execute(
                    f"SELECT sha256, vec FROM vectors WHERE model = ? AND kind = ? "
                    f"AND sha256 IN ({marks})",
                    [self.name, kind, *part],
                )
                for key, blob in cur:
                    found[bytes(key)] = np.frombuffer(blob, dtype=np.float32)
        return found
