"""What an engine researches with, built from config: web search, a chat model, a judge.

The schemas are the ones the CLI and the server already read: ``[search]`` is
the ``search.toml`` schema (:class:`~actors.providers.TenantSearchConfig`),
``[chat]`` a server tenant's chat table and ``[entailment]`` the server's
judge (:mod:`reactive_rag.engine._chat_setup`). :meth:`reactive_rag.Engine.from_config`
builds from them; so do ``reactive-rag ask`` (``credibility_from``) and the
server (``credibility_from``, the chat client), one way for all three.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from actors.providers import (
    CredibilitySettings,
    ProviderError,
    TenantSearchConfig,
    load_search_config,
)
from actors.rerank import Credibility
from actors.search import Searcher
from reactive_rag.judgement import PlannerPolicy, WriterPolicy
from reactive_rag.judgement.model import ChatEntailment
from reactive_rag.run import RunConfigError

from ._chat_setup import (
    ChatConfig,
    EntailmentConfig,
    chat_client,
    chat_policies,
    entailment_client,
)
from ._placement import parse_placement
from ._toml import read_toml

__all__ = ["EngineConfig", "Research", "credibility_from", "load_engine_config", "research_from"]


def credibility_from(settings: CredibilitySettings) -> Credibility:
    """The credibility table a tenant's ``[credibility]`` settings describe."""
    base = Credibility.defaults() if settings.defaults else Credibility()
    return base.merged(domains=settings.domains, collections=settings.collections)


class EngineConfig(BaseModel):
    """What :meth:`~reactive_rag.Engine.from_config` reads: each table is optional.

    Attributes:
        search: web search (the ``search.toml`` schema); ``None``: local collections only.
        chat: an OpenAI-compatible model for the planner and/or writer; ``None``: offline.
        entailment: a model that must also judge each claim; ``None``: offline checks.
        placement: actors on Ray, e.g. ``[placement.reranker]`` with ``on = "ray"``
            and :class:`~actors.RayOptions` keys; ``None``: every actor in process.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    search: TenantSearchConfig | None = None
    chat: ChatConfig | None = None
    entailment: EntailmentConfig | None = None
    placement: dict[str, Any] | None = None


def load_engine_config(config: str | os.PathLike[str] | Mapping[str, Any] | None = None, *,
                       tenant: str = "default",
                       env: Mapping[str, str] | None = None) -> EngineConfig:
    """Read an engine's config from a TOML file or a mapping (already parsed TOML).

    Three shapes are read: ``search``/``chat``/``entailment`` tables; a server
    config (``[tenants.NAME]`` with its ``search`` and ``chat``, or its
    ``[open_tenant]`` without tenants; top-level ``[entailment]``), taking
    ``tenant``'s; or ``None``: what ``reactive-rag ask
    --web --model-url`` would use, i.e. ``$REACTIVE_RAG_SEARCH_CONFIG`` (or
    ``$REACTIVE_RAG_SEARXNG_URL``) and ``$REACTIVE_RAG_CHAT_URL`` / ``_MODEL`` /
    ``_QUIRKS`` (no web search or chat model where they are unset).

    Raises:
        RunConfigError: an unreadable file, bad TOML, or values the schemas refuse.
    """
    environ = os.environ if env is None else env
    if config is None:
        return _from_environment(tenant, environ)
    data: Mapping[str, Any] = (config if isinstance(config, Mapping)
                               else read_toml(config, RunConfigError))
    if "tenants" in data or "open_tenant" in data:  # a server config: one tenant, the judge
        tenants = data.get("tenants") or {}
        table = tenants.get(tenant) if isinstance(tenants, Mapping) else None
        if not tenants and tenant == "default":  # no tenants: the server's open tenant
            table = data.get("open_tenant") or {}
        if not isinstance(table, Mapping):
            raise RunConfigError(f"the config has no [tenants.{tenant}] table")
        data = {key: table[key] for key in ("search", "chat") if key in table} | (
            {"entailment": data["entailment"]} if "entailment" in data else {})
    try:
        return EngineConfig.model_validate(dict(data))
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        raise RunConfigError(f"invalid engine config at {where or 'top level'}: "
                             f"{err.get('msg', '')}") from exc


def _from_environment(tenant: str, env: Mapping[str, str]) -> EngineConfig:
    try:
        search: TenantSearchConfig | None = load_search_config(env=env).tenant(tenant)
    except ProviderError:
        search = None  # nothing configured: local collections only, as `ask` without --web
    url = env.get("REACTIVE_RAG_CHAT_URL")
    try:
        chat = ChatConfig.model_validate({
            "url": url, "model": env.get("REACTIVE_RAG_CHAT_MODEL") or "default",
            "quirks": env.get("REACTIVE_RAG_CHAT_QUIRKS") or "none",
            **({"api_key_env": "REACTIVE_RAG_CHAT_API_KEY"}
               if env.get("REACTIVE_RAG_CHAT_API_KEY") else {})}) if url else None
    except ValidationError as exc:
        raise RunConfigError(f"REACTIVE_RAG_CHAT_*: {exc.errors(include_url=False)[0]['msg']}"
                             ) from exc
    return EngineConfig(search=search, chat=chat)


@dataclass
class Research:
    """The parts of an engine a config built, and what to close when the engine closes."""

    web: Searcher | None = None
    web_compression: Literal["none", "rag"] = "none"
    credibility: Credibility | None = None
    planner: Callable[[], PlannerPolicy] | None = None
    writer: Callable[[], WriterPolicy] | None = None
    entailment: ChatEntailment | None = None
    placement: dict[str, Any] | None = None
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def engine_options(self) -> dict[str, Any]:
        """Keyword arguments for :class:`~reactive_rag.Engine` (only those that were built)."""
        options: dict[str, Any] = {"web": self.web, "web_compression": self.web_compression,
                                   "planner": self.planner, "writer": self.writer,
                                   "entailment": self.entailment}
        if self.credibility is not None:
            options["credibility"] = self.credibility
        if self.placement is not None:
            options["placement"] = self.placement
        return options


def research_from(config: EngineConfig, env: Mapping[str, str] | None = None) -> Research:
    """Build the searcher, chat policies and judge a config describes (no network yet).

    Refuses what ``reactive-rag ask --web`` and ``reactive-rag serve`` refuse,
    before any network call.

    Raises:
        RunConfigError: an unknown provider kind, a provider missing its key,
            URL or options, or a ``[chat]`` naming an ``api_key_env`` that is not set.
    """
    environ = os.environ if env is None else env
    research = Research()  # nothing here opens a connection: a refusal leaves nothing open
    if config.search is not None:
        try:
            research.web = Searcher.from_config(config.search, env=environ)
        except ProviderError as exc:
            raise RunConfigError(f"[search]: {exc}") from exc
        research.closers.append(research.web.aclose)
        research.web_compression = config.search.compression
        research.credibility = credibility_from(config.search.credibility)
    if config.chat is not None:
        try:
            client = chat_client(config.chat, environ)
        except RunConfigError as exc:
            raise RunConfigError(f"[chat]: {exc}") from exc
        research.closers.append(client.aclose)
        research.planner, research.writer = chat_policies(
            client, quirks=config.chat.quirks, roles=config.chat.roles,
            timeout_s=config.chat.timeout_s)
    if config.entailment is not None:
        judge = entailment_client(config.entailment, environ)
        research.closers.append(judge.aclose)
        research.entailment = ChatEntailment(judge, timeout_s=config.entailment.timeout_s)
    if config.placement is not None:
        try:
            parse_placement(config.placement)  # refused here, before any engine is built
        except ValueError as exc:
            raise RunConfigError(f"[placement]: {exc}") from exc
        research.placement = config.placement
    return research
