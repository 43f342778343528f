"""BEIR retrieval quality of the corpus index: BM25, dense, hybrid, hybrid+rerank.

Usage::

    .venv/bin/python bench/beir.py                 # SciFact test, full corpus (5,183 docs)
    .venv/bin/python bench/beir.py --tune          # also compare fusions on *train* queries
    .venv/bin/python bench/beir.py --split train   # report the train queries instead
    .venv/bin/python bench/beir.py --json          # last line: one JSON object
    .venv/bin/python bench/beir.py --data PATH     # another BEIR dataset (corpus.jsonl, ...)

Each abstract is one document (chunked only when longer than 400 words; a document
scores by its best chunk). Passage and query vectors are cached on disk
(``$REACTIVE_RAG_HOME/bench`` or ``~/.cache/reactive_rag/bench``) so reruns only pay
for search. Metrics follow BEIR/pytrec_eval: nDCG@10 (linear gain) and Recall@100.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from reactive_rag.index import (  # noqa: E402
    DEFAULT_ALPHA,
    DEFAULT_FUSION,
    ChunkingConfig,
    Collection,
    CorpusIndex,
    Document,
    search_text,
)

BM25_ANCHOR = 0.665  # BEIR paper, SciFact nDCG@10
#: The hybrid defaults before issue 26, measured beside the new ones in every run.
OLD_DEFAULTS: dict[str, Any] = {"fusion": "minmax", "alpha": 0.4}


# --------------------------------------------------------------------------- data
def data_root(arg: str | None) -> Path:
    """``--data``, else ``$REACTIVE_RAG_DATA``, else ``../shared/data`` beside the repo."""
    base = Path(arg or os.environ.get("REACTIVE_RAG_DATA") or REPO.parent / "shared" / "data")
    return base


def dataset_dir(arg: str | None, name: str = "scifact") -> Path:
    """A BEIR folder: the given path itself if it holds corpus.jsonl, else PATH/NAME."""
    base = data_root(arg)
    if (base / "corpus.jsonl").is_file():
        return base
    if (base / name / "corpus.jsonl").is_file():
        return base / name
    raise SystemExit(f"no BEIR dataset (corpus.jsonl) at {base} or {base / name}")


def load_beir(path: Path, split: str) -> tuple[list[dict[str, str]], dict[str, str],
                                                 dict[str, dict[str, int]]]:
    """``(corpus rows, queries by id, qrels {qid: {docid: rel}})`` of one split."""
    with open(path / "corpus.jsonl", encoding="utf-8") as fh:
        corpus = [json.loads(line) for line in fh]
    with open(path / "queries.jsonl", encoding="utf-8") as fh:
        queries = {q["_id"]: q["text"] for q in map(json.loads, fh)}
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with open(path / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
        for line in fh:
            parts = line.strip().split("\t")
            if len(parts) < 3 or not parts[2].lstrip("-").isdigit():
                continue  # header
            qrels[parts[0]][parts[1]] = int(parts[2])
    return corpus, queries, dict(qrels)


# --------------------------------------------------------------------------- vectors
def cache_dir() -> Path:
    home = os.environ.get("REACTIVE_RAG_HOME")
    base = Path(home) if home else Path.home() / ".cache" / "reactive_rag"
    d = base / "bench"
    d.mkdir(parents=True, exist_ok=True)
    return d


class VectorCache:
    """An embedder wrapper with a flat ``.npz`` cache keyed by sha256(text).

    Benchmarks embed thousands of passages once; a single npz loads in
    milliseconds. Misses are embedded by ``inner`` and written back on ``save()``.
    """

    def __init__(self, inner: Any, path: Path) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.dim: int = inner.dim
        self.path = path
        self.misses = 0
        self._new: dict[str, npt.NDArray[np.float32]] = {}
        self._keys: dict[str, int] = {}
        self._vecs = np.zeros((0, self.dim), dtype=np.float32)
        for p in sorted(path.parent.glob(path.stem + "*.npz")):
            with np.load(p) as z:
                base = self._vecs.shape[0]
                keys = [k.decode() for k in z["keys"]]
                self._vecs = np.concatenate([self._vecs, z["vecs"].astype(np.float32)])
                for i, k in enumerate(keys):
                    self._keys.setdefault(k, base + i)

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    def _embed(self, texts: Sequence[str], queries: bool) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        todo: list[int] = []
        for i, t in enumerate(texts):
            k = self.key(t)
            if k in self._keys:
                out[i] = self._vecs[self._keys[k]]
            elif k in self._new:
                out[i] = self._new[k]
            else:
                todo.append(i)
        if todo:
            self.misses += len(todo)
            batch = [texts[i] for i in todo]
            fn = self.inner.embed_queries if queries else self.inner.embed_passages
            vecs = np.asarray(fn(batch), dtype=np.float32)
            for i, v in zip(todo, vecs, strict=True):
                out[i] = v
                self._new[self.key(texts[i])] = v
        return out

    def embed_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._embed(texts, True)

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._embed(texts, False)

    def save(self) -> None:
        if not self._new:
            return
        keys = np.array(list(self._new), dtype="S64")
        vecs = np.stack(list(self._new.values())).astype(np.float32)
        target = self.path.parent / f"{self.path.stem}-{int(time.time())}.npz"
        np.savez(target, keys=keys, vecs=vecs)
        self._new.clear()


def make_embedder(kind: str) -> VectorCache:
    if kind == "hashing":
        from actors.models import HashingEmbedder

        inner: Any = HashingEmbedder(384)
    else:
        from actors.models import MiniLMEmbedder

        inner = MiniLMEmbedder()
    return VectorCache(inner, cache_dir() / f"vectors-{inner.name}.npz")


# --------------------------------------------------------------------------- metrics
def ndcg_at(ranked: Sequence[str], rels: dict[str, int], k: int = 10) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((r for r in rels.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: Sequence[str], rels: dict[str, int], k: int = 100) -> float:
    relevant = {d for d, r in rels.items() if r > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def doc_ranking(coll: Collection, rows: npt.NDArray[np.int64], k: int) -> list[str]:
    """Chunk rows best first -> document ids best first (a document ranks by its best chunk)."""
    out: list[str] = []
    seen: set[str] = set()
    doc_of = coll._chunk_doc
    docs = coll._docs
    for r in rows:
        d = docs[int(doc_of[int(r)])]["id"]
        if d not in seen:
            seen.add(d)
            out.append(d)
            if len(out) == k:
                break
    return out


# --------------------------------------------------------------------------- runs
def build(corpus: list[dict[str, str]], embedder: VectorCache, root: Path) -> tuple[
        CorpusIndex, float]:
    idx = CorpusIndex(root, embedder, chunking=ChunkingConfig(target_words=400, max_words=500))
    docs = [Document(id=d["_id"], text=d.get("text", ""), title=d.get("title", ""))
            for d in corpus]
    t0 = time.perf_counter()
    last = [0.0]

    def progress(done: int, total: int, stage: str) -> None:
        now = time.perf_counter()
        if stage == "embed" and (now - last[0] > 10 or done == total):
            last[0] = now
            print(f"  embedding {done}/{total} chunks", file=sys.stderr, flush=True)

    idx.index_documents("beir", docs, progress=progress)
    embedder.save()
    return idx, time.perf_counter() - t0


def evaluate(
    coll: Collection,
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    qvecs: dict[str, npt.NDArray[np.float32]],
    *,
    configs: dict[str, dict[str, Any]],
    reranker: Any | None = None,
    rerank_top: int = 50,
) -> dict[str, dict[str, float]]:
    """nDCG@10 and Recall@100 for each named search configuration (plus "rerank")."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    qids = [q for q in qrels if q in queries]
    for qid in qids:
        q = queries[qid]
        rels = qrels[qid]
        fused_rows = None
        for name, cfg in configs.items():
            rows, _, _, _ = coll.search_rows(q, 300, query_vector=qvecs[qid], candidates=300,
                                             **cfg)
            ranked = doc_ranking(coll, rows, 100)
            sums[name][0] += ndcg_at(ranked, rels)
            sums[name][1] += recall_at(ranked, rels)
            if name == "hybrid":
                fused_rows = rows
        if reranker is not None and fused_rows is not None:
            top_rows = list(dict.fromkeys(int(r) for r in fused_rows))[:rerank_top]
            cands = [coll.chunk_at(r).to_evidence(float(len(top_rows) - i))
                     for i, r in enumerate(top_rows)]
            res = reranker.rerank(q, cands, k=len(cands),
                                  passage_vectors=coll.dense.vectors[np.asarray(top_rows)])
            order = [s.chunk.doc_id for s in sorted(res.all_scored or res.scored,
                                                     key=lambda s: -s.score)]
            tail = doc_ranking(coll, fused_rows, 100)
            ranked = list(dict.fromkeys(order + tail))
            sums["rerank"][0] += ndcg_at(ranked, rels)
            sums["rerank"][1] += recall_at(ranked, rels)
    n = max(len(qids), 1)
    return {k: {"ndcg10": v[0] / n, "recall100": v[1] / n} for k, v in sums.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="BEIR folder or data root (default: ../shared/data)")
    ap.add_argument("--dataset", default="scifact")
    ap.add_argument("--split", choices=("train", "test"), default="test",
                    help="queries to report on (tune on train, report test once)")
    ap.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    ap.add_argument("--tune", action="store_true",
                    help="compare fusions (RRF, linear alphas) on the train split first")
    ap.add_argument("--rerank-top", type=int, default=50)
    ap.add_argument("--max-queries", type=int, default=0, help="limit queries (0: all)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    path = dataset_dir(args.data, args.dataset)
    corpus, queries, qrels = load_beir(path, args.split)
    if args.max_queries:
        qrels = dict(list(qrels.items())[: args.max_queries])
    embedder = make_embedder(args.embedder)
    print(f"{path.name}: {len(corpus)} docs, {len(qrels)} {args.split} queries, "
          f"embedder {embedder.name}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="beir-index-") as tmp:
        idx, build_s = build(corpus, embedder, Path(tmp))
        print(f"  index built in {build_s:.1f}s ({embedder.misses} passages embedded, "
              "the rest from the vector cache)", file=sys.stderr)
        with idx.open("beir") as coll:
            tuned: dict[str, dict[str, float]] = {}
            if args.tune and (path / "qrels" / "train.tsv").is_file():
                _, _, train = load_beir(path, "train")
                tq = {q: queries[q] for q in train if q in queries}
                tv = dict(zip(tq, embedder.embed_queries(list(tq.values())), strict=True))
                configs: dict[str, dict[str, Any]] = {
                    "rrf": {"fusion": "rrf"},
                    "minmax a=0.4": {"fusion": "minmax", "alpha": 0.4}}
                for a in (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7):
                    configs[f"linear a={a}"] = {"fusion": "linear", "alpha": a}
                tuned = evaluate(coll, tq, train, tv, configs=configs)
                print(f"\nfusion on the TRAIN split ({len(train)} queries), nDCG@10 "
                      "(minmax a=0.4 was the default before issue 26):")
                for name, m in tuned.items():
                    print(f"  {name:<14} {m['ndcg10']:.4f}")
            qv = dict(zip(list(qrels), embedder.embed_queries([queries[q] for q in qrels]),
                          strict=True))
            embedder.save()
            reranker = None
            rerank_label = "hybrid+rerank"
            try:
                from actors.rerank import Reranker

                reranker = Reranker(embedder, floor=-1.0, diversity="none",
                                    passage_text=lambda c: search_text(c.title, c.text))
                rerank_label = f"hybrid+rerank (actors.rerank, top {args.rerank_top})"
            except ImportError:
                rerank_label = "hybrid+rerank (unavailable)"
            t0 = time.perf_counter()
            res = evaluate(coll, queries, qrels, qv, configs={
                "bm25": {"mode": "bm25"}, "dense": {"mode": "dense"},
                "hybrid": {"mode": "hybrid"},
                "hybrid_old": {"mode": "hybrid", **OLD_DEFAULTS},
                "hybrid_rrf": {"mode": "hybrid", "fusion": "rrf"},
            }, reranker=reranker, rerank_top=args.rerank_top)
            eval_s = time.perf_counter() - t0
        idx.close()
    base = res["bm25"]["ndcg10"]
    labels = {"bm25": "BM25 (bm25s, stemmed)", "dense": f"dense ({embedder.name})",
              "hybrid": f"hybrid (default: {DEFAULT_FUSION}, alpha {DEFAULT_ALPHA})",
              "hybrid_old": "hybrid (before issue 26: minmax, alpha 0.4)",
              "hybrid_rrf": "hybrid (RRF k=60)",
              "rerank": rerank_label}
    print(f"\n{path.name} {args.split}: {len(qrels)} queries, {len(corpus)} documents "
          f"(eval {eval_s:.1f}s)")
    print(f"{'method':<44} {'nDCG@10':>8} {'vs BM25':>8} {'R@100':>7}")
    for key, label in labels.items():
        if key in res:
            m = res[key]
            print(f"{label:<44} {m['ndcg10']:8.4f} {m['ndcg10'] / base:7.2f}x "
                  f"{m['recall100']:7.4f}")
    print(f"anchor: BM25 nDCG@10 = {BM25_ANCHOR} in the BEIR paper "
          f"(ours {base / BM25_ANCHOR:.2f}x of it); target hybrid+rerank >= 0.72")
    if args.json:
        out = {
            "dataset": path.name, "split": args.split, "queries": len(qrels),
            "ndcg10_bm25": res["bm25"]["ndcg10"], "ndcg10_dense": res["dense"]["ndcg10"],
            "ndcg10_hybrid": res["hybrid"]["ndcg10"],
            "ndcg10_hybrid_old_defaults": res["hybrid_old"]["ndcg10"],
            "hybrid_vs_old_defaults": res["hybrid"]["ndcg10"] / res["hybrid_old"]["ndcg10"],
            "ndcg10_hybrid_rrf": res["hybrid_rrf"]["ndcg10"],
            "ndcg10_rerank": res.get("rerank", {}).get("ndcg10"),
            "recall100_bm25": res["bm25"]["recall100"],
            "recall100_dense": res["dense"]["recall100"],
            "recall100_hybrid": res["hybrid"]["recall100"],
            "tuning_train_ndcg10": {k: v["ndcg10"] for k, v in tuned.items()},
        }
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
