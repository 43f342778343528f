"""What an engine researches with, built from config: web search, a chat model, a judge.

The schemas are the ones the CLI and the server already read: ``[search]`` is
the ``search.toml`` schema (:class:`~actors.providers.TenantSearchConfig`),
``[chat]`` a server tenant's chat table and ``[entailment]`` the server's
judge (:mod:`reactive_rag.engine._chat_setup`). :meth:`reactive_rag.Engine.from_config`
builds from them; so do ``reactive-rag ask`` (``credibility_from``) and the
server (``credibility_from``, the chat client), one way for all three.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from actors.models import ChatModel
from actors.providers import (
    CredibilitySettings,
    ProviderError,
    TenantSearchConfig,
    load_search_config,
)
from actors.rerank import Credibility
from actors.search import Searcher
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement.model import (
    ChatRewriter,
    ChatSufficiency,
    ChatSupportJudge,
    ChatWholeDocument,
)
from reactive_rag.judgement.offline import OFFLINE_FAMILIES, judge_answerability_fixed
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

__all__ = [
    "EngineConfig",
    "JudgementConfig",
    "Research",
    "Taps",
    "assemble",
    "credibility_from",
    "load_engine_config",
    "research_from",
]



class Assembled(Protocol):
    """What :func:`assemble` needs of the engine it builds (the engine class satisfies it)."""

    assembled_from: EngineConfig | None

    def close_with(self, close: Callable[[], Awaitable[None]]) -> None: ...


E = TypeVar("E", bound=Assembled)


def credibility_from(settings: CredibilitySettings) -> Credibility:
    """The credibility table a tenant's ``[credibility]`` settings describe."""
    base = Credibility.defaults() if settings.defaults else Credibility()
    return base.merged(domains=settings.domains, collections=settings.collections)


class JudgementConfig(BaseModel):
    """The ``[judgement]`` table: offline rule families to switch off.

    ``off`` names fields of :class:`~reactive_rag.judgement.Judgement`
    (:data:`~reactive_rag.judgement.offline.OFFLINE_FAMILIES`).
    ``sufficiency_head = false`` makes the offline answerability judge use fixed
    word shares instead of its fitted score (``judge_answerability_fixed``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    off: tuple[str, ...] = ()
    sufficiency_head: bool = True

    @field_validator("off")
    @classmethod
    def _known(cls, off: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(off) - set(OFFLINE_FAMILIES))
        if unknown:
            raise ValueError(f"unknown judgement families {unknown}; known: "
                             f"{list(OFFLINE_FAMILIES)}")
        return off


class EngineConfig(BaseModel):
    """What :meth:`~reactive_rag.Engine.from_config` reads: each table is optional.

    Attributes:
        search: web search (the ``search.toml`` schema); ``None``: local collections only.
        chat: an OpenAI-compatible model for the planner and/or writer; ``None``: offline.
        entailment: a model that must also judge each claim; ``None``: offline checks.
        placement: actors on Ray, e.g. ``[placement.reranker]`` with ``on = "ray"``
            and :class:`~actors.RayOptions` keys; ``None``: every actor in process.
        judgement: offline rule families switched off (``[judgement] off = ["spam"]``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    search: TenantSearchConfig | None = None
    chat: ChatConfig | None = None
    entailment: EntailmentConfig | None = None
    placement: dict[str, Any] | None = None
    judgement: JudgementConfig | None = None


ConfigSource = str | os.PathLike[str] | Mapping[str, Any] | EngineConfig | None
"""A TOML file, an already parsed mapping, a built config, or ``None`` (the environment)."""


def load_engine_config(config: ConfigSource = None, *,
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
    if isinstance(config, EngineConfig):
        return config
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
    """The parts a config built, not yet wired into an engine, and what closes them.

    Clients, not policies: a recording (:class:`Taps`) can wrap the searcher and the
    chat clients before :func:`assemble` turns them into per-run policy factories.
    """

    config: EngineConfig
    web: Searcher | None = None
    chat: ChatModel | None = None
    judge: ChatModel | None = None
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def tapped(self, taps: Taps) -> Research:
        """The same parts seen through ``taps`` (e.g. a cassette recording them)."""
        web = self.web if self.web is None or taps.searcher is None else taps.searcher(self.web)
        chat = self.chat if self.chat is None or taps.chat is None else taps.chat(self.chat, "chat")
        judge = (self.judge if self.judge is None or taps.chat is None
                 else taps.chat(self.judge, "entailment"))
        return replace(self, web=web, chat=chat, judge=judge)

    def engine_options(self) -> dict[str, Any]:
        """Keyword arguments for :class:`~reactive_rag.Engine` (only those the config sets)."""
        config = self.config
        options: dict[str, Any] = {"web": self.web, "web_compression": "none",
                                   "planner": None, "writer": None, "entailment": None,
                                   "sufficiency": None, "rewriter": None}
        if config.search is not None:
            options["web_compression"] = config.search.compression
            options["credibility"] = credibility_from(config.search.credibility)
        if self.chat is not None and config.chat is not None:
            options["planner"], options["writer"] = chat_policies(
                self.chat, quirks=config.chat.quirks, roles=config.chat.roles,
                timeout_s=config.chat.timeout_s)
        if self.chat is not None and config.chat is not None and \
                "sufficiency" in config.chat.roles:
            options["sufficiency"] = ChatSufficiency(self.chat, timeout_s=config.chat.timeout_s)
        if self.chat is not None and config.chat is not None and \
                "followups" in config.chat.roles:
            options["rewriter"] = ChatRewriter(self.chat, timeout_s=config.chat.timeout_s)
        if self.chat is not None and config.chat is not None and \
                "handoff" in config.chat.roles:
            options["whole_document"] = ChatWholeDocument(self.chat,
                                                          timeout_s=config.chat.timeout_s)
        if self.judge is not None and config.entailment is not None:
            options["entailment"] = ChatSupportJudge(self.judge,
                                                     timeout_s=config.entailment.timeout_s)
        if config.placement is not None:
            options["placement"] = config.placement
        if config.judgement is not None:
            options["judgement_off"] = frozenset(config.judgement.off)
            if not config.judgement.sufficiency_head:
                options["judge"] = judge_answerability_fixed
        return options

    def describe(self) -> str:
        """One log line's worth: providers, model, roles (never a key)."""
        parts = []
        if self.web is not None:
            parts.append("web search via " + ", ".join(self.web.providers))
        if self.config.chat is not None and self.chat is not None:
            parts.append(f"chat model {self.config.chat.model!r} at {self.config.chat.url} for "
                         + ", ".join(self.config.chat.roles))
        return "; ".join(parts)

    async def aclose(self) -> None:
        """Close what was built (provider sessions, chat clients); errors are not raised."""
        closers, self.closers = self.closers, []
        for close in closers:
            with contextlib.suppress(Exception):
                await close()


@dataclass(frozen=True, slots=True)
class Taps:
    """Wrappers applied to what a config built, before the engine is wired (a cassette's seam).

    ``chat`` receives each chat client with its role: ``"chat"`` (planner and writer)
    or ``"entailment"`` (the judge).
    """

    searcher: Callable[[Searcher], Searcher] | None = None
    chat: Callable[[ChatModel, str], ChatModel] | None = None


def research_from(config: EngineConfig, env: Mapping[str, str] | None = None) -> Research:
    """Build the searcher and chat clients a config describes (no network yet).

    Refuses what ``reactive-rag ask --web`` and ``reactive-rag serve`` refuse,
    before any network call.

    Raises:
        RunConfigError: an unknown provider kind, a provider missing its key,
            URL or options, or a ``[chat]`` naming an ``api_key_env`` that is not set.
    """
    environ = os.environ if env is None else env
    research = Research(config)  # nothing here opens a connection: a refusal leaves nothing open
    if config.placement is not None:
        try:
            parse_placement(config.placement)  # refused here, before any engine is built
        except ValueError as exc:
            raise RunConfigError(f"[placement]: {exc}") from exc
    if config.search is not None:
        try:
            research.web = Searcher.from_config(config.search, env=environ)
        except ProviderError as exc:
            raise RunConfigError(f"[search]: {exc}") from exc
        research.closers.append(research.web.aclose)
    if config.chat is not None:
        try:
            client = chat_client(config.chat, environ)
        except RunConfigError as exc:
            raise RunConfigError(f"[chat]: {exc}") from exc
        research.closers.append(client.aclose)
        research.chat = client
    if config.entailment is not None:
        judge = entailment_client(config.entailment, environ)
        research.closers.append(judge.aclose)
        research.judge = judge
    return research


def assemble(engine_class: Callable[..., E], research: Research, *,
             index: CorpusIndex | None = None,
             taps: Taps | None = None, owns_parts: bool = True, **overrides: Any) -> E:
    """The one way an engine is built from config, for every face.

    The library (:meth:`~reactive_rag.Engine.from_config`), the CLI (``ask``, ``chat``,
    ``mcp``), the server's tenants and Ray replicas all come through here, so the same
    config gives the same engine wherever it is read. ``overrides`` win over what the
    config set (e.g. the CLI's scraper, the server's shared judge). With ``owns_parts``
    the engine closes the built clients in its ``aclose``; otherwise the caller does.
    """
    if taps is not None:
        research = research.tapped(taps)
    engine = engine_class(index, **(research.engine_options() | overrides))
    engine.assembled_from = research.config
    if owns_parts:
        for close in research.closers:
            engine.close_with(close)
    return engine
