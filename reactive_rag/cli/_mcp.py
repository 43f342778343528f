"""``reactive-rag mcp``: the research tools as an MCP server on stdio.

The engine is set up from the same options as ``ask`` (``--root``, ``--collection``,
``--budget``, ``--web``, ``--model-url``...); an MCP client starts this command and
talks to it over stdin/stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from rich.console import Console
from rich.markup import escape

from reactive_rag.index import STDLIB_COLLECTION
from reactive_rag.run import RunConfigError

from ._ask import (
    add_run_setup_options,
    build_engine,
    ensure_default_corpus,
    live_setup,
    parse_budget,
)

__all__ = ["add_mcp_commands"]


def add_mcp_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``mcp`` on the main CLI parser."""
    mcp = subparsers.add_parser(
        "mcp", help="serve research, search and read as MCP tools over stdio",
        description="An MCP server on stdin/stdout for MCP clients (editors, agents). "
        "--collection limits the collections the tools may use (default: every indexed "
        "one; research and search default to the given ones, else stdlib); --budget and "
        "--mode set each run's base limits and default mode, which a call's own budget and "
        "mode override. --quiet and --progress do nothing here. Logs go to stderr.")
    add_run_setup_options(mcp, one_run=False)
    mcp.set_defaults(func=_cmd_mcp)


def _cmd_mcp(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    err = Console(stderr=True, highlight=False)
    try:
        from reactive_rag.mcp import local_scope, local_writer, serve_stdio
    except ImportError as exc:  # the optional SDK is missing
        err.print(f"[red]error:[/red] the MCP SDK is not installed ({escape(str(exc))}); "
                  "install reactive-rag[mcp]")
        return 2
    try:
        budget = parse_budget(args.budget)
        setup = live_setup(args, budget)
    except RunConfigError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    defaults = tuple(args.collections or (STDLIB_COLLECTION,))

    async def serve() -> None:
        engine = build_engine(args, setup)
        try:
            await ensure_default_corpus(engine, err, defaults, quiet=True)
            async with local_writer(engine.index) as writer:
                scope = local_scope(engine, allowed=args.collections, defaults=defaults,
                                    budget=budget, mode=args.mode or "agent", writer=writer)
                await serve_stdio(scope)
        finally:
            await engine.aclose()
            await setup.aclose()

    asyncio.run(serve())
    return 0
