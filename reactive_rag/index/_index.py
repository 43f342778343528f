"""``CorpusIndex``: named collections on disk, incremental re-indexing, hybrid search."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ._builder import (
    ChunkingConfig,
    IndexReport,
    Progress,
    SyncMode,
    build_generation,
    document_key,
)
from ._collection import (
    Chunk,
    Collection,
    Direction,
    EmbedderLike,
    SearchMode,
    SearchResult,
)
from ._dense import DEFAULT_EXACT_THRESHOLD
from ._documents import Document, load_folder
from ._exceptions import CollectionNotFound, IndexCorrupt
from ._filters import SearchFilter
from ._fusion import DEFAULT_ALPHA, DEFAULT_FUSION, Fusion
from ._layout import (
    acquire_lease,
    collect_garbage,
    default_root,
    generation_dirs,
    read_current,
    release_lease,
    validate_name,
    writer_lock,
)

__all__ = ["CorpusIndex", "default_embedder"]

_OPEN_RETRIES = 3


def default_embedder(root: Path) -> EmbedderLike:
    """MiniLM int8 behind an on-disk cache beside the index (``ROOT/embeddings.sqlite``)."""
    from actors.models import CachedEmbedder, MiniLMEmbedder

    return CachedEmbedder(MiniLMEmbedder(), root / "embeddings.sqlite")


class _Handle:
    """A shared open collection and how many searches are using it right now."""

    __slots__ = ("collection", "retired", "users")

    def __init__(self, collection: Collection) -> None:
        self.collection = collection
        self.users = 0
        self.retired = False


class CorpusIndex:
    """Named collections of chunked documents with BM25 + dense hybrid search.

    Thread-safe: many threads may search while another re-indexes; each search
    runs on one consistent generation (old or new, never a mix).

    Args:
        root: Folder holding the collections (default ``$REACTIVE_RAG_HOME/index``
            or ``~/.cache/reactive_rag/index``).
        embedder: Vectors for passages and queries (default: MiniLM int8 with a
            disk cache, created on first use).
        chunking: Chunk sizes for new documents.
        exact_threshold: Collections with at least this many chunks get an HNSW graph.
        hnsw_ef: HNSW search breadth (recall vs latency).
        fusion: Default fusion of BM25 and dense rankings ("linear" or "rrf").
        alpha: Dense weight of the linear fusion.
    """

    def __init__(
        self,
        root: str | Path | None = None,
        embedder: EmbedderLike | None = None,
        *,
        chunking: ChunkingConfig | None = None,
        exact_threshold: int = DEFAULT_EXACT_THRESHOLD,
        hnsw_ef: int = 128,
        fusion: Fusion = DEFAULT_FUSION,
        alpha: float = DEFAULT_ALPHA,
    ) -> None:
        self.root = Path(root) if root is not None else default_root()
        self._embedder = embedder
        self._owns_embedder = embedder is None
        self.chunking = chunking or ChunkingConfig()
        self.exact_threshold = exact_threshold
        self.hnsw_ef = hnsw_ef
        self.fusion: Fusion = fusion
        self.alpha = alpha
        self._lock = threading.Lock()
        self._handles: dict[str, _Handle] = {}

    # ------------------------------------------------------------------ embedder
    @property
    def embedder(self) -> EmbedderLike:
        """The embedder (the default one is created on first use)."""
        with self._lock:
            if self._embedder is None:
                self.root.mkdir(parents=True, exist_ok=True)
                self._embedder = default_embedder(self.root)
            return self._embedder

    # ------------------------------------------------------------------ collections
    def _dir(self, name: str) -> Path:
        return self.root / validate_name(name)

    def collections(self) -> list[str]:
        """Names of the collections that have a current generation."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "CURRENT").is_file())

    def exists(self, name: str) -> bool:
        """Whether ``name`` has a searchable generation."""
        return (self._dir(name) / "CURRENT").is_file()

    def open(self, name: str) -> Collection:
        """Open the current generation of ``name`` for reading; close it when done.

        Raises:
            CollectionNotFound: never indexed.
            IndexCorrupt: the files on disk are incomplete or inconsistent.
        """
        coll_dir = self._dir(name)
        last: Exception | None = None
        for _ in range(_OPEN_RETRIES):
            gen = acquire_lease(coll_dir)
            if gen is None:
                raise CollectionNotFound(f"collection {name!r} has no index yet under {self.root}")
            emb, why = self._embedder_or_none()
            try:
                return Collection(gen, name, emb, leased=True, embedder_error=why)
            except IndexCorrupt as exc:
                # Another process may have switched and collected meanwhile: re-read CURRENT.
                last = exc
                if read_current(coll_dir) == gen:
                    raise
        assert last is not None
        raise last

    def _embedder_or_none(self) -> tuple[EmbedderLike | None, str | None]:
        try:
            return self.embedder, None
        except Exception as exc:  # no model installed: BM25 search still works
            return None, f"{type(exc).__name__}: {exc}"

    @contextmanager
    def _borrow(self, name: str) -> Iterator[Collection]:
        """A shared open collection for one call, refreshed when a new generation appears."""
        coll_dir = self._dir(name)
        current = read_current(coll_dir)
        if current is None:
            raise CollectionNotFound(f"collection {name!r} has no index yet under {self.root}")
        handle: _Handle | None = None
        to_close: Collection | None = None
        with self._lock:
            cached = self._handles.get(name)
            if cached is not None and cached.collection.path == current:
                cached.users += 1
                handle = cached
        if handle is None:
            fresh = self.open(name)  # outside the lock: loading takes a while
            with self._lock:
                cached = self._handles.get(name)
                if cached is not None and cached.collection.path == fresh.path:
                    handle, to_close = cached, fresh  # another thread won the race
                else:
                    handle = _Handle(fresh)
                    self._handles[name] = handle
                    if cached is not None:
                        cached.retired = True
                        if cached.users == 0:
                            to_close = cached.collection
                handle.users += 1
            if to_close is not None:
                to_close.close()
        try:
            yield handle.collection
        finally:
            with self._lock:
                handle.users -= 1
                close_it = handle.retired and handle.users == 0
            if close_it:
                handle.collection.close()

    # ------------------------------------------------------------------ search
    def search(
        self,
        query: str,
        *,
        collection: str,
        k: int = 10,
        mode: SearchMode = "hybrid",
        filters: SearchFilter | None = None,
        fusion: Fusion | None = None,
        alpha: float | None = None,
        query_vector: npt.NDArray[np.float32] | None = None,
    ) -> list[SearchResult]:
        """Best ``k`` chunks of ``collection`` for ``query`` (see :meth:`Collection.search`)."""
        with self._borrow(collection) as coll:
            return coll.search(
                query, k, mode=mode, filters=filters, fusion=fusion or self.fusion,
                alpha=self.alpha if alpha is None else alpha, query_vector=query_vector,
            )

    def chunk(self, chunk_id: str, *, collection: str) -> Chunk:
        """One chunk by id (raises ``ChunkNotFound``)."""
        with self._borrow(collection) as coll:
            return coll.chunk(chunk_id)

    def neighbours(
        self, chunk_id: str, direction: Direction = "next", count: int = 1, *, collection: str
    ) -> list[Chunk]:
        """Chunks before/after ``chunk_id`` in its document: the agent's "read on" tool."""
        with self._borrow(collection) as coll:
            return coll.neighbours(chunk_id, direction, count)

    # ------------------------------------------------------------------ writing
    def index_documents(
        self,
        name: str,
        documents: Iterable[Document],
        *,
        mode: SyncMode = "sync",
        progress: Progress | None = None,
    ) -> IndexReport:
        """Build a new generation of ``name`` from ``documents`` and switch to it atomically.

        ``mode="sync"``: the collection becomes exactly these documents (others are
        removed). ``mode="add"``: these documents are added or replaced, others kept.
        Unchanged documents (same id and content hash) reuse their chunks and
        vectors: nothing is re-embedded for them.
        """
        coll_dir = self._dir(name)
        embedder = self.embedder
        with writer_lock(coll_dir):
            previous: Collection | None = None
            gen = acquire_lease(coll_dir)
            try:
                if gen is not None:
                    try:
                        previous = Collection(gen, name, embedder, leased=False)
                    except IndexCorrupt:
                        previous = None  # rebuild from scratch
                report = build_generation(
                    coll_dir, name, documents, previous=previous, embedder=embedder,
                    chunking=self.chunking, mode=mode, exact_threshold=self.exact_threshold,
                    hnsw_ef=self.hnsw_ef, progress=progress,
                )
            finally:
                if previous is not None:
                    previous.close()
                if gen is not None:
                    release_lease(gen)
            self._retire_stale(name)
            collect_garbage(coll_dir)
        return report

    def _retire_stale(self, name: str) -> None:
        """Let go of a cached view of an older generation so its files can be removed."""
        current = read_current(self._dir(name))
        with self._lock:
            handle = self._handles.get(name)
            if handle is None or handle.collection.path == current:
                return
            del self._handles[name]
            handle.retired = True
            close_now = handle.users == 0
        if close_now:
            handle.collection.close()

    def ensure(
        self,
        name: str,
        documents: Iterable[Document],
        *,
        progress: Progress | None = None,
    ) -> IndexReport | None:
        """Index ``documents`` as ``name`` unless it already holds exactly them.

        Returns None (and writes nothing, not even a new generation) when every
        document id and content hash matches; ``make demo`` calls this on every run.
        """
        docs = list(documents)
        if self.exists(name):
            emb = self.embedder
            wanted = {d.id: document_key(d, self.chunking, emb) for d in docs}
            try:
                with self._borrow(name) as coll:
                    if coll.document_hashes() == wanted:
                        return None
            except IndexCorrupt:
                pass  # rebuild below
        return self.index_documents(name, docs, progress=progress)

    def index_path(
        self,
        name: str,
        path: str | Path,
        *,
        mode: SyncMode = "sync",
        progress: Progress | None = None,
        skipped: list[Path] | None = None,
    ) -> IndexReport:
        """Index every supported file under ``path`` (see :func:`load_folder`)."""
        docs = list(load_folder(path, skipped=skipped if skipped is not None else []))
        return self.index_documents(name, docs, mode=mode, progress=progress)

    def drop(self, name: str) -> None:
        """Delete a collection from disk (searches already running finish first)."""
        coll_dir = self._dir(name)
        if not coll_dir.is_dir():
            raise CollectionNotFound(f"collection {name!r} not found under {self.root}")
        with writer_lock(coll_dir):
            (coll_dir / "CURRENT").unlink(missing_ok=True)
            for _, gen in generation_dirs(coll_dir):
                shutil.rmtree(gen, ignore_errors=True)
        with self._lock:
            handle = self._handles.pop(name, None)
            if handle is not None:
                handle.retired = True
                close_now = handle.users == 0
            else:
                close_now = False
        if handle is not None and close_now:
            handle.collection.close()

    def close(self) -> None:
        """Close cached collections and the default embedder's cache."""
        with self._lock:
            handles = list(self._handles.values())
            self._handles.clear()
            for h in handles:
                h.retired = True
        for h in handles:
            if h.users == 0:
                h.collection.close()
        emb = self._embedder
        closer = getattr(emb, "close", None)
        if self._owns_embedder and callable(closer):
            closer()

    def __enter__(self) -> CorpusIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
