"""``reactive-rag ask`` and ``reactive-rag demo``: a run with a live view of its stream.

``--record FILE`` tapes the run's outside responses and ``--replay FILE`` runs it again
from the tape alone (see :mod:`reactive_rag.cassette`).

Ctrl-C cancels the run: it ends ``cancelled``, is kept in the run store like any other,
one line says so and the exit status is 130. During the first run's indexing it stops
the build at its next batch, before anything is written (again 130 and one line).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from actors import EdgeOperator
from actors.providers import (
    CredibilitySettings,
    ProviderError,
    TenantSearchConfig,
    load_search_config,
)
from actors.rerank import Credibility
from actors.scrape import ScraperActor
from actors.search import Searcher
from reactive_rag.cassette import (
    Cassette,
    CassetteError,
    CassetteHeader,
    CassetteSetup,
    ChatSetup,
    describe_searcher,
)
from reactive_rag.engine import (
    CHAT_QUIRKS,
    ChatConfig,
    Engine,
    EngineConfig,
    EntailmentConfig,
    Mode,
    PriceTable,
    Research,
    RunHandle,
    RunResult,
    Taps,
    assemble,
    chat_policies,
    credibility_from,
    research_from,
    usage_json,
    usage_line,
)
from reactive_rag.index import STDLIB_COLLECTION, CorpusIndex
from reactive_rag.judgement import (
    ModelRewriter,
    PlannerPolicy,
    SufficiencyJudge,
    SupportJudge,
    WriterPolicy,
)
from reactive_rag.judgement.model import ChatRewriter, ChatSufficiency, ChatSupportJudge
from reactive_rag.run import Budget, RunConfigError
from streams import AsyncSubscriber, ConflictDetected, OverflowPolicy

from ._console import EventPrinter, conflict_sides
from ._index_progress import (
    BuildStopped,
    build_progress,
    open_reporter,
    progress_mode,
    stopped_line,
)
from ._safe_text import SafeConsole, safe_json
from ._store import add_store_options, keep_result, warn_unstored

__all__ = ["DEMO_QUESTION", "RunSetup", "add_ask_commands", "add_run_setup_options",
           "build_engine", "credibility_from", "ensure_default_corpus", "live_setup",
           "parse_budget", "render_result", "report_result", "result_json"]

DEMO_QUESTION = "How can I cache the results of an expensive function call?"


def add_ask_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``ask`` and ``demo`` on the main CLI parser."""
    ask = subparsers.add_parser(
        "ask", help="answer a question with verified citations, showing the run live",
        description="Runs the agent (or one-shot RAG) over local collections and prints its "
        "event stream live, then the answer with numbered citations and their quotes.")
    ask.add_argument("question", nargs="?", help="the question (with --replay: the recorded one)")
    add_run_setup_options(ask)
    add_store_options(ask)
    ask.set_defaults(func=_cmd_ask, default_question=None, demo=False)
    demo = subparsers.add_parser(
        "demo", help="index the bundled default corpus (first time) and answer a question",
        description="Builds (or reuses) the standard-library documentation index and asks "
        "a real question over it, showing the whole run.")
    demo.add_argument("question", nargs="?", help=f"default: {DEMO_QUESTION!r}")
    add_run_setup_options(demo)
    add_store_options(demo)
    demo.set_defaults(func=_cmd_ask, default_question=DEMO_QUESTION, demo=True)


def add_run_setup_options(p: argparse.ArgumentParser, *, one_run: bool = True) -> None:
    """The options a run is set up from (engine, collections, budget, models, live view).

    ``one_run=False`` leaves out what only fits a single run (``--json``, ``--record``,
    ``--replay``), for commands that start many runs (``chat``).
    """
    p.add_argument("--collection", "-c", action="append", dest="collections",
                   help=f"collection to search (repeatable; default {STDLIB_COLLECTION})")
    p.add_argument("--mode", choices=("agent", "rag"), default=None, help="default: agent")
    p.add_argument("--budget", action="append", default=[], metavar="NAME=VALUE",
                   help="override a budget limit, e.g. max_tool_calls=4 or wall_s=30")
    if one_run:
        p.add_argument("--json", action="store_true",
                       help="print the result as one JSON object, and nothing else "
                            "(no live view or notes on stderr unless --verbose)")
        p.add_argument("--verbose", "-v", action="store_true",
                       help="with --json: also show the live view and notes on stderr")
        p.add_argument("--prices", type=Path, metavar="FILE",
                       default=os.environ.get("REACTIVE_RAG_PRICES") or None,
                       help="TOML price table the run's cost is estimated with (default: "
                            "$REACTIVE_RAG_PRICES; see docs/configuration.md)")
    p.add_argument("--quiet", "-q", action="store_true", help="no live event view")
    p.add_argument("--progress", action="store_true", help="show budget ticks in the live view")
    p.add_argument("--root", type=Path, default=None, help="index folder (default: cache)")
    p.add_argument("--web", action="store_true",
                   help="also search the web with the configured providers "
                        "(see docs/configuration.md)")
    p.add_argument("--model-url", default=os.environ.get("REACTIVE_RAG_CHAT_URL"),
                   help="OpenAI-compatible chat server for the planner and writer "
                        "(default: $REACTIVE_RAG_CHAT_URL; none: offline policies)")
    p.add_argument("--model", default=os.environ.get("REACTIVE_RAG_CHAT_MODEL", "default"),
                   help="model name sent to the chat server")
    p.add_argument("--model-quirks", choices=CHAT_QUIRKS,
                   default=os.environ.get("REACTIVE_RAG_CHAT_QUIRKS", "none"),
                   help="work around a server's limits (llama-cpp-python: no streamed tool "
                        "calls, tool results sent as user messages; no-tool-template: "
                        "tool calls through a JSON-schema-constrained reply)")
    p.add_argument("--entailment-url", default=os.environ.get("REACTIVE_RAG_ENTAILMENT_URL"),
                   help="OpenAI-compatible chat server that must also judge that each quote "
                        "entails its claim (default: $REACTIVE_RAG_ENTAILMENT_URL; none: the "
                        "offline checks only)")
    p.add_argument("--entailment-model",
                   default=os.environ.get("REACTIVE_RAG_ENTAILMENT_MODEL", "default"),
                   help="model name sent to the entailment server")
    if not one_run:
        p.set_defaults(json=False, verbose=False, record=None, replay=None, prices=None)
        return
    tape = p.add_mutually_exclusive_group()
    tape.add_argument("--record", type=Path, metavar="FILE",
                      help="store every search response, fetched page and chat completion "
                           "of the run in FILE (JSON lines), to --replay it later")
    tape.add_argument("--replay", type=Path, metavar="FILE",
                      help="run a --record FILE again with no network, provider config or "
                           "API keys: question, options and run id come from the file")


def parse_budget(items: list[str]) -> dict[str, Any]:
    """``--budget NAME=VALUE`` items as budget overrides (numbers; ``true``/``false``)."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise RunConfigError(f"--budget takes NAME=VALUE, got {item!r}")
        if raw.strip().lower() in ("true", "false"):  # a switch, e.g. compress_context=true
            out[name.strip()] = raw.strip().lower() == "true"
            continue
        try:
            out[name.strip()] = int(raw) if raw.strip().lstrip("-").isdigit() else float(raw)
        except ValueError as exc:
            raise RunConfigError(f"--budget {name}: {raw!r} is not a number") from exc
    return out


#: The exit status after Ctrl-C (128 + SIGINT), as a shell reports an interrupted command.
EXIT_INTERRUPTED = 130


def _cmd_ask(args: argparse.Namespace) -> int:
    console = SafeConsole(highlight=False, stderr=args.json)
    if args.json and not args.verbose:
        args.quiet = True  # --json: the one JSON object, nothing else unless asked
    ctrl_c = _CtrlC()
    try:
        budget = parse_budget(args.budget)
        prices = PriceTable() if args.prices is None else PriceTable.load(args.prices)
        result, problem = asyncio.run(_ask_and_keep(args, console, budget, ctrl_c))
    except RunConfigError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}")
        return 2
    except BuildStopped:
        print(stopped_line(STDLIB_COLLECTION), file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except (_NotStarted, KeyboardInterrupt):  # KeyboardInterrupt: before _on_sigint
        print("cancelled before the run started", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    if problem is not None:
        warn_unstored(problem)
    if ctrl_c.cancelled(result):
        if args.json:
            print(safe_json(json.dumps(result_json(result, prices), ensure_ascii=False)))
        kept = (f"run {result.run_id} kept; see reactive-rag replay {result.run_id}"
                if args.keep and problem is None else f"run {result.run_id} not kept")
        print(f"cancelled ({kept})", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    return report_result(result, console, as_json=args.json, prices=prices)


async def _ask_and_keep(args: argparse.Namespace, console: Console, budget: dict[str, Any],
                        ctrl_c: _CtrlC) -> tuple[RunResult, str | None]:
    """The run, then (``--no-store`` aside) its store write; Ctrl-C is ``ctrl_c``'s all along.

    Returns:
        The result and, if it could not be stored, the line that says why.
    """
    with _on_sigint(asyncio.get_running_loop(), ctrl_c):
        result = await _ask(args, console, budget, ctrl_c)
        problem = await keep_result(result, args.store) if args.keep else None
    return result, problem


class _NotStarted(Exception):
    """Ctrl-C came before the run was started: none is."""


class _CtrlC:
    """What Ctrl-C does during ``ask``/``demo``.

    Indexing the default corpus: stop the build at its next batch (``stop``).
    The run going on: cancel it (it ends ``cancelled`` and is kept). Otherwise
    (the run has ended and is being stored) nothing. A second Ctrl-C while the
    first is still being carried out leaves at once (exit status 130).
    """

    REASON = "cancelled with Ctrl-C"

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.handle: RunHandle | None = None
        self.pressed = False

    def __call__(self) -> None:
        if self.pressed:
            print("interrupted again: leaving now", file=sys.stderr, flush=True)
            os._exit(EXIT_INTERRUPTED)
        self.pressed = True
        self.stop.set()  # the build (if one is going on) stops at its next batch
        if self.handle is not None:
            self.handle.cancel(self.REASON)

    def cancelled(self, result: RunResult) -> bool:
        """Whether Ctrl-C is what ended this run."""
        return self.pressed and result.outcome == "cancelled"


@contextlib.contextmanager
def _on_sigint(loop: asyncio.AbstractEventLoop, handler: Callable[[], None]) -> Iterator[None]:
    """Call ``handler`` on Ctrl-C instead of interrupting everything (where supported)."""
    try:
        loop.add_signal_handler(signal.SIGINT, handler)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, Windows
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def report_result(result: RunResult, console: Console, *, as_json: bool,
                  prices: PriceTable | None = None) -> int:
    """Print a finished run (rendered, or one JSON object); its exit status."""
    if as_json:
        print(safe_json(json.dumps(result_json(result, prices), ensure_ascii=False)))
    else:
        render_result(result, console, prices)
    return 0 if result.answered or result.outcome in ("partial", "no_evidence",
                                                      "handed_off") else 1


@dataclass
class StartOptions:
    """The run ``ask`` starts: :meth:`Engine.start`'s keywords, typed (live or replayed)."""

    question: str
    mode: Mode = "agent"
    collections: tuple[str, ...] = ()
    budget: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None
    edges: dict[str, list[EdgeOperator]] = field(default_factory=dict)

    @classmethod
    def recorded(cls, cassette: Cassette) -> StartOptions:
        """The recorded run's options (its edges included: one cassette is one run)."""
        h = cassette.header
        mode: Mode = "rag" if h.mode == "rag" else "agent"
        if h.mode not in ("agent", "rag"):
            raise RunConfigError(f"--replay: unknown mode {h.mode!r} in the cassette")
        return cls(question=h.question, mode=mode, collections=tuple(h.collections),
                   budget=dict(h.budget), run_id=h.run_id, edges=cassette.edges())

    def start(self, engine: Engine) -> RunHandle:
        """Start this run on ``engine``."""
        return engine.start(self.question, mode=self.mode, collections=self.collections,
                            budget=self.budget, run_id=self.run_id, edges=self.edges or None)


@dataclass
class RunSetup:
    """What one ``ask`` run is built from, live or replayed, and what to close after it."""

    start: StartOptions
    credibility: Credibility
    web: Searcher | None = None
    compression: Literal["none", "rag"] = "none"
    planner: Callable[[], PlannerPolicy] | None = None
    writer: Callable[[], WriterPolicy] | None = None
    entailment: SupportJudge | None = None
    sufficiency: SufficiencyJudge | None = None
    rewriter: ModelRewriter | None = None
    scraper: Callable[[], ScraperActor] | None = None
    cassette: Cassette | None = None
    research: Research | None = None
    """What a live run's config built (:func:`~reactive_rag.engine.research_from`)."""
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def aclose(self) -> None:
        for close in self.closers:
            with contextlib.suppress(Exception):
                await close()
        if self.cassette is not None:
            self.cassette.close()


async def _ask(args: argparse.Namespace, console: Console, budget: dict[str, Any],
               ctrl_c: _CtrlC) -> RunResult:
    setup = _replayed(args, budget) if args.replay else _live(args, budget)
    engine = build_engine(args, setup)
    started = False
    try:
        await ensure_default_corpus(engine, console, setup.start.collections, args.quiet,
                                    stop=ctrl_c.stop)
        if args.demo and not args.quiet:
            console.print(f"[dim]index: {escape(str(engine.index.root))} (collection "
                          f"{STDLIB_COLLECTION}; REACTIVE_RAG_HOME or --root moves it)[/dim]")
        if ctrl_c.pressed:  # Ctrl-C once the build was writing: it finished; start nothing
            raise _NotStarted
        handle = ctrl_c.handle = setup.start.start(engine)
        started = True
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
        if not started and setup.cassette is not None and setup.cassette.mode == "record":
            setup.cassette.discard()  # nothing ran: keep an earlier recording intact
        await setup.aclose()
        if started and setup.cassette is not None and not args.quiet:
            _tell_cassette(setup.cassette)


def build_engine(args: argparse.Namespace, setup: RunSetup) -> Engine:
    """The engine a setup describes, over the index at ``--root``.

    A live run's engine comes from its config through the one assembler every face
    uses; a replayed run's parts come from the cassette, not from a config.
    """
    if setup.research is not None:
        return assemble(Engine, setup.research, index=CorpusIndex(args.root), owns_parts=False,
                        credibility=setup.credibility, scraper=setup.scraper)
    return Engine(CorpusIndex(args.root), web=setup.web, web_compression=setup.compression,
                  planner=setup.planner, writer=setup.writer, credibility=setup.credibility,
                  entailment=setup.entailment, sufficiency=setup.sufficiency,
                  rewriter=setup.rewriter, scraper=setup.scraper)


def engine_config_from(args: argparse.Namespace) -> tuple[EngineConfig, CredibilitySettings]:
    """The :class:`EngineConfig` that ``--web``, ``--model-url`` and ``--entailment-url`` say,
    and the credibility settings of the search config (read even without ``--web``).

    Raises:
        RunConfigError: ``--web`` without a usable search configuration.
    """
    search: TenantSearchConfig | None = None
    settings = CredibilitySettings()
    if args.web:
        try:
            search = load_search_config().tenant()
        except ProviderError as exc:
            raise RunConfigError(f"--web: {exc}") from exc
        settings = search.credibility
    else:
        with contextlib.suppress(ProviderError):  # a local run needs no web config
            settings = load_search_config().tenant().credibility
    chat = entailment = None
    try:
        if args.model_url:
            chat = ChatConfig(url=args.model_url, model=args.model, quirks=args.model_quirks,
                              api_key_env="REACTIVE_RAG_CHAT_API_KEY"
                              if os.environ.get("REACTIVE_RAG_CHAT_API_KEY") else None)
        if args.entailment_url:
            entailment = EntailmentConfig(url=args.entailment_url, model=args.entailment_model)
    except ValidationError as exc:
        raise RunConfigError(f"--model-url/--entailment-url: "
                             f"{exc.errors(include_url=False)[0]['msg']}") from exc
    return EngineConfig(search=search, chat=chat, entailment=entailment), settings


async def ensure_default_corpus(engine: Engine, console: Console, collections: Sequence[str],
                                quiet: bool, *, stop: threading.Event | None = None) -> None:
    """Index the bundled default collection first if ``collections`` asks for it.

    Its progress is shown as ``reactive-rag index`` shows it (on stderr: rate,
    ETA and elapsed time). Once ``stop`` is set the build stops at its next
    batch, before writing anything, and :class:`BuildStopped` is raised.
    """
    if STDLIB_COLLECTION in collections and not engine.index.exists(STDLIB_COLLECTION):
        await asyncio.to_thread(_build_default, engine, console, quiet, stop)


def _live(args: argparse.Namespace, budget: dict[str, Any]) -> RunSetup:
    """A run against the configured providers and servers (recorded with ``--record``)."""
    question = args.question or args.default_question
    if not question:
        raise RunConfigError("ask needs a question (or --replay FILE)")
    return live_setup(args, budget, question)


def live_setup(args: argparse.Namespace, budget: dict[str, Any], question: str = "") -> RunSetup:
    """The setup of runs against the configured providers and servers (``--web``,
    ``--model-url``, ``--entailment-url``; recorded with ``--record``).

    ``start`` holds the run's options (``question``, ``mode``, ``collections``, ``budget``).

    Raises:
        RunConfigError: ``--web`` without a usable search configuration, a bad ``--record``.
    """
    config, settings = engine_config_from(args)
    research = research_from(config)
    setup = RunSetup(start=StartOptions(question, mode=args.mode or "agent",
                                        collections=tuple(args.collections
                                                          or (STDLIB_COLLECTION,)),
                                        budget=dict(budget)),
                   credibility=credibility_from(settings), web=research.web,
                   compression=config.search.compression if config.search else "none",
                   research=research, closers=list(research.closers))
    if args.record:
        cassette = _record(args, setup, settings, research.chat is not None,
                           research.judge is not None)
        setup.cassette = cassette
        setup.start.edges = cassette.edges()
        if research.web is not None:
            setup.scraper = cassette.scraper()
        setup.research = research.tapped(Taps(
            searcher=cassette.searcher,
            chat=lambda model, role: cassette.chat(model, role=role)))
    return setup


def _record(args: argparse.Namespace, setup: RunSetup, settings: CredibilitySettings,
            chat: bool, judge: bool) -> Cassette:
    """Open the recording; its header holds all a replay needs besides the answers."""
    try:
        limits = Budget().with_overrides(dict(setup.start.budget))
    except (ValueError, TypeError) as exc:
        raise RunConfigError(str(exc)) from exc
    setup.start.run_id = uuid.uuid4().hex[:12]
    header = CassetteHeader(
        question=setup.start.question, mode=setup.start.mode,
        run_id=setup.start.run_id, budget=dataclasses.asdict(limits),
        collections=setup.start.collections,
        setup=CassetteSetup(
            web=describe_searcher(setup.web) if setup.web is not None else None,
            compression=setup.compression, credibility=settings.model_dump(mode="json"),
            chat=ChatSetup(model=args.model, quirks=args.model_quirks) if chat else None,
            entailment=ChatSetup(model=args.entailment_model) if judge else None))
    try:
        return Cassette.record(args.record, header)
    except CassetteError as exc:
        raise RunConfigError(f"--record: {exc}") from exc


def _replayed(args: argparse.Namespace, budget: dict[str, Any]) -> RunSetup:
    """The recorded run again, its providers, pages and models answered by the cassette."""
    given = [flag for flag, used in (("--mode", args.mode is not None),
                                     ("--collection", bool(args.collections)),
                                     ("--budget", bool(budget))) if used]
    if given:
        raise RunConfigError(f"--replay takes the run's options from the cassette; "
                             f"drop {', '.join(given)}")
    try:
        cassette = Cassette.load(args.replay)
    except CassetteError as exc:
        raise RunConfigError(f"--replay: {exc}") from exc
    recorded = cassette.header.setup
    try:
        settings = CredibilitySettings.model_validate(recorded.credibility)
    except ValidationError as exc:
        raise RunConfigError(f"--replay: {args.replay}: bad credibility settings: {exc}") from exc
    start = StartOptions.recorded(cassette)
    if args.question and args.question != start.question:
        Console(stderr=True).print("[yellow]replay:[/yellow] the question differs from the "
                                   "recorded one; requests not in the cassette will fail")
        start.question = args.question
    setup = RunSetup(start=start, credibility=credibility_from(settings),
                   compression=recorded.compression, cassette=cassette)
    if recorded.web is not None:
        setup.web = cassette.searcher()
        setup.scraper = cassette.scraper()
    if recorded.chat is not None:
        if recorded.chat.quirks not in CHAT_QUIRKS:
            raise RunConfigError(f"--replay: unknown chat quirks {recorded.chat.quirks!r}")
        recorded_chat = cassette.chat(role="chat")
        setup.planner, setup.writer = chat_policies(recorded_chat, quirks=recorded.chat.quirks)
        setup.sufficiency = ChatSufficiency(recorded_chat)
        setup.rewriter = ChatRewriter(recorded_chat)
    if recorded.entailment is not None:
        setup.entailment = ChatSupportJudge(cassette.chat(role="entailment"))
    return setup


def _tell_cassette(cassette: Cassette) -> None:
    err = SafeConsole(stderr=True, highlight=False)
    if cassette.mode == "record":
        err.print(f"[dim]recorded {len(cassette.interactions)} interactions to "
                  f"{cassette.path}[/dim]")
        return
    unused = cassette.unused()
    if unused:
        kinds = ", ".join(sorted({i.kind for i in unused}))
        err.print(f"[yellow]replay:[/yellow] {len(unused)} recorded interaction(s) ({kinds}) "
                  "were never asked for: the run went another way than the recording")


def _build_default(engine: Engine, console: Console, quiet: bool,
                   stop: threading.Event | None) -> None:
    if not quiet:
        console.print(f"[dim]Indexing the standard-library documentation into "
                      f"{escape(str(engine.index.root))} (first run only; embeddings are "
                      "cached on disk; Ctrl-C stops it)…[/dim]")
    with open_reporter(progress_mode(quiet=quiet)) as reporter:
        engine.ensure_stdlib_corpus(build_progress(
            reporter, embed_rate=None if quiet else engine.index.embed_rate, stop=stop))


def render_result(result: RunResult, console: Console, prices: PriceTable | None = None) -> None:
    """The final answer with numbered citations, their quotes and sources, and the run's
    usage and estimated cost (by ``prices``; none: no price known)."""
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
    console.print(f"[dim]{usage_line(result.usage, prices or PriceTable())}[/dim]",
                  soft_wrap=True)  # one line, for grep


def result_json(result: RunResult, prices: PriceTable | None = None) -> dict[str, Any]:
    """The result as plain JSON data (``usage`` with its cost by ``prices``)."""
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
        "usage": usage_json(result.usage, prices or PriceTable()),
        "task": result.task.model_dump() if result.task is not None else None,
    }


def _conflicts(result: RunResult) -> list[ConflictDetected]:
    return [e for e in result.events if isinstance(e, ConflictDetected)]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)
