"""Writing a new generation: chunk, embed what changed, reuse the rest, switch atomically."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from actors.text import CHUNKING_VERSION, CLEAN_MARKUP_VERSION, chunk_text, clean_markup

from ._bm25 import BM25_TOKENIZER, Bm25
from ._collection import Collection, EmbedderLike
from ._dense import DenseStore
from ._documents import Document
from ._exceptions import CorpusError, EmbedderMismatch
from ._layout import FORMAT_VERSION, fsync_dir, generation_dirs, switch_current

__all__ = ["ChunkingConfig", "IndexReport", "Progress", "SyncMode", "build_generation",
           "document_chunks", "document_key", "document_text", "search_text"]

#: ``progress(done, total, stage)``; stages: "load" (files, ``index_path`` only), "chunk",
#: "embed" (first called with ``done=0`` before any passage is embedded), "bm25", "hnsw",
#: "write".
Progress = Callable[[int, int, str], None]
SyncMode = Literal["sync", "add"]

_EMBED_BATCH = 64


@dataclass(frozen=True, slots=True)
class ChunkingConfig:
    """Chunk sizes; part of each document's reuse key (changing them re-chunks everything)."""

    target_words: int = 220
    overlap_ratio: float = 0.1
    max_words: int = 300

    def key(self) -> str:
        """Stable string folded into document hashes."""
        return f"{CHUNKING_VERSION}/{self.target_words}/{self.overlap_ratio}/{self.max_words}"


@dataclass(frozen=True, slots=True)
class IndexReport:
    """What a (re-)index did."""

    collection: str
    generation: int
    documents: int
    chunks: int
    added: int
    updated: int
    unchanged: int
    removed: int
    embedded_chunks: int
    seconds: float
    dense: str
    embed_seconds: float = 0.0
    """Time spent embedding ``embedded_chunks`` (what the rate estimate learns from)."""
    embedder: str = ""
    """The embedder the generation was built with (recorded in its manifest)."""


def search_text(title: str, text: str) -> str:
    """What BM25 and the embedder see for a chunk: the title gives the chunk its topic."""
    return f"{title}\n{text}" if title else text


def document_key(doc: Document, chunking: ChunkingConfig, embedder: EmbedderLike) -> str:
    """What decides whether a document's chunks and vectors can be reused.

    The markup cleaner's version is part of it: a generation chunked from text
    cleaned differently (or not at all) is rebuilt, never silently kept.
    """
    return (f"{doc.content_hash()}|{CLEAN_MARKUP_VERSION}|{chunking.key()}|{embedder.name}"
            f"|{embedder.dim}")


def document_text(doc: Document) -> str:
    """The text a document's chunks are cut from: its markup cleaned, code kept as code."""
    return clean_markup(doc.text)


def document_chunks(doc: Document, chunking: ChunkingConfig) -> list[str]:
    """The chunk texts a document is indexed as (what a storage quota counts before a build)."""
    pieces = [c.text for c in chunk_text(
        document_text(doc), target_words=chunking.target_words,
        overlap_ratio=chunking.overlap_ratio, max_words=chunking.max_words,
    )]
    if not pieces and doc.title:
        pieces = [doc.title]
    return pieces


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _save_npy(path: Path, array: npt.NDArray[np.generic]) -> None:
    with open(path, "wb") as fh:
        np.save(fh, array)
        fh.flush()
        os.fsync(fh.fileno())


def _write_json(path: Path, value: object) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(value, fh, ensure_ascii=False, separators=(",", ":"))
        fh.flush()
        os.fsync(fh.fileno())


def build_generation(
    coll_dir: Path,
    name: str,
    documents: Iterable[Document],
    *,
    previous: Collection | None,
    embedder: EmbedderLike,
    chunking: ChunkingConfig,
    mode: SyncMode,
    exact_threshold: int,
    hnsw_ef: int,
    progress: Progress | None = None,
    remove: frozenset[str] = frozenset(),
) -> IndexReport:
    """Build ``gen-N+1`` next to the current one and switch ``CURRENT`` to it.

    Must be called under the collection's writer lock. Documents whose content
    hash (title, text, chunking, embedder) matches the previous generation keep
    their chunks and vectors without re-embedding. ``remove``: ids of previous
    documents that ``mode="add"`` does not keep (deleting documents).
    """
    t0 = time.perf_counter()
    if mode not in ("sync", "add"):
        raise ValueError(f"mode must be 'sync' or 'add', not {mode!r}")
    prev_hash: dict[str, str] = {}
    if previous is not None:
        if previous.embedder_name != embedder.name or previous.dim != embedder.dim:
            if mode == "add":
                raise EmbedderMismatch(
                    f"collection {name!r} was indexed with {previous.embedder_name!r}; adding "
                    f"documents embedded with {embedder.name!r} would mix vector spaces "
                    "(re-index everything in 'sync' mode: reactive-rag index --sync)"
                )
            previous_usable = None
        else:
            previous_usable = previous
            prev_hash = previous.document_hashes()
    else:
        previous_usable = None

    # Later duplicates of an id replace earlier ones.
    incoming: dict[str, tuple[Document, str]] = {}
    for doc in documents:
        if not isinstance(doc, Document):
            raise TypeError(f"expected Document, got {type(doc).__name__}")
        incoming[doc.id] = (doc, document_key(doc, chunking, embedder))
    added = updated = unchanged = 0
    plan: list[tuple[Document | None, str, str]] = []  # (doc or None=keep old, id, hash)
    for doc_id, (new_doc, h) in incoming.items():
        if prev_hash.get(doc_id) == h:
            unchanged += 1
        elif doc_id in prev_hash:
            updated += 1
        else:
            added += 1
        plan.append((new_doc, doc_id, h))
    removed = 0
    if previous is not None:
        for doc_id in previous.document_ids():
            if doc_id in incoming:
                continue
            if mode == "add" and previous_usable is not None and doc_id not in remove:
                plan.append((None, doc_id, prev_hash[doc_id]))
            else:
                removed += 1

    # Chunk new/changed documents; remember rows to copy for unchanged ones.
    texts: list[str] = []
    embed_texts: list[str] = []
    embed_rows: list[int] = []
    reuse_src: list[int] = []
    reuse_dst: list[int] = []
    docs_meta: list[dict[str, object]] = []
    chunk_doc: list[int] = []
    total_docs = len(plan)
    for i, (maybe_doc, doc_id, h) in enumerate(plan):
        start = len(texts)
        reuse = previous_usable is not None and prev_hash.get(doc_id) == h
        if reuse:
            assert previous_usable is not None
            p_start, p_count = previous_usable.document_span(doc_id)
            for r in range(p_start, p_start + p_count):
                reuse_src.append(r)
                reuse_dst.append(len(texts))
                texts.append(previous_usable.text_at(r))
            if maybe_doc is None:
                old = previous_usable.chunk_at(p_start)
                meta: dict[str, object] = {
                    "id": doc_id, "title": old.title, "url": old.url, "doc_type": old.doc_type,
                    "date": old.date, "tags": list(old.tags), "metadata": old.metadata,
                }
            else:
                meta = _doc_meta(maybe_doc)
        else:
            assert maybe_doc is not None
            doc = maybe_doc
            pieces = document_chunks(doc, chunking)
            for piece in pieces:
                embed_rows.append(len(texts))
                embed_texts.append(search_text(doc.title, piece))
                texts.append(piece)
            meta = _doc_meta(doc)
        count = len(texts) - start
        if count == 0:  # an empty document has nothing to find
            continue
        meta.update(hash=h, start=start, count=count)
        docs_meta.append(meta)
        chunk_doc.extend([len(docs_meta) - 1] * count)
        if progress is not None and (i % 50 == 0 or i + 1 == total_docs):
            progress(i + 1, total_docs, "chunk")

    n = len(texts)
    dim = int(embedder.dim)
    vectors = np.zeros((n, dim), dtype=np.float32)
    if reuse_src:
        assert previous_usable is not None
        vectors[np.asarray(reuse_dst)] = previous_usable.dense.vectors[np.asarray(reuse_src)]
    if progress is not None and embed_texts:
        progress(0, len(embed_texts), "embed")
    t_embed = time.perf_counter()
    for b in range(0, len(embed_texts), _EMBED_BATCH):
        batch = embed_texts[b:b + _EMBED_BATCH]
        vecs = np.asarray(embedder.embed_passages(batch), dtype=np.float32)
        if vecs.shape != (len(batch), dim):
            raise CorpusError(
                f"embedder {embedder.name!r} returned shape {vecs.shape} for {len(batch)} texts"
            )
        vectors[np.asarray(embed_rows[b:b + len(batch)])] = vecs
        if progress is not None:
            progress(b + len(batch), len(embed_texts), "embed")
    embed_seconds = time.perf_counter() - t_embed

    # Write the new generation beside the current one; nothing points at it yet.
    gens = generation_dirs(coll_dir)
    number = (gens[-1][0] + 1) if gens else 1
    gen_dir = coll_dir / f"gen-{number:06d}"
    tmp_dir = coll_dir / f".building-{gen_dir.name}-{os.getpid()}"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    tmp_dir.mkdir(parents=True)
    try:
        encoded = [t.encode("utf-8") for t in texts]
        offsets = np.zeros(n + 1, dtype=np.int64)
        if n:
            offsets[1:] = np.cumsum([len(e) for e in encoded])
        with open(tmp_dir / "texts.bin", "wb") as fh:
            fh.write(b"".join(encoded))
            fh.flush()
            os.fsync(fh.fileno())
        _save_npy(tmp_dir / "offsets.npy", offsets)
        _save_npy(tmp_dir / "chunk_doc.npy", np.asarray(chunk_doc, dtype=np.int32))
        _save_npy(tmp_dir / "vectors.npy", vectors)
        if progress is not None:
            progress(0, 1, "bm25")
        titles = [str(docs_meta[d]["title"]) for d in chunk_doc]
        bm25 = Bm25.build([search_text(t, x) for t, x in zip(titles, texts, strict=True)])
        bm25.save(tmp_dir / "bm25")
        for f in (tmp_dir / "bm25").iterdir():
            _fsync_file(f)
        fsync_dir(tmp_dir / "bm25")
        if progress is not None:
            progress(1, 1, "bm25")
        dense = "exact"
        if n >= exact_threshold:
            if progress is not None:
                progress(0, 1, "hnsw")
            graph = DenseStore.build_hnsw(vectors)
            graph.save_index(str(tmp_dir / "hnsw.bin"))
            _fsync_file(tmp_dir / "hnsw.bin")
            dense = "hnsw"
            if progress is not None:
                progress(1, 1, "hnsw")
        _write_json(tmp_dir / "docs.json", docs_meta)
        manifest = {
            "format": FORMAT_VERSION, "collection": name, "generation": number,
            "n_chunks": n, "n_docs": len(docs_meta), "embedder": embedder.name, "dim": dim,
            "chunking": {"target_words": chunking.target_words,
                         "overlap_ratio": chunking.overlap_ratio,
                         "max_words": chunking.max_words},
            "dense": dense, "hnsw_ef": hnsw_ef, "created": time.time(),
            "bm25_tokenizer": BM25_TOKENIZER,
        }
        _write_json(tmp_dir / "manifest.json", manifest)  # last: marks the folder complete
        fsync_dir(tmp_dir)
        os.replace(tmp_dir, gen_dir)
        fsync_dir(coll_dir)
        switch_current(coll_dir, gen_dir)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    if progress is not None:
        progress(1, 1, "write")
    return IndexReport(
        collection=name, generation=number, documents=len(docs_meta), chunks=n, added=added,
        updated=updated, unchanged=unchanged, removed=removed, embedded_chunks=len(embed_texts),
        seconds=time.perf_counter() - t0, dense=dense, embed_seconds=embed_seconds,
        embedder=embedder.name,
    )


def _doc_meta(doc: Document) -> dict[str, object]:
    return {
        "id": doc.id, "title": doc.title, "url": doc.url, "doc_type": doc.doc_type,
        "date": doc.date, "tags": list(doc.tags), "metadata": dict(doc.metadata),
    }
