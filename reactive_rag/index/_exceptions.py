"""Errors of the corpus index.

Hierarchy::

    CorpusError
    ├── CollectionNotFound (LookupError)   no collection of that name exists under the index root
    ├── IndexCorrupt (ValueError)          a generation on disk is missing files or inconsistent
    ├── EmbedderMismatch (ValueError)      the index was built with another embedder (name or dim)
    ├── ChunkNotFound (KeyError)           a chunk id that is not in the collection
    └── DocumentLoadError (OSError)        a file could not be read or parsed into a document
"""

from __future__ import annotations

__all__ = [
    "ChunkNotFound",
    "CollectionNotFound",
    "CorpusError",
    "DocumentLoadError",
    "EmbedderMismatch",
    "IndexCorrupt",
]


class CorpusError(Exception):
    """Root of every error raised by ``reactive_rag.index``."""


class CollectionNotFound(CorpusError, LookupError):
    """No collection of that name exists (it was never indexed, or the root is wrong)."""


class IndexCorrupt(CorpusError, ValueError):
    """A generation on disk is incomplete or inconsistent; re-index the collection."""


class EmbedderMismatch(CorpusError, ValueError):
    """Vectors on disk came from another embedder, so query vectors would not be comparable."""


class ChunkNotFound(CorpusError, KeyError):
    """The chunk id does not exist in this collection (a stale or made-up id)."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable.
        return str(self.args[0]) if self.args else ""


class DocumentLoadError(CorpusError, OSError):
    """A file could not be read or converted to text."""
