"""``reactive-rag serve``, ``reactive-rag runs`` and ``reactive-rag replay RUN_ID``
(or ``replay --from-file EXPORT.ndjson``, a run exported over HTTP)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from reactive_rag.engine import RunResult
from reactive_rag.store import RunNotFound, RunStore
from streams import Event, RunFinished, encode_json

from ._ask import render_result
from ._console import EventPrinter
from ._safe_text import SafeConsole, safe_json
from ._timeline import build_timeline, render_timeline, terminal_width

if TYPE_CHECKING:
    from aiohttp import web

    from reactive_rag.server import ServerConfig

__all__ = ["add_serve_commands", "serve"]


def add_serve_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``serve``, ``runs`` and ``replay`` on the main CLI parser."""
    serve = subparsers.add_parser(
        "serve", help="run the HTTP service (runs over HTTP, events over SSE/WebSocket)",
        description="Serves the API and the web page. With no tenants in the config, one open "
        "'default' tenant is served on 127.0.0.1 only.")
    serve.add_argument("--host", default=None, help="interface to bind (needs tenants)")
    serve.add_argument("--port", type=int, default=None, help="TCP port (default 8080)")
    serve.add_argument("--config", default=None, help="TOML config file (tenants, store...)")
    serve.add_argument("--store", default=None,
                       help="SQLite path, redis:// or postgresql:// URL "
                            "(default $REACTIVE_RAG_HOME/runs.db)")
    serve.add_argument("--owner", default=None,
                       help="this server's stable name among the store's writers "
                            "(default: a unique id per process)")
    serve.set_defaults(func=_cmd_serve)
    runs = subparsers.add_parser("runs", help="list stored runs, newest first")
    runs.add_argument("--limit", type=int, default=20)
    runs.add_argument("--tenant", default="default")
    runs.add_argument("--store", default=None)
    runs.add_argument("--config", default=None)
    runs.add_argument("--json", action="store_true", help="one JSON object per line")
    runs.set_defaults(func=_cmd_runs)
    replay = subparsers.add_parser("replay", help="re-render a stored (or exported) run's "
                                   "event stream")
    replay.add_argument("run_id", nargs="?", help="a stored run's id, or a prefix of it")
    replay.add_argument("--from-file", type=Path, default=None, metavar="EXPORT.ndjson",
                        help="replay a run exported by GET /v1/runs/{id}/export instead of "
                             "a stored one (the same output)")
    replay.add_argument("--store", default=None)
    replay.add_argument("--config", default=None)
    replay.add_argument("--json", action="store_true", help="events as JSON lines")
    replay.add_argument("--progress", action="store_true", help="show budget ticks")
    replay.add_argument("--timeline", action="store_true",
                        help="draw the run as swimlanes: a bar per request and reply, per actor")
    replay.set_defaults(func=_cmd_replay)


def _config(args: argparse.Namespace, **overrides: Any) -> Any:
    from reactive_rag.server import ServerConfig

    return ServerConfig.load(args.config, store=args.store, **overrides)


def serve(config: ServerConfig | None = None) -> None:
    """Serve the HTTP API, the web page and the optional faces until SIGINT/SIGTERM.

    The faces are ``/mcp`` (with the ``mcp`` extra) and the A2A agent (with the
    ``a2a`` extra). The library's way to run what ``reactive-rag serve`` runs;
    ``config`` defaults to one open ``default`` tenant on 127.0.0.1:8080. Raises
    :class:`~reactive_rag.server.ConfigError`, :class:`~reactive_rag.server.BindError` or
    :class:`~reactive_rag.server.StartError` (the run store cannot be opened).
    """
    from reactive_rag.server import serve as serve_app

    serve_app(config, mounts=[face.mount for face in _FACES])


def _cmd_serve(args: argparse.Namespace) -> int:
    from reactive_rag.server import BindError, ConfigError, StartError

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        serve(_config(args, host=args.host, port=args.port, owner=args.owner))
    except (ConfigError, BindError, StartError) as exc:  # StartError: a store that won't open
        # escaped: messages name TOML tables ("[search]"), which are not markup
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    return 0


_Mount = Callable[["web.Application"], None]


@dataclass(frozen=True, slots=True)
class _OptionalFace:
    """A protocol face ``serve`` mounts when its extra (its official SDK) is installed.

    ``load`` imports the face's ``mount_*`` function; a ``ModuleNotFoundError`` for
    one of ``sdk`` (top-level module names) means the extra is missing, which is
    said in one log line, and the server runs without that face. Any other import
    error is a bug and is raised.
    """

    what: str
    extra: str
    sdk: frozenset[str]
    load: Callable[[], _Mount]

    def mount(self, app: web.Application) -> None:
        try:
            mount = self.load()
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] not in self.sdk:
                raise
            logging.getLogger("reactive_rag.server").info(
                "no %s: the %s SDK is not installed (pip install 'reactive-rag[%s]')",
                self.what, self.extra.upper(), self.extra)
            return
        mount(app)


def _load_mcp() -> _Mount:
    from reactive_rag.mcp import mount_mcp

    return mount_mcp


def _load_a2a() -> _Mount:
    from reactive_rag.a2a import mount_a2a

    return mount_a2a


_FACES = (
    _OptionalFace("/mcp endpoint", "mcp",
                  frozenset({"mcp", "mcp_types", "starlette", "sse_starlette", "httpx2"}),
                  _load_mcp),
    _OptionalFace("A2A agent (/a2a, /.well-known/agent-card.json)", "a2a",
                  frozenset({"a2a", "google", "jsonrpc", "culsans", "httpx"}), _load_a2a),
)
"""The faces ``serve`` adds above the server, in mount order."""


async def _open_store(args: argparse.Namespace) -> RunStore:
    """The store as an operator reads it: read-only, so a live server's runs stay running."""
    from reactive_rag.server import make_store

    store = make_store(_config(args).store_target(), read_only=True)
    await store.open()
    return store


async def _open_store_or_say(args: argparse.Namespace) -> RunStore | None:
    """:func:`_open_store`, or ``None`` after saying on stderr why the store cannot be read."""
    from reactive_rag.server import ConfigError
    from reactive_rag.store import StoreError

    try:
        return await _open_store(args)
    except (StoreError, ConfigError) as exc:  # ConfigError: e.g. a malformed store URL
        Console(stderr=True).print(f"[red]error:[/red] {escape(str(exc))}")
        return None


def _cmd_runs(args: argparse.Namespace) -> int:
    async def go() -> int:
        store = await _open_store_or_say(args)
        if store is None:
            return 1
        try:
            page = await store.list_runs(args.tenant, limit=max(1, args.limit))
        finally:
            await store.close()
        if args.json:
            for r in page.runs:
                print(json.dumps({"run_id": r.run_id, "status": r.status, "outcome": r.outcome,
                                  "question": r.question, "mode": r.mode,
                                  "created": r.created_at, "events": r.last_seq}))
            return 0
        # the whole id, never folded or cut however narrow the terminal: `replay` takes it
        widest = max((len(r.run_id) for r in page.runs), default=3)
        table = Table(Column("run", no_wrap=True, min_width=widest), "created", "status",
                      "outcome", "events", "question")
        for r in page.runs:
            created = datetime.fromtimestamp(r.created_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
            table.add_row(r.run_id, created, r.status, r.outcome or "", str(r.last_seq),
                          r.question[:60])
        SafeConsole().print(table)
        return 0

    return asyncio.run(go())


async def _resolve_or_say(store: RunStore, prefix: str) -> str | None:
    """The whole id a typed prefix stands for, or ``None`` after one line on stderr why not."""
    from reactive_rag.store import AmbiguousRunId, resolve_run_id

    try:
        return await resolve_run_id(store, prefix)
    except RunNotFound:
        Console(stderr=True).print(f"[red]error:[/red] no run {escape(repr(prefix))} in the store")
    except AmbiguousRunId as exc:
        Console(stderr=True, soft_wrap=True).print(
            f"[red]error:[/red] run id {escape(repr(prefix))} is ambiguous: it starts "
            f"{escape(', '.join(exc.candidates))}; type more of it")
    return None


def _cmd_replay(args: argparse.Namespace) -> int:
    if (args.run_id is None) == (args.from_file is None):
        Console(stderr=True).print("[red]error:[/red] replay takes a RUN_ID or --from-file "
                                   "EXPORT.ndjson (one of them)")
        return 2
    if args.from_file is not None:
        return _replay_file(args)

    async def go() -> int:
        store = await _open_store_or_say(args)
        if store is None:
            return 1
        try:
            run_id = await _resolve_or_say(store, args.run_id)
            if run_id is None:
                return 2
            events = store.events(run_id)
            try:
                return await _replay_events(args, events)
            except RunNotFound:
                Console(stderr=True).print(f"[red]error:[/red] no run {args.run_id!r} in the store")
                return 1
            finally:
                with contextlib.suppress(Exception):
                    await events.aclose()  # type: ignore[attr-defined]
        finally:
            await store.close()

    return asyncio.run(go())


def _replay_file(args: argparse.Namespace) -> int:
    """``replay --from-file``: the export's events, checked whole first, shown as a stored run."""
    from ._export_file import ExportFileError, read_export

    try:
        events = read_export(args.from_file)
    except ExportFileError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {escape(str(exc))}")
        return 1

    async def each() -> AsyncIterator[Event]:
        for event in events:
            yield event

    return asyncio.run(_replay_events(args, each()))


async def _replay_events(args: argparse.Namespace, events: AsyncIterator[Event]) -> int:
    """Show a run's events as they come (JSON lines, the live view or a timeline), then
    its result: what ``replay`` prints, from the store or from an export."""
    console = SafeConsole(highlight=False)
    printer = EventPrinter(console, show_progress=args.progress)
    seen: list[Event] = []
    async for event in events:
        seen.append(event)
        if args.json:
            print(safe_json(encode_json(event)))
        elif not args.timeline:
            printer.print(event)
    if args.json:
        return 0  # the JSON lines alone (their last one shows whether the run ended)
    if args.timeline:
        render_timeline(build_timeline(seen),
                        SafeConsole(highlight=False, width=terminal_width()))
        return 0
    if not seen or not isinstance(seen[-1], RunFinished):
        console.print("[dim]the run has no run.finished event yet (still running?)[/dim]")
    else:
        render_result(RunResult.from_events(seen), console)
    return 0
