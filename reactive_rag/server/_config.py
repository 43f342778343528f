"""Server configuration: where to listen, which store, and the tenants table.

Loaded from a TOML file and overridden by environment variables::

    host = "0.0.0.0"
    port = 8080
    store = "/var/lib/reactive_rag/runs.db"    # or redis://host:6379/0, postgresql://host/db
    owner = "api-1"                            # optional: this replica's stable name
    lease_ttl_s = 15.0                         # its lease lasts this long per heartbeat
    store_retry_s = 15.0                       # a store down longer than this fails its runs
    session_ttl_s = 3600.0                     # a conversation lives this long after its last use
    session_max_ttl_s = 86400.0                # the most a POST /v1/sessions may ask for
    retention = { days = 30, tenants = { acme = 7 } }  # ended runs kept N days (RetentionConfig)
    cancels = { poll_s = 0.25 }                # look for other replicas' cancels (CancelConfig)

    [tenants.acme]
    token_sha256 = ["<sha256 hex of the bearer token>"]
    collections = ["stdlib", "acme-docs"]
    max_concurrent_runs = 4
    runs_per_minute = 30

    [tenants.acme.caps]                        # optional: caps on one run's budget, runs
    wall_s = 120                               # and tokens per hour/day (defaults: TenantCaps)

    [tenants.acme.collection_writes]           # optional: collections over the API
    max_chunks = 50000                         # storage quota (CollectionWritesConfig)

    [tenants.acme.search]                      # optional: web search, the CLI's search.toml
    max_results = 8                            # schema (actors.providers.TenantSearchConfig)
    [tenants.acme.search.providers.searxng]
    base_url = "http://127.0.0.1:8888"

    [tenants.acme.chat]                        # optional: a chat model planning and/or writing
    url = "http://127.0.0.1:8000/v1"
    model = "qwen2.5-7b-instruct"
    api_key_env = "ACME_CHAT_API_KEY"          # the variable's name, never the key
    roles = ["planner", "writer"]

    [entailment]                               # optional: a chat model judging citations
    url = "http://127.0.0.1:8000/v1"
    model = "judge"

    [replicas]                                 # optional: new runs go to engine replicas
    count = 2                                  # on Ray (needs a redis:// or postgresql://
    num_cpus = 1                               # store and the ray extra)
    address = ""                               # Ray address; "" = $RAY_ADDRESS or a local Ray

    [observability]                            # optional: runs' traces over OTLP/HTTP
    endpoint = "http://127.0.0.1:4318/v1/traces"   # (observability.ObservabilityConfig)

    [usage.prices.models."gpt-4o-mini"]        # optional: costs per 1k tokens, per search
    input_per_1k = 0.00015                     # call ([usage.prices.providers]); and
    output_per_1k = 0.0006                     # tenant_metrics = true under [usage]

Tokens are stored only as SHA-256 digests. A tenant without ``[search]`` runs
offline (its local collections only); without ``[chat]`` its planner and writer
are the offline ones. With no tenant configured the server runs one ``default``
tenant without authentication and listens on 127.0.0.1 only, whatever ``host``
says: an open server must not be reachable from the network by accident.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from actors.providers import TenantSearchConfig
from reactive_rag.engine import ChatConfig, EntailmentConfig, UsageConfig, read_toml
from reactive_rag.observability import ObservabilityConfig

from ._cancel_config import CancelConfig
from ._caps import TenantCaps
from ._collection_config import CollectionWritesConfig
from ._exceptions import ConfigError
from ._retention_config import RetentionConfig

__all__ = [
    "DEFAULT_TENANT",
    "SESSION_TTL_CAP_S",
    "SHARED_STORES",
    "ChatConfig",
    "EntailmentConfig",
    "ReplicasConfig",
    "ServerConfig",
    "TenantConfig",
    "default_store_path",
]

DEFAULT_TENANT = "default"
ALL_COLLECTIONS = "*"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_STRICT = ConfigDict(extra="forbid", frozen=True)
SESSION_TTL_CAP_S = 30 * 86400.0
"""No session TTL (configured or asked for) is over 30 days."""
SHARED_STORES = ("redis://", "rediss://", "postgresql://", "postgres://")
"""Store URLs that processes on other machines can write to and read from."""


def default_store_path() -> Path:
    """``$REACTIVE_RAG_HOME/runs.db`` or ``~/.cache/reactive_rag/runs.db``."""
    home = os.environ.get("REACTIVE_RAG_HOME")
    base = Path(home) if home else Path.home() / ".cache" / "reactive_rag"
    return base / "runs.db"


class TenantConfig(BaseModel):
    """One tenant: its token digests, the collections it may search, its rate limits,
    and optionally its web search and chat model."""

    model_config = _STRICT

    token_sha256: tuple[str, ...] = ()
    """SHA-256 hex digests of the bearer tokens (several, to rotate tokens)."""
    collections: tuple[str, ...] = (ALL_COLLECTIONS,)
    """Collections the tenant may search; ``"*"`` means every indexed collection."""
    max_concurrent_runs: int = Field(default=8, ge=1)
    runs_per_minute: int = Field(default=60, ge=1)
    search: TenantSearchConfig | None = None
    """Web search next to the local collections (the CLI's search-config schema);
    ``None``: offline."""
    chat: ChatConfig | None = None
    """The chat model of the planner and/or writer; ``None``: offline policies."""
    caps: TenantCaps = Field(default_factory=TenantCaps)
    """The most one run may ask for, and runs and tokens per hour/day (``[caps]``)."""
    collection_writes: CollectionWritesConfig = Field(default_factory=CollectionWritesConfig)
    """Collections over the API: creation, writable names, storage quota (chunks)."""

    @field_validator("token_sha256")
    @classmethod
    def _digests(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        digests = tuple(v.strip().lower() for v in value)
        for digest in digests:
            if not _HEX64.match(digest):
                raise ValueError("token_sha256 entries must be 64 hex digits "
                                 "(the SHA-256 of the token, never the token itself)")
        return digests

    def allows(self, collection: str) -> bool:
        """True if this tenant may search ``collection``."""
        return ALL_COLLECTIONS in self.collections or collection in self.collections


class ReplicasConfig(BaseModel):
    """``[replicas]``: new runs execute on engine replicas on Ray, not in the server.

    Each replica is a Ray actor holding an engine over ``index_root`` (a path
    every node must see), one per tenant with ``[search]`` or ``[chat]`` (their
    API keys read from the worker's environment), and its own connection to
    the server's store, where it records its runs; the server streams them
    from there.
    """

    model_config = _STRICT

    count: int = Field(default=2, ge=1, le=1024)
    """Engine replicas (spread over the cluster's nodes)."""
    num_cpus: float = Field(default=1.0, ge=0)
    """CPUs Ray reserves for each replica (scheduling only)."""
    num_gpus: float = Field(default=0.0, ge=0)
    max_restarts: int = Field(default=3, ge=-1)
    """Times Ray restarts a dead replica (its runs in flight end ``interrupted``)."""
    address: str = ""
    """Ray cluster address; empty: ``$RAY_ADDRESS``, else a local Ray on loopback."""
    start_timeout_s: float = Field(default=120.0, gt=0)
    """How long starting the replicas (their engines and stores) may take."""


class ServerConfig(BaseModel):
    """Everything ``reactive-rag serve`` needs.

    Attributes:
        host: interface to bind (forced to 127.0.0.1 when no tenant is configured).
        port: TCP port (0 picks a free one).
        store: SQLite path or ``sqlite:///path``, or a ``redis://`` or
            ``postgresql://`` URL (``?schema=NAME``: the schema of its tables);
            default ``$REACTIVE_RAG_HOME/runs.db``.
        owner: this server's name among the processes writing to the store;
            ``None`` (default) takes a unique id per process. A stable name
            lets a restarted server interrupt its own crashed runs at once
            instead of after their lease expired; never give two live
            replicas the same name.
        lease_ttl_s: how long this server's lease on its runs lasts after each
            heartbeat; once it lapses, other replicas mark its running runs
            interrupted.
        store_retry_s: how long a run's events are retried against a store that
            cannot take writes (held in a bounded buffer) before the run ends
            ``failed``; its ending is stored once the store takes writes again.
        resume_interrupted: resume the runs this server's recovery marks
            ``interrupted`` (at start-up: this owner's crashed runs and those of
            owners whose lease expired; later: those its lease sweeps find) from
            their stored events, as ``POST /v1/runs/{id}/resume`` would; off by
            default.
        index_root: corpus index folder (default: the index default).
        default_collections: searched when a request names none.
        build_default_corpus: index the bundled standard-library docs at start-up
            (in the background) when ``stdlib`` is a default collection and missing.
        tenants: tenant name -> settings; empty means one open ``default`` tenant.
        open_tenant: limits and collections of that ``default`` tenant (its tokens are ignored).
        max_body_bytes: cap on a request body.
        sse_buffer: events buffered per SSE/WebSocket client before the overflow policy applies.
        keepalive_s: idle time before an SSE comment keeps the connection open.
        write_timeout_s: a client that cannot take one write in this time is detached.
        entailment: a chat model judging every kept claim on top of the offline
            checks (``[entailment]`` table: ``url``, ``model``); none by default.
        session_ttl_s: how long a conversation session (``POST /v1/sessions``)
            lives after its last use (each request about it, each turn's end
            slides it); after that it is gone (404) and swept from the store.
        session_max_ttl_s: the longest TTL a ``POST /v1/sessions`` may ask for
            (a longer one is cut to this); at least ``session_ttl_s``, at most
            30 days.
        replicas: ``[replicas]``: new runs go to engine replicas on Ray
            (:class:`ReplicasConfig`); ``None`` (default): they run in the
            server. Needs a ``redis://`` or ``postgresql://`` store and Ray.
        observability: ``[observability]``: every run's spans exported to an
            OpenTelemetry collector over OTLP/HTTP (:class:`ObservabilityConfig`);
            ``None`` (default): no export.
        usage: ``[usage]``: the price table costs are estimated with, and
            ``tenant_metrics`` (per-tenant usage counters on ``/metrics``, off by
            default) (:class:`~reactive_rag.engine.UsageConfig`).
        retention: ``[retention]``: how many days each tenant's ended runs are
            kept before a sweeper deletes them (:class:`RetentionConfig`); by
            default they are kept until ``DELETE /v1/runs/{id}``.
        cancels: ``[cancels]``: how often this server looks for the cancels other
            replicas recorded for its runs (:class:`CancelConfig`).
    """

    model_config = _STRICT

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    store: str = ""
    owner: str | None = Field(default=None, min_length=1, max_length=200,
                              pattern=r"^[^\s\x00-\x1f]+$")
    lease_ttl_s: float = Field(default=15.0, gt=0)
    store_retry_s: float = Field(default=15.0, gt=0)
    resume_interrupted: bool = False
    index_root: Path | None = None
    default_collections: tuple[str, ...] = ("stdlib",)
    build_default_corpus: bool = True
    tenants: dict[str, TenantConfig] = Field(default_factory=dict)
    open_tenant: TenantConfig = Field(default_factory=TenantConfig)
    max_body_bytes: int = Field(default=64 * 1024, ge=1024)
    sse_buffer: int = Field(default=256, ge=1)
    keepalive_s: float = Field(default=15.0, gt=0)
    write_timeout_s: float = Field(default=10.0, gt=0)
    entailment: EntailmentConfig | None = None
    session_ttl_s: float = Field(default=3600.0, gt=0, le=SESSION_TTL_CAP_S)
    session_max_ttl_s: float = Field(default=86400.0, gt=0, le=SESSION_TTL_CAP_S)
    replicas: ReplicasConfig | None = None
    observability: ObservabilityConfig | None = None
    usage: UsageConfig = Field(default_factory=UsageConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    cancels: CancelConfig = Field(default_factory=CancelConfig)

    @model_validator(mode="after")
    def _replicas_usable(self) -> ServerConfig:
        """``[replicas]`` is refused at load time unless every replica can reach the store."""
        if self.replicas is None:
            return self
        if not self.store_target().startswith(SHARED_STORES):
            raise ValueError(f"[replicas] needs a store every replica can reach: a redis:// "
                             f"or postgresql:// URL, not {self.store_label()!r}")
        if importlib.util.find_spec("ray") is None:
            raise ValueError("[replicas] needs Ray: pip install 'reactive-rag[ray]'")
        return self

    @model_validator(mode="after")
    def _session_ttls(self) -> ServerConfig:
        if self.session_ttl_s > self.session_max_ttl_s:
            raise ValueError(f"session_ttl_s ({self.session_ttl_s}) is over "
                             f"session_max_ttl_s ({self.session_max_ttl_s})")
        return self

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str) -> str:
        """A PostgreSQL URL is checked here, so ``serve`` refuses it before it starts."""
        if value.startswith(("postgresql://", "postgres://")):
            try:
                from reactive_rag.store import PostgresRunStore
            except ImportError:
                raise ValueError("a PostgreSQL store needs the postgres extra: "
                                 "pip install 'reactive-rag[postgres]'") from None
            PostgresRunStore(value)  # checks the URL (ValueError); connects to nothing
        return value

    @field_validator("tenants")
    @classmethod
    def _names(cls, value: dict[str, TenantConfig]) -> dict[str, TenantConfig]:
        for name in value:
            if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", name):
                raise ValueError(f"invalid tenant name {name!r}")
        return value

    @property
    def open_mode(self) -> bool:
        """No tenants configured: one unauthenticated ``default`` tenant on loopback."""
        return not self.tenants

    @property
    def bind_host(self) -> str:
        """The host actually bound (loopback only in open mode)."""
        return "127.0.0.1" if self.open_mode else self.host

    @property
    def effective_tenants(self) -> dict[str, TenantConfig]:
        """The tenants table, or the single open ``default`` tenant."""
        return dict(self.tenants) if self.tenants else {DEFAULT_TENANT: self.open_tenant}

    def store_target(self) -> str:
        """The store location with the default filled in."""
        return self.store or str(default_store_path())

    def store_label(self) -> str:
        """:meth:`store_target` fit for a log line: a URL's password shows as ``***``."""
        return re.sub(r"(?<=://)([^:/@?#]*):[^@/?#]*@", r"\1:***@", self.store_target())

    @classmethod
    def load(cls, path: str | Path | None = None, *,
             env: Mapping[str, str] | None = None, **overrides: Any) -> ServerConfig:
        """Read ``path`` (TOML), then ``REACTIVE_RAG_SERVER_*`` env vars, then ``overrides``.

        Env vars: ``REACTIVE_RAG_SERVER_CONFIG`` (file, if ``path`` is None),
        ``REACTIVE_RAG_SERVER_HOST``, ``_PORT``, ``_STORE``, ``_INDEX``, ``_OWNER``.

        Raises:
            ConfigError: unreadable file, bad TOML, or invalid values.
        """
        env = os.environ if env is None else env
        path = path or env.get("REACTIVE_RAG_SERVER_CONFIG") or None
        data: dict[str, Any] = {}
        if path is not None:
            data = read_toml(path, ConfigError)
        for key, var in (("host", "HOST"), ("port", "PORT"), ("store", "STORE"),
                         ("index_root", "INDEX"), ("owner", "OWNER")):
            value = env.get(f"REACTIVE_RAG_SERVER_{var}")
            if value:
                data[key] = value
        data.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in err.get("loc", ()))
            raise ConfigError(f"invalid server config at {where or 'top level'}: "
                              f"{err.get('msg', '')}") from exc
