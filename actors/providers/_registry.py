"""Providers by name: the built-in adapters plus third parties' through entry points.

A third party ships a provider without touching this code by declaring, in its
own ``pyproject.toml``::

    [project.entry-points."reactive_rag.providers"]
    mysearch = "mypackage.search:make_provider"

where ``make_provider(settings, *, name, session, env) -> SearchProvider`` (a
provider class with that constructor works as is). Entry points are read once,
lazily, the first time a name is not found among the registered ones.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Protocol

import aiohttp

from ._brave import BraveProvider
from ._config import ProviderSettings, TenantSearchConfig
from ._duckduckgo import DuckDuckGoProvider
from ._exceptions import ProviderError, ProviderNotConfigured
from ._google_cse import GoogleCseProvider
from ._protocol import SearchProvider
from ._searxng import SearxngProvider
from ._tavily import TavilyProvider

__all__ = [
    "ENTRY_POINT_GROUP",
    "ProviderFactory",
    "ProviderRegistry",
    "default_registry",
    "register_provider",
]

ENTRY_POINT_GROUP = "reactive_rag.providers"


class ProviderFactory(Protocol):
    """Builds a provider from its settings (a provider class's constructor fits)."""

    def __call__(
        self,
        settings: ProviderSettings,
        *,
        name: str | None = ...,
        session: aiohttp.ClientSession | None = ...,
        env: Mapping[str, str] | None = ...,
    ) -> SearchProvider: ...


class ProviderRegistry:
    """Factories by kind, consulted when a tenant's configuration is turned into providers.

    Args:
        group: entry-point group searched for kinds not registered in code
            (``None`` disables entry points).
    """

    def __init__(self, group: str | None = ENTRY_POINT_GROUP) -> None:
        self._factories: dict[str, ProviderFactory] = {}
        self._group = group
        self._entry_points_loaded = group is None
        self._lock = threading.Lock()
        self._broken: dict[str, str] = {}

    def register(self, kind: str, factory: ProviderFactory, *, replace: bool = False) -> None:
        """Make ``kind`` buildable.

        Raises:
            ValueError: ``kind`` is empty, or taken and ``replace`` is false.
        """
        if not kind:
            raise ValueError("a provider kind must be a non-empty string")
        with self._lock:
            if kind in self._factories and not replace:
                raise ValueError(f"provider kind {kind!r} is already registered")
            self._factories[kind] = factory

    def kinds(self) -> list[str]:
        """Every known kind, entry points included, sorted."""
        self._load_entry_points()
        return sorted(self._factories)

    def factory(self, kind: str) -> ProviderFactory:
        """The factory of ``kind``.

        Raises:
            ProviderNotConfigured: no such kind, in code or in entry points.
        """
        found = self._factories.get(kind)
        if found is None:
            self._load_entry_points()
            found = self._factories.get(kind)
        if found is None:
            if kind in self._broken:
                raise ProviderNotConfigured(
                    f"provider plugin {kind!r} failed to load: {self._broken[kind]}")
            raise ProviderNotConfigured(
                f"unknown provider kind {kind!r} (known: {', '.join(self.kinds())})")
        return found

    def create(
        self,
        name: str,
        settings: ProviderSettings,
        *,
        session: aiohttp.ClientSession | None = None,
        env: Mapping[str, str] | None = None,
    ) -> SearchProvider:
        """Build the provider a tenant configured as ``name``.

        Raises:
            ProviderNotConfigured: unknown kind, or the adapter lacks key/URL/options.
        """
        factory = self.factory(settings.kind or name)
        try:
            return factory(settings, name=name, session=session, env=env)
        except ProviderError:
            raise
        except Exception as exc:  # a third party's factory: report, do not crash
            raise ProviderNotConfigured(
                f"factory failed: {type(exc).__name__}: {exc}", provider=name) from exc

    def build(
        self,
        tenant: TenantSearchConfig,
        *,
        session: aiohttp.ClientSession | None = None,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, SearchProvider]:
        """Every provider of a tenant, in fallback order (primary first).

        Raises:
            ProviderNotConfigured: any of them is unconfigured (fail at start-up,
                not in the middle of a run).
        """
        names = tenant.primary() + [n for n in tenant.fallback if n not in tenant.primary()]
        return {n: self.create(n, tenant.provider(n), session=session, env=env) for n in names}

    def _load_entry_points(self) -> None:
        if self._entry_points_loaded:
            return
        with self._lock:
            if self._entry_points_loaded:
                return
            self._entry_points_loaded = True
            assert self._group is not None
            for ep in entry_points(group=self._group):
                if ep.name in self._factories:
                    continue
                try:
                    self._factories[ep.name] = ep.load()
                except Exception as exc:  # a broken plugin must not hide the others
                    self._broken[ep.name] = f"{type(exc).__name__}: {exc}"


def _builtin_registry() -> ProviderRegistry:
    registry = ProviderRegistry()
    for cls in (SearxngProvider, BraveProvider, GoogleCseProvider, TavilyProvider,
                DuckDuckGoProvider):
        registry.register(cls.kind, cls)
    return registry


default_registry = _builtin_registry()
"""The process-wide registry with the built-in adapters."""


def register_provider(kind: str, factory: ProviderFactory, *, replace: bool = False) -> None:
    """Register ``factory`` as ``kind`` in :data:`default_registry`."""
    default_registry.register(kind, factory, replace=replace)
