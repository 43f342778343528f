"""Search behaviour of the corpus index: ranking, modes, fusion, filters, neighbours."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from reactive_rag.index import (
    ChunkingConfig,
    ChunkNotFound,
    CorpusIndex,
    SearchFilter,
    fuse,
)

from .._index_helpers import CountingEmbedder, long_doc, topic_docs


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CorpusIndex]:
    idx = CorpusIndex(tmp_path_factory.mktemp("idx"), CountingEmbedder(),
                      chunking=ChunkingConfig(target_words=40, overlap_ratio=0.1, max_words=80))
    idx.index_documents("topics", [*topic_docs(), long_doc()])
    yield idx
    idx.close()


@pytest.mark.parametrize(
    ("query", "gold"),
    [
        ("how does magma produce lava during an eruption", "volcano"),
        ("yeast makes the dough rise before baking", "bread"),
        ("why do tides follow the moon", "tides"),
        ("checkmate with a queen and a rook", "chess"),
    ],
)
@pytest.mark.parametrize("mode", ["hybrid", "bm25", "dense"])
def test_gold_document_ranks_first(index: CorpusIndex, query: str, gold: str, mode: str) -> None:
    results = index.search(query, collection="topics", k=3, mode=mode)  # type: ignore[arg-type]
    assert results[0].chunk.doc_id == gold
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("fusion", ["linear", "rrf"])
def test_both_fusions_rank_the_gold_document_first(index: CorpusIndex, fusion: str) -> None:
    results = index.search("honey from nectar in the hive", collection="topics", k=5,
                           fusion=fusion)  # type: ignore[arg-type]
    assert results[0].chunk.doc_id == "bees"
    assert results[0].bm25_score is not None and results[0].dense_score is not None


def test_results_carry_chunk_identity_and_metadata(index: CorpusIndex) -> None:
    top = index.search("spruce and maple bow strings", collection="topics", k=1)[0]
    c = top.chunk
    assert (c.id, c.doc_id, c.position, c.collection) == ("violin#0", "violin", 0, "topics")
    assert c.title == "Violin" and c.doc_type == "md" and c.date == "2024-06-15"
    assert c.prev_id is None and c.next_id is None
    ev = c.to_evidence(top.score)
    assert ev.id == "violin#0" and ev.source == "local:topics" and ev.score == top.score


def test_k_larger_than_collection_returns_everything_once(index: CorpusIndex) -> None:
    with index.open("topics") as coll:
        n = len(coll)
        results = coll.search("the", k=n + 50, mode="dense")
    assert len(results) == n
    assert len({r.chunk.id for r in results}) == n


def test_query_without_known_terms_still_gets_dense_results(index: CorpusIndex) -> None:
    assert index.search("zzzqqq xxyyzz", collection="topics", k=3, mode="bm25") == []
    assert len(index.search("zzzqqq xxyyzz", collection="topics", k=3)) == 3


def test_doc_type_filter_excludes_other_types(index: CorpusIndex) -> None:
    f = SearchFilter(doc_types=["md"])
    results = index.search("volcano lava magma eruption", collection="topics", k=10, filters=f)
    assert results, "md documents exist"
    assert all(r.chunk.doc_type == "md" for r in results)
    assert "volcano" not in {r.chunk.doc_id for r in results}  # volcano is a txt document


def test_filter_is_applied_before_the_top_k_cut(index: CorpusIndex) -> None:
    # The best matches for this query are all txt; asking for md must still fill k.
    f = SearchFilter(doc_types=["md"])
    for mode in ("hybrid", "bm25", "dense"):
        results = index.search("volcano lava magma eruption", collection="topics", k=3,
                               filters=f, mode=mode)  # type: ignore[arg-type]
        if mode == "bm25":
            assert all(r.chunk.doc_type == "md" for r in results)
        else:
            assert len(results) == 3
            assert all(r.chunk.doc_type == "md" for r in results)


def test_date_range_and_tag_filters(index: CorpusIndex) -> None:
    f = SearchFilter(date_from="2024-02-01", date_to="2024-04-30")
    got = {r.chunk.doc_id for r in index.search("the", collection="topics", k=50, filters=f,
                                                 mode="dense")}
    assert got == {"bread", "chess", "tides"}  # months 2..4; the long doc has no date
    f = SearchFilter(tags=["odd"])
    got = {r.chunk.doc_id for r in index.search("the", collection="topics", k=50, filters=f,
                                                 mode="dense")}
    assert got == {"bread", "tides", "violin"}


def test_filter_matching_nothing_returns_nothing(index: CorpusIndex) -> None:
    for f in (SearchFilter(doc_types=["pdf"]), SearchFilter(tags=["missing"]),
              SearchFilter(collections=["other"])):
        assert index.search("bread", collection="topics", k=5, filters=f) == []


def test_malformed_filter_date_is_rejected_when_built() -> None:
    with pytest.raises(ValueError):
        SearchFilter(date_from="last tuesday")


def test_neighbours_walk_prev_and_next(index: CorpusIndex) -> None:
    with index.open("topics") as coll:
        _start, count = coll.document_span("long")
    assert count >= 4
    nxt = index.neighbours("long#1", "next", 2, collection="topics")
    assert [c.id for c in nxt] == ["long#2", "long#3"]
    prev = index.neighbours("long#2", "prev", 5, collection="topics")
    assert [c.id for c in prev] == ["long#0", "long#1"]
    both = index.neighbours("long#2", "both", 1, collection="topics")
    assert [c.id for c in both] == ["long#1", "long#3"]
    last = f"long#{count - 1}"
    assert index.neighbours(last, "next", 3, collection="topics") == []
    chunk = index.chunk(last, collection="topics")
    assert chunk.next_id is None and chunk.prev_id == f"long#{count - 2}"
    # Following next_id from the first chunk visits every chunk of the document in order.
    seen, cid = [], "long#0"
    while cid is not None:
        c = index.chunk(cid, collection="topics")
        seen.append(c.position)
        cid = c.next_id
    assert seen == list(range(count))


def test_adjacent_chunks_overlap_and_cover_the_document(index: CorpusIndex) -> None:
    a = index.chunk("long#0", collection="topics").text
    b = index.chunk("long#1", collection="topics").text
    last_sentence_of_a = a.rstrip().split(". ")[-1]
    assert last_sentence_of_a in b  # ~10% overlap: the boundary sentence is in both


def test_unknown_chunk_ids_are_clear_errors(index: CorpusIndex) -> None:
    with pytest.raises(ChunkNotFound, match="no chunk 'long#999'"):
        index.neighbours("long#999", "next", 1, collection="topics")
    with pytest.raises(ChunkNotFound, match="malformed"):
        index.chunk("no-position", collection="topics")
    with pytest.raises(ChunkNotFound):
        index.chunk("ghost#0", collection="topics")


def test_bad_arguments_are_rejected(index: CorpusIndex) -> None:
    with pytest.raises(ValueError, match="mode"):
        index.search("x", collection="topics", mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="direction"):
        index.neighbours("long#0", "sideways", 1, collection="topics")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="collection name"):
        index.search("x", collection="../escape")


def test_fuse_linear_and_rrf_rank_shared_candidates_first() -> None:
    lex = (np.array([3, 1, 7]), np.array([9.0, 5.0, 1.0], dtype=np.float32))
    den = (np.array([1, 3, 8]), np.array([0.9, 0.8, 0.1], dtype=np.float32))
    for method in ("linear", "minmax", "rrf"):
        ids, scores = fuse(lex, den, method=method)
        assert set(ids[:2].tolist()) == {1, 3}
        assert sorted(ids.tolist()) == [1, 3, 7, 8]
        assert np.all(np.diff(scores) <= 0)
    with pytest.raises(ValueError):
        fuse(lex, den, method="max")  # type: ignore[arg-type]


def test_linear_fusion_uses_the_real_score_of_a_candidate_one_signal_missed() -> None:
    # Row 5 is BM25's second hit; dense scores it just below its own best but it fell
    # outside dense's (short) candidate list. With the real dense score it beats row 1,
    # which BM25 ranked first but dense finds unrelated.
    lex = (np.array([1, 5, 9]), np.array([6.0, 5.5, 1.0], dtype=np.float32))
    den = (np.array([2, 3]), np.array([0.90, 0.85], dtype=np.float32))
    all_dense = {1: 0.05, 2: 0.90, 3: 0.85, 5: 0.88, 9: 0.10}
    all_bm25 = {1: 6.0, 2: 0.0, 3: 0.0, 5: 5.5, 9: 1.0}

    def dense_of(rows: np.ndarray) -> np.ndarray:
        return np.array([all_dense[int(r)] for r in rows], dtype=np.float32)

    def bm25_of(rows: np.ndarray) -> np.ndarray:
        return np.array([all_bm25[int(r)] for r in rows], dtype=np.float32)

    ids, scores = fuse(lex, den, lexical_scores=bm25_of, dense_scores=dense_of)
    assert ids[0] == 5
    assert ids.tolist().index(5) < ids.tolist().index(1)
    assert np.all(np.diff(scores) <= 0)
    # Without the lookups a missed candidate only gets the list's lowest score, and the
    # BM25 order between rows 1 and 5 stands.
    blind = fuse(lex, den)[0].tolist()
    assert blind.index(1) < blind.index(5)


def test_linear_fusion_ignores_a_signal_that_cannot_tell_candidates_apart() -> None:
    # No query term matched (all BM25 scores equal): the dense order decides alone.
    lex = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
    den = (np.array([4, 2, 7]), np.array([0.7, 0.5, 0.2], dtype=np.float32))
    ids, scores = fuse(lex, den, lexical_scores=lambda r: np.zeros(r.size, dtype=np.float32))
    assert ids.tolist() == [4, 2, 7]
    assert np.all((scores > 0) & (scores < 1))


def test_hnsw_collections_search_and_filter_like_exact_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reactive_rag.index import _dense

    docs = [*topic_docs(), long_doc()]
    cfg = ChunkingConfig(target_words=40, overlap_ratio=0.1, max_words=80)
    with CorpusIndex(tmp_path / "exact", CountingEmbedder(), chunking=cfg) as exact, \
            CorpusIndex(tmp_path / "hnsw", CountingEmbedder(), chunking=cfg,
                        exact_threshold=1) as ann:
        assert exact.index_documents("c", docs).dense == "exact"
        assert ann.index_documents("c", docs).dense == "hnsw"
        with ann.open("c") as coll:
            assert coll.dense.hnsw is not None
        for q in ("magma lava eruption", "queen rook checkmate", "item3x4 paragraph"):
            a = [r.chunk.id for r in exact.search(q, collection="c", k=5, mode="dense")
                 if r.score > 1e-6]  # (ties at zero may come in any order)
            b = [r.chunk.id for r in ann.search(q, collection="c", k=5, mode="dense")
                 if r.score > 1e-6]
            assert a == b and a  # a tiny graph is searched exhaustively
        f = SearchFilter(doc_types=["md"])
        monkeypatch.setattr(_dense, "FILTER_EXACT_MAX", 0)  # walk the graph
        res = ann.search("volcano lava", collection="c", k=3, filters=f, mode="dense")
        assert len(res) == 3 and all(r.chunk.doc_type == "md" for r in res)
