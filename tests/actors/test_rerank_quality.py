"""Quality sanity on real data: MiniLM + Reranker put SciFact's gold abstract above random ones."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from actors.models import CachedEmbedder, MiniLMEmbedder
from actors.rerank import Reranker
from streams import EvidenceChunk

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("REACTIVE_RAG_DATA") or ROOT.parent / "shared" / "data") / "scifact"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (DATA / "corpus.jsonl").exists(), reason=f"no SciFact data at {DATA}"),
]


def _load() -> tuple[dict[str, str], list[tuple[str, str]]]:
    corpus = {}
    with open(DATA / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            # the first ~300 characters keep the test fast; titles carry most of the topic
            corpus[str(d["_id"])] = (d["title"] + "\n" + d["text"])[:300]
    queries = {}
    with open(DATA / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            queries[str(d["_id"])] = d["text"]
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    with open(DATA / "qrels" / "test.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            q, doc, _ = line.split("\t")
            if q not in seen and doc in corpus:
                seen.add(q)
                pairs.append((queries[q], doc))
    return corpus, pairs[:20]


def test_gold_abstract_outranks_random_ones_and_the_floor_rejects_off_topic(
    tmp_path: Path,
) -> None:
    corpus, pairs = _load()
    with CachedEmbedder(MiniLMEmbedder(), tmp_path / "vectors.sqlite") as embedder:
        ranker = Reranker(embedder, floor=0.0)  # ranking only
        reranker = Reranker(embedder)  # default weights and floor
        rng = random.Random(7)
        ids = sorted(corpus)
        first = kept = 0
        sets = []
        for query, gold in pairs:
            others = [d for d in rng.sample(ids, 4) if d != gold][:3]
            # gold given the worst fusion rank, so the reranker has to lift it
            cands = [EvidenceChunk(id=d, doc_id=d, text=corpus[d]) for d in [*others, gold]]
            sets.append(cands)
            first += ranker.rerank(query, cands, 4).chunks[0].id == gold
            # the default floor keeps the gold abstract (even cut to 300 characters)
            kept += gold in {c.id for c in reranker.rerank(query, cands, 4).chunks}
        assert len(pairs) == 20
        assert first >= 18, f"gold ranked first for only {first}/20 queries"
        assert kept >= 18, f"the floor dropped the gold abstract for {20 - kept}/20 queries"

        # Questions no SciFact abstract answers: the floor turns them into "nothing relevant"
        # (passage vectors are cached now, so this costs three query embeddings).
        off_topic = ["who won the football world cup in 1998",
                     "lyrics of the national anthem of canada",
                     "how many strings does a violin have"]
        empty = sum(
            reranker.rerank(q, cands, 4).nothing_relevant for q in off_topic for cands in sets
        )
        assert empty >= 0.8 * len(off_topic) * len(sets), f"{empty}/{len(off_topic) * len(sets)}"
