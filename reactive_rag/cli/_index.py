"""``reactive-rag index`` and ``reactive-rag search``: build and query local collections."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from reactive_rag.index import (
    EMBEDDER_CHOICES,
    STDLIB_COLLECTION,
    CollectionNotFound,
    CorpusError,
    CorpusIndex,
    IndexReport,
    NothingToIndex,
    SearchFilter,
    SkippedFile,
    SyncMode,
    chunk_url,
    stdlib_documents,
)

from ._index_progress import (
    BuildStopped,
    build_progress,
    open_reporter,
    progress_mode,
    stop_on_sigint,
    stopped_line,
)

__all__ = ["DEFAULT_MAX_FILE_MB", "add_index_commands", "main"]

#: ``--max-file-mb`` default: larger files are rarely prose worth embedding.
DEFAULT_MAX_FILE_MB = 20.0


def add_index_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``index`` and ``search`` sub-commands on the main CLI parser."""
    p = subparsers.add_parser(
        "index", help="index a folder or file into a named collection",
        description="Index txt/md/rst/html(/pdf) files into a collection. Files already in it "
        "are added or updated and the others kept (--sync: the collection becomes exactly "
        "PATH). Unchanged files are not re-embedded; the new generation replaces the old "
        "one atomically. Binary, undecodable, oversized and unsupported files and dangling "
        "links are skipped and listed with a reason. PATH ':stdlib' indexes the Python "
        "standard library documentation.",
    )
    p.add_argument("path", metavar="PATH", help="folder or file (or ':stdlib')")
    p.add_argument("--collection", "-c", required=True, help="collection name")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--sync", action="store_true",
                     help="make the collection exactly PATH: remove documents not under it")
    how.add_argument("--add", action="store_true",
                     help="add/update these documents and keep the others (the default)")
    p.add_argument("--max-file-mb", type=_positive_mb, default=DEFAULT_MAX_FILE_MB,
                   metavar="MB", help="skip files larger than this "
                   f"(default {DEFAULT_MAX_FILE_MB:g})")
    p.add_argument("--embedder", choices=EMBEDDER_CHOICES, default=None,
                   help="auto: multilingual E5 when the documents are CJK text, else MiniLM "
                   "(a collection keeps the one it was built with unless this is given; "
                   "searches always use the recorded one)")
    p.add_argument("--root", type=Path, default=None, help="index folder (default: cache)")
    p.add_argument("--json", action="store_true",
                   help="print only the report as JSON on stdout, nothing on stderr unless "
                        "--verbose (a large-job warning goes into the report's `warnings`)")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="with --json: progress and warnings on stderr as without it")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.set_defaults(func=_cmd_index)

    s = subparsers.add_parser("search", help="search a collection",
                              description="Hybrid (BM25 + dense) search of a collection.")
    s.add_argument("query", help="the search query")
    s.add_argument("--collection", "-c", default=STDLIB_COLLECTION, help="collection name")
    s.add_argument("-k", type=int, default=10, help="number of results (default 10)")
    s.add_argument("--mode", choices=("hybrid", "bm25", "dense"), default="hybrid")
    s.add_argument("--type", dest="doc_types", action="append", help="only this doc type")
    s.add_argument("--tag", dest="tags", action="append", help="only documents with this tag")
    s.add_argument("--since", help="only documents dated on/after (YYYY-MM-DD)")
    s.add_argument("--until", help="only documents dated on/before (YYYY-MM-DD)")
    s.add_argument("--root", type=Path, default=None, help="index folder (default: cache)")
    s.add_argument("--json", action="store_true", help="print results as JSON")
    s.set_defaults(func=_cmd_search)


def _positive_mb(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return value


def _cmd_index(args: argparse.Namespace) -> int:
    index = CorpusIndex(args.root)
    skipped: list[SkippedFile] = []
    mode: SyncMode = "sync" if args.sync else "add"
    machine = args.json and not args.verbose  # --json: stdout is the report, stderr silent
    warnings: list[str] = []
    try:
        with stop_on_sigint() as stop, \
                open_reporter(progress_mode(quiet=args.quiet or machine)) as reporter:
            progress = build_progress(reporter, embed_rate=index.embed_rate,
                                      warnings=warnings, show_warnings=not machine, stop=stop)
            if args.path == ":stdlib":
                report = index.index_documents(args.collection, stdlib_documents(),
                                               mode=mode, progress=progress,
                                               embedder=args.embedder)
            else:
                report = index.index_path(args.collection, args.path, mode=mode,
                                          progress=progress, skipped=skipped,
                                          max_bytes=int(args.max_file_mb * 1e6),
                                          embedder=args.embedder)
    except NothingToIndex as exc:
        print(f"error: {exc}", file=sys.stderr)
        _print_skipped(exc.skipped, sys.stderr)
        return 2
    except (BuildStopped, KeyboardInterrupt):
        print(stopped_line(args.collection), file=sys.stderr, flush=True)
        return 130
    except (CorpusError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        index.close()
    _print_report(report, skipped, as_json=args.json, warnings=warnings)
    return 0


def _print_report(report: IndexReport, skipped: list[SkippedFile], *, as_json: bool,
                  warnings: Sequence[str] = ()) -> None:
    if as_json:
        data: dict[str, object] = {k: getattr(report, k) for k in report.__dataclass_fields__}
        data["skipped"] = [s.to_json() for s in skipped]
        data["warnings"] = list(warnings)
        print(json.dumps(data))
        return
    print(
        f"collection {report.collection!r} generation {report.generation}: "
        f"{report.documents} documents, {report.chunks} chunks ({report.dense} dense search)\n"
        f"  added {report.added}, updated {report.updated}, unchanged {report.unchanged}, "
        f"removed {report.removed}; embedded {report.embedded_chunks} chunks "
        f"in {report.seconds:.1f}s ({report.embedder})"
    )
    _print_skipped(skipped, sys.stdout)


def _print_skipped(skipped: Sequence[SkippedFile], stream: TextIO) -> None:
    if not skipped:
        return
    print(f"  skipped {len(skipped)} file(s):", file=stream)
    width = max(len(s.reason) for s in skipped)
    for s in skipped:
        print(f"    {s.reason:<{width}}  {s.path}" + (f"  ({s.detail})" if s.detail else ""),
              file=stream)


def _cmd_search(args: argparse.Namespace) -> int:
    filters = None
    try:
        if args.doc_types or args.tags or args.since or args.until:
            filters = SearchFilter(doc_types=args.doc_types, tags=args.tags,
                                   date_from=args.since, date_to=args.until)
        with CorpusIndex(args.root) as index:
            t0 = time.perf_counter()
            results = index.search(args.query, collection=args.collection, k=args.k,
                                   mode=args.mode, filters=filters)
            elapsed = time.perf_counter() - t0
    except (CorpusError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        if isinstance(exc, CollectionNotFound) and args.collection == STDLIB_COLLECTION:
            print("hint: build it with `reactive-rag index :stdlib --collection stdlib`",
                  file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([
            {"rank": i + 1, "score": r.score, "bm25": r.bm25_score, "dense": r.dense_score,
             "chunk_id": r.chunk.id, "doc_id": r.chunk.doc_id, "title": r.chunk.title,
             "url": chunk_url(r.chunk), "text": r.chunk.text}
            for i, r in enumerate(results)
        ]))
        return 0
    from rich.table import Table

    from ._safe_text import SafeConsole

    table = Table(title=f"{args.query!r} in {args.collection} ({elapsed * 1000:.0f} ms)",
                  show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("source")
    table.add_column("text")
    for i, r in enumerate(results):
        text = " ".join(r.chunk.text.split())
        table.add_row(str(i + 1), f"{r.score:.3f}", f"{r.chunk.id}\n{chunk_url(r.chunk)}",
                      text[:240] + ("…" if len(text) > 240 else ""))
    SafeConsole().print(table)  # page text may carry escape sequences
    if not results:
        print("no results")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point for these two commands (the main CLI embeds them)."""
    parser = argparse.ArgumentParser(prog="reactive-rag")
    sub = parser.add_subparsers(dest="command", required=True)
    add_index_commands(sub)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
