"""The real offline embedder (MiniLM int8) through the index: meaning, not just words."""

from __future__ import annotations

from pathlib import Path

import pytest

from reactive_rag.index import CorpusIndex, stdlib_documents


@pytest.mark.slow
def test_minilm_dense_search_finds_modules_by_meaning(tmp_path: Path) -> None:
    models = pytest.importorskip("actors.models")
    emb = models.CachedEmbedder(models.MiniLMEmbedder(), tmp_path / "cache.sqlite")
    with CorpusIndex(tmp_path, emb) as idx:
        idx.index_documents("stdlib", stdlib_documents(["argparse", "sqlite3", "heapq"]))
        calls = emb.model_calls
        for query, gold in [
            ("store rows in an embedded SQL database file", "sqlite3"),
            ("always pop the smallest item first, like a priority queue", "heapq"),
            ("read options given on the command line", "argparse"),
        ]:
            # The module's overview or one of its members ("heapq" or "heapq.heappop").
            top = idx.search(query, collection="stdlib", k=1, mode="dense")[0]
            assert top.chunk.doc_id.split(".")[0] == gold, (query, top.chunk.id)
            hybrid = idx.search(query, collection="stdlib", k=1)[0].chunk.doc_id
            assert hybrid.split(".")[0] == gold, (query, hybrid)
        # A second build of the same corpus embeds nothing (reuse + cache).
        misses = emb.misses
        report = idx.index_documents("stdlib", stdlib_documents(["argparse", "sqlite3", "heapq"]))
        assert report.embedded_chunks == 0 and emb.misses == misses
        assert emb.model_calls >= calls
    emb.close()
