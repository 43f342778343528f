"""Search providers: the protocol, web adapters, registry, configuration, health, blacklist.

Every adapter maps its API's real response format and error signalling to
:class:`streams.Hit` values and the typed errors of :mod:`._exceptions`.
"""

from ._blacklist import Blacklist, BlacklistRuleError
from ._brave import BraveProvider
from ._config import (
    AgentSearchSettings,
    CredibilitySettings,
    ProviderSettings,
    SearchConfig,
    TenantSearchConfig,
    load_search_config,
)
from ._duckduckgo import DuckDuckGoProvider
from ._exceptions import (
    AllProvidersFailed,
    CircuitOpen,
    ProviderAuthError,
    ProviderBadResponse,
    ProviderError,
    ProviderNotConfigured,
    ProviderQuotaError,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
)
from ._google_cse import GoogleCseProvider
from ._health import (
    BreakerState,
    CircuitBreaker,
    HealthChange,
    HealthListener,
    ResilientProvider,
    RetryPolicy,
)
from ._http import HttpProvider, parse_retry_after
from ._protocol import SearchProvider, time_left
from ._registry import (
    ENTRY_POINT_GROUP,
    ProviderFactory,
    ProviderRegistry,
    default_registry,
    register_provider,
)
from ._searxng import SearxngProvider
from ._tavily import TavilyProvider

__all__ = [
    "ENTRY_POINT_GROUP",
    "AgentSearchSettings",
    "AllProvidersFailed",
    "Blacklist",
    "BlacklistRuleError",
    "BraveProvider",
    "BreakerState",
    "CircuitBreaker",
    "CircuitOpen",
    "CredibilitySettings",
    "DuckDuckGoProvider",
    "GoogleCseProvider",
    "HealthChange",
    "HealthListener",
    "HttpProvider",
    "ProviderAuthError",
    "ProviderBadResponse",
    "ProviderError",
    "ProviderFactory",
    "ProviderNotConfigured",
    "ProviderQuotaError",
    "ProviderRateLimited",
    "ProviderRegistry",
    "ProviderSettings",
    "ProviderTimeout",
    "ProviderUnavailable",
    "ResilientProvider",
    "RetryPolicy",
    "SearchConfig",
    "SearchProvider",
    "SearxngProvider",
    "TavilyProvider",
    "TenantSearchConfig",
    "default_registry",
    "load_search_config",
    "parse_retry_after",
    "register_provider",
    "time_left",
]
