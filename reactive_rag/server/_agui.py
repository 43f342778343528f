"""AG-UI face: a run's events as AG-UI events (GET /v1/runs/{run_id}/agui)."""

from __future__ import annotations

from aiohttp import web

__all__ = ["agui_routes"]

agui_routes = web.RouteTableDef()
