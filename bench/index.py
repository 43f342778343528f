"""Corpus-index performance: a measured real-text build, and query latency at 100k chunks.

Usage::

    .venv/bin/python bench/index.py --json        # 10k-chunk real build + 100k latency
    .venv/bin/python bench/index.py --chunks 1000 --skip-latency   # quicker build only
    .venv/bin/python bench/index.py --profile-embed 300 --skip-latency --chunks 0
    .venv/bin/python bench/index.py --data PATH

1. Build (measured, nothing extrapolated): ``--chunks N`` (default 10,000) chunks
   of real text, embedded by MiniLM int8 with no vector cache, end to end through
   ``CorpusIndex.index_documents`` in a child process of its own (so its peak RSS
   is that build's; the model load is included). The text is the SciFact abstracts
   (5,183 documents = 7,180 chunks at the index's default chunk size), then
   HotpotQA paragraphs (``hotpotqa_dev_300.jsonl``) until N chunks. Then a
   re-index, in a second child, after every 20th document (5%) has its text
   edited (``bench/_index_build.py``): only the changed documents are re-embedded.
2. ``--profile-embed K``: MiniLM throughput on K of those chunks under different
   batch sizes, padding, ordering and onnxruntime settings (``bench/_embed_profile.py``).
3. Latency, disk and memory at ``--latency-chunks`` (default 100,000) chunks,
   synthesised from real SciFact abstracts by repetition with perturbation (words
   dropped and shuffled locally, a unique marker added). Embedding 100k passages
   here would take over an hour, so these synthetic chunks get the MiniLM vector
   of their source abstract plus Gaussian noise (cosine ~0.9 to the source); the
   output says so. Queries are the SciFact test queries.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _index_build import chunk_texts, real_documents, run_child  # noqa: E402
from beir import data_root, dataset_dir, load_beir, make_embedder  # noqa: E402

from actors.text import chunk_text  # noqa: E402
from reactive_rag.index import (  # noqa: E402
    CorpusIndex,
    Document,
    search_text,
)
from reactive_rag.index._bm25 import top_k  # noqa: E402
from reactive_rag.index._builder import document_text  # noqa: E402

_WORDS = 200


class DictEmbedder:
    """Serves precomputed vectors for known texts (the synthetic passages)."""

    def __init__(self, table: dict[str, npt.NDArray[np.float32]], name: str, dim: int) -> None:
        self.table = table
        self.name = name
        self.dim = dim

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.stack([self.table[t] for t in texts]).astype(np.float32)

    def embed_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        raise RuntimeError("queries are embedded by the real model in this benchmark")


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000, p))


def synthesise(corpus: list[dict[str, str]], base_vecs: npt.NDArray[np.float32], n: int,
               seed: int = 7) -> tuple[list[Document], dict[str, npt.NDArray[np.float32]]]:
    """``n`` single-chunk documents perturbed from the corpus, and their vectors."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    dim = base_vecs.shape[1]
    sigma = float(np.sqrt((1 / 0.81 - 1) / dim))  # expected cosine to the source ~0.9
    docs: list[Document] = []
    table: dict[str, npt.NDArray[np.float32]] = {}
    for i in range(n):
        j = i % len(corpus)
        src = corpus[j]
        words = (src.get("text") or src.get("title", "")).split()[:_WORDS]
        if i >= len(corpus):  # copies: drop ~10% of words, swap a few neighbours
            words = [w for w in words if rng.random() > 0.1] or words[:1]
            for _ in range(max(1, len(words) // 20)):
                a = rng.randrange(len(words))
                b = min(len(words) - 1, a + 1)
                words[a], words[b] = words[b], words[a]
        text = " ".join(words) + f" [copy {i}]"
        title = src.get("title", "")
        doc = Document(id=f"s{i}", text=text, title=title, doc_type=("a", "b", "c")[i % 3],
                       date=f"20{10 + i % 15:02d}-01-01", tags=(f"t{i % 10}",))
        docs.append(doc)
        v = base_vecs[j] + (nrng.normal(0, sigma, dim) if i >= len(corpus) else 0)
        # Key by what the builder embeds: its chunks of the markup-cleaned text (an
        # abstract holding "[M + K](+)" is changed by clean_markup, so the raw text
        # would not be found).
        for piece in [c.text for c in chunk_text(document_text(doc))] or [text]:
            table[search_text(title, piece)] = (v / np.linalg.norm(v)).astype(np.float32)
    return docs, table


def measure_rss(root: Path, queries: list[str], qvecs: npt.NDArray[np.float32],
                name: str) -> dict[str, float]:
    """Open the index in a fresh process, run queries, report resident memory growth."""
    payload = json.dumps({"root": str(root), "queries": queries[:200], "name": name})
    np.save(root / "_qvecs.npy", qvecs[:200])
    out = subprocess.run(
        [sys.executable, __file__, "--_rss", payload], capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _rss_child(payload: str) -> None:
    cfg = json.loads(payload)
    root = Path(cfg["root"])
    qvecs = np.load(root / "_qvecs.npy")
    before = rss_mb()
    idx = CorpusIndex(root, DictEmbedder({}, cfg["name"], qvecs.shape[1]))
    coll = idx.open("bench")
    opened = rss_mb()
    for q, v in zip(cfg["queries"], qvecs, strict=True):
        coll.search_rows(q, 10, query_vector=v)
    searched = rss_mb()
    coll.close()
    idx.close()
    print(json.dumps({"before": before, "opened": opened, "searched": searched}))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def measured_build(root_dir: Path, scifact: Path, chunks: int, embedder: str
                   ) -> dict[str, object]:
    """Build ``chunks`` chunks of real text, then re-index after 5% of documents change;
    each in a child process of its own. Returns the JSON fields."""
    with tempfile.TemporaryDirectory(prefix="index-build-") as tmp:
        cfg = {"data_root": str(root_dir), "scifact": str(scifact), "chunks": chunks,
               "root": str(Path(tmp) / "index"), "embedder": embedder,
               "log": str(Path(tmp) / "progress.log")}
        log(f"measured build: {chunks} chunks of real text ({embedder}, no vector cache)")
        b = run_child("build", cfg, Path(tmp) / "cfg.json")
        log(f"  built {b['chunks']} chunks in {b['seconds']:.1f}s")
        r = run_child("reindex", cfg, Path(tmp) / "cfg.json")
        log(f"  re-indexed in {r['seconds']:.1f}s ({r['embedded']} chunks re-embedded)")
    return report_build(b, r)


def report_build(b: dict[str, Any], r: dict[str, Any]) -> dict[str, object]:
    """Print the measured-build table; the JSON fields."""
    cps = b["chunks"] / b["seconds"]
    src = (f"{b['scifact_docs']:,} SciFact abstracts = {b['scifact_chunks']:,} chunks"
           + (f" + {b['hotpot_docs']:,} HotpotQA paragraphs = {b['hotpot_chunks']:,} chunks"
              if b["hotpot_docs"] else ""))
    print(f"\nmeasured build: {b['chunks']:,} chunks of real text ({src}), "
          f"{b.get('embedder', 'MiniLM int8')}, no vector cache, one child process per build")
    print(f"{'measure':<52} {'value':>14}")
    rows = [
        ("end-to-end build (chunk, embed, BM25, HNSW, write)", f"{b['seconds']:.1f} s"),
        ("  = chunks/s", f"{cps:.1f}"),
        ("  chunking + embedding (start to last vector)",
         f"{b['embed_s']:.1f} s ({b['embedded'] / b['embed_s']:.1f}/s)"),
        ("  the rest (BM25, HNSW, write, fsync, switch)", f"{b['seconds'] - b['embed_s']:.1f} s"),
        ("peak RSS of the build process (VmHWM)", f"{b['peak_rss_mb']:.0f} MB"),
        ("  RSS after model load, before building", f"{b['rss_after_model_load_mb']:.0f} MB"),
        (f"re-index after {r['changed_docs']} of {r['documents']} docs (5%) changed",
         f"{r['seconds']:.1f} s"),
        ("  chunks re-embedded / reused",
         f"{r['embedded']} / {r['chunks'] - r['embedded']}"),
        ("  chunks/s (all chunks of the new generation)", f"{r['chunks'] / r['seconds']:.0f}"),
        ("  peak RSS of the re-index process", f"{r['peak_rss_mb']:.0f} MB"),
    ]
    for k, v in rows:
        print(f"{k:<52} {v:>14}")
    return {
        "build_chunks": b["chunks"], "build_s": round(b["seconds"], 2),
        "build_chunks_per_s": round(cps, 3),
        "embed_chunks_per_s": round(b["embedded"] / b["embed_s"], 3),
        "peak_rss_mb": round(b["peak_rss_mb"], 1),
        "reindex_5pct_s": round(r["seconds"], 2), "reindex_embedded": r["embedded"],
        "reindex_peak_rss_mb": round(r["peak_rss_mb"], 1),
        "build_sources": {k: b[k] for k in ("scifact_docs", "scifact_chunks", "hotpot_docs",
                                            "hotpot_chunks")},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="BEIR folder or data root (default: ../shared/data)")
    ap.add_argument("--chunks", type=int, default=10_000,
                    help="chunks of real text in the measured build (0: skip the build)")
    ap.add_argument("--latency-chunks", type=int, default=100_000,
                    help="synthetic chunks for the latency/disk/memory part")
    ap.add_argument("--skip-latency", action="store_true", help="only the measured build")
    ap.add_argument("--profile-embed", type=int, default=0, metavar="K",
                    help="profile MiniLM settings on K real chunks (e.g. 300)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm",
                    help="hashing: a quick smoke run without the model")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--_rss", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._rss:
        _rss_child(args._rss)
        return 0

    path = dataset_dir(args.data)
    out: dict[str, object] = {}

    # 1. The measured build and re-index of real text.
    if args.chunks > 0:
        out.update(measured_build(data_root(args.data), path, args.chunks, args.embedder))

    # 2. Embedding settings.
    if args.profile_embed > 0:
        from _embed_profile import profile

        real_docs, _ = real_documents(data_root(args.data), path, 10_000)
        texts = chunk_texts(real_docs)
        step = max(1, len(texts) // args.profile_embed)
        prof_rows = profile(texts[::step][: args.profile_embed], log)
        print(f"\nMiniLM int8 embedding, {args.profile_embed} real chunks (every {step}th of "
              f"the build's), one timing each")
        print(f"{'setting':<60} {'chunks/s':>9} {'vs now':>7} {'min cos':>8}")
        for r in prof_rows:
            print(f"{r['setting']:<60} {r['chunks_per_s']:9.1f} {r['vs_current']:6.2f}x "
                  f"{r['min_cos']:8.4f}")
        out["embed_profile"] = [{k: round(v, 4) if isinstance(v, float) else v
                                 for k, v in r.items()} for r in prof_rows]
        from _embed_profile import arena_rss

        ar = arena_rss(texts[::step][: args.profile_embed], log)
        print(f"peak RSS of a fresh process embedding those {args.profile_embed} chunks "
              "(batch 32, sorted, 2 threads):")
        for r in ar:
            print(f"  onnxruntime CPU arena {'on ' if r['arena'] else 'off'}: "
                  f"{r['peak_rss_mb']:.0f} MB (model loaded: {r['rss_before_mb']:.0f} MB), "
                  f"{r['chunks_per_s']:.1f} chunks/s")
        out["embed_arena_rss"] = ar

    if args.skip_latency:
        if args.json:
            print(json.dumps(out))
        return 0

    corpus, queries, qrels = load_beir(path, "test")
    qtexts = [queries[q] for q in qrels if q in queries][: args.queries]
    emb = make_embedder(args.embedder)  # vector cache in front of the real model
    log(f"latency part: {len(corpus)} SciFact abstracts from {path}; "
        f"{args.latency_chunks} synthetic chunks")
    model = emb.inner

    # Source vectors (cached MiniLM vectors of the abstracts; embedded if missing).
    base_vecs = emb.embed_passages([search_text(d.get("title", ""), d.get("text", "")).strip()
                                    for d in corpus])
    emb.save()
    docs, table = synthesise(corpus, base_vecs, args.latency_chunks)
    log(f"synthesised {len(docs)} documents")

    with tempfile.TemporaryDirectory(prefix="index-bench-") as tmp:
        root = Path(tmp)
        stages: dict[str, float] = {}
        marks: dict[str, float] = {}

        def progress(done: int, total: int, stage: str) -> None:
            now = time.perf_counter()
            marks.setdefault(stage, now)
            stages[stage] = now - marks[stage]
            if done == total and stage in ("bm25", "hnsw"):
                log(f"  {stage} done in {stages[stage]:.1f}s")

        idx = CorpusIndex(root, DictEmbedder(table, emb.name, base_vecs.shape[1]))
        t0 = time.perf_counter()
        report = idx.index_documents("bench", docs, progress=progress)
        build_s = time.perf_counter() - t0
        idx.close()
        del table
        n = report.chunks
        log(f"built {n} chunks in {build_s:.1f}s ({report.dense})")
        gen = root / "bench" / (root / "bench" / "CURRENT").read_text().strip()
        disk_mb = sum(f.stat().st_size for f in gen.rglob("*") if f.is_file()) / 2**20

        # 3. Query vectors: cached MiniLM vectors (latency without the model), plus the
        #    real model's per-query time measured separately.
        qv = emb.embed_queries(qtexts)
        emb.save()
        q_embed: list[float] = []

        rss = measure_rss(root, qtexts, qv, emb.name)

        idx = CorpusIndex(root, model)
        coll = idx.open("bench")
        t = time.perf_counter()
        _ = idx.open("bench")
        open_s = time.perf_counter() - t
        _.close()
        lat: dict[str, list[float]] = {k: [] for k in (
            "bm25", "bm25s_retrieve", "dense_exact", "dense_hnsw", "hybrid", "hybrid_e2e",
            "rerank20", "hybrid_rerank20", "hybrid_filtered", "select_neg", "select_bm25s")}
        recall_hits = 0
        from actors.rerank import Reranker

        reranker = Reranker(model, floor=-1.0,
                            passage_text=lambda c: search_text(c.title, c.text))
        import bm25s

        retriever = coll.bm25._retriever
        from reactive_rag.index import SearchFilter

        flt = SearchFilter(doc_types=["b"], tags=["t1", "t2", "t3", "t4", "t5"])
        for q, v in zip(qtexts, qv, strict=True):
            t = time.perf_counter()
            s = coll.bm25.scores(q)
            top_k(s, 10)
            lat["bm25"].append(time.perf_counter() - t)
            t = time.perf_counter()
            np.argpartition(-s, 10)[:10]
            lat["select_neg"].append(time.perf_counter() - t)
            t = time.perf_counter()
            np.argpartition(s, -10)[-10:]
            lat["select_bm25s"].append(time.perf_counter() - t)
            toks = coll.bm25.tokens(q)
            if toks:
                t = time.perf_counter()
                retriever.retrieve([toks], k=10, show_progress=False, n_threads=1)
                lat["bm25s_retrieve"].append(time.perf_counter() - t)
            t = time.perf_counter()
            ex, _s = coll.dense.search(v, 10, exact=True)
            lat["dense_exact"].append(time.perf_counter() - t)
            t = time.perf_counter()
            hn, _s = coll.dense.search(v, 10, exact=False)
            lat["dense_hnsw"].append(time.perf_counter() - t)
            recall_hits += len(set(ex.tolist()) & set(hn.tolist()))
            t = time.perf_counter()
            rows, _f, _b, _d = coll.search_rows(q, 20, query_vector=v)
            lat["hybrid"].append(time.perf_counter() - t)
            t = time.perf_counter()
            coll.search_rows(q, 10, query_vector=v, filters=flt)
            lat["hybrid_filtered"].append(time.perf_counter() - t)
            cands = [coll.chunk_at(int(r)).to_evidence(float(20 - i)) for i, r in enumerate(rows)]
            t = time.perf_counter()
            reranker.rerank(q, cands, k=10, passage_vectors=coll.dense.vectors[rows])
            lat["rerank20"].append(time.perf_counter() - t)
        for q in qtexts[:100]:
            t = time.perf_counter()
            v = model.embed_queries([q])[0]
            q_embed.append(time.perf_counter() - t)
            rows, _f, _b, _d = coll.search_rows(q, 20, query_vector=v)
            res = [coll.chunk_at(int(r)).to_evidence(float(20 - i)) for i, r in enumerate(rows)]
            lat["hybrid_e2e"].append(time.perf_counter() - t)
            reranker.rerank(q, res, k=10, passage_vectors=coll.dense.vectors[rows])
            lat["hybrid_rerank20"].append(time.perf_counter() - t)
        coll.close()
        idx.close()
        del bm25s
    hnsw_recall = recall_hits / (10 * len(qtexts))
    scale = 100_000 / n
    rss_per = (rss["searched"] - rss["before"]) * scale
    p = {k: (pct(v, 50), pct(v, 99)) for k, v in lat.items() if v}
    print(f"\ncorpus index at {n} chunks ({report.dense} dense search; synthetic chunks from "
          f"{len(corpus)} SciFact abstracts, vectors = MiniLM vector of the source + noise)")
    print(f"build: {build_s:.1f}s without embedding ({n / build_s:,.0f} chunks/s: chunking, "
          f"BM25 {stages.get('bm25', 0):.1f}s, HNSW {stages.get('hnsw', 0):.1f}s, writing)")
    print("       (the measured end-to-end build with embedding is the first table)")
    print(f"disk: {disk_mb:.0f} MB ({disk_mb * scale:.0f} MB per 100k chunks); "
          f"open: {open_s * 1000:.0f} ms (nothing re-embedded)")
    print(f"memory: RSS +{rss['opened'] - rss['before']:.0f} MB after open, "
          f"+{rss['searched'] - rss['before']:.0f} MB after 200 hybrid searches "
          f"({rss_per:.0f} MB per 100k chunks)")
    print(f"\n{'query latency (1 thread)':<44} {'p50 ms':>8} {'p99 ms':>8} {'vs BM25':>8}")
    names = {
        "bm25": "BM25 (get_scores + argpartition(-s, k))",
        "bm25s_retrieve": "BM25 via bm25s.retrieve (its own top-k)",
        "select_neg": "  top-10 selection: argpartition(-s, k)",
        "select_bm25s": "  top-10 selection: argpartition(s, -k)",
        "dense_exact": "dense exact (numpy matmul)",
        "dense_hnsw": "dense HNSW (M=16, ef=128)",
        "hybrid": "hybrid, no query embedding",
        "hybrid_filtered": "hybrid + filter (type, tags), no embedding",
        "hybrid_e2e": "hybrid incl. MiniLM query embedding",
        "rerank20": "rerank of 20 (actors.rerank; embeds the query)",
        "hybrid_rerank20": "hybrid + rerank 20, incl. embedding",
    }
    base = p["bm25"][0]
    for k, label in names.items():
        if k in p:
            print(f"{label:<44} {p[k][0]:8.2f} {p[k][1]:8.2f} {p[k][0] / base:7.2f}x")
    print(f"query embedding alone (MiniLM): p50 {pct(q_embed, 50):.1f} ms")
    print(f"HNSW recall@10 vs exact: {hnsw_recall:.3f} (target >= 0.95)")
    print(f"targets: hybrid p50 <= 15 ms (got {p['hybrid'][0]:.1f} without / "
          f"{p['hybrid_e2e'][0]:.1f} with query embedding); rerank20 p50 <= 150 ms "
          f"(got {p['rerank20'][0]:.1f})")
    out.update({
            "chunks": n, "hybrid_p50_ms": p["hybrid"][0], "hybrid_p99_ms": p["hybrid"][1],
            "hybrid_e2e_p50_ms": p["hybrid_e2e"][0], "rerank20_p50_ms": p["rerank20"][0],
            "hybrid_rerank20_p50_ms": p["hybrid_rerank20"][0],
            "bm25_p50_ms": p["bm25"][0], "bm25s_retrieve_p50_ms": p.get("bm25s_retrieve",
                                                                        (None,))[0],
            "dense_exact_p50_ms": p["dense_exact"][0], "dense_hnsw_p50_ms": p["dense_hnsw"][0],
            "hnsw_recall10": hnsw_recall,
            "build_chunks_per_s_without_embedding": n / build_s,
            "disk_mb_per_100k": disk_mb * scale,
            "rss_mb_per_100k": rss_per, "open_ms": open_s * 1000,
    })
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
