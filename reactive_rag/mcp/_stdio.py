"""``reactive-rag mcp``: the tools over stdio, for an MCP client that starts this process.

stdout carries the protocol and nothing else: logging goes to stderr, and so does
anything the engine's setup prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcp.server.mcpserver import Context

from reactive_rag.engine import Engine, Mode, RunHandle
from reactive_rag.server import Tenant, TenantConfig

from ._tools import ToolScope, build_mcp_server

__all__ = ["LOCAL_TENANT", "local_scope", "serve_stdio"]

LOCAL_TENANT = "local"
"""The one caller of a stdio server: the user who started it."""


def local_scope(engine: Engine, *, allowed: Sequence[str] | None, defaults: Sequence[str],
                budget: Mapping[str, Any], mode: Mode = "agent") -> ToolScope:
    """The stdio caller's scope: ``allowed`` collections (None: every indexed one),
    ``budget`` as each run's base with a call's own ``budget`` on top, ``mode`` for a
    call that names none."""
    config = TenantConfig(collections=tuple(allowed) if allowed else ("*",))
    base = dict(budget)

    async def start(question: str, mode: Mode, collections: tuple[str, ...],
                    overrides: Mapping[str, Any]) -> RunHandle:
        return engine.start(question, mode=mode, collections=collections,
                            budget={**base, **overrides})

    return ToolScope(tenant=Tenant(LOCAL_TENANT, config), engine=engine,
                     defaults=tuple(defaults), start=start, mode=mode)


async def serve_stdio(scope: ToolScope) -> None:
    """Serve the tools on stdin/stdout until the client closes stdin."""

    def scope_of(_ctx: Context) -> ToolScope:
        return scope

    await build_mcp_server(scope_of).run_stdio_async()
