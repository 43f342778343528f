"""``reactive-rag mcp``: the tools over stdio, for an MCP client that starts this process.

stdout carries the protocol and nothing else: logging goes to stderr, and so does
anything the engine's setup prints.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import Context

from reactive_rag.engine import Engine, Mode, RunHandle
from reactive_rag.index import CorpusIndex
from reactive_rag.server import CollectionWriter, CollectionWritesConfig, Tenant, TenantConfig
from reactive_rag.store import SqliteRunStore
from reactive_rag.tasks import TaskManager

from ._tools import ToolScope, build_mcp_server

__all__ = ["LOCAL_TENANT", "LOCAL_WRITES", "local_scope", "local_writer", "serve_stdio"]

LOCAL_TENANT = "local"
"""The one caller of a stdio server: the user who started it."""

LOCAL_WRITES = CollectionWritesConfig(writable=("*",), max_chunks=10**12)
"""The local user writes every collection under the root (as ``reactive-rag index`` can)."""


@asynccontextmanager
async def local_writer(index: CorpusIndex) -> AsyncIterator[CollectionWriter]:
    """Collection writes for the stdio tools: builds as tasks in ``ROOT/.tasks.db``."""
    index.root.mkdir(parents=True, exist_ok=True)
    store = SqliteRunStore(index.root / ".tasks.db")
    await store.open()
    manager = TaskManager(store, index)
    try:
        writer = CollectionWriter(index, manager)
        await manager.start()
        yield writer
    finally:
        await manager.aclose()
        await store.close()


def local_scope(engine: Engine, *, allowed: Sequence[str] | None, defaults: Sequence[str],
                budget: Mapping[str, Any], mode: Mode = "agent",
                writer: CollectionWriter | None = None) -> ToolScope:
    """The stdio caller's scope: ``allowed`` collections (None: every indexed one),
    ``budget`` as each run's base with a call's own ``budget`` on top, ``mode`` for a
    call that names none; ``writer`` (:func:`local_writer`) enables the collection tools,
    file paths included."""
    config = TenantConfig(collections=tuple(allowed) if allowed else ("*",),
                          collection_writes=LOCAL_WRITES)
    base = dict(budget)

    async def start(question: str, mode: Mode, collections: tuple[str, ...],
                    overrides: Mapping[str, Any]) -> RunHandle:
        return engine.start(question, mode=mode, collections=collections,
                            budget={**base, **overrides})

    # the local user reads every collection under the root, a server tenant's too
    return ToolScope(tenant=Tenant(LOCAL_TENANT, config), engine=engine,
                     defaults=tuple(defaults), start=start, mode=mode, writer=writer,
                     local_files=True, tasks=writer.tasks if writer is not None else None)


async def serve_stdio(scope: ToolScope) -> None:
    """Serve the tools on stdin/stdout until the client closes stdin."""

    def scope_of(_ctx: Context) -> ToolScope:
        return scope

    await build_mcp_server(scope_of).run_stdio_async()
