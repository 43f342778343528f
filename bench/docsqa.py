"""Questions a user asks of a real HTML manual: SQLite's, as Debian's ``sqlite3-doc`` ships it.

    bash scripts/get-manual.sh            # once: installs the manual, prints its folder
    python bench/docsqa.py [--manual PATH] [--split tune|report|both] [--modes agent,rag]
                           [--limit N] [--cap N] [--root DIR] [--dump FILE] [--json]

Every HTML page of the manual (``--manual``, default the package's folder) is one
document of one collection, loaded with the project's own folder loader and indexer
(what ``reactive-rag index`` does with a folder). The questions
(``bench/data/docsqa_sqlite.jsonl``) are written in a user's words, not the
manual's: answerable rows carry gold strings, every one of which is checked against
the manual's extracted text before anything runs (the bench stops, naming every row
whose gold is absent); unanswerable rows ask about things the manual does not cover.
Loading, gold checks, halves, runs and scores are ``bench/_qaset.py``'s: even rows
are the tune half, odd rows the report half. ``--limit N`` keeps the first N
answerable and the first N unanswerable rows of a half.

Reported per path (agent, rag) and half:
- ``answer_correct_rate``: answerable questions ending answered or ``partial`` whose
  answer contains a gold string (NFKC, case folded, whitespace collapsed, whole words);
- ``answered_rate``: answerable questions ending answered;
- ``unanswerable_answered_rate``: unanswerable questions ending answered;
- ``answer_in_writer_evidence``: answerable questions with a gold string in a chunk
  handed to the writer (retrieval and selection, whatever the writer did with it);
- ``claims_cut_mid_sentence``: share of claims whose quote ends without sentence-final
  punctuation and is not the end of its chunk (hard-wrap and chunking artefacts);
- outcome counts and ``p50_s`` (median seconds per question).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _qaset import (  # bench/ sibling (the script's folder)
    QAResult,
    QuestionSetError,
    Split,
    add_run_arguments,
    check_gold,
    fold,
    load_questions,
    print_table,
    run_questions,
    score,
    split_rows,
)

from reactive_rag import Engine
from reactive_rag.index import CorpusIndex, Document, IndexReport, load_folder
from reactive_rag.index._builder import document_text

HERE = Path(__file__).resolve().parent
#: Where Debian's ``sqlite3-doc`` puts the manual (``scripts/get-manual.sh`` prints it).
DEFAULT_MANUAL = Path("/usr/share/doc/sqlite3")
QUESTIONS = HERE / "data" / "docsqa_sqlite.jsonl"
COLLECTION = "sqlite-manual"
_SENTENCE_END = re.compile(r"[.!?:;\u3002\uff01\uff1f\uff1b][\"'\u201d\u2019)\]]*$")
#: Figures of one path over one half, as printed and as ``--json`` keys.
KEYS = ("answer_correct_rate", "answered_rate", "unanswerable_answered_rate",
        "answer_in_writer_evidence", "claims_cut_mid_sentence", "p50_s")


def bench_root(given: Path | None) -> Path:
    """Where the bench keeps its index and vector cache."""
    return given or Path(os.environ.get("REACTIVE_RAG_HOME", Path.home() / ".cache"
                                        / "reactive_rag")) / "bench-docsqa"


def load_manual(folder: Path) -> list[Document]:
    """Every HTML page of the manual, one document each (the project's folder loader)."""
    return list(load_folder(folder, suffixes=(".html", ".htm"), skipped=[]))


def manual_texts(docs: Sequence[Document]) -> dict[str, str]:
    """Document id -> its extracted (cleaned) text, what the gold strings are checked against."""
    return {d.id: document_text(d) for d in docs}


def index_manual(index: CorpusIndex, docs: Sequence[Document]) -> IndexReport:
    """The manual's collection in ``index`` (unchanged pages are not embedded again)."""
    return index.index_documents(COLLECTION, docs, mode="sync")


def build_collection(index: CorpusIndex) -> str:
    """The manual (from its default folder) as a collection of ``index``; its name."""
    index_manual(index, load_manual(DEFAULT_MANUAL))
    return COLLECTION


def cut_mid_sentence(result: QAResult) -> tuple[int, int]:
    """``(claims, claims whose quote stops mid-sentence)``: no final punctuation and not
    the end of the chunk it was quoted from."""
    claims = cut = 0
    for cite in result.citations:
        claims += 1
        quote = cite.claim.quote.strip()
        if _SENTENCE_END.search(quote):
            continue
        if cite.chunk is not None and fold(cite.chunk.text).endswith(fold(quote)):
            continue
        cut += 1
    return claims, cut


def figures(results: Sequence[QAResult]) -> dict[str, Any]:
    """``_qaset.score``'s figures plus the manual's own: writer evidence and cut claims."""
    out = score(results)
    answerable = [r for r in results if r.row["answerable"]]
    claims = cut = 0
    for r in results:
        n, c = cut_mid_sentence(r)
        claims, cut = claims + n, cut + c
    out["answer_in_writer_evidence"] = (
        round(sum(r.gold_in_writer_evidence for r in answerable) / len(answerable), 4)
        if answerable else 0.0)
    out["claims_cut_mid_sentence"] = round(cut / claims, 4) if claims else 0.0
    out["claims"] = claims
    return out


def limit_rows(rows: Sequence[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` answerable and the first ``limit`` unanswerable rows (all if 0)."""
    if not limit:
        return list(rows)
    return ([r for r in rows if r["answerable"]][:limit]
            + [r for r in rows if not r["answerable"]][:limit])


async def evaluate(args: argparse.Namespace, docs: Sequence[Document],
                   rows: Sequence[dict[str, Any]]
                   ) -> tuple[dict[str, Any], dict[str, Any], list[QAResult]]:
    """``(index figures, report[split][mode] figures, every result)``."""
    index = CorpusIndex(bench_root(args.root))
    engine = Engine(index)
    report: dict[str, Any] = {}
    every: list[QAResult] = []
    try:
        t0 = time.perf_counter()
        built = index_manual(index, docs)
        index_figures = {"documents": built.documents, "chunks": built.chunks,
                         "embedder": built.embedder, "embedded_now": built.embedded_chunks,
                         "seconds": round(time.perf_counter() - t0, 1)}
        budget = {"final_evidence": args.cap}
        splits: list[Split] = ["tune", "report"] if args.split == "both" else [args.split]
        for split in splits:
            part = limit_rows(split_rows(rows, split), args.limit)
            report[split] = {}
            for mode in args.modes:
                results = await run_questions(engine, part, COLLECTION, mode, budget)
                every += results
                report[split][mode] = figures(results)
    finally:
        await engine.aclose()  # closes the index too
    return index_figures, report, every


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--manual", type=Path, default=DEFAULT_MANUAL,
                        help="folder of the manual's HTML pages (scripts/get-manual.sh)")
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--cap", type=int, default=5, help="evidence chunks given to the writer")
    add_run_arguments(parser, limit_help="first N answerable and N unanswerable rows per half")
    args = parser.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not (args.manual / "index.html").exists():
        print(f"no manual at {args.manual}: run `bash scripts/get-manual.sh` (installs Debian's "
              "sqlite3-doc and prints its folder), or pass --manual PATH", file=sys.stderr)
        return 2
    try:
        rows = load_questions(args.questions)
    except QuestionSetError as exc:
        print(f"docsqa: {exc}", file=sys.stderr)
        return 1
    docs = load_manual(args.manual)
    try:
        check_gold(rows, manual_texts(docs))  # every row, whatever the split
    except QuestionSetError as exc:
        print(f"docsqa: the manual's extracted text lacks gold strings: {exc}", file=sys.stderr)
        return 3
    index_figures, report, every = asyncio.run(evaluate(args, docs, rows))
    if args.dump:
        with args.dump.open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in every)
    ix = index_figures
    print(f"manual: {ix['documents']} pages, {ix['chunks']} chunks, embedder {ix['embedder']} "
          f"({ix['embedded_now']} embedded now, {ix['seconds']} s)")
    print_table(report, ("n_answerable", "n_unanswerable", *KEYS))
    if args.json and args.modes:
        head_split = "report" if "report" in report else "tune"
        head = report[head_split]
        first = head.get("agent") or head[args.modes[0]]
        out: dict[str, Any] = {"split": head_split, "answerable": first["n_answerable"],
                               "unanswerable": first["n_unanswerable"],
                               "pages": ix["documents"], "chunks": ix["chunks"],
                               **{k: first[k] for k in KEYS}}
        for split, body in report.items():
            for mode, fig in body.items():
                for key in KEYS:
                    out[f"{key}_{mode}_{split}"] = fig[key]
                out[f"outcomes_{mode}_{split}"] = {
                    "answerable": fig["outcomes_answerable"],
                    "unanswerable": fig["outcomes_unanswerable"]}
        print(json.dumps(out, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
