"""``mount_a2a``: the agent card and the JSON-RPC endpoint on the API server."""

from __future__ import annotations

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from aiohttp import web

from reactive_rag.server import CONFIG_KEY

from ._card import agent_card
from ._handler import RunTaskHandler
from ._jsonrpc import A2aEndpoint

__all__ = ["A2A_PATH", "AGENT_CARD_PATH", "mount_a2a"]

A2A_PATH = "/a2a"
"""The JSON-RPC endpoint (A2A 1.0 and 0.3 method names)."""

AGENT_CARD_PATH = AGENT_CARD_WELL_KNOWN_PATH
"""Where A2A clients look for the card: ``/.well-known/agent-card.json``."""


async def _card(request: web.Request) -> web.Response:
    """The card, unauthenticated (clients read it to learn how to authenticate).

    The endpoint's URL is built from the request's scheme and ``Host``, so the card
    names the address the client reached (behind a proxy: what the proxy forwards).
    """
    endpoint = str(request.url.origin().with_path(A2A_PATH))
    card = agent_card(endpoint, open_mode=request.app[CONFIG_KEY].open_mode)
    return web.json_response(agent_card_to_dict(card))


def mount_a2a(app: web.Application) -> None:
    """Serve the A2A face on an app from :func:`~reactive_rag.server.create_app`,
    before it starts: ``GET /.well-known/agent-card.json`` and ``POST /a2a``
    (``reactive-rag serve`` does this when the ``a2a`` extra is installed).
    """
    app.router.add_get(AGENT_CARD_PATH, _card)
    app.router.add_post(A2A_PATH, A2aEndpoint(RunTaskHandler()).handle)
