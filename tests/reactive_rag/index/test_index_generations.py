"""Persistence of the corpus index: generations, atomic switch, incremental re-index, errors."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from reactive_rag.index import (
    ChunkingConfig,
    CollectionNotFound,
    CorpusIndex,
    Document,
    EmbedderMismatch,
    IndexCorrupt,
)

from .._index_helpers import CountingEmbedder, long_doc, topic_docs

_SMALL = ChunkingConfig(target_words=40, overlap_ratio=0.1, max_words=80)


def _gens(root: Path, name: str) -> list[str]:
    return sorted(p.name for p in (root / name).iterdir() if p.name.startswith("gen-"))


def test_index_persists_and_reopens_without_embedding(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    with CorpusIndex(tmp_path, emb, chunking=_SMALL) as idx:
        report = idx.index_documents("c", [*topic_docs(), long_doc()])
    assert report.embedded_chunks == report.chunks == len(emb.passages)
    emb2 = CountingEmbedder()
    with CorpusIndex(tmp_path, emb2, chunking=_SMALL) as idx2:
        assert idx2.collections() == ["c"]
        res = idx2.search("magma lava eruption", collection="c", k=1)
        assert res[0].chunk.doc_id == "volcano"
        with idx2.open("c") as coll:
            assert len(coll) == report.chunks and coll.generation == 1
    assert emb2.passages == []  # opening re-embeds nothing (only the query was embedded)
    assert emb2.query_calls == 1


def test_reindex_embeds_only_new_and_changed_documents(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    idx = CorpusIndex(tmp_path, emb, chunking=_SMALL)
    docs = [*topic_docs(), long_doc()]
    first = idx.index_documents("c", docs)
    emb.passages.clear()

    again = idx.index_documents("c", docs)
    assert emb.passages == []
    assert (again.unchanged, again.added, again.updated, again.embedded_chunks) == (7, 0, 0, 0)
    assert again.generation == first.generation + 1

    changed = [d if d.id != "bees" else Document(id="bees", text="Bumblebees are fuzzy.",
                                                 title="Bees") for d in docs]
    changed.append(Document(id="new", text="Glaciers carve valleys out of granite."))
    third = idx.index_documents("c", changed)
    assert (third.unchanged, third.updated, third.added) == (6, 1, 1)
    assert sorted(emb.passages) == sorted(["Bees\nBumblebees are fuzzy.",
                                           "Glaciers carve valleys out of granite."])
    assert idx.search("fuzzy bumblebees", collection="c", k=1)[0].chunk.doc_id == "bees"
    # Reused vectors still retrieve their documents by meaning.
    assert idx.search("glaciers granite valleys", collection="c", k=1,
                      mode="dense")[0].chunk.doc_id == "new"
    assert idx.search("yeast dough oven", collection="c", k=1,
                      mode="dense")[0].chunk.doc_id == "bread"
    idx.close()


def test_sync_removes_missing_documents_and_add_keeps_them(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    with CorpusIndex(tmp_path, emb, chunking=_SMALL) as idx:
        idx.index_documents("c", topic_docs())
        r = idx.index_documents("c", [Document(id="x", text="Quartz is a hard mineral.")],
                                mode="add")
        assert (r.documents, r.added, r.removed) == (7, 1, 0)
        r = idx.index_documents("c", topic_docs()[:2])
        assert (r.documents, r.removed) == (2, 5)
        with idx.open("c") as coll:
            assert coll.document_ids() == ["volcano", "bread"]


def test_metadata_change_updates_filters_without_reembedding(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    with CorpusIndex(tmp_path, emb, chunking=_SMALL) as idx:
        idx.index_documents("c", [Document(id="a", text="Copper conducts heat.", tags=("x",))])
        emb.passages.clear()
        idx.index_documents("c", [Document(id="a", text="Copper conducts heat.", tags=("y",))])
        assert emb.passages == []
        from reactive_rag.index import SearchFilter

        assert idx.search("copper", collection="c", filters=SearchFilter(tags=["x"])) == []
        assert len(idx.search("copper", collection="c", filters=SearchFilter(tags=["y"]))) == 1


def test_old_generation_is_removed_after_the_switch(tmp_path: Path) -> None:
    with CorpusIndex(tmp_path, CountingEmbedder(), chunking=_SMALL) as idx:
        idx.index_documents("c", topic_docs("v1"))
        idx.search("bread", collection="c")  # a cached reader on gen 1
        idx.index_documents("c", topic_docs("v2"))
        assert _gens(tmp_path, "c") == ["gen-000002"]
        assert (tmp_path / "c" / "CURRENT").read_text().strip() == "gen-000002"


def test_open_reader_keeps_its_generation_until_closed(tmp_path: Path) -> None:
    with CorpusIndex(tmp_path, CountingEmbedder(), chunking=_SMALL) as idx:
        idx.index_documents("c", topic_docs("oldversion"))
        reader = idx.open("c")
        idx.index_documents("c", topic_docs("newversion"))
        # The held reader still sees (and can search) the old content...
        assert "oldversion" in reader.search("bread yeast", k=1)[0].chunk.text
        assert _gens(tmp_path, "c") == ["gen-000001", "gen-000002"]
        # ...new searches see the new content...
        assert "newversion" in idx.search("bread yeast", collection="c", k=1)[0].chunk.text
        reader.close()
        # ...and closing the last reader of the old generation removes it.
        assert _gens(tmp_path, "c") == ["gen-000002"]


def test_reindex_is_atomic_under_concurrent_readers(tmp_path: Path) -> None:
    writer = CorpusIndex(tmp_path, CountingEmbedder(), chunking=_SMALL)
    writer.index_documents("c", topic_docs("version0"))
    # Readers use their own CorpusIndex (as another process would) and the writer's.
    other = CorpusIndex(tmp_path, CountingEmbedder(), chunking=_SMALL)
    stop = threading.Event()
    errors: list[BaseException] = []
    seen: set[str] = set()
    searches = [0]
    lock = threading.Lock()

    def reader(idx: CorpusIndex, explicit_open: bool) -> None:
        while not stop.is_set():
            try:
                if explicit_open:
                    with idx.open("c") as coll:
                        results = coll.search("the", k=6, mode="dense")
                else:
                    results = idx.search("the", collection="c", k=6, mode="dense")
                versions = {r.chunk.text.rsplit(" ", 1)[-1] for r in results}
                # Never a half-built index: all six documents, all from one generation.
                assert len(results) == 6, len(results)
                assert len(versions) == 1, versions
                with lock:
                    seen.update(versions)
                    searches[0] += 1
            except BaseException as exc:
                errors.append(exc)
                return

    threads = [threading.Thread(target=reader, args=(idx, explicit))
               for idx in (writer, other) for explicit in (False, True)]
    for t in threads:
        t.start()
    try:
        for v in range(1, 6):
            writer.index_documents("c", topic_docs(f"version{v}"))
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert not errors, errors[0]
    assert searches[0] > 0
    assert seen <= {f"version{v}" for v in range(6)}
    assert "version5" in {r.chunk.text.rsplit(" ", 1)[-1]
                          for r in other.search("the", collection="c", k=6, mode="dense")}
    writer.close()
    other.close()
    # With every reader gone, only the current generation is left on disk.
    CorpusIndex(tmp_path, CountingEmbedder()).index_documents("c", topic_docs("version5"))
    assert _gens(tmp_path, "c") == ["gen-000007"]


def test_missing_collection_is_a_clear_error(tmp_path: Path) -> None:
    with CorpusIndex(tmp_path, CountingEmbedder()) as idx:
        with pytest.raises(CollectionNotFound, match="'nope' not found"):
            idx.search("x", collection="nope")
        with pytest.raises(CollectionNotFound):
            idx.open("nope")
        assert idx.collections() == []


@pytest.mark.parametrize("damage", ["manifest", "vectors", "texts", "bm25", "docs"])
def test_corrupt_generation_is_a_clear_error(tmp_path: Path, damage: str) -> None:
    with CorpusIndex(tmp_path, CountingEmbedder(), chunking=_SMALL) as idx:
        idx.index_documents("c", topic_docs())
    gen = tmp_path / "c" / "gen-000001"
    if damage == "manifest":
        (gen / "manifest.json").unlink()
    elif damage == "vectors":
        (gen / "vectors.npy").write_bytes(b"not numpy")
    elif damage == "texts":
        with open(gen / "texts.bin", "ab") as fh:
            fh.write(b"extra")
    elif damage == "bm25":
        for f in (gen / "bm25").iterdir():
            f.unlink()
    else:
        (gen / "docs.json").write_text(json.dumps([]))
    with CorpusIndex(tmp_path, CountingEmbedder()) as idx, \
            pytest.raises(IndexCorrupt, match="re-index"):
        idx.search("bread", collection="c")


def test_corrupt_generation_is_rebuilt_by_the_next_index(tmp_path: Path) -> None:
    with CorpusIndex(tmp_path, CountingEmbedder(), chunking=_SMALL) as idx:
        idx.index_documents("c", topic_docs())
        (tmp_path / "c" / "gen-000001" / "manifest.json").unlink()
        report = idx.index_documents("c", topic_docs())
        assert report.embedded_chunks == report.chunks  # nothing trustworthy to reuse
        assert idx.search("yeast", collection="c", k=1)[0].chunk.doc_id == "bread"


def test_searching_with_another_embedder_is_refused(tmp_path: Path) -> None:
    with CorpusIndex(tmp_path, CountingEmbedder(256), chunking=_SMALL) as idx:
        idx.index_documents("c", topic_docs())
    with CorpusIndex(tmp_path, CountingEmbedder(128)) as idx:
        with pytest.raises(EmbedderMismatch, match="hashing-256"):
            idx.search("bread", collection="c")
        # BM25 needs no vectors and keeps working.
        assert idx.search("yeast", collection="c", k=1, mode="bm25")[0].chunk.doc_id == "bread"
        with pytest.raises(EmbedderMismatch):
            idx.index_documents("c", [Document(id="z", text="zinc")], mode="add")
        # A full (sync) re-index with the new embedder re-embeds everything.
        report = idx.index_documents("c", topic_docs())
        assert report.embedded_chunks == report.chunks
        assert idx.search("yeast dough", collection="c", k=1)[0].chunk.doc_id == "bread"


def test_failed_build_leaves_the_current_generation_untouched(tmp_path: Path) -> None:
    class Exploding(CountingEmbedder):
        def embed_passages(self, texts):  # type: ignore[no-untyped-def]
            raise RuntimeError("model crashed")

    with CorpusIndex(tmp_path, CountingEmbedder(), chunking=_SMALL) as idx:
        idx.index_documents("c", topic_docs("good"))
    with CorpusIndex(tmp_path, Exploding(), chunking=_SMALL) as idx:
        with pytest.raises(RuntimeError, match="model crashed"):
            idx.index_documents("c", [Document(id="n", text="new text")], mode="add")
        assert "good" in idx.search("yeast", collection="c", k=1, mode="bm25")[0].chunk.text
    assert _gens(tmp_path, "c") == ["gen-000001"]
    assert not [p for p in (tmp_path / "c").iterdir() if p.name.startswith(".building")]


def test_ensure_builds_once_then_does_nothing_until_documents_change(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    with CorpusIndex(tmp_path, emb, chunking=_SMALL) as idx:
        first = idx.ensure("c", topic_docs())
        assert first is not None and first.generation == 1
        assert idx.ensure("c", topic_docs()) is None
        assert _gens(tmp_path, "c") == ["gen-000001"]
        emb.passages.clear()
        changed = idx.ensure("c", topic_docs("v2"))
        assert changed is not None and changed.updated == 6 and len(emb.passages) == 6


def test_missing_model_gives_a_clear_error_and_bm25_keeps_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.models import ModelNotAvailable
    from reactive_rag.index import _index

    with CorpusIndex(tmp_path, CountingEmbedder(), chunking=_SMALL) as idx:
        idx.index_documents("c", topic_docs())

    def no_model(root: Path) -> None:
        raise ModelNotAvailable("the MiniLM ONNX model package is not installed")

    monkeypatch.setattr(_index, "default_embedder", no_model)
    with CorpusIndex(tmp_path) as idx:  # default embedder: fails to load
        with pytest.raises(EmbedderMismatch, match="MiniLM ONNX model package is not installed"):
            idx.search("yeast", collection="c")
        assert idx.search("yeast", collection="c", k=1, mode="bm25")[0].chunk.doc_id == "bread"
        with pytest.raises(ModelNotAvailable):
            idx.index_documents("c", topic_docs())
