"""The HTTP service: runs over HTTP, their events over SSE and WebSocket, tenants and scope.

``create_app(ServerConfig.load(path))`` builds the aiohttp application;
``reactive-rag serve`` runs it.
"""

from ._app import (
    AUTH_KEY,
    CONFIG_KEY,
    ENGINE_KEY,
    MANAGER_KEY,
    STORE_KEY,
    create_app,
    make_store,
    request_tenant,
)
from ._auth import Authenticator, Tenant, hash_token
from ._bind import BindError, bind_listener
from ._config import (
    DEFAULT_TENANT,
    EntailmentConfig,
    ReplicasConfig,
    ServerConfig,
    TenantConfig,
    default_store_path,
)
from ._exceptions import ConfigError, Problem, RateLimited, ServerError
from ._feed import EventFeed, FeedStats
from ._models import RunRequest
from ._openapi import openapi_document
from ._problems import PROBLEM_CODES, ProblemAppRunner
from ._redact import RedactingAccessLogger
from ._requests import CORPUS_TASK_KEY, resolve_collections
from ._runs import ActiveRun, RunManager
from ._serve import serve
from ._sessions import SESSIONS_KEY, SessionManager, SessionRequest
from ._sse import KEEP_ALIVE, ClientGone, SseWriter

__all__ = [
    "AUTH_KEY",
    "CONFIG_KEY",
    "CORPUS_TASK_KEY",
    "DEFAULT_TENANT",
    "ENGINE_KEY",
    "KEEP_ALIVE",
    "MANAGER_KEY",
    "PROBLEM_CODES",
    "SESSIONS_KEY",
    "STORE_KEY",
    "ActiveRun",
    "Authenticator",
    "BindError",
    "ClientGone",
    "ConfigError",
    "EntailmentConfig",
    "EventFeed",
    "FeedStats",
    "Problem",
    "ProblemAppRunner",
    "RateLimited",
    "RedactingAccessLogger",
    "ReplicasConfig",
    "RunManager",
    "RunRequest",
    "ServerConfig",
    "ServerError",
    "SessionManager",
    "SessionRequest",
    "SseWriter",
    "Tenant",
    "TenantConfig",
    "bind_listener",
    "create_app",
    "default_store_path",
    "hash_token",
    "make_store",
    "openapi_document",
    "request_tenant",
    "resolve_collections",
    "serve",
]
