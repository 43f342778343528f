"""The one small protocol every search provider implements (web APIs and local corpora).

Filters are an optional capability, so existing providers keep working: a
provider that declares ``supported_filters`` (names from
:data:`~._filtering.FILTER_NAMES`) is a :class:`FilteringProvider` and is
called with ``filters=``; any other provider is called as
``search(query, k, deadline)`` and is reported as applying no filter. The
searcher checks what it can itself (sites by host, dates of dated hits).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol, cast, runtime_checkable

from streams import Hit, SearchFilters

from ._filtering import UnappliedFilter, supported_filters

__all__ = ["FilteringProvider", "SearchProvider", "search_with", "time_left"]


@runtime_checkable
class SearchProvider(Protocol):
    """A source of search hits.

    ``deadline`` is an absolute ``asyncio`` loop time (``loop.time()``) after
    which the caller no longer waits; ``None`` means no deadline. A provider
    raises a ``ProviderError`` subclass on failure (never returns garbage) and
    must not outlive the deadline.
    """

    name: str

    async def search(self, query: str, k: int, deadline: float | None) -> Sequence[Hit]:
        """Return up to ``k`` hits for ``query``, best first."""
        ...


@runtime_checkable
class FilteringProvider(Protocol):
    """A provider that maps structured filters to its own API (the optional capability).

    ``supported_filters`` names the filters it can apply at all; ``unapplied``
    refines that for one request (e.g. "a date range beyond a year cannot be
    expressed") so the planner is told what the results were not held to. A
    provider without ``unapplied`` is taken to apply exactly what it declares.
    """

    name: str
    supported_filters: frozenset[str]

    async def search(self, query: str, k: int, deadline: float | None, *,
                     filters: SearchFilters | None = None) -> Sequence[Hit]:
        """Return up to ``k`` hits for ``query`` under ``filters``, best first."""
        ...

    def unapplied(self, filters: SearchFilters) -> tuple[UnappliedFilter, ...]:
        """The requested filters this provider does not apply, and why.

        Called after the provider's search with the same filters; depends only
        on the filters, the provider's configuration and clock, and what its
        searches found out (the local corpus learns which collections lack
        language metadata).
        """
        ...


async def search_with(provider: SearchProvider, query: str, k: int, deadline: float | None,
                      filters: SearchFilters | None = None) -> Sequence[Hit]:
    """Call ``provider`` with ``filters=`` only if it declares filters and there are some.

    Empty filters never reach a provider, so a request without filters is
    exactly the call it was before filters existed.
    """
    if filters is not None and not filters.is_empty and supported_filters(provider) is not None:
        return await cast(FilteringProvider, provider).search(query, k, deadline, filters=filters)
    return await provider.search(query, k, deadline)


def time_left(deadline: float | None) -> float | None:
    """Seconds until ``deadline`` (never negative), or ``None`` for no deadline."""
    if deadline is None:
        return None
    return max(0.0, deadline - asyncio.get_running_loop().time())
