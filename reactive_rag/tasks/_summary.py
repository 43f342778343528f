"""Extractive whole-document summary, computed chunk by chunk from a resumable state.

Offline and deterministic: each sentence is scored by how central it is to
the document (cosine between its vector and the document's centroid, the
mean of the chunk vectors). The state after each chunk is plain JSON (the
centroid, how many chunks are done, the best candidates so far), so a task
persists it and a restarted process continues from the next chunk, not from
zero, with the same result as an uninterrupted run. Every summary sentence is
an exact substring of the chunk it names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from actors.text import split_sentences

__all__ = ["SummaryState"]

_MIN_WORDS = 4


class _Embedder(Protocol):
    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


class SummaryState:
    """Where a summary stands: centroid, chunks done, best candidates (JSON round trip).

    Args:
        total: chunks in the document.
        sentences: how many sentences the summary keeps.
    """

    def __init__(self, total: int, sentences: int) -> None:
        if sentences < 1:
            raise ValueError("sentences must be >= 1")
        self.total = total
        self.sentences = sentences
        self.done = 0
        self.centroid: list[float] | None = None
        # [score, position, index in chunk, chunk id, text]
        self.candidates: list[list[Any]] = []

    # --- persistence ----------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {"total": self.total, "sentences": self.sentences, "done": self.done,
                "centroid": self.centroid, "candidates": self.candidates}

    @classmethod
    def from_json(cls, data: Any) -> SummaryState:
        """Rebuild from :meth:`to_json` output; raises ValueError if it is not one."""
        if not isinstance(data, dict):
            raise ValueError("summary state must be a mapping")
        try:
            state = cls(int(data["total"]), int(data["sentences"]))
            state.done = int(data["done"])
            centroid = data["centroid"]
            state.centroid = None if centroid is None else [float(x) for x in centroid]
            state.candidates = [list(c) for c in data["candidates"]]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed summary state: {exc}") from exc
        return state

    # --- the work -------------------------------------------------------------------

    @property
    def complete(self) -> bool:
        return self.done >= self.total

    def start(self, chunk_texts: Sequence[str], embedder: _Embedder) -> None:
        """Compute the document centroid (once; a resumed state already has it)."""
        if self.centroid is not None:
            return
        if not chunk_texts:
            self.centroid = []
            return
        vectors = np.asarray(embedder.embed_passages(list(chunk_texts)), dtype=np.float32)
        mean = vectors.mean(axis=0)
        norm = float(np.linalg.norm(mean))
        self.centroid = (mean / norm if norm > 0 else mean).tolist()

    def add_chunk(self, chunk_id: str, text: str, embedder: _Embedder) -> None:
        """Score the sentences of the next chunk and keep the best candidates."""
        if self.centroid is None:
            raise RuntimeError("call start() before add_chunk()")
        sentences = [text[a:b] for a, b in split_sentences(text)
                     if len(text[a:b].split()) >= _MIN_WORDS]
        if sentences and self.centroid:
            vectors = np.asarray(embedder.embed_passages(sentences), dtype=np.float32)
            norms = np.linalg.norm(vectors, axis=1)
            norms[norms == 0] = 1.0
            scores = (vectors @ np.asarray(self.centroid, dtype=np.float32)) / norms
            seen = {c[4] for c in self.candidates}
            for index, (sentence, score) in enumerate(zip(sentences, scores, strict=True)):
                if sentence in seen:
                    continue
                seen.add(sentence)
                self.candidates.append(
                    [round(float(score), 6), self.done, index, chunk_id, sentence])
            self.candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
            del self.candidates[self.sentences:]
        self.done += 1

    def result(self) -> list[dict[str, Any]]:
        """The kept sentences in document order: ``{text, chunk_id, score}``."""
        chosen = sorted(self.candidates, key=lambda c: (c[1], c[2]))
        return [{"text": c[4], "chunk_id": c[3], "score": c[0]} for c in chosen]
