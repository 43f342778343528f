"""Reranker, embedder and SimHash benchmark (and the tuning run behind RerankWeights).

    .venv/bin/python bench/rerank.py            # table
    .venv/bin/python bench/rerank.py --json     # ... and one JSON object on the last line
    .venv/bin/python bench/rerank.py --tune     # grid-search the weights on SciFact train

Data: BEIR SciFact from ``../shared/data/scifact`` (or ``$REACTIVE_RAG_DATA`` /
``--data``). Candidates for each query are the BM25 top-N over the full corpus
(bm25s); passage vectors are cached on disk (``--cache``) so a second run only
measures, never re-embeds. Keys: ``rerank20_p50_ms`` (20 candidates whose
passage vectors are cached, as they are when candidates come from the index:
one query embedding + scoring), ``rerank20_cold_p50_ms`` (passages embedded in
the call), ``embed_query_ms``, ``embed_passage_ms`` (per passage, batched),
``simhash_us_per_doc`` (1 KB texts).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from actors.models import CachedEmbedder, HashingEmbedder, MiniLMEmbedder  # noqa: E402
from actors.rerank import Reranker  # noqa: E402
from actors.text import hamming, simhash64  # noqa: E402
from streams import EvidenceChunk  # noqa: E402


class PassagesFromCache:
    """Embeds queries with the model every time, takes passage vectors from the cache."""

    def __init__(self, model: MiniLMEmbedder, cache: CachedEmbedder) -> None:
        self.name, self.dim = model.name, model.dim
        self.embed_queries = model.embed_queries
        self.embed_passages = cache.embed_passages


def data_dir(arg: str | None) -> Path:
    base = Path(arg or os.environ.get("REACTIVE_RAG_DATA") or ROOT.parent / "shared" / "data")
    return base / "scifact" if (base / "scifact").is_dir() else base


def load(path: Path) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, set[str]]]]:
    corpus = {}
    with open(path / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            corpus[str(d["_id"])] = (d.get("title", "") + "\n" + d["text"]).strip()
    queries = {}
    with open(path / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            queries[str(d["_id"])] = d["text"]
    qrels: dict[str, dict[str, set[str]]] = {}
    for split in ("train", "test"):
        p = path / "qrels" / f"{split}.tsv"
        if not p.exists():
            continue
        rel: dict[str, set[str]] = {}
        with open(p, encoding="utf-8") as f:
            next(f)
            for line in f:
                q, d, s = line.rstrip("\n").split("\t")
                if int(s) > 0:
                    rel.setdefault(q, set()).add(d)
        qrels[split] = rel
    return corpus, queries, qrels


class BM25:
    """Plain bm25s over the corpus; top-k with argpartition(-scores) (the fast path)."""

    def __init__(self, corpus: dict[str, str]) -> None:
        import bm25s
        import Stemmer

        self._bm25s = bm25s
        self._stemmer = Stemmer.Stemmer("english")
        self.ids = list(corpus)
        tokens = bm25s.tokenize(list(corpus.values()), stopwords="en", stemmer=self._stemmer,
                                show_progress=False)
        self.model = bm25s.BM25()
        self.model.index(tokens, show_progress=False)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        qt = self._bm25s.tokenize([query], stopwords="en", stemmer=self._stemmer,
                                  return_ids=False, show_progress=False)[0]
        scores = self.model.get_scores(qt)
        top = np.argpartition(-scores, k)[:k]
        top = top[np.argsort(-scores[top])]
        return [(self.ids[i], float(scores[i])) for i in top]


def ndcg10(ranked: Sequence[str], gold: set[str]) -> float:
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    return dcg / ideal if ideal else 0.0


def chunks_for(hits: list[tuple[str, float]], corpus: dict[str, str]) -> list[EvidenceChunk]:
    return [EvidenceChunk(id=d, doc_id=d, text=corpus[d], score=s) for d, s in hits]


def p50_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def naive_simhash(text: str) -> int:
    """Baseline: per-feature, per-bit Python SimHash over the same kind of features."""
    words = text.lower().split()
    feats = words + [a + " " + b for a, b in itertools.pairwise(words)]
    v = [0] * 64
    for f in feats:
        h = int.from_bytes(hashlib.blake2b(f.encode(), digest_size=8).digest(), "little")
        for i in range(64):
            v[i] += 1 if (h >> i) & 1 else -1
    return sum(1 << i for i in range(64) if v[i] > 0)


def bench_simhash(corpus: dict[str, str], rows: list[tuple[str, str, str]]) -> dict[str, float]:
    texts = [t[:1024] for t in corpus.values() if len(t) >= 1024][:3000]
    from actors.text import _simhash

    _simhash._WORD_HASH.clear()
    t = time.perf_counter()
    fps = simhash64(texts)
    cold = (time.perf_counter() - t) / len(texts) * 1e6
    t = time.perf_counter()
    simhash64(texts)
    warm = (time.perf_counter() - t) / len(texts) * 1e6
    t = time.perf_counter()
    for x in texts[:200]:
        naive_simhash(x)
    naive = (time.perf_counter() - t) / 200 * 1e6
    rows.append(("simhash64, 1 KB texts (cold word memo)", f"{cold:.0f} us/doc",
                 f"{naive / cold:.1f}x faster than naive Python"))
    rows.append(("simhash64, 1 KB texts (warm)", f"{warm:.0f} us/doc",
                 f"{naive / warm:.1f}x faster than naive Python ({naive:.0f} us/doc)"))
    # near-duplicate separation
    rng = random.Random(0)
    vocab = [w for x in texts[:300] for w in x.split()]
    caught = {}
    for changes in (1, 3, 5):
        ds = []
        for x in texts[:400]:
            w = x.split()
            for _ in range(changes):
                w[rng.randrange(len(w))] = rng.choice(vocab)
            ds.append(int(hamming(simhash64([x])[0], simhash64([" ".join(w)])[0])))
        arr = np.array(ds)
        caught[changes] = (float((arr <= 3).mean()), float((arr <= 6).mean()))
    half = len(fps) // 2
    dist = hamming(fps[:half, None], fps[None, half : 2 * half])
    for j, (d, who) in enumerate(((3, "NearDuplicateIndex default"), (6, "dedup_chunks default"))):
        rates = " / ".join(f"{caught[c][j]:.0%}" for c in (1, 3, 5))
        rows.append((f"near-dup caught, 1/3/5 words changed per KB, d<={d}", rates, who))
    rows.append((f"distinct abstracts: min distance over {dist.size:,} pairs",
                 str(int(dist.min())), f"pairs <= 6: {int((dist <= 6).sum())}"))
    return {"simhash_us_per_doc": warm, "simhash_cold_us_per_doc": cold}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", help="BEIR folder (default ../shared/data/scifact)")
    ap.add_argument("--json", action="store_true", help="end with one JSON object")
    ap.add_argument("--tune", action="store_true", help="grid-search weights on train queries")
    ap.add_argument("--queries", type=int, default=60, help="test queries for quality")
    ap.add_argument("--candidates", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "rr-bench-vectors.sqlite"))
    args = ap.parse_args()

    corpus, queries, qrels = load(data_dir(args.data))
    rows: list[tuple[str, str, str]] = []
    out: dict[str, float] = {}

    out.update(bench_simhash(corpus, rows))

    model = MiniLMEmbedder(intra_op_threads=args.threads)
    hashing = HashingEmbedder()
    some = list(corpus.values())[:64]
    qtexts = [queries[q] for q in list(qrels["test"])[:20]]
    model.embed_queries(qtexts[:2])
    eq = statistics.median(p50_ms(partial(model.embed_queries, [q]), 1) for q in qtexts)
    hq = statistics.median(p50_ms(partial(hashing.embed_queries, [q]), 1) for q in qtexts)
    rows.append(("embed 1 query (MiniLM int8)", f"{eq:.1f} ms", f"hashing: {hq:.2f} ms"))
    t = time.perf_counter()
    model.embed_passages(some[:32])
    ep = (time.perf_counter() - t) * 1000 / 32
    t = time.perf_counter()
    hashing.embed_passages(some[:32])
    hp = (time.perf_counter() - t) * 1000 / 32
    rows.append(("embed passages, batch 32 (per passage)", f"{ep:.1f} ms",
                 f"hashing: {hp:.2f} ms ({ep / hp:.0f}x)"))
    out["embed_query_ms"] = eq
    out["embed_passage_ms"] = ep

    bm25 = BM25(corpus)
    with CachedEmbedder(model, args.cache) as cached:
        reranker = Reranker(cached)
        test_q = sorted(qrels["test"], key=int)[: args.queries]
        cands = {q: chunks_for(bm25.search(queries[q], args.candidates), corpus) for q in test_q}
        # warm the cache (one-off embedding of every candidate, as indexing would)
        t = time.perf_counter()
        for q in test_q:
            cached.embed_passages([c.text for c in cands[q]])
        warm_s = time.perf_counter() - t

        # The realistic path: passage vectors cached (the index made them), the
        # query new (embedded in the call), as for a user's fresh question.
        live = Reranker(PassagesFromCache(model, cached))
        lat = [p50_ms(partial(live.rerank, queries[q], cands[q], 10), 1) for q in test_q]
        r20 = statistics.median(lat)
        alone = statistics.median(
            p50_ms(partial(model.embed_queries, [queries[q]]), 1) for q in test_q
        )
        rows.append((f"rerank {args.candidates} candidates, passage vectors cached (p50)",
                     f"{r20:.1f} ms", f"query embedding alone: {alone:.1f} ms"))
        out["rerank20_p50_ms"] = r20

        cold_reranker = Reranker(model)
        cold = [p50_ms(partial(cold_reranker.rerank, queries[q], cands[q], 10), 1)
                for q in test_q[:3]]
        cold_ms = out["rerank20_cold_p50_ms"] = statistics.median(cold)
        rows.append((f"rerank {args.candidates} candidates, passages embedded in call (p50 of 3)",
                     f"{cold_ms:.0f} ms", f"{cold_ms / r20:.0f}x the cached path"))

        gold = qrels["test"]
        bm = [ndcg10([c.doc_id for c in cands[q]], gold[q]) for q in test_q]
        rr = [ndcg10([c.doc_id for c in reranker.rerank(queries[q], cands[q], 10).chunks], gold[q])
              for q in test_q]
        dn = []
        for q in test_q:
            qv = cached.embed_queries([queries[q]])[0]
            v = cached.embed_passages([c.text for c in cands[q]]) @ qv
            dn.append(ndcg10([cands[q][i].doc_id for i in np.argsort(-v)], gold[q]))
        rows.append((f"SciFact nDCG@10, {len(test_q)} test queries: BM25 top-{args.candidates}",
                     f"{statistics.mean(bm):.3f}", "baseline"))
        rows.append(("... reranked by dense cosine only", f"{statistics.mean(dn):.3f}",
                     f"{statistics.mean(dn) / statistics.mean(bm):.2f}x BM25"))
        rows.append(("... reranked by Reranker (default weights)", f"{statistics.mean(rr):.3f}",
                     f"{statistics.mean(rr) / statistics.mean(bm):.2f}x BM25"))
        out["ndcg10_bm25_candidates"] = statistics.mean(bm)
        out["ndcg10_reranked"] = statistics.mean(rr)

        # relevance floor: gold kept for SciFact queries vs "nothing relevant" for off-topic ones
        kept_gold = sum(
            any(c.doc_id in gold[q] for c in reranker.rerank(queries[q], cands[q], 10).chunks)
            for q in test_q if any(c.doc_id in gold[q] for c in cands[q])
        )
        with_gold = sum(any(c.doc_id in gold[q] for c in cands[q]) for q in test_q)
        off_topic = load_off_topic(data_dir(args.data), 30)
        empty = 0
        for question in off_topic:
            oc = chunks_for(bm25.search(question, args.candidates), corpus)
            cached.embed_passages([c.text for c in oc])
            empty += reranker.rerank(question, oc, 10).nothing_relevant
        rows.append((f"floor {reranker.floor}: gold kept when retrieved",
                     f"{kept_gold}/{with_gold}",
                     f"off-topic NQ questions -> empty: {empty}/{len(off_topic)}"))
        out["floor_gold_kept"] = kept_gold / max(1, with_gold)
        out["floor_offtopic_empty"] = empty / max(1, len(off_topic))

        if args.tune:
            tune(cached, bm25, corpus, queries, qrels["train"], args.candidates, rows)

    width = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(width)}  {'value':>16}  vs baseline (same run)")
    for name, value, note in rows:
        print(f"{name.ljust(width)}  {value:>16}  {note}")
    n_cands = sum(len(c) for c in cands.values())
    print(f"(one-off embedding of {n_cands} candidates took {warm_s:.1f} s; cache {args.cache})")
    load1, load5, _ = os.getloadavg()
    print(f"(machine load average during the run: {load1:.1f} now, {load5:.1f} over 5 min, "
          f"{os.cpu_count()} CPUs; timings scale with contention)")
    if args.json:
        print(json.dumps({k: round(v, 4) for k, v in out.items()}))


def load_off_topic(path: Path, n: int) -> list[str]:
    nq = path.parent / "NQ-open.dev.jsonl"
    if not nq.exists():
        return []
    with open(nq, encoding="utf-8") as f:
        return [json.loads(line)["question"] for line in itertools.islice(f, n)]


def tune(
    cached: CachedEmbedder,
    bm25: BM25,
    corpus: dict[str, str],
    queries: dict[str, str],
    gold: dict[str, set[str]],
    n: int,
    rows: list[tuple[str, str, str]],
) -> None:
    """Grid-search RerankWeights on SciFact *train* queries (never the test split)."""
    train = sorted(gold, key=int)[:150]
    cands = {q: chunks_for(bm25.search(queries[q], n), corpus) for q in train}
    vecs = {q: cached.embed_passages([c.text for c in cands[q]]) for q in train}
    base = Reranker(cached, floor=-1.0, diversity="none")
    signals = []
    for q in train:
        res = base.rerank(queries[q], cands[q], n, passage_vectors=vecs[q])
        sc = res.all_scored
        signals.append((
            np.array([s.dense for s in sc]),
            np.array([s.coverage for s in sc]),
            np.array([s.fusion_rank for s in sc], dtype=float),
            [s.chunk.doc_id for s in sc],
            gold[q],
        ))
    results = []
    for wd, wc, wp in itertools.product((0.6, 0.7, 0.75, 0.8, 0.9, 1.0),
                                        (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4),
                                        (0.0, 0.05, 0.1, 0.15, 0.2, 0.3)):
        total = 0.0
        for dense, cov, rank, ids, g in signals:
            order = np.argsort(-(wd * dense + wc * cov + wp / np.sqrt(1.0 + rank)), kind="stable")
            total += ndcg10([ids[i] for i in order], g)
        results.append((total / len(signals), wd, wc, wp))
    results.sort(reverse=True)
    for score, wd, wc, wp in results[:5]:
        rows.append((f"tune (train, {len(train)} q): dense={wd} cov={wc} prior={wp}",
                     f"{score:.3f}", "nDCG@10"))
    bm = statistics.mean(ndcg10([c.doc_id for c in cands[q]], gold[q]) for q in train)
    rows.append(("tune: BM25 order on the same train queries", f"{bm:.3f}", "nDCG@10"))


if __name__ == "__main__":
    main()
