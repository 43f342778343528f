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
from ._cancel_across import CancelAnswer, cancel_anywhere
from ._cancel_config import CancelConfig
from ._caps import BUDGET_CAPS, BUDGET_LIMIT, TenantCaps
from ._collection_config import CollectionWritesConfig
from ._collection_writes import COLLECTION_WRITER, DocumentIn, json_documents
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
from ._indexing import INDEX_KIND, CollectionWriter
from ._models import RunRequest
from ._openapi import openapi_document
from ._problems import PROBLEM_CODES, ProblemAppRunner
from ._redact import RedactingAccessLogger
from ._requests import CORPUS_TASK_KEY, resolve_collections
from ._retention import RetentionSweeper
from ._retention_config import RetentionConfig
from ._runs import ActiveRun, RunManager
from ._serve import serve
from ._sessions import SESSIONS_KEY, SessionManager, SessionRequest
from ._sse import KEEP_ALIVE, ClientGone, SseWriter
from ._start_errors import StartError
from ._tasks import TASK_MANAGER, task_view

__all__ = [
    "AUTH_KEY",
    "BUDGET_CAPS",
    "BUDGET_LIMIT",
    "COLLECTION_WRITER",
    "CONFIG_KEY",
    "CORPUS_TASK_KEY",
    "DEFAULT_TENANT",
    "ENGINE_KEY",
    "INDEX_KIND",
    "KEEP_ALIVE",
    "MANAGER_KEY",
    "PROBLEM_CODES",
    "SESSIONS_KEY",
    "STORE_KEY",
    "TASK_MANAGER",
    "ActiveRun",
    "Authenticator",
    "BindError",
    "CancelAnswer",
    "CancelConfig",
    "ClientGone",
    "CollectionWriter",
    "CollectionWritesConfig",
    "ConfigError",
    "DocumentIn",
    "EntailmentConfig",
    "EventFeed",
    "FeedStats",
    "Problem",
    "ProblemAppRunner",
    "RateLimited",
    "RedactingAccessLogger",
    "ReplicasConfig",
    "RetentionConfig",
    "RetentionSweeper",
    "RunManager",
    "RunRequest",
    "ServerConfig",
    "ServerError",
    "SessionManager",
    "SessionRequest",
    "SseWriter",
    "StartError",
    "Tenant",
    "TenantCaps",
    "TenantConfig",
    "bind_listener",
    "cancel_anywhere",
    "create_app",
    "default_store_path",
    "hash_token",
    "json_documents",
    "make_store",
    "openapi_document",
    "request_tenant",
    "resolve_collections",
    "serve",
    "task_view",
]
