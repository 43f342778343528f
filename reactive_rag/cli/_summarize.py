"""``reactive-rag summarize DOC``: start a document's background summary task and follow it.

The task is the server's (:class:`~reactive_rag.tasks.TaskManager`): stored in the run
store before it starts (``--store``, default ``$REACTIVE_RAG_HOME/runs.db``, as
``serve`` reads), its progress persisted after every chunk. This command runs it here
and prints its progress (stderr) and its summary (stdout; ``--json``: the task as
``GET /v1/tasks/{id}`` shows it). Stopped (Ctrl-C), the task stays unfinished in the
store, and a server over the same store resumes it from its last chunk.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from reactive_rag.index import CorpusIndex
from reactive_rag.store import BackgroundTask, RunStore
from reactive_rag.tasks import DocumentNotFound, TaskManager, TaskProgress

from ._safe_text import SafeConsole, safe_json, visible
from ._store import STORE_TENANT

__all__ = ["add_summarize_commands", "find_collection"]

EXIT_NOT_FOUND = 2
"""The exit status when the document (or its collection) is not indexed."""


def add_summarize_commands(
        subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``summarize`` on the main CLI parser."""
    p = subparsers.add_parser(
        "summarize", help="summarise one whole document in a background task, and follow it",
        description="Starts the whole-document summary task (the one `POST /v1/tasks` and "
        "agent runs start for 'summarise <document>' questions), stored in the run store, "
        "and follows it to its end: progress on stderr, the summary on stdout.")
    p.add_argument("doc", help="the document id (as `index` printed it, e.g. guides/setup.md)")
    p.add_argument("-c", "--collection", default=None,
                   help="its collection (default: the one collection that has it)")
    p.add_argument("--root", type=Path, default=None, help="index folder (default: cache)")
    p.add_argument("--store", default=None, metavar="PATH|URL",
                   help="run store the task is kept in (default $REACTIVE_RAG_HOME/runs.db)")
    p.add_argument("--sentences", type=int, default=5, help="sentences in the summary")
    p.add_argument("--json", action="store_true", help="print the finished task as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_summarize)


def find_collection(index: CorpusIndex, doc_id: str) -> list[str]:
    """The collections of ``index`` holding a document ``doc_id``."""
    return [c for c in index.collections() if doc_id in index.document_titles(c)]


def _summarize(args: argparse.Namespace) -> int:
    err = SafeConsole(stderr=True, soft_wrap=True)
    if args.sentences < 1:
        err.print("[red]error:[/red] --sentences must be at least 1")
        return EXIT_NOT_FOUND
    index = CorpusIndex(args.root) if args.root is not None else CorpusIndex()
    try:
        collection = args.collection
        if collection is None:
            found = find_collection(index, args.doc)
            if len(found) != 1:
                where = (f"in several collections ({', '.join(found)}): pass --collection"
                         if found else "in no indexed collection")
                err.print(f"[red]error:[/red] document {escape(args.doc)!r} is {where}")
                return EXIT_NOT_FOUND
            collection = found[0]
        return asyncio.run(_follow(index, collection, args, err))
    finally:
        index.close()


async def _open_store(target: str | None) -> RunStore:
    from reactive_rag.server import ServerConfig, make_store

    store = make_store(ServerConfig.load(store=target).store_target())
    await store.open()
    return store


async def _follow(index: CorpusIndex, collection: str, args: argparse.Namespace,
                  err: Console) -> int:
    store = await _open_store(args.store)
    manager = TaskManager(store, index, sentences=args.sentences)
    try:
        try:
            task = await manager.submit_summary(collection, args.doc, tenant=STORE_TENANT)
        except DocumentNotFound as exc:
            err.print(f"[red]error:[/red] {escape(str(exc))}")
            return EXIT_NOT_FOUND
        if not args.quiet:
            err.print(f"task {task.task_id}: summarising {escape(args.doc)!r} "
                      f"of {escape(collection)!r}")
            stream = manager.stream(task.task_id)
            if stream is not None:
                stream.tap(("task.progress",), lambda e: _progress(e, err), name="cli-progress")
        final = await manager.wait(task.task_id)
    finally:
        await manager.aclose()
        await store.close()
    _print(final, as_json=args.json, err=err)
    return 0 if final.status.value == "done" else 1


def _progress(event: object, err: Console) -> None:
    if isinstance(event, TaskProgress):
        err.print(f"[dim]  chunk {event.done}/{event.total}[/dim]")


def _print(task: BackgroundTask, *, as_json: bool, err: Console) -> None:
    from reactive_rag.server import task_view

    if as_json:
        print(safe_json(json.dumps(task_view(task), ensure_ascii=False)))
        return
    if task.status.value != "done" or not isinstance(task.result, dict):
        err.print(f"[red]task {task.task_id} {task.status.value}[/red] {escape(task.error or '')}")
        return
    sentences = task.result.get("sentences")
    for sentence in sentences if isinstance(sentences, list) else []:
        if isinstance(sentence, dict):
            print(visible(f"- {sentence.get('text', '')} [{sentence.get('chunk_id', '')}]"))
    err.print(f"[dim]task {task.task_id} done ({task.result.get('chunks')} chunks)[/dim]")
