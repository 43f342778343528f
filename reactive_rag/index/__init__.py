"""Corpus index: documents -> chunks (with neighbours) -> BM25 + vectors -> hybrid search.

Collections live on disk in generations that switch atomically, so a re-index
never disturbs a running search; unchanged documents are never re-embedded.
"""

from ._builder import (
    ChunkingConfig,
    IndexReport,
    Progress,
    SyncMode,
    document_chunks,
    search_text,
)
from ._collection import (
    Chunk,
    Collection,
    Direction,
    EmbedderLike,
    SearchMode,
    SearchResult,
    chunk_id,
    split_chunk_id,
)
from ._dense import DEFAULT_EXACT_THRESHOLD, DenseStore
from ._documents import SUPPORTED_SUFFIXES, Document, load_file
from ._exceptions import (
    ChunkNotFound,
    CollectionNotFound,
    CorpusError,
    DocumentLoadError,
    EmbedderMismatch,
    IndexCorrupt,
    NothingToIndex,
)
from ._filters import SearchFilter
from ._fusion import DEFAULT_ALPHA, DEFAULT_FUSION, RRF_K, Fusion, fuse
from ._index import (
    EMBEDDER_CHOICES,
    EMBEDDER_NAMES,
    CorpusIndex,
    EmbedderChoice,
    default_embedder,
    multilingual_embedder,
)
from ._info import CollectionInfo
from ._layout import default_root, validate_name
from ._provider import LocalCorpusProvider, chunk_url
from ._rates import DEFAULT_EMBED_RATE, load_embed_rate, save_embed_rate
from ._skips import SKIP_REASONS, SkippedFile, SkipReason
from ._sources import FolderScan, load_folder, scan_folder
from ._stdlib_corpus import DEFAULT_STDLIB_MODULES, STDLIB_COLLECTION, stdlib_documents

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_EMBED_RATE",
    "DEFAULT_EXACT_THRESHOLD",
    "DEFAULT_FUSION",
    "DEFAULT_STDLIB_MODULES",
    "EMBEDDER_CHOICES",
    "EMBEDDER_NAMES",
    "RRF_K",
    "SKIP_REASONS",
    "STDLIB_COLLECTION",
    "SUPPORTED_SUFFIXES",
    "Chunk",
    "ChunkNotFound",
    "ChunkingConfig",
    "Collection",
    "CollectionInfo",
    "CollectionNotFound",
    "CorpusError",
    "CorpusIndex",
    "DenseStore",
    "Direction",
    "Document",
    "DocumentLoadError",
    "EmbedderChoice",
    "EmbedderLike",
    "EmbedderMismatch",
    "FolderScan",
    "Fusion",
    "IndexCorrupt",
    "IndexReport",
    "LocalCorpusProvider",
    "NothingToIndex",
    "Progress",
    "SearchFilter",
    "SearchMode",
    "SearchResult",
    "SkipReason",
    "SkippedFile",
    "SyncMode",
    "chunk_id",
    "chunk_url",
    "default_embedder",
    "default_root",
    "document_chunks",
    "fuse",
    "load_embed_rate",
    "load_file",
    "load_folder",
    "multilingual_embedder",
    "save_embed_rate",
    "scan_folder",
    "search_text",
    "split_chunk_id",
    "stdlib_documents",
    "validate_name",
]
