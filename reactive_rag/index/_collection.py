"""An opened, immutable generation of a collection: chunks, BM25, vectors, search."""

from __future__ import annotations

import contextlib
import json
import mmap
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from actors.providers import language_code, url_host
from streams import EvidenceChunk

from ._bm25 import Bm25, top_k
from ._dense import DenseStore
from ._exceptions import ChunkNotFound, EmbedderMismatch, IndexCorrupt
from ._filters import DocColumns, SearchFilter, date_ordinal
from ._fusion import DEFAULT_ALPHA, DEFAULT_FUSION, Fusion, fuse
from ._layout import FORMAT_VERSION, release_lease

__all__ = [
    "Chunk",
    "Collection",
    "Direction",
    "EmbedderLike",
    "SearchMode",
    "SearchResult",
    "chunk_id",
    "document_language",
    "split_chunk_id",
]

SearchMode = Literal["hybrid", "bm25", "dense"]
Direction = Literal["next", "prev", "both"]

_CANDIDATES = 100


class EmbedderLike(Protocol):
    """The part of ``actors.models.Embedder`` the index uses."""

    @property
    def name(self) -> str:
        """Model identity; vectors of different names are not comparable."""
        ...

    @property
    def dim(self) -> int:
        """Vector size."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit query vectors."""
        ...

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit passage vectors."""
        ...


def document_language(metadata: object) -> str | None:
    """A document's language from its metadata (``language`` or ``lang``), as ``"en"``."""
    if not isinstance(metadata, dict):
        return None
    value = metadata.get("language") or metadata.get("lang")
    return (language_code(value) or None) if isinstance(value, str) else None


def chunk_id(doc_id: str, position: int) -> str:
    """The id of chunk ``position`` of document ``doc_id`` (``"doc#3"``)."""
    return f"{doc_id}#{position}"


def split_chunk_id(cid: str) -> tuple[str, int]:
    """Inverse of :func:`chunk_id`.

    Raises:
        ChunkNotFound: ``cid`` is not of the form ``DOC#N``.
    """
    doc_id, sep, pos = cid.rpartition("#")
    if not sep or not pos.isdigit():
        raise ChunkNotFound(f"malformed chunk id {cid!r} (expected 'DOC_ID#POSITION')")
    return doc_id, int(pos)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One passage of a document, with its neighbours for reading on."""

    id: str
    doc_id: str
    position: int
    text: str
    title: str
    url: str
    collection: str
    doc_type: str = ""
    date: str | None = None
    tags: tuple[str, ...] = ()
    prev_id: str | None = None
    next_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_evidence(self, score: float | None = None) -> EvidenceChunk:
        """This chunk as the stream's citable ``EvidenceChunk``."""
        return EvidenceChunk(
            id=self.id, text=self.text, doc_id=self.doc_id, url=self.url, title=self.title,
            position=self.position, prev_id=self.prev_id, next_id=self.next_id,
            score=score, source=f"local:{self.collection}",
        )


@dataclass(frozen=True, slots=True)
class SearchResult:
    """A chunk with its fused score and the per-signal scores behind it."""

    chunk: Chunk
    score: float
    bm25_score: float | None = None
    dense_score: float | None = None


class Collection:
    """A read-only view of one generation; cheap to search from many threads.

    Obtain it from :meth:`CorpusIndex.open` and close it (or use ``with``): the
    open view holds a lease so a concurrent re-index cannot delete its files.

    Raises:
        IndexCorrupt: on open, if files are missing or disagree with the manifest.
    """

    def __init__(self, gen_dir: Path, name: str, embedder: EmbedderLike | None,
                 *, leased: bool = True, embedder_error: str | None = None) -> None:
        self.name = name
        self._embedder_error = embedder_error
        self.path = gen_dir
        self._embedder = embedder
        self._leased = leased
        self._closed = False
        self._close_lock = threading.Lock()
        try:
            self._load(gen_dir)
        except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:  # incl. IndexCorrupt
            self.close()
            raise IndexCorrupt(
                f"collection {name!r} ({gen_dir}) is corrupt or incomplete: {exc}; "
                f"re-index it (reactive-rag index PATH --collection {name})"
            ) from exc

    # ------------------------------------------------------------------ loading
    def _load(self, gen: Path) -> None:
        manifest_path = gen / "manifest.json"
        if not manifest_path.is_file():
            raise IndexCorrupt("no manifest.json (an interrupted build?)")
        m = json.loads(manifest_path.read_text(encoding="utf-8"))
        if m.get("format") != FORMAT_VERSION:
            raise IndexCorrupt(f"unsupported index format {m.get('format')!r}")
        self.manifest: dict[str, Any] = m
        n = int(m["n_chunks"])
        self.embedder_name: str = m["embedder"]
        self.dim: int = int(m["dim"])
        docs = json.loads((gen / "docs.json").read_text(encoding="utf-8"))
        if len(docs) != int(m["n_docs"]):
            raise IndexCorrupt(
                f"docs.json holds {len(docs)} docs, manifest says {m['n_docs']}"
            )
        self._docs: list[dict[str, Any]] = docs
        self._doc_index = {d["id"]: i for i, d in enumerate(docs)}
        self._doc_start = np.asarray([d["start"] for d in docs], dtype=np.int64)
        self._doc_count = np.asarray([d["count"] for d in docs], dtype=np.int64)
        types = sorted({d.get("doc_type", "") for d in docs})
        self._type_code = {t: i for i, t in enumerate(types)}
        self._doc_types = np.asarray([self._type_code[d.get("doc_type", "")] for d in docs],
                                     dtype=np.int32)
        self._doc_dates = np.asarray([date_ordinal(d.get("date")) for d in docs], dtype=np.int64)
        tag_rows: dict[str, list[int]] = {}
        for i, d in enumerate(docs):
            for t in d.get("tags", ()):
                tag_rows.setdefault(t, []).append(i)
        self._doc_tags = {t: np.asarray(r, dtype=np.int64) for t, r in tag_rows.items()}
        hosts = [url_host(str(d.get("url") or "")) or "" for d in docs]
        langs = [document_language(d.get("metadata")) or "" for d in docs]
        host_names, lang_names = sorted(set(hosts) | {""}), sorted(set(langs) | {""})
        host_code = {h: i for i, h in enumerate(host_names)}
        lang_code = {x: i for i, x in enumerate(lang_names)}
        self._columns = DocColumns(
            types=self._doc_types, type_index=self._type_code, dates=self._doc_dates,
            tags=self._doc_tags, index=self._doc_index,
            hosts=np.asarray([host_code[h] for h in hosts], dtype=np.int32),
            host_names=host_names,
            languages=np.asarray([lang_code[x] for x in langs], dtype=np.int32),
            language_names=lang_names,
        )
        self._offsets = np.load(gen / "offsets.npy", mmap_mode="r")
        self._chunk_doc = np.load(gen / "chunk_doc.npy", mmap_mode="r")
        vectors = np.load(gen / "vectors.npy", mmap_mode="r")
        if self._offsets.shape != (n + 1,) or self._chunk_doc.shape != (n,):
            raise IndexCorrupt(f"chunk arrays do not match n_chunks={n}")
        if vectors.shape != (n, self.dim) or vectors.dtype != np.float32:
            raise IndexCorrupt(
                f"vectors.npy has shape {vectors.shape}, expected {(n, self.dim)}"
            )
        if int(self._doc_count.sum()) != n:
            raise IndexCorrupt(
                f"documents cover {int(self._doc_count.sum())} chunks, not {n}"
            )
        texts_path = gen / "texts.bin"
        size = texts_path.stat().st_size
        if size != int(self._offsets[-1]):
            raise IndexCorrupt(
                f"texts.bin is {size} bytes, offsets say {int(self._offsets[-1])}"
            )
        # The mapping keeps its own descriptor: no open file to leak if close() is forgotten.
        with open(texts_path, "rb") as fh:
            self._texts: mmap.mmap | bytes = (
                mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
            )
        self._bm25 = Bm25.load(gen / "bm25", n, int(m.get("bm25_tokenizer", 1)))
        hnsw = None
        if m.get("dense") == "hnsw":
            hnsw = DenseStore.load_hnsw(gen / "hnsw.bin", self.dim, n)
        self._dense = DenseStore(vectors, hnsw, ef=int(m.get("hnsw_ef", 128)))

    # ------------------------------------------------------------------ basics
    def __len__(self) -> int:
        return int(self._chunk_doc.shape[0])

    @property
    def n_documents(self) -> int:
        """Number of documents in this generation."""
        return len(self._docs)

    @property
    def generation(self) -> int:
        """The generation number (grows by one per re-index)."""
        return int(self.manifest["generation"])

    @property
    def has_languages(self) -> bool:
        """Whether any document has ``language`` metadata (else a language filter is moot)."""
        return self._columns.has_languages

    @property
    def dense(self) -> DenseStore:
        """The vector store (exposed for benchmarks and tools)."""
        return self._dense

    @property
    def bm25(self) -> Bm25:
        """The lexical index (exposed for benchmarks and tools)."""
        return self._bm25

    def document_ids(self) -> list[str]:
        """Ids of all documents, in index order."""
        return [d["id"] for d in self._docs]

    def document_urls(self) -> dict[str, str]:
        """URL per document id (how a file indexed on its own finds its id in a folder's index)."""
        return {d["id"]: str(d.get("url") or "") for d in self._docs}

    def document_hashes(self) -> dict[str, str]:
        """Content hash per document id (what incremental re-indexing compares)."""
        return {d["id"]: d["hash"] for d in self._docs}

    def document_span(self, doc_id: str) -> tuple[int, int]:
        """``(first chunk row, chunk count)`` of a document."""
        i = self._doc_index[doc_id]
        return int(self._doc_start[i]), int(self._doc_count[i])

    def text_at(self, row: int) -> str:
        """Chunk text of row ``row``."""
        a, b = int(self._offsets[row]), int(self._offsets[row + 1])
        return bytes(self._texts[a:b]).decode("utf-8")

    def chunk_at(self, row: int) -> Chunk:
        """The chunk stored at row ``row``."""
        d = self._docs[int(self._chunk_doc[row])]
        pos = row - int(d["start"])
        return Chunk(
            id=chunk_id(d["id"], pos), doc_id=d["id"], position=pos, text=self.text_at(row),
            title=d.get("title", ""), url=d.get("url", ""), collection=self.name,
            doc_type=d.get("doc_type", ""), date=d.get("date"), tags=tuple(d.get("tags", ())),
            prev_id=chunk_id(d["id"], pos - 1) if pos > 0 else None,
            next_id=chunk_id(d["id"], pos + 1) if pos + 1 < int(d["count"]) else None,
            metadata=dict(d.get("metadata", {})),
        )

    def row_of(self, cid: str) -> int:
        """Row of chunk ``cid``.

        Raises:
            ChunkNotFound: unknown document or position.
        """
        doc_id, pos = split_chunk_id(cid)
        i = self._doc_index.get(doc_id)
        if i is None or pos >= int(self._doc_count[i]):
            raise ChunkNotFound(f"no chunk {cid!r} in collection {self.name!r}")
        return int(self._doc_start[i]) + pos

    def chunk(self, cid: str) -> Chunk:
        """The chunk with id ``cid`` (raises :class:`ChunkNotFound`)."""
        return self.chunk_at(self.row_of(cid))

    def neighbours(self, cid: str, direction: Direction = "next", count: int = 1) -> list[Chunk]:
        """Up to ``count`` chunks before/after ``cid`` in the same document, in reading order.

        ``direction="both"`` returns up to ``count`` on each side (the chunk itself
        excluded). Raises :class:`ChunkNotFound` for an unknown id.
        """
        if direction not in ("next", "prev", "both"):
            raise ValueError(f"direction must be 'next', 'prev' or 'both', not {direction!r}")
        if count < 0:
            raise ValueError("count must be >= 0")
        row = self.row_of(cid)
        d = self._docs[int(self._chunk_doc[row])]
        start, end = int(d["start"]), int(d["start"]) + int(d["count"])
        rows: list[int] = []
        if direction in ("prev", "both"):
            rows.extend(range(max(start, row - count), row))
        if direction in ("next", "both"):
            rows.extend(range(row + 1, min(end, row + 1 + count)))
        return [self.chunk_at(r) for r in rows]

    # ------------------------------------------------------------------ search
    def mask(self, filters: SearchFilter | None) -> npt.NDArray[np.bool_] | None:
        """Boolean mask over chunk rows for ``filters`` (None when nothing is excluded)."""
        if filters is None or filters.is_empty:
            return None
        out: npt.NDArray[np.bool_] = filters.mask(self._columns)[self._chunk_doc]
        return out

    def embed_query(self, query: str) -> npt.NDArray[np.float32]:
        """The query vector from the configured embedder (checked against the index's)."""
        emb = self._embedder
        if emb is None:
            why = f" ({self._embedder_error})" if self._embedder_error else ""
            raise EmbedderMismatch(
                f"collection {self.name!r} needs the embedder {self.embedder_name!r} for dense "
                f"search, but none is available{why}; BM25 search (mode='bm25') still works"
            )
        if emb.name != self.embedder_name or emb.dim != self.dim:
            raise EmbedderMismatch(
                f"collection {self.name!r} was indexed with {self.embedder_name!r} "
                f"({self.dim} dims) but the search uses {emb.name!r} ({emb.dim} dims); "
                "re-index or configure the same embedder"
            )
        vecs: npt.NDArray[np.float32] = np.asarray(emb.embed_queries([query]), dtype=np.float32)
        first: npt.NDArray[np.float32] = vecs[0]
        return first

    def search_rows(
        self,
        query: str,
        k: int = 10,
        *,
        mode: SearchMode = "hybrid",
        filters: SearchFilter | None = None,
        fusion: Fusion = DEFAULT_FUSION,
        alpha: float = DEFAULT_ALPHA,
        candidates: int = _CANDIDATES,
        query_vector: npt.NDArray[np.float32] | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32],
               dict[int, float], dict[int, float]]:
        """Row-level search: ``(rows, fused scores, bm25 by row, dense by row)``, best first.

        The filter mask is applied to the full score vectors (BM25, exact dense)
        or inside the HNSW walk, before any top-k cut, so a selective filter
        still yields ``k`` results when ``k`` chunks match.
        """
        if mode not in ("hybrid", "bm25", "dense"):
            raise ValueError(f"unknown search mode {mode!r}; use 'hybrid', 'bm25' or 'dense'")
        if k <= 0 or len(self) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, np.zeros(0, dtype=np.float32), {}, {}
        mask = self.mask(filters)
        n_cand = max(k, candidates) if mode == "hybrid" else k
        lex: tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] = (
            np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
        den = lex
        s: npt.NDArray[np.float32] | None = None
        if mode in ("hybrid", "bm25"):
            s = self._bm25.scores(query)
            if mask is not None:
                s = np.where(mask, s, np.float32(-np.inf))
            idx = top_k(s, n_cand)
            sc = s[idx]
            keep = sc > 0  # a chunk sharing no term with the query is no lexical match
            lex = (idx[keep], sc[keep])
        qv: npt.NDArray[np.float32] | None = None
        if mode in ("hybrid", "dense"):
            qv = np.asarray(query_vector if query_vector is not None
                            else self.embed_query(query), dtype=np.float32)
            den = self._dense.search(qv, n_cand, mask)
        bm25_by = {int(r): float(v) for r, v in zip(*lex, strict=True)}
        dense_by = {int(r): float(v) for r, v in zip(*den, strict=True)}
        if mode == "bm25":
            return lex[0][:k], lex[1][:k], bm25_by, dense_by
        if mode == "dense":
            return den[0][:k], den[1][:k], bm25_by, dense_by
        # Every fused candidate gets both signals' real scores: BM25 scored every chunk
        # already, and a dense score is one dot product with the stored vector.
        bm25_all, query_vec, vectors = s, qv, self._dense.vectors
        assert bm25_all is not None and query_vec is not None

        def lexical_scores(r: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
            return np.maximum(bm25_all[r], np.float32(0.0))

        def dense_scores(r: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
            out: npt.NDArray[np.float32] = np.asarray(vectors[r] @ query_vec, dtype=np.float32)
            return out

        rows, scores = fuse(lex, den, method=fusion, alpha=alpha,
                            lexical_scores=lexical_scores, dense_scores=dense_scores)
        return rows[:k], scores[:k], bm25_by, dense_by

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        mode: SearchMode = "hybrid",
        filters: SearchFilter | None = None,
        fusion: Fusion = DEFAULT_FUSION,
        alpha: float = DEFAULT_ALPHA,
        candidates: int = _CANDIDATES,
        query_vector: npt.NDArray[np.float32] | None = None,
    ) -> list[SearchResult]:
        """The best ``k`` chunks for ``query`` (hybrid BM25 + dense by default)."""
        if filters is not None and not filters.allows_collection(self.name):
            return []
        rows, scores, bm25_by, dense_by = self.search_rows(
            query, k, mode=mode, filters=filters, fusion=fusion, alpha=alpha,
            candidates=candidates, query_vector=query_vector,
        )
        return [
            SearchResult(self.chunk_at(int(r)), float(s), bm25_by.get(int(r)),
                         dense_by.get(int(r)))
            for r, s in zip(rows, scores, strict=True)
        ]

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Release the files and the lease (idempotent)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        texts = getattr(self, "_texts", None)
        if isinstance(texts, mmap.mmap):
            with contextlib.suppress(BufferError):  # a slice still exported: GC unmaps it
                texts.close()
        if self._leased:
            release_lease(self.path)

    def __enter__(self) -> Collection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Collection {self.name!r} gen={self.path.name} chunks={len(self)}>"
