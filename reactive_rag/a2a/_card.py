"""The agent card: who this agent is, its skills, where and how to call it.

Served unauthenticated at ``/.well-known/agent-card.json`` (the A2A discovery path).
It names one JSON-RPC endpoint twice, for protocol 1.0 and for 0.3 (the server
speaks both method sets there), so clients of either version find it. With tenants
the card asks for an HTTP bearer token (a tenant token of this server); in open
mode (no tenants, loopback only) it asks for none.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol

from reactive_rag.engine import Mode

__all__ = ["BEARER_SCHEME", "SKILL_MODES", "agent_card"]

SKILL_MODES: Mapping[str, Mode] = {"research": "agent", "search": "rag"}
"""A skill id (a message's ``skill`` metadata) -> the run mode it starts."""

BEARER_SCHEME = "bearer"
"""The card's name for the server's tenant tokens."""

_TEXT = "text/plain"
_JSON = "application/json"


def _version() -> str:
    try:
        return version("reactive-rag")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def agent_card(endpoint: str, *, open_mode: bool) -> AgentCard:
    """The card of an agent whose JSON-RPC endpoint is the absolute URL ``endpoint``.

    ``open_mode``: the server has no tenants, so the card asks for no credentials.
    """
    auth = ("No credentials: this server runs in open mode (one tenant, loopback only)."
            if open_mode else
            "Send a tenant token of this server as 'Authorization: Bearer <token>'; a task "
            "is visible to its tenant only.")
    card = AgentCard(
        name="reactive-rag",
        description=("Deep research over your document collections: the agent plans, "
                     "searches and reads, and sends only answer text whose every claim it "
                     "has verified against a quoted source. " + auth),
        version=_version(),
        supported_interfaces=[
            AgentInterface(url=endpoint, protocol_binding=TransportProtocol.JSONRPC.value,
                           protocol_version=PROTOCOL_VERSION_1_0),
            AgentInterface(url=endpoint, protocol_binding=TransportProtocol.JSONRPC.value,
                           protocol_version=PROTOCOL_VERSION_0_3),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False,
                                       extended_agent_card=False),
        default_input_modes=[_TEXT],
        default_output_modes=[_TEXT, _JSON],
        skills=[
            AgentSkill(
                id="research", name="Research",
                description=("The agent over the tenant's collections: it plans, searches, "
                             "reads on and answers with numbered citations. The default "
                             "skill. Message metadata: skill, collections, budget."),
                tags=["research", "citations", "rag"],
                examples=["Who founded Bayer and when?"],
                input_modes=[_TEXT], output_modes=[_TEXT, _JSON]),
            AgentSkill(
                id="search", name="Search",
                description=("One retrieval pass over the collections and a verified answer "
                             "from what it found (no planning): fast, for simple questions. "
                             "Message metadata: skill='search', collections, budget."),
                tags=["search", "retrieval"],
                examples=["What is tea made from?"],
                input_modes=[_TEXT], output_modes=[_TEXT, _JSON]),
        ],
    )
    if not open_mode:
        card.security_schemes[BEARER_SCHEME].CopyFrom(SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="bearer", description="a tenant token of this server")))
        card.security_requirements.append(
            SecurityRequirement(schemes={BEARER_SCHEME: StringList()}))
    return card
