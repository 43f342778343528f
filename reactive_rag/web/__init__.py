"""The live run page: static files served at ``/`` with no build step.

The page (``index.html``, ``app.js``, ``app.css``) talks only to the public
HTTP API (``POST /v1/runs``, ``GET /v1/runs/{id}/events`` as SSE,
``POST /v1/runs/{id}/cancel``; for follow-up questions ``POST /v1/sessions`` and
``POST /v1/sessions/{id}/runs``, without which it asks plain runs), so any server
that implements that API can serve it. :func:`add_web_routes` mounts it on an
aiohttp application: the page at ``/``, its assets under ``/web/``, and the one
thing of the events it cannot know by itself, which request each reply answers
(``GET /v1/events/replies``, built from the event classes' declarations; the
swimlanes read it, so the page keeps no copy of that table).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from aiohttp import web

from streams import reply_table

__all__ = ["STATIC_DIR", "add_web_routes"]

STATIC_DIR: Path = Path(__file__).resolve().parent
"""Folder holding ``index.html``, ``app.js`` and ``app.css``."""

_NO_CACHE = {"Cache-Control": "no-cache"}


async def _index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC_DIR / "index.html", headers=_NO_CACHE)


async def _replies(request: web.Request) -> web.Response:
    """Every request event type -> who answers it and with which events (no tenant data)."""
    table = {name: dataclasses.asdict(info) for name, info in reply_table().items()}
    return web.json_response({"requests": table}, headers=_NO_CACHE)


def add_web_routes(app: web.Application) -> None:
    """Serve the page at ``/``, its assets under ``/web/`` (where ``index.html`` looks)
    and the request -> reply table its swimlanes read at ``/v1/events/replies``."""
    app.router.add_get("/", _index, name="web-index")
    app.router.add_get("/v1/events/replies", _replies, name="event-replies")
    app.router.add_static("/web/", STATIC_DIR, name="web-static", append_version=False)
