"""A collection's vital statistics read from its manifest, without opening its files."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ._exceptions import CollectionNotFound, IndexCorrupt
from ._layout import read_current

__all__ = ["CollectionInfo", "read_info"]

_RETRIES = 3


@dataclass(frozen=True, slots=True)
class CollectionInfo:
    """What a listing shows of a collection's current generation.

    Attributes:
        name: The collection name.
        documents: Documents in the current generation.
        chunks: Chunks in it.
        generation: Its number (grows by one per re-index).
        updated: When it was written (Unix seconds).
        embedder: The embedder its vectors come from.
    """

    name: str
    documents: int
    chunks: int
    generation: int
    updated: float
    embedder: str

    def to_json(self) -> dict[str, object]:
        """The fields as a JSON object."""
        return {"name": self.name, "documents": self.documents, "chunks": self.chunks,
                "generation": self.generation, "updated": self.updated,
                "embedder": self.embedder}


def read_info(coll_dir: Path) -> CollectionInfo:
    """The current generation's manifest as a :class:`CollectionInfo`.

    Only ``CURRENT`` and ``manifest.json`` are read, so listing many large
    collections is cheap. A re-index may switch and collect the generation
    between the two reads; ``CURRENT`` is then read again.

    Raises:
        CollectionNotFound: no such collection, or it has no generation yet.
        IndexCorrupt: the manifest is missing or malformed.
    """
    last: Exception | None = None
    for _ in range(_RETRIES):
        gen = read_current(coll_dir)
        if gen is None:
            raise CollectionNotFound(f"collection {coll_dir.name!r} has no index yet")
        try:
            m = json.loads((gen / "manifest.json").read_text(encoding="utf-8"))
            return CollectionInfo(
                name=coll_dir.name, documents=int(m["n_docs"]), chunks=int(m["n_chunks"]),
                generation=int(m["generation"]), updated=float(m["created"]),
                embedder=str(m["embedder"]))
        except FileNotFoundError as exc:
            last = exc  # switched and collected meanwhile: read CURRENT again
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexCorrupt(f"collection {coll_dir.name!r}: unreadable manifest "
                               f"({exc})") from exc
    raise IndexCorrupt(f"collection {coll_dir.name!r}: its generation kept vanishing "
                       f"while being read ({last})")
