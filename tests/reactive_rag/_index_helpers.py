"""Shared helpers of the corpus-index tests (a counting embedder, small corpora, the CLI)."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from actors.models import HashingEmbedder
from reactive_rag.cli import _index as _cli_index
from reactive_rag.index import Document


class CountingEmbedder:
    """The deterministic hashing embedder, counting every passage it embeds."""

    def __init__(self, dim: int = 256) -> None:
        self.inner = HashingEmbedder(dim)
        self.name = self.inner.name
        self.dim = dim
        self.passages: list[str] = []
        self.query_calls = 0
        self._lock = threading.Lock()

    def embed_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        with self._lock:
            self.query_calls += 1
        return self.inner.embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        with self._lock:
            self.passages.extend(texts)
        return self.inner.embed_passages(texts)


TOPICS = {
    "volcano": "Volcanoes erupt when magma rises through the crust. Lava flows and ash "
               "clouds follow an eruption; basalt forms as lava cools.",
    "bread": "Bread is baked from flour, water, yeast and salt. The dough rises while the "
             "yeast ferments sugars, then the loaf bakes in a hot oven.",
    "chess": "Chess is played on an eight by eight board. Each player moves a king, a "
             "queen, rooks, bishops, knights and pawns; checkmate ends the game.",
    "tides": "Ocean tides come from the gravitational pull of the moon and the sun. High "
             "tide and low tide alternate about twice a day on most coasts.",
    "bees": "Honey bees live in colonies with a queen, workers and drones. Workers gather "
            "nectar and pollen and turn nectar into honey inside the hive.",
    "violin": "The violin has four strings tuned in fifths and is played with a bow. Its "
              "body is carved from spruce and maple wood.",
}


def topic_docs(version: str = "") -> list[Document]:
    """Six one-paragraph documents on unrelated topics (optionally version-stamped)."""
    return [
        Document(id=name, text=f"{text} {version}".strip(), title=name.title(),
                 doc_type="md" if i % 2 else "txt", date=f"2024-0{i + 1}-15",
                 tags=("even",) if i % 2 == 0 else ("odd",))
        for i, (name, text) in enumerate(TOPICS.items())
    ]


def long_doc(doc_id: str = "long", paragraphs: int = 12) -> Document:
    """A document long enough for several chunks, each paragraph numbered."""
    sentences = []
    for p in range(paragraphs):
        sentences.append(
            f"Paragraph {p} begins here. " + " ".join(
                f"Sentence {s} of paragraph {p} talks about item{p}x{s}." for s in range(8)
            )
        )
    return Document(id=doc_id, text="\n\n".join(sentences), title="Long document")


def run_index_cli(argv: list[str]) -> int:
    """``reactive-rag index``/``search`` in process: the parser the CLI registers, its exit code."""
    parser = argparse.ArgumentParser(prog="reactive-rag")
    sub = parser.add_subparsers(dest="command", required=True)
    _cli_index.add_index_commands(sub)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code
