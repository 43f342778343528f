"""Search configuration as production platforms do it: per tenant, per agent, per request.

A tenant picks its providers (with keys from an environment variable or a
secret file, never inline in shared files), their fallback order, how many
results, whether dates are shown, the compression mode and a URL blacklist. An
agent may lower ``max_results``; the request carries only the query. Loaded
from TOML plus the environment and validated with pydantic, so a typo fails at
start-up and not in the middle of a run.

Example (``search.toml``)::

    max_results = 8
    blacklist = ["*://*.pinterest.com/*", "/example\\.(net|org)/"]

    [providers.searxng]
    base_url = "http://127.0.0.1:8888"

    [providers.brave]
    api_key_env = "BRAVE_API_KEY"

    [credibility]                      # source weights (1.0: neutral), over the defaults
    domains = {"example.com" = 0.5, "*.gov" = 1.4}
    collections = {"handbook" = 1.3}

A file without a ``[tenants.*]`` table configures the ``default`` tenant.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from ._exceptions import ProviderNotConfigured

__all__ = [
    "AgentSearchSettings",
    "CredibilitySettings",
    "ProviderSettings",
    "SearchConfig",
    "TenantSearchConfig",
    "load_search_config",
]

CONFIG_ENV = "REACTIVE_RAG_SEARCH_CONFIG"
"""Environment variable naming the TOML file :func:`load_search_config` reads."""

SEARXNG_URL_ENV = "REACTIVE_RAG_SEARXNG_URL"
"""Shortcut: a SearXNG base URL that configures (or overrides) the default tenant's ``searxng``."""

_STRICT = ConfigDict(extra="forbid", frozen=True)


class ProviderSettings(BaseModel):
    """One provider as a tenant configured it.

    Attributes:
        kind: registered adapter name (``searxng``, ``brave``, ``google_cse``,
            ``tavily``, ``duckduckgo`` or a third party's); defaults to the
            table's key.
        base_url: API endpoint; tests and self-hosted instances point it at
            their own host.
        api_key / api_key_env / api_key_file: the secret inline (discouraged),
            from an environment variable, or from a file (Docker/K8s secrets).
        timeout_s: cap per request (the run's remaining budget caps it further).
        max_results: per-provider cap on hits asked for.
        retries: extra attempts for retryable errors (429, 5xx, timeouts).
        backoff_s / max_backoff_s: base and cap of the jittered exponential
            backoff between attempts (a ``Retry-After`` wins when longer).
        breaker_threshold / breaker_cool_down_s: consecutive failures that open
            the circuit, and seconds before a half-open probe.
        options: adapter-specific parameters (Google ``cx``, SearXNG
            ``categories``, Tavily ``search_depth``...).
    """

    model_config = _STRICT

    kind: str = ""
    base_url: str | None = None
    api_key: SecretStr | None = None
    api_key_env: str | None = None
    api_key_file: Path | None = None
    timeout_s: float = Field(default=10.0, gt=0)
    max_results: int | None = Field(default=None, ge=1)
    retries: int = Field(default=2, ge=0)
    backoff_s: float = Field(default=0.2, ge=0)
    max_backoff_s: float = Field(default=5.0, ge=0)
    breaker_threshold: int = Field(default=5, ge=1)
    breaker_cool_down_s: float = Field(default=30.0, ge=0)
    options: dict[str, str] = Field(default_factory=dict)

    def resolve_api_key(
        self, name: str, env: Mapping[str, str] | None = None, *, required: bool = True
    ) -> str | None:
        """The API key, from inline, env var or file, in that order.

        Raises:
            ProviderNotConfigured: ``required`` and no key could be found.
        """
        environ = os.environ if env is None else env
        if self.api_key is not None and self.api_key.get_secret_value():
            return self.api_key.get_secret_value()
        if self.api_key_env:
            value = environ.get(self.api_key_env, "").strip()
            if value:
                return value
            if required:
                raise ProviderNotConfigured(
                    f"api key environment variable {self.api_key_env} is not set", provider=name)
        if self.api_key_file is not None:
            try:
                value = self.api_key_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ProviderNotConfigured(
                    f"cannot read api key file {self.api_key_file}: {exc}", provider=name
                ) from exc
            if value:
                return value
        if required:
            raise ProviderNotConfigured(
                "no api key configured (set api_key_env or api_key_file)", provider=name)
        return None


class AgentSearchSettings(BaseModel):
    """What one agent may change: fewer results than its tenant allows."""

    model_config = _STRICT

    max_results: int | None = Field(default=None, ge=1)


class CredibilitySettings(BaseModel):
    """A tenant's source weights (the ``[credibility]`` table).

    Attributes:
        domains: host or glob (``docs.python.org``, ``*.gov``) -> weight.
        collections: local collection name -> weight.
        defaults: start from the built-in table (official docs and primary
            sources up, content farms down); ``false``: only these entries.

    Weights are in ``[0.1, 10]``; 1.0 changes nothing. The built-in table and
    the lookup rules live in ``actors.rerank.Credibility``.
    """

    model_config = _STRICT

    domains: dict[str, Annotated[float, Field(ge=0.1, le=10.0)]] = Field(default_factory=dict)
    collections: dict[str, Annotated[float, Field(ge=0.1, le=10.0)]] = Field(
        default_factory=dict)
    defaults: bool = True


class TenantSearchConfig(BaseModel):
    """A tenant's web search: providers, order, limits, presentation, blacklist.

    Attributes:
        providers: configured providers by name.
        order: providers asked on every search, in priority order (default:
            every provider not listed in ``fallback``).
        fallback: providers asked only when hedging (the primary is slow) or
            when every primary provider failed.
        hedge_delay_s: ask the fallback when the first provider has not
            answered within this many seconds (``None``: no hedging).
        max_results: hits per search after merging.
        include_date: keep ``published_at`` in the results.
        compression: ``none`` returns the hits; ``rag`` indexes them into the
            session's temporary knowledge base and returns passages.
        blacklist: wildcard (``*://*.example.com/*``) and ``/regex/`` URL rules.
        credibility: source weights by domain and collection (``[credibility]``).
        agents: per-agent overrides.
    """

    model_config = _STRICT

    providers: dict[str, ProviderSettings] = Field(default_factory=dict)
    order: list[str] | None = None
    fallback: list[str] = Field(default_factory=list)
    hedge_delay_s: float | None = Field(default=None, ge=0)
    max_results: int = Field(default=10, ge=1, le=100)
    include_date: bool = True
    compression: Literal["none", "rag"] = "none"
    blacklist: list[str] = Field(default_factory=list)
    credibility: CredibilitySettings = Field(default_factory=CredibilitySettings)
    agents: dict[str, AgentSearchSettings] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names_known(self) -> TenantSearchConfig:
        named = list(self.order or []) + list(self.fallback)
        unknown = [n for n in named if n not in self.providers]
        if unknown:
            raise ValueError(f"order/fallback name unconfigured providers: {unknown}")
        return self

    def primary(self) -> list[str]:
        """Names asked on every search, in order."""
        if self.order is not None:
            return list(self.order)
        return [n for n in self.providers if n not in self.fallback]

    def provider(self, name: str) -> ProviderSettings:
        """Settings of ``name``.

        Raises:
            ProviderNotConfigured: the tenant did not configure ``name``.
        """
        try:
            return self.providers[name]
        except KeyError:
            raise ProviderNotConfigured(
                f"not configured for this tenant (configured: {sorted(self.providers)})",
                provider=name,
            ) from None

    def max_results_for(self, agent: str | None = None) -> int:
        """The tenant's ``max_results``, lowered by the agent's override (never raised)."""
        override = self.agents.get(agent or "")
        if override is not None and override.max_results is not None:
            return min(self.max_results, override.max_results)
        return self.max_results


class SearchConfig(BaseModel):
    """Every tenant's search configuration."""

    model_config = _STRICT

    tenants: dict[str, TenantSearchConfig] = Field(default_factory=dict)
    default_tenant: str = "default"

    def tenant(self, name: str | None = None) -> TenantSearchConfig:
        """One tenant's configuration.

        Raises:
            ProviderNotConfigured: the tenant has no search configuration.
        """
        key = name or self.default_tenant
        try:
            return self.tenants[key]
        except KeyError:
            raise ProviderNotConfigured(f"tenant {key!r} has no web search configured") from None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> SearchConfig:
        """Validate a parsed document (a bare tenant table means the default tenant)."""
        doc = dict(data)
        if "tenants" not in doc:
            doc = {"tenants": {"default": doc}} if doc else {"tenants": {}}
        return cls.model_validate(doc)


def load_search_config(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> SearchConfig:
    """Load search configuration from TOML and the environment.

    ``path`` defaults to ``$REACTIVE_RAG_SEARCH_CONFIG``; with neither, the
    config is empty (no web search). ``$REACTIVE_RAG_SEARXNG_URL`` then adds or
    overrides the default tenant's ``searxng`` base URL, the quickest way to
    point ``reactive-rag ask --web`` at an instance.

    Raises:
        ProviderNotConfigured: the file cannot be read or does not validate.
    """
    environ = os.environ if env is None else env
    raw_path = path if path is not None else environ.get(CONFIG_ENV)
    data: dict[str, Any] = {}
    if raw_path:
        try:
            with open(raw_path, "rb") as fh:
                data = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ProviderNotConfigured(f"cannot load search config {raw_path}: {exc}") from exc
    try:
        config = SearchConfig.from_mapping(data)
        searxng_url = environ.get(SEARXNG_URL_ENV, "").strip()
        if searxng_url:
            config = _with_searxng(config, searxng_url)
    except ValidationError as exc:
        raise ProviderNotConfigured(f"invalid search config {raw_path or ''}: {exc}") from exc
    return config


def _with_searxng(config: SearchConfig, url: str) -> SearchConfig:
    name = config.default_tenant
    tenant = config.tenants.get(name, TenantSearchConfig())
    current = tenant.providers.get("searxng", ProviderSettings(kind="searxng"))
    providers = {**tenant.providers, "searxng": current.model_copy(update={"base_url": url})}
    order = tenant.order
    if order is not None and "searxng" not in order:
        order = ["searxng", *order]
    updated = tenant.model_copy(update={"providers": providers, "order": order})
    return config.model_copy(update={"tenants": {**config.tenants, name: updated}})
