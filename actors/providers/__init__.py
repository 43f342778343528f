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
from ._filtering import (
    FILTER_NAMES,
    FilterPlan,
    UnappliedFilter,
    date_bounds,
    hit_date,
    language_code,
    site_host,
    site_matches,
    supported_filters,
    unapplied_filters,
    url_host,
    utc_today,
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
from ._protocol import FilteringProvider, SearchProvider, search_with, time_left
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
    "FILTER_NAMES",
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
    "FilterPlan",
    "FilteringProvider",
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
    "UnappliedFilter",
    "date_bounds",
    "default_registry",
    "hit_date",
    "language_code",
    "load_search_config",
    "parse_retry_after",
    "register_provider",
    "search_with",
    "site_host",
    "site_matches",
    "supported_filters",
    "time_left",
    "unapplied_filters",
    "url_host",
    "utc_today",
]
