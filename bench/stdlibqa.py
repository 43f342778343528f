"""Questions users ask about the built-in stdlib corpus, in their own words, and off-corpus ones.

    python bench/stdlibqa.py [--split tune|report|both] [--modes agent,rag] [--limit N]
                             [--data bench/data/stdlib_questions.jsonl] [--dump FILE] [--json]

The corpus is the one ``reactive-rag demo`` answers from (the standard-library
docstrings, collection ``stdlib``), built the way the product builds it
(:meth:`Engine.ensure_stdlib_corpus`) in its own index folder. The questions
(``bench/data/stdlib_questions.jsonl``) were written for this bench: answerable
ones reworded the way users ask ("how can I ...", "is there a way to ...",
"in one go"), with gold strings (a function's name, a default) checked here
against the indexed text of the answering document (the bench stops if one is
missing); and off-corpus ones (other languages' libraries, third-party
packages, general knowledge, features Python lacks). Even rows are the tune
half, odd rows the report half (``--split``).

Reported per path (agent, one-shot ``rag``) and half:
- ``answer_correct_rate``: answerable questions ending answered or partial whose
  answer text contains a gold string (case-insensitive);
- ``answered_rate``: answerable questions ending answered;
- ``offcorpus_answered_rate``: off-corpus questions ending answered (false answers);
- outcome counts, ``p50_s`` (median seconds per question).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _qaset import (  # bench/ sibling (the script's folder)
    QAResult,
    QuestionSetError,
    Split,
    add_run_arguments,
    check_gold,
    load_questions,
    print_table,
    run_questions,
    score,
    split_rows,
)

from reactive_rag import Engine
from reactive_rag.index import STDLIB_COLLECTION, CorpusIndex

QUESTIONS = Path(__file__).resolve().parent / "data" / "stdlib_questions.jsonl"
OFFCORPUS_KEY = "offcorpus_answered_rate"
KEYS = ("n_answerable", "n_unanswerable", "answer_correct_rate", "answered_rate",
        OFFCORPUS_KEY, "p50_s")


def bench_root(given: Path | None) -> Path:
    """Where the bench keeps its index (apart from the user's own)."""
    return given or Path(os.environ.get("REACTIVE_RAG_HOME", Path.home() / ".cache"
                                        / "reactive_rag")) / "bench-stdlibqa"


def build_collection(index: CorpusIndex) -> str:
    """The stdlib collection in ``index``, built as the product builds it (unless current)."""
    Engine(index).ensure_stdlib_corpus()
    return STDLIB_COLLECTION


def corpus_texts(index: CorpusIndex, collection: str = STDLIB_COLLECTION) -> dict[str, str]:
    """Document id -> its title and chunk texts as indexed (what answers can quote)."""
    coll = index.open(collection)
    try:
        out: dict[str, str] = {}
        for doc in coll.document_ids():
            start, count = coll.document_span(doc)
            chunks = [coll.chunk_at(row) for row in range(start, start + count)]
            title = chunks[0].title if chunks else ""
            out[doc] = "\n\n".join([title, *(c.text for c in chunks)])
        return out
    finally:
        coll.close()


async def evaluate(args: argparse.Namespace) -> tuple[dict[str, Any], list[QAResult]]:
    rows = load_questions(args.data)
    index = CorpusIndex(bench_root(args.root))
    collection = build_collection(index)
    check_gold(rows, corpus_texts(index, collection))  # every row, whatever the split
    splits: list[Split] = ["tune", "report"] if args.split == "both" else [args.split]
    engine = Engine(index)
    report: dict[str, Any] = {}
    every: list[QAResult] = []
    try:
        for split in splits:
            part = split_rows(rows, split)[: args.limit or None]
            report[split] = {}
            for mode in args.modes:
                results = await run_questions(engine, part, collection, mode)
                every += results
                report[split][mode] = score(results, OFFCORPUS_KEY)
    finally:
        await engine.aclose()
    return report, every


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", "--questions", dest="data", type=Path, default=QUESTIONS,
                        help="question file (JSONL rows {id, question, answers, answerable})")
    add_run_arguments(parser, limit_help="first N rows of each half")
    args = parser.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.data.exists():
        print(f"no question file at {args.data}", file=sys.stderr)
        return 2
    try:
        report, every = asyncio.run(evaluate(args))
    except QuestionSetError as exc:
        print(f"stdlibqa: {exc}", file=sys.stderr)
        return 1
    if args.dump:
        with args.dump.open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in every)
    print_table(report, KEYS)
    if args.json:
        head_split = "report" if "report" in report else "tune"
        head = report[head_split]
        agent = head.get("agent") or head[args.modes[0]]
        figures: dict[str, Any] = {"split": head_split, **{k: agent[k] for k in KEYS}}
        for split, body in report.items():
            for mode, fig in body.items():
                for key in ("answer_correct_rate", "answered_rate", OFFCORPUS_KEY, "p50_s"):
                    figures[f"{key}_{mode}_{split}"] = fig[key]
                figures[f"outcomes_{mode}_{split}"] = {
                    "answerable": fig["outcomes_answerable"],
                    "offcorpus": fig["outcomes_unanswerable"]}
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
