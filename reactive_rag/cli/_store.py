"""Keep the runs ``ask`` and ``chat`` start in the run store, so the ids they print replay.

The run is written once it has ended (its whole event log in one transaction),
to the same store ``reactive-rag runs``/``replay`` read (``$REACTIVE_RAG_HOME/runs.db``
unless ``--store`` names another), under the ``default`` tenant. Writing after the
end keeps the store out of the run's way: a store that cannot be written costs a
warning line, never the answer.
"""

from __future__ import annotations

import argparse
import asyncio

from rich.console import Console
from rich.markup import escape

from reactive_rag.engine import RunResult
from streams import RunStarted

__all__ = ["STORE_TENANT", "add_store_options", "keep_result", "store_result", "warn_unstored"]

STORE_TENANT = "default"
"""The tenant CLI runs are stored under (what ``reactive-rag runs`` lists by default)."""


def add_store_options(p: argparse.ArgumentParser) -> None:
    """``--store`` and ``--no-store`` for a command that starts one run."""
    p.add_argument("--store", default=None, metavar="PATH|URL",
                   help="run store to keep the run in, for `reactive-rag replay` "
                        "(default $REACTIVE_RAG_HOME/runs.db, as `serve` and `runs`)")
    p.add_argument("--no-store", dest="keep", action="store_false",
                   help="do not keep the run in the run store")


def store_result(result: RunResult, target: str | None) -> str | None:
    """Write a finished run to the store at ``target`` (None: the default store).

    Returns:
        None once stored, else the one line that says why it was not (the
        caller prints it; the run's answer stands either way).
    """
    return asyncio.run(keep_result(result, target))


async def keep_result(result: RunResult, target: str | None) -> str | None:
    """:func:`store_result` from inside a running loop (each turn of ``chat``)."""
    from reactive_rag.store import RunExists

    try:
        await _store(result, target)
    except RunExists:  # e.g. `ask --replay` of a recording whose run was kept
        return f"run {result.run_id} is already in the store; kept the stored one"
    except Exception as exc:  # any failure of the store is reported, never raised
        return (f"run {result.run_id} was not stored ({type(exc).__name__}: {exc}); "
                "`reactive-rag replay` will not find it")
    return None


def warn_unstored(message: str) -> None:
    """The warning line for :func:`store_result`'s answer, on stderr."""
    Console(stderr=True, soft_wrap=True).print(f"[yellow]warning:[/yellow] {escape(message)}")


async def _store(result: RunResult, target: str | None) -> None:
    from reactive_rag.server import ServerConfig, make_store
    from reactive_rag.store import RunMeta

    started = next((e for e in result.events if isinstance(e, RunStarted)), None)
    meta = RunMeta(run_id=result.run_id, tenant=STORE_TENANT,
                   question=started.question if started is not None else "",
                   mode=started.mode if started is not None else "agent")
    store = make_store(ServerConfig.load(store=target).store_target())
    await store.open()
    try:
        await store.create_run(meta)
        await store.append(result.run_id, list(result.events))
    finally:
        await store.close()
