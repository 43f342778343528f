"""Errors of the corpus index.

Hierarchy::

    CorpusError
    ├── CollectionNotFound (LookupError)   no collection of that name exists under the index root
    ├── IndexCorrupt (ValueError)          a generation on disk is missing files or inconsistent
    ├── EmbedderMismatch (ValueError)      the index was built with another embedder (name or dim)
    ├── ChunkNotFound (KeyError)           a chunk id that is not in the collection
    ├── DocumentLoadError (OSError)        a file could not be read or parsed into a document
    └── NothingToIndex (ValueError)        a path held no file that could be indexed
"""

from __future__ import annotations

from collections.abc import Sequence

from ._skips import SkippedFile, SkipReason

__all__ = [
    "ChunkNotFound",
    "CollectionNotFound",
    "CorpusError",
    "DocumentLoadError",
    "EmbedderMismatch",
    "IndexCorrupt",
    "NothingToIndex",
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
    """A file could not be read or converted to text; ``reason`` says why, as a type."""

    def __init__(self, message: str, *, reason: SkipReason = "unreadable",
                 detail: str | None = None) -> None:
        super().__init__(message)
        self.reason: SkipReason = reason
        self.detail: str = detail if detail is not None else message
        """The same without the file's name, for a listing that shows the name already."""

    def __str__(self) -> str:  # OSError would format a second argument as an errno
        return str(self.args[0]) if self.args else ""


class NothingToIndex(CorpusError, ValueError):
    """The path held no indexable file, so no collection or generation was written.

    ``skipped`` lists every file that was found and left out, with its reason.
    """

    def __init__(self, message: str, skipped: Sequence[SkippedFile] = ()) -> None:
        super().__init__(message)
        self.skipped: tuple[SkippedFile, ...] = tuple(skipped)
