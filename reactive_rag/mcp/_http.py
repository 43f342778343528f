"""The tools over Streamable HTTP at ``/mcp`` on the API server, with the API's tenants.

Every request to ``/mcp`` is authenticated first, exactly like the API
(``Authorization: Bearer``; a missing or wrong token is the API's 401 problem and
never reaches the MCP transport). The caller's :class:`ToolScope` — its tenant,
its engine, the server's default collections, runs started through the server's
:class:`~reactive_rag.server.RunManager` (stored, rate-limited, listed under
``/v1/runs``) — travels in the ASGI scope to the tool, which reads it back from
the request it serves.

The SDK's session manager runs stateless: each POST is served on its own, so any
replica behind a load balancer can take any request and nothing is kept between
them. It runs in a task of its own (its anyio task group must be entered and left
by one task), started and stopped with the app.

``/mcp`` is not in the OpenAPI document: it is one JSON-RPC endpoint whose contract
is the MCP specification (the route-coverage test covers ``/v1/``, ``/healthz`` and
``/readyz``, and ``create_app`` alone does not mount it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

from aiohttp import web
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from reactive_rag.engine import Mode, RunHandle
from reactive_rag.server import (
    COLLECTION_WRITER,
    CONFIG_KEY,
    CORPUS_TASK_KEY,
    MANAGER_KEY,
    TASK_MANAGER,
    request_tenant,
)

from ._asgi import serve_asgi
from ._tools import ToolScope, build_mcp_server

__all__ = ["MCP_PATH", "mount_mcp"]

MCP_PATH = "/mcp"
_SCOPE_KEY = "reactive_rag.tool_scope"
"""Where the caller's :class:`ToolScope` rides in the ASGI scope."""


def _scope_of(ctx: Context) -> ToolScope:
    asgi_scope = getattr(ctx.request_context.request, "scope", None)
    found = asgi_scope.get(_SCOPE_KEY) if isinstance(asgi_scope, Mapping) else None
    if not isinstance(found, ToolScope):  # only reachable if the transport changed under us
        raise ToolError("this request has no authenticated caller")
    return found


def mount_mcp(app: web.Application) -> None:
    """Serve the tools at ``/mcp`` (GET, POST, DELETE) on an app from
    :func:`~reactive_rag.server.create_app`, before it starts (``reactive-rag serve``
    does this when the ``mcp`` extra is installed; the server itself does not know MCP).
    """
    config = app[CONFIG_KEY]
    server = build_mcp_server(_scope_of)
    # The Starlette app is not used: requests go to the session manager it creates,
    # which keeps the SDK's DNS-rebinding checks for a loopback-only server.
    server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True,
                               max_request_body_size=config.max_body_bytes,
                               host=config.bind_host)
    sessions = server.session_manager

    async def handle(request: web.Request) -> web.StreamResponse:
        tenant = request_tenant(request)  # the API's 401 problem for a bad token
        runs = request.app[MANAGER_KEY]

        async def start(question: str, mode: Mode, collections: tuple[str, ...],
                        budget: Mapping[str, Any]) -> RunHandle:
            run_id = await runs.start(tenant, question, mode=mode, collections=collections,
                                      budget=budget, here=True)  # the handle is needed
            # No await since start() created the run's watcher: it is still active here.
            return runs.active[run_id].handle

        scope = ToolScope(tenant=tenant, engine=runs.engine_for(tenant.name),
                          defaults=config.default_collections, start=start,
                          building=request.app.get(CORPUS_TASK_KEY),
                          prices=config.usage.prices,
                          writer=request.app.get(COLLECTION_WRITER),
                          tasks=request.app.get(TASK_MANAGER))
        return await serve_asgi(request, sessions.handle_request, scope={_SCOPE_KEY: scope})

    for method in ("GET", "POST", "DELETE"):
        app.router.add_route(method, MCP_PATH, handle)

    async def lifecycle(_app: web.Application) -> AsyncIterator[None]:
        ready = asyncio.Event()
        stop = asyncio.Event()

        async def run() -> None:
            async with sessions.run():
                ready.set()
                await stop.wait()

        task = asyncio.get_running_loop().create_task(run(), name="mcp-sessions")
        waiter = asyncio.get_running_loop().create_task(ready.wait())
        await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
        if task.done():  # it failed to start: say why
            waiter.cancel()
            task.result()
        try:
            yield
        finally:
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app.cleanup_ctx.append(lifecycle)
