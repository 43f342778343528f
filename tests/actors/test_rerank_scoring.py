"""Reranker: relevance beats fusion order, the floor empties, diversity caps sources, ordering."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from actors.models import FloatMatrix, HashingEmbedder
from actors.rerank import (
    CrossEncoderError,
    Reranker,
    RerankWeights,
    diversity_key,
    edges_order,
)
from streams import EvidenceChunk

FLOOR = 0.15  # HashingEmbedder's scale (MiniLM's default floor is 0.25)


class CountingHashing(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.passage_calls = 0

    def embed_passages(self, texts: Sequence[str]) -> FloatMatrix:
        self.passage_calls += 1
        return super().embed_passages(texts)


def chunk(cid: str, text: str, *, doc: str = "", url: str = "", score: float | None = None,
          source: str = "") -> EvidenceChunk:
    return EvidenceChunk(id=cid, text=text, doc_id=doc, url=url, score=score, source=source)


RELEVANT = "Aspirin lowers fever by blocking prostaglandin synthesis in the hypothalamus."
ALSO = "Fever reduction with aspirin works through prostaglandin inhibition."
NOISE = [
    "The Treaty of Westphalia ended the Thirty Years War in 1648.",
    "Basalt is a fine-grained volcanic rock rich in magnesium and iron.",
    "The violin has four strings tuned in perfect fifths.",
    "Photosynthesis converts light energy into chemical energy in plants.",
]


def test_relevant_passage_rises_above_fusion_order() -> None:
    cands = [chunk(f"n{i}", t, doc=f"n{i}", score=10.0 - i) for i, t in enumerate(NOISE)]
    cands.append(chunk("gold", RELEVANT, doc="gold", score=1.0))
    reranker = Reranker(HashingEmbedder(), floor=FLOOR)
    result = reranker.rerank("how does aspirin lower fever", cands, 3)
    assert result.chunks[0].id == "gold"
    assert result.considered == 5
    best = result.scored[0]
    assert best.coverage == 1.0 and best.fusion_rank == 4 and best.dense > 0.2
    assert result.chunks[0].score == pytest.approx(best.score)  # score replaced by rerank score


def test_below_floor_gives_nothing_relevant() -> None:
    cands = [chunk(f"n{i}", t, score=float(i)) for i, t in enumerate(NOISE)]
    reranker = Reranker(HashingEmbedder(), floor=FLOOR)
    result = reranker.rerank("aspirin dosage for children", cands, 3)
    assert result.chunks == () and result.below_floor == 4 and result.nothing_relevant
    assert result.context == ()


def test_no_candidates_is_empty_but_not_a_floor_verdict() -> None:
    result = Reranker(HashingEmbedder()).rerank("anything", [], 5)
    assert result.chunks == () and result.considered == 0 and not result.nothing_relevant


def test_floor_drops_only_the_irrelevant() -> None:
    cands = [chunk("a", RELEVANT, doc="a"), chunk("b", NOISE[0], doc="b"),
             chunk("c", ALSO, doc="c")]
    reranker = Reranker(HashingEmbedder(), floor=FLOOR)
    result = reranker.rerank("aspirin fever prostaglandin", cands, 5)
    assert {c.id for c in result.chunks} == {"a", "c"} and result.below_floor == 1


def _many_from_one_doc() -> list[EvidenceChunk]:
    same = [chunk(f"a{i}", f"{RELEVANT} Detail number {i}.", doc="docA", score=100.0 - i)
            for i in range(6)]
    other = [chunk("b0", ALSO, doc="docB", score=1.0),
             chunk("c0", ALSO + " Dosage matters.", url="https://c.example/x?utm_source=t",
                   score=0.5)]
    return same + other


def test_round_robin_lets_other_sources_in() -> None:
    r = Reranker(HashingEmbedder(), floor=FLOOR)
    result = r.rerank("aspirin fever prostaglandin", _many_from_one_doc(), 4)
    docs = [diversity_key(c) for c in result.chunks]
    assert "doc:docB" in docs and "url:https://c.example/x" in docs
    assert docs.count("doc:docA") == 2


def test_max_per_source_caps_every_strategy() -> None:
    for diversity in ("round_robin", "mmr", "none"):
        r = Reranker(HashingEmbedder(), floor=FLOOR, diversity=diversity, max_per_source=1)
        result = r.rerank("aspirin fever prostaglandin", _many_from_one_doc(), 5)
        keys = [diversity_key(c) for c in result.chunks]
        assert len(keys) == len(set(keys)) == 3, diversity


def test_without_diversity_one_document_fills_the_context() -> None:
    r = Reranker(HashingEmbedder(), floor=FLOOR, diversity="none")
    result = r.rerank("aspirin fever prostaglandin detail", _many_from_one_doc(), 4)
    assert all(c.doc_id == "docA" for c in result.chunks)


def test_mmr_skips_near_copies() -> None:
    cands = [chunk("x1", RELEVANT, score=3.0), chunk("x2", RELEVANT + " ", score=2.0),
             chunk("y", "Aspirin is sold as tablets of various strengths in pharmacies.",
                   score=1.0)]
    plain = Reranker(HashingEmbedder(), floor=FLOOR, diversity="none", key=lambda c: c.id)
    mmr = Reranker(HashingEmbedder(), floor=FLOOR, diversity="mmr", mmr_lambda=0.5,
                   key=lambda c: c.id)
    q = "aspirin fever"
    assert [c.id for c in plain.rerank(q, cands, 2).chunks] == ["x1", "x2"]
    assert sorted(c.id for c in mmr.rerank(q, cands, 2).chunks) == ["x1", "y"]


def test_edges_order_puts_best_first_and_last() -> None:
    assert edges_order([1, 2, 3, 4, 5, 6]) == [1, 3, 5, 6, 4, 2]
    assert edges_order([1, 2, 3]) == [1, 3, 2]
    assert edges_order([]) == []
    cands = [chunk(f"c{i}", f"{RELEVANT} {i}", doc=f"d{i}") for i in range(4)]
    result = Reranker(HashingEmbedder(), floor=FLOOR).rerank("aspirin fever", cands, 4)
    ranked = [c.id for c in result.chunks]
    assert [c.id for c in result.context] == [ranked[0], ranked[2], ranked[3], ranked[1]]
    scores = [c.score or 0.0 for c in result.chunks]
    assert scores == sorted(scores, reverse=True)


def test_cached_passage_vectors_skip_passage_embedding() -> None:
    emb = CountingHashing()
    cands = [chunk("a", RELEVANT), chunk("b", NOISE[0])]
    vecs = HashingEmbedder().embed_passages([c.text for c in cands])
    result = Reranker(emb, floor=FLOOR).rerank("aspirin", cands, 2, passage_vectors=vecs)
    assert emb.passage_calls == 0 and result.chunks[0].id == "a"
    with pytest.raises(ValueError, match="shape"):
        Reranker(emb).rerank("aspirin", cands, 2, passage_vectors=vecs[:1])


class FixedCross:
    name = "fixed"

    def __init__(self, scores: list[float]) -> None:
        self.scores = scores

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        return np.array(self.scores[: len(passages)])


def test_cross_encoder_can_overrule_embeddings() -> None:
    cands = [chunk("a", RELEVANT, doc="a"), chunk("c", ALSO, doc="c")]
    base = Reranker(HashingEmbedder(), floor=0.0).rerank("aspirin fever prostaglandin", cands, 2)
    top = base.chunks[0].id
    other = "c" if top == "a" else "a"
    logits = [-8.0, 8.0] if top == "a" else [8.0, -8.0]  # logits: a sigmoid is applied
    r = Reranker(HashingEmbedder(), floor=0.0, cross_encoder=FixedCross(logits),
                 weights=RerankWeights(cross=0.9))
    result = r.rerank("aspirin fever prostaglandin", cands, 2)
    assert result.chunks[0].id == other
    assert result.scored[0].cross == pytest.approx(1 / (1 + np.exp(-8.0)))


def test_broken_cross_encoder_is_a_clear_error() -> None:
    cands = [chunk("a", RELEVANT), chunk("b", ALSO)]
    r = Reranker(HashingEmbedder(), cross_encoder=FixedCross([0.5]))
    with pytest.raises(CrossEncoderError, match=r"returned 1 scores .* for 2 passages"):
        r.rerank("q", cands, 2)

    class Raising:
        name = "down"

        def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
            raise ConnectionError("model server unreachable")

    with pytest.raises(CrossEncoderError, match="unreachable"):
        Reranker(HashingEmbedder(), cross_encoder=Raising()).rerank("q", cands, 2)


def test_fusion_rank_from_scores_else_input_order() -> None:
    texts = [RELEVANT, RELEVANT + " again", RELEVANT + " once more"]
    by_score = [chunk(f"c{i}", t, doc=f"d{i}", score=s) for i, (t, s) in
                enumerate(zip(texts, [1.0, 3.0, 2.0], strict=True))]
    r = Reranker(HashingEmbedder(), floor=0.0)
    ranks = {s.chunk.id: s.fusion_rank for s in r.rerank("aspirin", by_score, 3).scored}
    assert ranks == {"c1": 0, "c2": 1, "c0": 2}
    unscored = [c.model_copy(update={"score": None}) for c in by_score]
    ranks = {s.chunk.id: s.fusion_rank for s in r.rerank("aspirin", unscored, 3).scored}
    assert ranks == {"c0": 0, "c1": 1, "c2": 2}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        Reranker(HashingEmbedder()).rerank("q", [chunk("a", "x")], 0)
    with pytest.raises(ValueError):
        Reranker(HashingEmbedder(), diversity="random")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Reranker(HashingEmbedder(), max_per_source=0)
