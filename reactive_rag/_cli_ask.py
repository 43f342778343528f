"""``reactive-rag ask`` and ``reactive-rag demo``: a run with a live view of its stream."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from actors.models import OpenAIChatClient
from actors.providers import CredibilitySettings, ProviderError, load_search_config
from actors.rerank import Credibility
from actors.search import Searcher
from streams import AsyncSubscriber, ConflictDetected, OverflowPolicy

from ._console import EventPrinter, conflict_sides
from ._engine import Engine, RunResult
from .agent import ChatEntailment, ChatPlanner, ChatWriter, PlannerPolicy, WriterPolicy
from .index import STDLIB_COLLECTION, CorpusIndex
from .run import RunConfigError

__all__ = ["DEMO_QUESTION", "add_ask_commands", "credibility_from", "render_result", "result_json"]

DEMO_QUESTION = "How can I cache the results of an expensive function call?"


def add_ask_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``ask`` and ``demo`` on the main CLI parser."""
    ask = subparsers.add_parser(
        "ask", help="answer a question with verified citations, showing the run live",
        description="Runs the agent (or one-shot RAG) over local collections and prints its "
        "event stream live, then the answer with numbered citations and their quotes.")
    ask.add_argument("question")
    _run_options(ask)
    ask.set_defaults(func=_cmd_ask)
    demo = subparsers.add_parser(
        "demo", help="index the bundled default corpus (first time) and answer a question",
        description="Builds (or reuses) the standard-library documentation index and asks "
        "a real question over it, showing the whole run.")
    demo.add_argument("question", nargs="?", default=DEMO_QUESTION)
    _run_options(demo)
    demo.set_defaults(func=_cmd_ask)


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--collection", "-c", action="append", dest="collections",
                   help=f"collection to search (repeatable; default {STDLIB_COLLECTION})")
    p.add_argument("--mode", choices=("agent", "rag"), default="agent")
    p.add_argument("--budget", action="append", default=[], metavar="NAME=VALUE",
                   help="override a budget limit, e.g. max_tool_calls=4 or wall_s=30")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--quiet", "-q", action="store_true", help="no live event view")
    p.add_argument("--progress", action="store_true", help="show budget ticks in the live view")
    p.add_argument("--root", type=Path, default=None, help="index folder (default: cache)")
    p.add_argument("--web", action="store_true",
                   help="also search the web with the configured providers (see README)")
    p.add_argument("--model-url", default=os.environ.get("REACTIVE_RAG_CHAT_URL"),
                   help="OpenAI-compatible chat server for the planner and writer "
                        "(default: $REACTIVE_RAG_CHAT_URL; none: offline policies)")
    p.add_argument("--model", default=os.environ.get("REACTIVE_RAG_CHAT_MODEL", "default"),
                   help="model name sent to the chat server")
    p.add_argument("--model-quirks", choices=("none", "llama-cpp-python"),
                   default=os.environ.get("REACTIVE_RAG_CHAT_QUIRKS", "none"),
                   help="work around a server's limits (llama-cpp-python: no streamed tool "
                        "calls, tool results sent as user messages)")
    p.add_argument("--entailment-url", default=os.environ.get("REACTIVE_RAG_ENTAILMENT_URL"),
                   help="OpenAI-compatible chat server that must also judge that each quote "
                        "entails its claim (default: $REACTIVE_RAG_ENTAILMENT_URL; none: the "
                        "offline checks only)")
    p.add_argument("--entailment-model",
                   default=os.environ.get("REACTIVE_RAG_ENTAILMENT_MODEL", "default"),
                   help="model name sent to the entailment server")


def _parse_budget(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise RunConfigError(f"--budget takes NAME=VALUE, got {item!r}")
        try:
            out[name.strip()] = int(raw) if raw.strip().lstrip("-").isdigit() else float(raw)
        except ValueError as exc:
            raise RunConfigError(f"--budget {name}: {raw!r} is not a number") from exc
    return out


def _cmd_ask(args: argparse.Namespace) -> int:
    console = Console(highlight=False, stderr=args.json)
    try:
        budget = _parse_budget(args.budget)
        result = asyncio.run(_ask(args, console, budget))
    except RunConfigError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}")
        return 2
    if args.json:
        print(json.dumps(result_json(result), ensure_ascii=False))
    else:
        render_result(result, console)
    return 0 if result.answered or result.outcome in ("partial", "no_evidence") else 1


async def _ask(args: argparse.Namespace, console: Console, budget: dict[str, Any]) -> RunResult:
    web: Searcher | None = None
    chat: OpenAIChatClient | None = None
    compression: Literal["none", "rag"] = "none"
    settings = CredibilitySettings()
    if args.web:
        try:
            tenant = load_search_config().tenant()
            web = Searcher.from_config(tenant)
        except ProviderError as exc:
            raise RunConfigError(f"--web: {exc}") from exc
        compression = tenant.compression
        settings = tenant.credibility
    else:
        with contextlib.suppress(ProviderError):  # a local run needs no web config
            settings = load_search_config().tenant().credibility
    credibility = credibility_from(settings)
    planner: Callable[[], PlannerPolicy] | None = None
    writer: Callable[[], WriterPolicy] | None = None
    if args.model_url:
        chat = OpenAIChatClient(args.model_url, model=args.model,
                                api_key=os.environ.get("REACTIVE_RAG_CHAT_API_KEY"))
        client = chat
        quirky = args.model_quirks == "llama-cpp-python"

        def planner() -> PlannerPolicy:
            return ChatPlanner(client, stream=not quirky, results_as_user=quirky)

        def writer() -> WriterPolicy:
            return ChatWriter(client)

    judge: OpenAIChatClient | None = None
    if args.entailment_url:
        judge = OpenAIChatClient(args.entailment_url, model=args.entailment_model,
                                 api_key=os.environ.get("REACTIVE_RAG_ENTAILMENT_API_KEY"))
    engine = Engine(CorpusIndex(args.root), web=web, web_compression=compression,
                    planner=planner, writer=writer, credibility=credibility,
                    entailment=ChatEntailment(judge) if judge is not None else None)
    try:
        collections = tuple(args.collections or (STDLIB_COLLECTION,))
        if STDLIB_COLLECTION in collections and not engine.index.exists(STDLIB_COLLECTION):
            await asyncio.to_thread(_build_default, engine, console, args.json)
        handle = engine.start(args.question, mode=args.mode, collections=collections,
                              budget=budget)
        view: AsyncSubscriber | None = None
        if not args.quiet:
            printer = EventPrinter(console, show_progress=args.progress)
            view = AsyncSubscriber(printer, name="terminal", maxsize=10_000,
                                   policy=OverflowPolicy.DROP_NORMAL).attach(handle.stream)
        result = await handle.wait()
        if view is not None:
            await view.wait()
        return result
    finally:
        await engine.aclose()
        if web is not None:
            await web.aclose()
        if chat is not None:
            await chat.aclose()
        if judge is not None:
            await judge.aclose()


def credibility_from(settings: CredibilitySettings) -> Credibility:
    """The credibility table a tenant's ``[credibility]`` settings describe."""
    base = Credibility.defaults() if settings.defaults else Credibility()
    return base.merged(domains=settings.domains, collections=settings.collections)


def _build_default(engine: Engine, console: Console, quiet: bool) -> None:
    console.print("[dim]Indexing the standard-library documentation (first run only; "
                  "embeddings are cached on disk)…[/dim]")
    bar_context: AbstractContextManager[Progress | None] = (
        nullcontext(None) if quiet else Progress(
            TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(),
            console=console, transient=True))
    with bar_context as bar:
        tasks: dict[str, TaskID] = {}

        def progress(done: int, total: int, stage: str) -> None:
            if bar is None:
                return
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        engine.ensure_stdlib_corpus(progress)


def render_result(result: RunResult, console: Console) -> None:
    """The final answer with numbered citations, their quotes and sources."""
    console.rule(f"{result.outcome.replace('_', ' ')} in {result.elapsed_s:.1f}s")
    if result.answer:
        console.print(result.answer)
    if result.reason:
        console.print(f"[dim]{result.reason}[/dim]")
    for cite in result.citations:
        source = cite.chunk.title or cite.chunk.doc_id if cite.chunk else cite.claim.source_id
        where = cite.chunk.url if cite.chunk else ""
        cred = (f" [dim]credibility {cite.credibility:g}[/dim]"
                if cite.credibility is not None else "")
        console.print(f"  [{cite.number}] [bold]{source}[/bold] [dim]{where}[/dim]{cred}")
        console.print(f"      “{' '.join(cite.claim.quote.split())}”", style="italic")
    for conflict in _conflicts(result):
        sides = conflict_sides(conflict.sides, conflict.preferred)
        console.print(f"[bold magenta]sources disagree[/bold magenta] on {conflict.attribute} "
                      f"of {conflict.subject}: {sides}")
    console.print(f"[dim]{result.count('search.requested')} searches, "
                  f"{result.count('read.requested')} reads, {len(result.evidence)} evidence "
                  f"chunks, {len(result.events)} events (run {result.run_id})[/dim]")


def result_json(result: RunResult) -> dict[str, Any]:
    """The result as plain JSON data."""
    return {
        "run_id": result.run_id,
        "outcome": result.outcome,
        "answer": result.answer,
        "reason": result.reason,
        "elapsed_s": round(result.elapsed_s, 3),
        "citations": [c.to_json() for c in result.citations],
        "conflicts": [c.conflict().model_dump(mode="json") for c in _conflicts(result)],
        "evidence": len(result.evidence),
        "searches": result.count("search.requested"),
        "reads": result.count("read.requested"),
        "events": len(result.events),
    }


def _conflicts(result: RunResult) -> list[ConflictDetected]:
    return [e for e in result.events if isinstance(e, ConflictDetected)]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)
