"""``CorpusIndex``: named collections on disk, incremental re-indexing, hybrid search."""

from __future__ import annotations

import dataclasses
import json
import shutil
import threading
import urllib.parse
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from actors.models import MULTILINGUAL_E5_NAME, MiniLMEmbedder
from actors.text import is_cjk_text

from ._bm25 import BM25_TOKENIZER
from ._builder import (
    ChunkingConfig,
    IndexReport,
    Progress,
    SyncMode,
    build_generation,
    document_key,
    document_text,
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
from ._documents import Document
from ._exceptions import CollectionNotFound, IndexCorrupt, NothingToIndex
from ._filters import SearchFilter
from ._fusion import DEFAULT_ALPHA, DEFAULT_FUSION, Fusion
from ._info import CollectionInfo, read_info
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
from ._rates import DEFAULT_EMBED_RATE, MIN_MEASURED, load_embed_rate, save_embed_rate
from ._skips import SkippedFile
from ._sources import load_folder

__all__ = ["EMBEDDER_CHOICES", "EMBEDDER_NAMES", "CorpusIndex", "EmbedderChoice",
           "default_embedder", "multilingual_embedder"]

_OPEN_RETRIES = 3

EmbedderChoice = Literal["auto", "minilm", "multilingual"]
"""Which embedder a collection is built with: ``auto`` picks ``multilingual`` when a
sample of its documents is CJK text (:func:`~actors.text.is_cjk_text`), else ``minilm``."""

EMBEDDER_CHOICES: tuple[str, ...] = get_args(EmbedderChoice)

EMBEDDER_NAMES: dict[str, str] = {
    "minilm": MiniLMEmbedder.name,
    "multilingual": MULTILINGUAL_E5_NAME,
}
"""The model name each choice records in a collection's manifest."""

_SAMPLE_DOCS = 64
_SAMPLE_CHARS = 2000


def default_embedder(root: Path) -> EmbedderLike:
    """MiniLM int8 behind an on-disk cache beside the index (``ROOT/embeddings.sqlite``)."""
    from actors.models import CachedEmbedder, MiniLMEmbedder

    return CachedEmbedder(MiniLMEmbedder(), root / "embeddings.sqlite")


def multilingual_embedder(root: Path) -> EmbedderLike:
    """multilingual-e5-small 4-bit behind the same disk cache (vectors keyed by model name)."""
    from actors.models import CachedEmbedder, MultilingualE5Embedder

    return CachedEmbedder(MultilingualE5Embedder(), root / "embeddings.sqlite")


def _build_model(model: str, root: Path) -> EmbedderLike:
    # looked up at call time, so the module's factories can be swapped (tests, tools)
    if model == EMBEDDER_NAMES["multilingual"]:
        return multilingual_embedder(root)
    return default_embedder(root)


_FACTORIES = frozenset(EMBEDDER_NAMES.values())


def looks_cjk(documents: Sequence[Document]) -> bool:
    """Whether a sample of ``documents`` (up to 64, spread over them) is CJK text."""
    if not documents:
        return False
    step = max(1, len(documents) // _SAMPLE_DOCS)
    sample = [f"{d.title}\n{document_text(d)[:_SAMPLE_CHARS]}"
              for d in documents[::step][:_SAMPLE_DOCS]]
    return is_cjk_text("\n".join(sample))


def _manifest_embedder(gen: Path) -> str | None:
    try:
        value = json.loads((gen / "manifest.json").read_text(encoding="utf-8"))["embedder"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # Collection reports the corruption
    return value if isinstance(value, str) else None


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
        embedder: Vectors for passages and queries of every collection. Default:
            chosen per collection and recorded in its manifest (MiniLM int8 for
            English text, multilingual E5 for CJK text; see :data:`EmbedderChoice`),
            each behind one disk cache and created on first use; a search uses the
            embedder its collection was built with.
        chunking: Chunk sizes for new documents.
        exact_threshold: Collections with at least this many chunks get an HNSW graph.
        hnsw_ef: HNSW search breadth (recall vs latency).
        fusion: Default fusion of BM25 and dense rankings ("linear": z-scored blend,
            "minmax", or "rrf").
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
        self._models: dict[str, EmbedderLike] = {}  # built per model name (owned)
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
        """The embedder given to the index, else the default one (MiniLM, created on first use).

        Collections may record another one: :meth:`collection_embedder`.
        """
        with self._lock:
            if self._embedder is None:
                self._embedder = self._model_locked(EMBEDDER_NAMES["minilm"])
            return self._embedder

    @property
    def fixed_embedder(self) -> bool:
        """Whether an embedder was given (then every collection uses it)."""
        return not self._owns_embedder

    def _model_locked(self, model: str) -> EmbedderLike:
        emb = self._models.get(model)
        if emb is None:
            self.root.mkdir(parents=True, exist_ok=True)
            emb = self._models[model] = _build_model(model, self.root)
        return emb

    def embedder_named(self, model: str) -> EmbedderLike:
        """The embedder recorded as ``model``: the given one if the index has one, else the
        built-in model of that name (created on first use), else the default one (whose
        name will not match: searching then says so).
        """
        if not self._owns_embedder or model not in _FACTORIES:
            return self.embedder
        with self._lock:
            return self._model_locked(model)

    def recorded_embedder(self, name: str) -> str | None:
        """The embedder name ``name``'s current generation records (None: not indexed)."""
        try:
            return read_info(self._dir(name)).embedder
        except (CollectionNotFound, IndexCorrupt):
            return None

    def collection_embedder(self, name: str) -> EmbedderLike:
        """The embedder searches of collection ``name`` use (the one it was built with)."""
        recorded = self.recorded_embedder(name) if self._owns_embedder else None
        return self.embedder if recorded is None else self.embedder_named(recorded)

    def embedder_for(self, collections: Sequence[str]) -> EmbedderLike:
        """One embedder for work over ``collections`` (reranking, a run's loop guard).

        Their common recorded embedder; the default one when they record different
        ones or none (or when the index was given an embedder).
        """
        if self._owns_embedder:
            recorded = {self.recorded_embedder(c) for c in collections} - {None}
            if len(recorded) == 1:
                return self.embedder_named(recorded.pop() or "")
        return self.embedder

    def choose_embedder(self, name: str, documents: Sequence[Document],
                        choice: EmbedderChoice | None = None,
                        mode: SyncMode = "sync") -> EmbedderLike:
        """The embedder a (re-)index of ``name`` with ``documents`` uses.

        ``choice`` ``"minilm"`` or ``"multilingual"`` names the model. ``None`` keeps
        the one the collection records (a new collection: as ``"auto"``); ``"auto"``
        detects it from the documents' text, except when adding to a collection,
        which keeps its own (one collection cannot mix vector spaces). An embedder
        given to the index is used for ``None`` and ``"auto"``.

        Raises:
            ValueError: an unknown ``choice``.
        """
        if choice is not None and choice not in EMBEDDER_CHOICES:
            raise ValueError(f"unknown embedder {choice!r}; use one of "
                             f"{', '.join(EMBEDDER_CHOICES)}")
        if choice in EMBEDDER_NAMES:
            with self._lock:
                return self._model_locked(EMBEDDER_NAMES[str(choice)])
        if not self._owns_embedder:
            return self.embedder
        recorded = self.recorded_embedder(name)
        if recorded in _FACTORIES and (choice is None or mode == "add"):
            return self.embedder_named(str(recorded))
        kind = "multilingual" if looks_cjk(documents) else "minilm"
        with self._lock:
            return self._model_locked(EMBEDDER_NAMES[kind])

    # ------------------------------------------------------------------ collections
    def _dir(self, name: str) -> Path:
        return self.root / validate_name(name)

    def collections(self) -> list[str]:
        """Names of the collections that have a current generation."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "CURRENT").is_file())

    def collection_info(self, name: str) -> CollectionInfo:
        """Counts, generation and time of ``name``'s current generation (manifest only).

        Raises:
            CollectionNotFound: never indexed.
            IndexCorrupt: its manifest is unreadable.
        """
        return read_info(self._dir(name))

    def embed_rate(self, model: str | None = None) -> tuple[float, bool]:
        """``(passages per second, measured)`` of an embedder on this machine.

        ``model``: an embedder name (default: :attr:`embedder`'s). The rate the last
        large enough build measured under this root, else
        :data:`~reactive_rag.index._rates.DEFAULT_EMBED_RATE` (``measured`` False).
        """
        rate = load_embed_rate(self.root, model or self.embedder.name)
        return (rate, True) if rate is not None else (DEFAULT_EMBED_RATE, False)

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
            emb, why = self._embedder_or_none(_manifest_embedder(gen))
            try:
                return Collection(gen, name, emb, leased=True, embedder_error=why)
            except IndexCorrupt as exc:
                # Another process may have switched and collected meanwhile: re-read CURRENT.
                last = exc
                if read_current(coll_dir) == gen:
                    raise
        assert last is not None
        raise last

    def _embedder_or_none(self, model: str | None) -> tuple[EmbedderLike | None, str | None]:
        try:
            return (self.embedder if model is None else self.embedder_named(model)), None
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

    def document_titles(self, collection: str) -> dict[str, str]:
        """Title per document id of ``collection``, in index order (what a run may read whole)."""
        with self._borrow(collection) as coll:
            return {d: coll.chunk_at(coll.document_span(d)[0]).title
                    for d in coll.document_ids()}

    # ------------------------------------------------------------------ writing
    def index_documents(
        self,
        name: str,
        documents: Iterable[Document],
        *,
        mode: SyncMode = "sync",
        progress: Progress | None = None,
        embedder: EmbedderChoice | None = None,
        remove: Iterable[str] = (),
    ) -> IndexReport:
        """Build a new generation of ``name`` from ``documents`` and switch to it atomically.

        ``mode="sync"``: the collection becomes exactly these documents (others are
        removed). ``mode="add"``: these documents are added or replaced, others kept
        except the ids in ``remove``. Unchanged documents (same id and content hash)
        reuse their chunks and vectors: nothing is re-embedded for them. ``embedder``:
        see :meth:`choose_embedder`; the choice is recorded in the manifest.
        """
        docs = list(documents)
        return self._index_with(name, docs, self.choose_embedder(name, docs, embedder, mode),
                                mode=mode, progress=progress, remove=frozenset(remove))

    def _index_with(self, name: str, documents: list[Document], embedder: EmbedderLike, *,
                    mode: SyncMode, progress: Progress | None,
                    remove: frozenset[str] = frozenset()) -> IndexReport:
        coll_dir = self._dir(name)
        misses_before = _cache_misses(embedder)
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
                    hnsw_ef=self.hnsw_ef, progress=progress, remove=remove,
                )
            finally:
                if previous is not None:
                    previous.close()
                if gen is not None:
                    release_lease(gen)
            self._retire_stale(name)
            collect_garbage(coll_dir)
        # A cache in front of the model serves some passages at once: count only the others.
        misses_after = _cache_misses(embedder)
        by_model = (report.embedded_chunks if misses_before is None or misses_after is None
                    else misses_after - misses_before)
        if by_model >= MIN_MEASURED and report.embed_seconds > 0:
            save_embed_rate(self.root, embedder.name, by_model / report.embed_seconds)
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
        embedder: EmbedderChoice | None = None,
    ) -> IndexReport | None:
        """Index ``documents`` as ``name`` unless it already holds exactly them.

        Returns None (and writes nothing, not even a new generation) when every
        document id and content hash matches; ``make demo`` calls this on every run.
        """
        docs = list(documents)
        emb = self.choose_embedder(name, docs, embedder)
        if self.exists(name):
            wanted = {d.id: document_key(d, self.chunking, emb) for d in docs}
            try:
                with self._borrow(name) as coll:
                    # an older BM25 tokenisation is rebuilt too (vectors are reused)
                    if (coll.document_hashes() == wanted
                            and coll.bm25.tokenizer == BM25_TOKENIZER):
                        return None
            except IndexCorrupt:
                pass  # rebuild below
        return self._index_with(name, docs, emb, mode="sync", progress=progress)

    def index_path(
        self,
        name: str,
        path: str | Path,
        *,
        mode: SyncMode = "sync",
        progress: Progress | None = None,
        skipped: list[SkippedFile] | None = None,
        max_bytes: int | None = None,
        embedder: EmbedderChoice | None = None,
    ) -> IndexReport:
        """Index every readable file under ``path`` (see :func:`load_folder`).

        A file already in the collection (same resolved file URL) keeps its
        document id, so indexing one file or a subfolder of an indexed folder
        updates those documents instead of adding copies; ``mode="add"`` keeps
        the others, ``mode="sync"`` removes them.

        Args:
            name: The collection.
            path: A folder or a single file.
            mode: "sync" (the collection becomes exactly these files) or "add".
            progress: Called per stage ("load" first), see :data:`Progress`.
            skipped: Receives every file left out, with its typed reason.
            max_bytes: Per-file size cap; larger files are skipped ``too_large``.
            embedder: Which embedder (see :meth:`choose_embedder`).

        Raises:
            NothingToIndex: no file under ``path`` could be indexed; nothing was
                written (no collection folder, no generation).
            DocumentLoadError: ``path`` does not exist.
        """
        found: list[SkippedFile] = []
        docs = list(load_folder(path, skipped=found, max_bytes=max_bytes, progress=progress))
        found.sort(key=lambda f: f.path)
        if skipped is not None:
            skipped.extend(found)
        if not docs:
            raise NothingToIndex(f"nothing to index in {path}: {_nothing_why(found)}", found)
        return self.index_documents(name, self._keep_ids(name, docs, mode), mode=mode,
                                    progress=progress, embedder=embedder)

    def _keep_ids(self, name: str, docs: list[Document], mode: SyncMode) -> list[Document]:
        """``docs`` with the ids the collection already gives the same files.

        When adding, a file whose relative path is already the id of another
        file (``notes.md`` of a second folder) gets an id naming its folder
        (``b/notes.md``) instead of replacing the one indexed before.
        """
        if not self.exists(name):
            return docs
        try:
            with self._borrow(name) as coll:
                urls = coll.document_urls()
        except (CollectionNotFound, IndexCorrupt):
            return docs  # rebuilt from scratch by index_documents
        by_url = {url: doc_id for doc_id, url in urls.items() if url.startswith("file:")}
        taken = set(urls) if mode == "add" else set()
        kept: list[Document] = []
        for doc in docs:
            if doc.url in by_url:
                doc = dataclasses.replace(doc, id=by_url[doc.url])
            elif doc.id in taken:
                doc = dataclasses.replace(doc, id=_free_id(doc, taken))
            taken.add(doc.id)
            kept.append(doc)
        return kept

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
        with self._lock:
            models = list(self._models.values())
            self._models.clear()
            if self._owns_embedder:
                self._embedder = None
        for emb in models:  # the owned ones; one given to the index is its owner's to close
            closer = getattr(emb, "close", None)
            if callable(closer):
                closer()

    def __enter__(self) -> CorpusIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _nothing_why(skipped: Sequence[SkippedFile]) -> str:
    if not skipped:
        return "no files (an empty folder, or only hidden files)"
    counts = Counter(s.reason for s in skipped)
    return (f"{len(skipped)} file(s) found, none indexable ("
            + ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items())) + ")")


def _cache_misses(embedder: EmbedderLike) -> int | None:
    """Passages a caching embedder sent to its model so far (None: not a caching one)."""
    misses = getattr(embedder, "misses", None)
    return misses if isinstance(misses, int) else None


def _free_id(doc: Document, taken: set[str]) -> str:
    """An id for ``doc`` not in ``taken``: its relative path under more of its folders."""
    parts = Path(urllib.parse.unquote(urllib.parse.urlsplit(doc.url).path)).parts
    depth = len(Path(doc.id).parts)
    for more in range(1, len(parts) - depth):
        candidate = "/".join(parts[-(depth + more):])
        if candidate not in taken:
            return candidate
    n = 2
    while f"{doc.id}#{n}" in taken:
        n += 1
    return f"{doc.id}#{n}"
