"""The event stream's AsyncAPI 3 document, generated from the event models (GET /asyncapi.json)."""

from __future__ import annotations

from aiohttp import web

__all__ = ["asyncapi_routes"]

asyncapi_routes = web.RouteTableDef()
