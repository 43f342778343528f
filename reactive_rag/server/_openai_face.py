"""OpenAI-compatible face: POST /v1/chat/completions and GET /v1/models (runs)."""

from __future__ import annotations

from aiohttp import web

__all__ = ["openai_routes"]

openai_routes = web.RouteTableDef()
