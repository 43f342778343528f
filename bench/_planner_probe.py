"""Offline probe of the offline planner on HotpotQA, without the agent runtime.

Builds one BM25 index (bm25s) over every paragraph of the first N questions of
``hotpotqa_dev_300.jsonl`` and compares, at the same cap on final evidence:

(a) one search of the question, top ``cap`` paragraphs;
(b) the :class:`OfflinePlanner` for up to 3 rounds, fed the top ``k`` hits of
    each search as evidence, then ``select_evidence`` picks ``cap`` chunks.

Also printed, to show where the gain comes from: one wide search with the same
selection (a2), the planner's evidence cut by the question alone (b-q, what a
final rerank against the question does), the question's top 20 then
``select_evidence`` (b-r20), and everything the planner held (b-pool).

    .venv/bin/python bench/_planner_probe.py [--n 100] [--cap 5] [--k 10] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import Stemmer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reactive_rag.judgement import PlannerView  # noqa: E402
from reactive_rag.judgement.offline import OfflinePlanner, select_evidence  # noqa: E402
from reactive_rag.judgement.offline._evidence_pick import PoolScorer  # noqa: E402
from reactive_rag.run import saturated  # noqa: E402
from streams import EvidenceChunk, QueryStat  # noqa: E402


def _data(path: str | None) -> Path:
    if path:
        return Path(path)
    base = Path(os.environ.get("REACTIVE_RAG_DATA") or ROOT.parent / "shared" / "data")
    return base / "hotpotqa_dev_300.jsonl"


class Corpus:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.chunks: list[EvidenceChunk] = []
        index: dict[tuple[str, str], int] = {}
        for row in rows:
            for c in row["contexts"]:
                key = (c["title"], c["paragraph_text"])
                if key not in index:
                    index[key] = len(self.chunks)
                    self.chunks.append(
                        EvidenceChunk(
                            id=f"c{len(self.chunks)}",
                            text=c["paragraph_text"],
                            doc_id=c["title"],
                            title=c["title"],
                        )
                    )
        self.stemmer = Stemmer.Stemmer("english")
        texts = [f"{c.title}. {c.text}" for c in self.chunks]
        tokens = bm25s.tokenize(texts, stopwords="en", stemmer=self.stemmer, show_progress=False)
        self.bm25 = bm25s.BM25()
        self.bm25.index(tokens, show_progress=False)

    def search(self, query: str, k: int) -> list[EvidenceChunk]:
        tok = bm25s.tokenize([query], stopwords="en", stemmer=self.stemmer, show_progress=False)
        ids = tok.ids[0] if hasattr(tok, "ids") else tok[0]
        if not len(ids):
            return []
        vocab_inv = {v: k for k, v in tok.vocab.items()}
        words = [vocab_inv[i] for i in ids]
        scores = self.bm25.get_scores(words)
        order = np.argsort(-scores, kind="stable")[:k]
        return [
            self.chunks[i].model_copy(update={"score": float(scores[i])})
            for i in order
            if scores[i] > 0
        ]


@dataclass
class PlannerRun:
    """What one simulated agent run held and asked."""

    evidence: list[EvidenceChunk]
    queries: list[str]
    calls: int


async def run_planner(
    planner: OfflinePlanner, corpus: Corpus, question: str, *, k: int, max_tools: int
) -> PlannerRun:
    """The agent loop without the runtime: decide, search, register, repeat."""
    evidence: dict[str, EvidenceChunk] = {}
    records: list[QueryStat] = []
    rounds: list[set[str]] = []
    calls = 0
    feedback: list[str] = []
    for rnd in range(1, 10):
        view = PlannerView(
            question=question,
            round=rnd,
            evidence=list(evidence.values()),
            queries=list(records),
            feedback=tuple(feedback),
            remaining_tool_calls=max_tools - calls,
        )
        decision = await planner.decide(view)
        feedback = []
        if decision.action == "answer":
            break
        got: set[str] = set()
        for call in decision.calls:
            if calls >= max_tools:
                break
            calls += 1
            if call.tool != "search":
                continue  # HotpotQA paragraphs have no neighbours to read on to
            q = str(call.args["query"])
            hits = corpus.search(q, k)
            new = 0
            for h in hits:
                got.add(h.id)
                if h.id not in evidence:
                    evidence[h.id] = h
                    new += 1
            records.append(QueryStat(query=q, hits=len(hits), new_evidence=new))
        rounds.append(got)
        if saturated(rounds):
            feedback.append("search saturated: stop searching")
    return PlannerRun(list(evidence.values()), [r.query for r in records], calls)


def _question_top(question: str, pool: list[EvidenceChunk], k: int) -> list[EvidenceChunk]:
    # Stand-in for a final rerank against the question alone (BM25 over the pool).
    scores = PoolScorer(pool).scores(question)
    order = sorted(range(len(pool)), key=lambda i: (-scores[i], i))
    return [pool[i] for i in order[:k]]


ROWS = [
    ("a", "(a) one search, top cap"),
    ("a2", "(a2) one search top-20 + select_evidence"),
    ("b", "(b) planner + select_evidence"),
    ("b_q", "(b-q) planner, question-only top cap"),
    ("b_r20", "(b-r20) planner, question top-20 + select"),
    ("pool", "(b-pool) all planner evidence (no cap)"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--cap", type=int, default=5)
    ap.add_argument("--k", type=int, default=10, help="hits per planner search")
    ap.add_argument("--max-tools", type=int, default=8)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = [json.loads(x) for x in _data(args.data).open(encoding="utf-8") if x.strip()][: args.n]
    t0 = time.perf_counter()
    corpus = Corpus(rows)
    planner = OfflinePlanner()
    both: Counter[str] = Counter()
    anyg: Counter[str] = Counter()
    calls = 0
    for row in rows:
        gold = {c["title"] for c in row["contexts"] if c["is_supporting"]}
        q = row["question_text"]
        run = asyncio.run(run_planner(planner, corpus, q, k=args.k, max_tools=args.max_tools))
        calls += run.calls
        got = {
            "a": corpus.search(q, args.cap),
            "a2": select_evidence(q, corpus.search(q, 20), k=args.cap),
            "b": select_evidence(q, run.evidence, run.queries, k=args.cap),
            "b_q": _question_top(q, run.evidence, args.cap),
            "b_r20": select_evidence(
                q, _question_top(q, run.evidence, 20), run.queries, k=args.cap
            ),
            "pool": run.evidence,
        }
        for key, chunks in got.items():
            titles = {c.title for c in chunks}
            both[key] += gold <= titles
            anyg[key] += bool(gold & titles)
        if args.verbose and not gold <= {c.title for c in got["b"]}:
            print(
                f"MISS {q!r} gold={sorted(gold)} in_pool={gold <= {c.title for c in run.evidence}}"
            )
            print("   queries:", run.queries)
    n = len(rows)
    out: dict[str, object] = {
        "n": n,
        "corpus_chunks": len(corpus.chunks),
        "cap": args.cap,
        "k": args.k,
        "both_gold_rag": both["a"] / n,
        "both_gold_agent": both["b"] / n,
        "any_gold_rag": anyg["a"] / n,
        "any_gold_agent": anyg["b"] / n,
        "mean_tool_calls": calls / n,
        "variants": {key: {"both_gold": both[key] / n, "any_gold": anyg[key] / n} for key in got},
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(
        f"HotpotQA planner probe: {n} questions, {len(corpus.chunks)} paragraphs (BM25), "
        f"cap {args.cap}, {args.k} hits per search"
    )
    print(f"{'path':<44}{'both-gold':>10}{'any-gold':>10}{'vs (a)':>9}")
    for key, label in ROWS:
        ratio = both[key] / both["a"] if both["a"] else float("nan")
        print(f"{label:<44}{both[key] / n:>10.2f}{anyg[key] / n:>10.2f}{ratio:>8.2f}x")
    delta = (both["b"] - both["a"]) / n * 100
    print(
        f"planner both-gold gain over one search: {delta:+.0f} points; "
        f"mean tool calls {calls / n:.1f}; {out['seconds']} s"
    )
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
