"""Agent vs one-shot RAG on HotpotQA: does searching again find both gold paragraphs?

    python bench/hotpot.py [--data PATH] [--offset 0] [--n 100] [--json]

One corpus is built from every paragraph of the questions used (so each
question must find its 2 gold paragraphs among ~10 x n), indexed once with the
offline MiniLM embedder (cached on disk). Each question then runs
(a) ``mode="rag"``: one search of the question, rerank, answer, and
(b) ``mode="agent"``: the offline planner (expansion, multi-hop bridges, read-on),
both with the same cap on the evidence given to the writer (``final_evidence=5``).

Reported: both-gold recall and at-least-one-gold recall of that final evidence,
mean tool calls, p50/p95 run time, outcome counts, and fabricated quotes: claims
of answered runs whose quote is not found in the cited chunk, re-checked here
with a plain substring test that shares no code with the verifier (quote and
chunk both NFKC-normalised, lower-cased, whitespace collapsed; the quote's
surrounding punctuation stripped). The verifier's own ``match_quote`` count is
reported beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reactive_rag import Engine, RunResult
from reactive_rag.agent import match_quote
from reactive_rag.index import CorpusIndex, Document
from streams import AnswerRequested, EvidenceChunk

DEFAULT_DATA = Path(os.environ.get("REACTIVE_RAG_DATA", Path(__file__).resolve().parents[1].parent
                                   / "shared" / "data")) / "hotpotqa_dev_300.jsonl"
COLLECTION = "hotpot"


def load(path: Path, n: int, offset: int = 0) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return rows[offset:offset + n]


def documents(rows: Sequence[dict[str, Any]]) -> list[Document]:
    """Every paragraph once, keyed by its title (HotpotQA titles are Wikipedia pages)."""
    docs: dict[str, Document] = {}
    for row in rows:
        for ctx in row["contexts"]:
            title = ctx["title"]
            if title not in docs:
                docs[title] = Document(id=title, title=title, text=ctx["paragraph_text"])
    return list(docs.values())


def gold_titles(row: dict[str, Any]) -> set[str]:
    return {c["title"] for c in row["contexts"] if c.get("is_supporting")}


def writer_evidence(result: RunResult) -> list[EvidenceChunk]:
    """The chunks handed to the writer (the last answer request)."""
    requests = [e for e in result.events if isinstance(e, AnswerRequested)]
    if not requests:
        return []
    return [result.evidence[i] for i in requests[-1].evidence_ids if i in result.evidence]


def final_docs(result: RunResult) -> list[str]:
    """Documents of the evidence handed to the writer."""
    return [c.doc_id for c in writer_evidence(result)]


_WS = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Unicode NFKC, lower-case, whitespace collapsed to single spaces."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


def normalise_quote(quote: str) -> str:
    """``normalise`` plus surrounding punctuation (and quote marks) stripped."""
    q = normalise(quote)
    start, end = 0, len(q)
    while start < end and (unicodedata.category(q[start])[0] in "PS" or q[start].isspace()):
        start += 1
    while end > start and (unicodedata.category(q[end - 1])[0] in "PS" or q[end - 1].isspace()):
        end -= 1
    return q[start:end]


def plain_quote_found(quote: str, chunk_text: str) -> bool:
    """Independent of the verifier: is the normalised quote a substring of the chunk?"""
    q = normalise_quote(quote)
    return bool(q) and q in normalise(chunk_text)


def fabricated(result: RunResult, examples: list[dict[str, str]] | None = None
               ) -> tuple[int, int, int]:
    """``(claims, plain-substring failures, match_quote failures)`` of a finished run.

    The headline count is the plain test (``plain_quote_found``), which shares no
    code with the verifier; ``match_quote`` (the verifier's own matcher) is kept
    beside it for comparison. A claim whose cited chunk is missing fails both.
    """
    claims = plain_bad = mq_bad = 0
    for cite in result.citations:
        claims += 1
        chunk = result.evidence.get(cite.claim.source_id)
        if chunk is None:
            plain_bad += 1
            mq_bad += 1
            continue
        if not plain_quote_found(cite.claim.quote, chunk.text):
            plain_bad += 1
            if examples is not None and len(examples) < 5:
                examples.append({"quote": cite.claim.quote, "chunk": chunk.text[:300]})
        if not match_quote(cite.claim.quote, chunk.text).ok:
            mq_bad += 1
    return claims, plain_bad, mq_bad


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


async def evaluate(rows: list[dict[str, Any]], engine: Engine, mode: str,
                   budget: dict[str, Any]) -> dict[str, Any]:
    both = anyg = 0
    tools: list[int] = []
    times: list[float] = []
    outcomes: Counter[str] = Counter()
    fab = mq_fab = claims = 0
    examples: list[dict[str, str]] = []
    for row in rows:
        t0 = time.perf_counter()
        result = await engine.ask(row["question_text"], mode=mode, collections=[COLLECTION],
                                  budget=budget)
        times.append(time.perf_counter() - t0)
        gold = gold_titles(row)
        got = set(final_docs(result))
        both += gold <= got
        anyg += bool(gold & got)
        tools.append(result.count("search.requested") + result.count("read.requested")
                     + result.count("scrape.requested"))
        outcomes[result.outcome] += 1
        c, bad, mq_bad = fabricated(result, examples)
        claims += c
        fab += bad
        mq_fab += mq_bad
        engine.forget(result.run_id)
    n = len(rows)
    return {"both_gold": both / n, "any_gold": anyg / n, "mean_tool_calls": sum(tools) / n,
            "p50_s": statistics.median(times), "p95_s": _pct(times, 0.95),
            "outcomes": dict(outcomes), "fabricated_quotes": fab, "claims": claims,
            "fabricated_quotes_match_quote": mq_fab, "fabricated_examples": examples}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    rows = load(args.data, args.n, args.offset)
    root = args.root or Path(os.environ.get("REACTIVE_RAG_HOME", Path.home() / ".cache"
                                            / "reactive_rag")) / "bench-hotpot"
    index = CorpusIndex(root / (f"n{len(rows)}" if args.offset == 0
                                else f"o{args.offset}-n{len(rows)}"))
    t0 = time.perf_counter()
    report = index.index_documents(COLLECTION, documents(rows))
    build_s = time.perf_counter() - t0
    engine = Engine(index)
    budget = {"final_evidence": args.cap}
    try:
        rag = await evaluate(rows, engine, "rag", budget)
        agent = await evaluate(rows, engine, "agent", budget)
    finally:
        await engine.aclose()
    return {"n": len(rows), "offset": args.offset, "docs": report.documents,
            "chunks": report.chunks, "index_build_s": round(build_s, 1), "rag": rag, "agent": agent}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--n", type=int, default=100, help="questions (n rows from --offset)")
    parser.add_argument("--offset", type=int, default=0, help="first row (150: the held-out rows)")
    parser.add_argument("--cap", type=int, default=5, help="evidence chunks given to the writer")
    parser.add_argument("--root", type=Path, default=None, help="index folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"no data at {args.data} (set --data or REACTIVE_RAG_DATA)", file=sys.stderr)
        return 2
    out = asyncio.run(main_async(args))
    rag, agent = out["rag"], out["agent"]
    print(f"HotpotQA: {out['n']} questions (rows {out['offset']}-{out['offset'] + out['n'] - 1}), "
          f"corpus {out['docs']} paragraphs / {out['chunks']} chunks "
          f"(index built/opened in {out['index_build_s']}s), evidence cap {args.cap}")
    print(f"{'measure':<28}{'one-shot rag':>14}{'agent':>12}{'agent - rag':>14}")
    for key, label in (("both_gold", "both-gold recall"), ("any_gold", "at-least-one recall")):
        print(f"{label:<28}{rag[key]:>14.3f}{agent[key]:>12.3f}"
              f"{(agent[key] - rag[key]) * 100:>+13.1f}pt")
    for key, label in (("mean_tool_calls", "mean tool calls"), ("p50_s", "p50 run time (s)"),
                       ("p95_s", "p95 run time (s)")):
        print(f"{label:<28}{rag[key]:>14.3f}{agent[key]:>12.3f}")
    for key, label in (("claims", "claims checked"),
                       ("fabricated_quotes", "fabricated (plain substr)"),
                       ("fabricated_quotes_match_quote", "  (verifier's match_quote)")):
        print(f"{label:<28}{rag[key]:>14d}{agent[key]:>12d}")
    for mode, res in (("rag", rag), ("agent", agent)):
        for ex in res["fabricated_examples"]:
            print(f"  {mode} quote not found: {ex['quote']!r} in {ex['chunk'][:120]!r}...")
    print(f"{'outcomes':<28}{rag['outcomes']!s:>14}  {agent['outcomes']!s}")
    if args.json:
        print(json.dumps({
            "n": out["n"],
            "offset": out["offset"],
            "both_gold_agent": round(agent["both_gold"], 4),
            "both_gold_rag": round(rag["both_gold"], 4),
            "any_gold_agent": round(agent["any_gold"], 4),
            "any_gold_rag": round(rag["any_gold"], 4),
            "mean_tool_calls": round(agent["mean_tool_calls"], 3),
            "mean_tool_calls_rag": round(rag["mean_tool_calls"], 3),
            "fabricated_quotes": agent["fabricated_quotes"] + rag["fabricated_quotes"],
            "fabricated_quotes_match_quote": (agent["fabricated_quotes_match_quote"]
                                              + rag["fabricated_quotes_match_quote"]),
            "claims_checked": agent["claims"] + rag["claims"],
            "p50_s": round(agent["p50_s"], 3),
            "p95_s": round(agent["p95_s"], 3),
            "p50_s_rag": round(rag["p50_s"], 3),
            "outcomes": agent["outcomes"],
            "outcomes_rag": rag["outcomes"],
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
