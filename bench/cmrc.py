"""Chinese end to end: retrieval and answers on CMRC 2018 (Chinese Wikipedia, SQuAD format).

    python bench/cmrc.py [--data PATH] [--split tune|report|both] [--modes agent,rag]
                         [--limit N] [--json]

Every paragraph of the file (default ``cmrc2018_trial.json``, CC BY-SA 4.0) is one
document of one collection, built with the embedder ``auto`` picks for it (the
multilingual one: the text is Chinese). Questions of the first 128 articles are the
tune split, the rest the report split. ``--limit N`` keeps the first N questions of a
split (quick runs).

Reported, per split:
- ``retrieval_recall5``: share of questions whose paragraph is in the top 5 hits of the
  collection search the agent uses (hybrid); ``retrieval_recall5_bm25`` / ``_dense``:
  the same with one signal alone;
- per path (agent, rag): ``answered_rate`` (share ending ``answered``),
  ``answer_contains_gold`` (a gold span, NFKC-normalised with whitespace removed, is in
  the answer text), ``answer_chars_p50`` (median answer length of answered runs),
  ``p50_s`` (median seconds per question);
- ``false_answer_rate_removed``: 50 questions of the split asked over the corpus with
  their paragraphs removed (one collection without all 50): share ending ``answered``;
- ``index_chunks_per_s``: passages per second of the collection's embedder on 32 of the
  paragraphs, measured without the vector cache (what a fresh index build pays).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reactive_rag import Engine
from reactive_rag.index import CorpusIndex, Document, search_text

DATA_DIR = Path(os.environ.get("REACTIVE_RAG_DATA", Path(__file__).resolve().parents[1].parent
                                / "shared" / "data"))
TUNE_ARTICLES = 128
REMOVED = 50
COLLECTION = "cmrc"
REMOVED_COLLECTION = "cmrc-removed"


@dataclass(frozen=True, slots=True)
class Question:
    """One question, the paragraph (document id) it was written on, its gold spans."""

    text: str
    doc_id: str
    golds: tuple[str, ...]


def load(path: Path) -> tuple[list[Document], dict[str, list[Question]]]:
    """Documents (one per paragraph) and the questions of each split."""
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    docs: list[Document] = []
    splits: dict[str, list[Question]] = {"tune": [], "report": []}
    for a, article in enumerate(data):
        split = "tune" if a < TUNE_ARTICLES else "report"
        title = str(article.get("title", ""))
        for p, para in enumerate(article["paragraphs"]):
            doc_id = f"{article.get('id', a)}-{p}"
            docs.append(Document(id=doc_id, text=para["context"], title=title))
            for qa in para["qas"]:
                if not str(qa["question"]).strip():
                    continue  # two rows of the trial set have no question text
                golds = tuple(dict.fromkeys(str(x["text"]) for x in qa["answers"]))
                splits[split].append(Question(str(qa["question"]), doc_id, golds))
    return docs, splits


def normalize(text: str) -> str:
    """NFKC (full-width to half-width), case folded, whitespace removed."""
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def contains_gold(answer: str, golds: Sequence[str]) -> bool:
    """A normalised gold span occurs in the normalised answer."""
    have = normalize(answer)
    return any(g and g in have for g in (normalize(x) for x in golds))


@dataclass
class Tally:
    n: int = 0
    answered: int = 0
    contains_gold: int = 0
    chars: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)

    def figures(self) -> dict[str, Any]:
        n = max(1, self.n)
        return {
            "answered_rate": round(self.answered / n, 3),
            "answer_contains_gold": round(self.contains_gold / n, 3),
            "answer_chars_p50": statistics.median(self.chars) if self.chars else None,
            "p50_s": round(statistics.median(self.seconds), 3) if self.seconds else None,
            "outcomes": dict(self.outcomes),
        }


async def run_all(engine: Engine, questions: Sequence[Question], collection: str, mode: str,
                  budget: dict[str, Any], dump: list[dict[str, Any]] | None) -> Tally:
    tally = Tally()
    for q in questions:
        t0 = time.perf_counter()
        result = await engine.ask(q.text, mode=mode, collections=[collection], budget=budget)
        tally.seconds.append(time.perf_counter() - t0)
        tally.n += 1
        tally.outcomes[result.outcome] += 1
        answered = result.outcome == "answered"
        tally.answered += answered
        hit = contains_gold(result.answer, q.golds) if result.answer else False
        tally.contains_gold += hit
        if answered:
            tally.chars.append(len(result.answer))
        if dump is not None:
            dump.append({"collection": collection, "mode": mode, "question": q.text,
                         "golds": list(q.golds), "outcome": result.outcome,
                         "reason": result.reason, "answer": result.answer,
                         "contains_gold": hit})
        engine.forget(result.run_id)
    return tally


def recall5(index: CorpusIndex, questions: Sequence[Question], mode: str) -> float:
    """Share of questions whose paragraph is among the top 5 hits (``mode`` search)."""
    hits = 0
    for q in questions:
        found = index.search(q.text, collection=COLLECTION, k=5, mode=mode)  # type: ignore[arg-type]
        hits += any(r.chunk.doc_id == q.doc_id for r in found)
    return round(hits / max(1, len(questions)), 3)


def embed_rate(index: CorpusIndex, docs: Sequence[Document], n: int = 32) -> float:
    """Passages per second of the collection's embedder, bypassing the vector cache."""
    emb = index.collection_embedder(COLLECTION)
    inner = getattr(emb, "inner", emb)
    texts = [search_text(d.title, d.text) for d in docs[:n]]
    t0 = time.perf_counter()
    inner.embed_passages(texts)
    return round(len(texts) / (time.perf_counter() - t0), 2)


async def evaluate(args: argparse.Namespace, index: CorpusIndex, docs: list[Document],
                   split: str, questions: list[Question]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(questions)}
    t0 = time.perf_counter()
    out["retrieval_recall5"] = recall5(index, questions, "hybrid")
    out["retrieval_recall5_bm25"] = recall5(index, questions, "bm25")
    out["retrieval_recall5_dense"] = recall5(index, questions, "dense")
    out["retrieval_s"] = round(time.perf_counter() - t0, 1)
    if args.no_runs:
        return out
    asked = questions[:REMOVED]
    gone = {q.doc_id for q in asked}
    index.index_documents(f"{REMOVED_COLLECTION}-{split}",
                          [d for d in docs if d.id not in gone], mode="sync")
    engine = Engine(index)
    budget = {"final_evidence": args.cap}
    for mode in args.modes:
        t = await run_all(engine, questions, COLLECTION, mode, budget, args.dump_rows)
        out[mode] = t.figures()
    removed = await run_all(engine, asked, f"{REMOVED_COLLECTION}-{split}", "agent", budget,
                            args.dump_rows)
    out["false_answer_rate_removed"] = round(removed.answered / max(1, removed.n), 3)
    out["outcomes_removed"] = dict(removed.outcomes)
    for run in list(engine.runs):
        engine.forget(run)
    return out


def bench_root(given: Path | None) -> Path:
    """Where the bench keeps its index and vector cache."""
    return given or Path(os.environ.get("REACTIVE_RAG_HOME", Path.home() / ".cache"
                                        / "reactive_rag")) / "bench-cmrc"


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    docs, questions = load(args.data)
    index = CorpusIndex(bench_root(args.root))
    report: dict[str, Any] = {"splits": {}}
    try:
        t0 = time.perf_counter()
        built = index.index_documents(COLLECTION, docs, mode="sync", embedder="auto")
        report["index"] = {"documents": built.documents, "chunks": built.chunks,
                           "embedder": built.embedder, "embedded_now": built.embedded_chunks,
                           "seconds": round(time.perf_counter() - t0, 1)}
        report["index_chunks_per_s"] = embed_rate(index, docs)
        splits = ["tune", "report"] if args.split == "both" else [args.split]
        for split in splits:
            part = questions[split][:args.limit] if args.limit else questions[split]
            report["splits"][split] = await evaluate(args, index, docs, split, part)
    finally:
        index.close()
    return report


def print_table(report: dict[str, Any], modes: Sequence[str]) -> None:
    ix = report["index"]
    print(f"collection: {ix['documents']} paragraphs, {ix['chunks']} chunks, embedder "
          f"{ix['embedder']}; {report['index_chunks_per_s']} chunks/s (uncached)")
    splits = list(report["splits"])
    print(f"{'measure':<30}" + "".join(f"{s:>14}" for s in splits))
    for key in ("n", "retrieval_recall5", "retrieval_recall5_bm25", "retrieval_recall5_dense",
                "false_answer_rate_removed"):
        print(f"{key:<30}" + "".join(f"{report['splits'][s].get(key, '-')!s:>14}"
                                     for s in splits))
    for mode in modes:
        for key in ("answered_rate", "answer_contains_gold", "answer_chars_p50", "p50_s"):
            cells = "".join(f"{report['splits'][s].get(mode, {}).get(key, '-')!s:>14}"
                            for s in splits)
            print(f"{key + ' [' + mode + ']':<30}{cells}")
        for s in splits:
            if mode in report["splits"][s]:
                print(f"outcomes [{s} {mode}]: {report['splits'][s][mode]['outcomes']}")
    for s in splits:
        if "outcomes_removed" in report["splits"][s]:
            print(f"outcomes [{s} removed]: {report['splits'][s]['outcomes_removed']}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA_DIR / "cmrc2018_trial.json",
                        help="CMRC 2018 (SQuAD-format) file")
    parser.add_argument("--split", choices=("tune", "report", "both"), default="both")
    parser.add_argument("--modes", default="agent,rag", help="paths to run")
    parser.add_argument("--limit", type=int, default=0, help="first N questions per split")
    parser.add_argument("--cap", type=int, default=5, help="evidence chunks given to the writer")
    parser.add_argument("--no-runs", action="store_true", help="retrieval figures only")
    parser.add_argument("--root", type=Path, default=None, help="index folder")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write every run's question, outcome and answer to this JSONL file")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    args.dump_rows = [] if args.dump else None
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.data.exists():
        print(f"no data at {args.data} (set --data or REACTIVE_RAG_DATA)", file=sys.stderr)
        return 2
    report = asyncio.run(main_async(args))
    if args.dump:
        with args.dump.open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in args.dump_rows)
    print_table(report, args.modes)
    if args.json:
        head_split = "report" if "report" in report["splits"] else "tune"
        head = report["splits"][head_split]
        agent = head.get("agent") or head.get(args.modes[0]) if args.modes else None
        figures: dict[str, Any] = {
            "split": head_split, "n": head["n"],
            "retrieval_recall5": head["retrieval_recall5"],
            "retrieval_recall5_bm25": head["retrieval_recall5_bm25"],
            "retrieval_recall5_dense": head["retrieval_recall5_dense"],
            "index_chunks_per_s": report["index_chunks_per_s"],
            "embedder": report["index"]["embedder"],
        }
        if agent:
            figures.update({k: agent[k] for k in ("answered_rate", "answer_contains_gold",
                                                  "answer_chars_p50", "p50_s")})
            figures["false_answer_rate_removed"] = head["false_answer_rate_removed"]
        for split, body in report["splits"].items():
            for mode in args.modes:
                if mode in body:
                    for key in ("answered_rate", "answer_contains_gold", "answer_chars_p50"):
                        figures[f"{key}_{mode}_{split}"] = body[mode][key]
            figures[f"retrieval_recall5_{split}"] = body["retrieval_recall5"]
        print(json.dumps(figures, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
