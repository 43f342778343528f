"""``reactive-rag chat``: questions asked in one conversation, each run shown live.

Every line typed is a question in the same :class:`~reactive_rag.conversation.Conversation`,
so a follow-up may lean on earlier turns ("who designed it?"): the run reads it as a
standalone question first (the ``query.rewritten`` event) and the live view shows how.
The engine is set up exactly as ``reactive-rag ask`` sets it up (offline by default;
``--web``, ``--model-url``, ``--entailment-url``, ``--collection``, ``--budget`` ...).

Lines starting with ``/`` are commands (:data:`COMMANDS`). Ctrl-C during a run cancels
that run and the conversation goes on; Ctrl-C at the prompt, ``/quit`` or end of input
(Ctrl-D) leaves.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import queue
import sys
import textwrap
import threading
from typing import Any

from rich.console import Console
from rich.text import Text

from reactive_rag.conversation import Conversation
from reactive_rag.engine import Engine, RunHandle
from reactive_rag.run import Budget, RunConfigError
from streams import AsyncSubscriber, OverflowPolicy

from ._ask import (
    _on_sigint,
    add_run_setup_options,
    build_engine,
    ensure_default_corpus,
    live_setup,
    parse_budget,
    render_result,
)
from ._console import EventPrinter
from ._safe_text import SafeConsole
from ._store import add_store_options, keep_result, warn_unstored

__all__ = ["COMMANDS", "add_chat_commands"]

PROMPT = "you> "

COMMANDS = {
    "/new": "forget this conversation and start a new one",
    "/history": "the turns so far (question -> how it was read, outcome, answer) and the "
                "summary of older ones",
    "/help": "this list",
    "/quit": "leave (also Ctrl-D, or Ctrl-C at the prompt)",
}


def add_chat_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``chat`` on the main CLI parser."""
    chat = subparsers.add_parser(
        "chat", help="ask questions in a conversation: follow-ups may refer to earlier turns",
        description="A prompt where each line is a question in one conversation, answered "
        "with verified citations and its run shown live; a follow-up ('who designed it?') "
        "is read as a standalone question from the earlier turns. Commands: "
        + "; ".join(f"{name}: {what}" for name, what in COMMANDS.items()) + ".")
    add_run_setup_options(chat, one_run=False)
    add_store_options(chat)
    chat.set_defaults(func=_cmd_chat)


def _cmd_chat(args: argparse.Namespace) -> int:
    console = SafeConsole(highlight=False)
    try:
        budget = parse_budget(args.budget)
        asyncio.run(_chat(args, console, budget))
    except RunConfigError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}")
        return 2
    except KeyboardInterrupt:  # where no signal handler could be installed
        console.print()
    return 0


async def _chat(args: argparse.Namespace, console: Console, budget: dict[str, Any]) -> None:
    try:  # refused now rather than at every question
        Budget().with_overrides(dict(budget))
    except (ValueError, TypeError) as exc:
        raise RunConfigError(str(exc)) from exc
    setup = live_setup(args, budget)
    engine = build_engine(args, setup)
    try:
        collections = setup.start.collections
        await ensure_default_corpus(engine, console, collections, False)
        missing = [c for c in collections if not engine.index.exists(c)]
        if missing:
            known = ", ".join(engine.index.collections()) or "none"
            raise RunConfigError(f"unknown collection(s) {missing}; indexed: {known}")
        options = {"mode": setup.start.mode, "collections": collections, "budget": budget}
        await _Repl(engine, console, options, quiet=args.quiet,
                    progress=args.progress, store=args.store if args.keep else None,
                    keep=args.keep).run()
    finally:
        await engine.aclose()
        await setup.aclose()


class _LineReader:
    """Reads one line of standard input when asked, in a daemon thread.

    A daemon thread rather than the loop's executor: a thread blocked reading
    when the user leaves with Ctrl-C must not hold up the exit. At a terminal
    it reads with :func:`input` (line editing); otherwise straight from the
    file descriptor, as a read blocked in ``sys.stdin`` would hold its lock
    and abort the interpreter's shutdown.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._interactive = sys.stdin.isatty() and sys.stdout.isatty()
        self._pending = b""
        self._asks: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._waiting: asyncio.Future[str | None] | None = None
        self._thread: threading.Thread | None = None
        self._ended = False

    async def read(self, prompt: str) -> str | None:
        """The next line (without its newline); None at end of input or after :meth:`interrupt`."""
        if self._ended:
            return None
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="chat-input", daemon=True)
            self._thread.start()
        self._waiting = self._loop.create_future()
        self._asks.put(prompt)
        try:
            return await self._waiting
        finally:
            self._waiting = None

    def interrupt(self) -> None:
        """Make the pending :meth:`read` (and every later one) return None."""
        self._ended = True
        if self._waiting is not None and not self._waiting.done():
            self._waiting.set_result(None)

    def _serve(self) -> None:
        while True:
            prompt = self._asks.get()
            line: str | None
            try:
                line = input(prompt) if self._interactive else self._raw_line(prompt)
            except (EOFError, OSError, ValueError, UnicodeDecodeError):
                line = None
            with contextlib.suppress(RuntimeError):  # the loop is gone: we are leaving
                self._loop.call_soon_threadsafe(self._deliver, line)
            if line is None:
                return

    def _raw_line(self, prompt: str) -> str | None:
        sys.stdout.write(prompt)
        sys.stdout.flush()
        fd = sys.stdin.fileno()
        while b"\n" not in self._pending:
            chunk = os.read(fd, 65536)
            if not chunk:
                rest, self._pending = self._pending, b""
                return rest.decode("utf-8", errors="replace") if rest else None
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode("utf-8", errors="replace").removesuffix("\r")

    def _deliver(self, line: str | None) -> None:
        if line is None:
            self._ended = True
        if self._waiting is not None and not self._waiting.done():
            self._waiting.set_result(line)


class _Repl:
    """The prompt loop over one conversation (renewed by ``/new``)."""

    def __init__(self, engine: Engine, console: Console, options: dict[str, Any], *,
                 quiet: bool, progress: bool, store: str | None = None,
                 keep: bool = False) -> None:
        self.engine = engine
        self.store = store
        self.keep = keep
        self.console = console
        self.options = options
        self.quiet = quiet
        self.progress = progress
        self.conversation = Conversation(engine)
        self.running: RunHandle | None = None
        self.echo = not sys.stdin.isatty()  # piped input: show what was asked
        self._reader: _LineReader | None = None

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        reader = self._reader = _LineReader(loop)
        names = ", ".join(self.options["collections"])
        self.console.print(f"[bold]chat[/bold] over {names} ({self.options['mode']}): type a "
                           "question; follow-ups may refer to earlier answers. /help lists "
                           "the commands, /quit or Ctrl-D leaves.")
        with _on_sigint(loop, self._interrupted):
            while True:
                line = await reader.read(PROMPT)
                if line is None:
                    self.console.print()
                    return
                if self.echo:
                    self.console.print(Text(line))
                text = line.strip()
                if not text:
                    continue
                if text.startswith("/"):
                    if not self.command(text):
                        return
                    continue
                await self.ask(text)

    def _interrupted(self) -> None:
        """Ctrl-C: cancel the run going on, or leave when at the prompt."""
        running = self.running
        if running is not None and not running.done:
            if running.cancel("cancelled with Ctrl-C"):
                self.console.print("[yellow]cancelling the run…[/yellow]")
            return
        if self._reader is not None:
            self._reader.interrupt()

    def command(self, text: str) -> bool:
        """Run a ``/command``; False to leave."""
        name, _, rest = text.partition(" ")
        name = name.lower()
        if name in ("/quit", "/exit"):
            return False
        if rest.strip():
            self.console.print(Text(f"{name} takes no argument", style="red"))
        elif name == "/help":
            for command, what in COMMANDS.items():
                self.console.print(f"  [bold]{command:<9}[/bold] {what}")
            self.console.print("  anything else is a question; Ctrl-C cancels a run going on")
        elif name == "/new":
            self.conversation.new()
            self.console.print("[dim]new conversation: earlier turns are forgotten[/dim]")
        elif name == "/history":
            self.history()
        else:
            self.console.print(Text.assemble(
                ("unknown command ", "red"), (name, "bold red"),
                f"; the commands are {', '.join(COMMANDS)}"))
        return True

    def history(self) -> None:
        turns = self.conversation.turns
        if not turns:
            self.console.print("[dim]no turns yet in this conversation[/dim]")
        for i, turn in enumerate(turns, 1):
            line = Text(f"{i:>3}. ")
            line.append(turn.question, style="bold")
            if turn.standalone and turn.standalone != turn.question:
                line.append(f" -> “{turn.standalone}”")
            line.append(f"  [{turn.outcome}]", style="dim")
            self.console.print(line)
            first = next((s.strip() for s in (turn.answer or "").splitlines() if s.strip()), "")
            if first:
                self.console.print(Text("     " + textwrap.shorten(first, 100, placeholder="…")))
        summary = self.conversation.summary
        if summary:
            self.console.print(Text.assemble(("summary of older turns: ", "dim"), summary))

    async def ask(self, question: str) -> None:
        try:
            handle = await self.conversation.astart(question, **self.options)
        except RunConfigError as exc:
            self.console.print(Text.assemble(("error: ", "red"), str(exc)))
            return
        self.running = handle
        try:
            view: AsyncSubscriber | None = None
            if self.quiet:
                prepared = self.conversation.last_prepared
                if prepared is not None and prepared.rewrite.changed:
                    self.console.print(Text(f"follow-up read as: “{prepared.standalone}”"))
            else:
                printer = EventPrinter(self.console, show_progress=self.progress)
                view = AsyncSubscriber(printer, name="terminal", maxsize=10_000,
                                       policy=OverflowPolicy.DROP_NORMAL).attach(handle.stream)
            result = await self.conversation.finish(handle)
            if view is not None:
                await view.wait()
        finally:
            self.running = None
        render_result(result, self.console)
        if self.keep:  # each turn is a run of its own: `reactive-rag replay` shows it
            problem = await keep_result(result, self.store)
            if problem is not None:
                warn_unstored(problem)
