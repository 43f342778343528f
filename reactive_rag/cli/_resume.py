"""``reactive-rag resume RUN_ID``: carry a run a crash interrupted on to its end, here.

The store is opened for writing under an owner of this process's own (never
the configured server's: a store opened under a live server's name would take
that server's running runs for crashed ones), with a lease kept alive while the
run goes on. The interrupted run is reopened, rebuilt from its stored events
and run in-process with the live view of ``ask``; its new events are stored
after the old ones, and the result is printed as ``ask`` prints it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import cast

from rich.console import Console
from rich.markup import escape

from reactive_rag.engine import Engine, RunResult
from reactive_rag.index import CorpusIndex
from reactive_rag.run import RunConfigError
from reactive_rag.store import (
    AmbiguousRunId,
    LeaseKeeper,
    Recorder,
    RunNotFound,
    RunNotResumable,
    RunStore,
    StoreError,
    resolve_run_id,
)
from streams import AsyncSubscriber, Event, OverflowPolicy

from ._ask import report_result
from ._console import EventPrinter
from ._safe_text import SafeConsole

__all__ = ["add_resume_commands"]


class _Refused(Exception):
    """The run cannot be resumed here (the message says why, for the user)."""


def add_resume_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``resume`` on the main CLI parser."""
    resume = subparsers.add_parser(
        "resume", help="resume a run a crash interrupted, from its stored events",
        description="Reopens an interrupted run in the store, rebuilds it from its stored "
        "events and runs it to its end in this process (offline policies, local "
        "collections), showing the new events live; they are stored after the old ones.")
    resume.add_argument("run_id")
    resume.add_argument("--store", default=None,
                        help="SQLite path, redis:// or postgresql:// URL (default: the "
                             "config's, else $REACTIVE_RAG_HOME/runs.db)")
    resume.add_argument("--config", default=None, help="server TOML config (for its store)")
    resume.add_argument("--root", type=Path, default=None, help="index folder (default: cache)")
    resume.add_argument("--json", action="store_true",
                        help="print the result as one JSON object, and nothing else "
                             "(no live view on stderr unless --verbose)")
    resume.add_argument("--verbose", "-v", action="store_true",
                        help="with --json: also show the live view on stderr")
    resume.add_argument("--quiet", "-q", action="store_true", help="no live event view")
    resume.add_argument("--progress", action="store_true",
                        help="show budget ticks in the live view")
    resume.set_defaults(func=_cmd_resume)


def _cmd_resume(args: argparse.Namespace) -> int:
    console = SafeConsole(highlight=False, stderr=args.json)
    if args.json and not args.verbose:
        args.quiet = True
    try:
        result = asyncio.run(_resume(args, console))
    except _Refused as exc:
        Console(stderr=True).print(f"[red]error:[/red] {escape(str(exc))}")
        return 1
    return report_result(result, console, as_json=args.json)


async def _resume(args: argparse.Namespace, console: Console) -> RunResult:
    from reactive_rag.server import ConfigError, ServerConfig, make_store

    try:
        config = ServerConfig.load(args.config, store=args.store)
    except ConfigError as exc:
        raise _Refused(str(exc)) from None
    target = config.store_label()  # for messages: no password
    store = make_store(config.store_target())  # an owner of our own; recovery as any writer does it
    try:
        await store.open()
    except StoreError as exc:
        raise _Refused(f"the store {target} cannot be opened: {exc}") from None
    try:
        async with LeaseKeeper(store):
            return await _resume_in(store, args, console)
    except StoreError as exc:
        raise _Refused(f"the store {target}: {exc}") from None
    finally:
        await store.close()


async def _resume_in(store: RunStore, args: argparse.Namespace, console: Console) -> RunResult:
    try:
        run_id = await resolve_run_id(store, args.run_id)  # a unique prefix will do
        record = await store.get_run(run_id)
    except RunNotFound:
        raise _Refused(f"no run {args.run_id!r} in the store") from None
    except AmbiguousRunId as exc:
        raise _Refused(f"run id {args.run_id!r} is ambiguous: it starts "
                       f"{', '.join(exc.candidates)}; type more of it") from None
    if record.status != "interrupted":
        why = (" (a server may still be running it: it is marked interrupted once that "
               "server's lease expires)") if record.status == "running" else ""
        raise _Refused(f"run {run_id!r} is {record.status}: only an interrupted run can be "
                       f"resumed{why}")
    replay = cast(AsyncGenerator[Event, None], store.events(run_id))
    async with contextlib.aclosing(replay) as stored:
        events = [event async for event in stored]
    engine = Engine(CorpusIndex(args.root))
    try:
        try:
            handle = engine.resume(events)
        except RunConfigError as exc:
            raise _Refused(str(exc)) from None
        try:
            await store.reopen(run_id)
        except (RunNotFound, RunNotResumable) as exc:
            handle.cancel("the run could not be reopened")
            with contextlib.suppress(Exception):
                await handle.wait()
            raise _Refused(f"run {run_id!r} could not be reopened: {exc}") from None
        if not args.quiet:
            console.print(f"[dim]resuming run {run_id} after its {len(events)} stored "
                          "events[/dim]")
        recorder = Recorder(store, handle.stream)  # no meta: goes on after the stored seq
        await recorder.start()
        view: AsyncSubscriber | None = None
        if not args.quiet:
            printer = EventPrinter(console, show_progress=args.progress)
            view = AsyncSubscriber(printer, name="terminal", maxsize=10_000,
                                   policy=OverflowPolicy.DROP_NORMAL).attach(
                handle.stream, after_seq=len(events))  # what it did meanwhile, then live
        try:
            result = await handle.wait()
        finally:
            await recorder.aclose()
        if view is not None:
            await view.wait()
        return result
    finally:
        await engine.aclose()
