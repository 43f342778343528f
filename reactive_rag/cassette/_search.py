"""Search providers that record their answers, stand-ins that replay them, and their searcher.

The recording wrapper sits outside a provider's retries and circuit breaker:
a replay serves what the run got after retrying, without waiting for backoff,
and the breaker's changes (``provider.health`` events) that happened during a
call are recorded with it and replayed by the stand-in at the same point.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from actors.providers import (
    Blacklist,
    BreakerState,
    HealthChange,
    HealthListener,
    ProviderError,
    SearchProvider,
    UnappliedFilter,
    search_with,
    supported_filters,
    unapplied_filters,
)
from actors.search import Searcher, SearchOutcome, SeenUrls
from streams import Hit, SearchFilters

from ._format import ProviderSetup, WebSetup, canonical
from ._tape import Tape

__all__ = ["RecordingProvider", "ReplayProvider", "TapedSearcher", "describe_searcher",
           "recording_searcher", "replay_searcher", "search_key"]

# the (wrapper, changes) of the search call running in this task, for breaker changes
_CALL: contextvars.ContextVar[tuple[object, list[HealthChange]] | None] = \
    contextvars.ContextVar("cassette_search_call", default=None)


def search_key(provider: str, query: str, k: int,
               filters: SearchFilters | None) -> dict[str, Any]:
    """A search request as matched on replay (the deadline is not part of it)."""
    key: dict[str, Any] = {"provider": provider, "query": query, "k": k}
    if filters is not None and not filters.is_empty:
        key["filters"] = _filters_json(filters)
    return key


def _filters_json(filters: SearchFilters) -> dict[str, Any]:
    return filters.model_dump(mode="json", exclude_defaults=True)


class _Listeners:
    """The ``add_listener``/``remove_listener`` side of a provider with a breaker."""

    def __init__(self) -> None:
        self._listeners: list[HealthListener] = []

    def add_listener(self, listener: HealthListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: HealthListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _tell(self, change: HealthChange) -> None:
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:  # a monitor's bug must not break searches
                continue


class RecordingProvider(_Listeners):
    """A provider whose every answer, typed error or cut call goes on the cassette.

    Same ``name`` as the wrapped provider, and its ``supported_filters`` when it
    declares them; filters reach it exactly as they would without the wrapper,
    and what it could not apply of them is recorded with its answer.
    """

    supported_filters: frozenset[str]

    def __init__(self, inner: SearchProvider, cassette: Tape) -> None:
        super().__init__()
        self.inner = inner
        self.name = inner.name
        self._cassette = cassette
        declared = supported_filters(inner)
        if declared is not None:
            self.supported_filters = declared
        add = getattr(inner, "add_listener", None)
        if add is not None:
            add(self._changed)

    def _changed(self, change: HealthChange) -> None:
        call = _CALL.get()
        if call is not None and call[0] is self:
            call[1].append(change)
        self._tell(change)

    async def search(self, query: str, k: int, deadline: float | None, *,
                     filters: SearchFilters | None = None) -> Sequence[Hit]:
        key = search_key(self.name, query, k, filters)
        changes: list[HealthChange] = []
        token = _CALL.set((self, changes))
        loop = asyncio.get_running_loop()
        started = loop.time()

        def add(**outcome: Any) -> None:
            self._cassette.add("search", key, health=changes,
                               elapsed_s=loop.time() - started, **outcome)

        try:
            hits = await search_with(self.inner, query, k, deadline, filters)
            bad = next((h for h in hits if not isinstance(h, Hit)), None)
            if bad is not None:  # what the searcher would make of it
                raise ProviderError(f"returned {type(bad).__name__}, not Hit", provider=self.name)
        except asyncio.CancelledError:
            add(cancelled=True)
            raise
        except (ProviderError, TimeoutError) as exc:
            add(error=exc)
            raise
        except Exception as exc:  # a provider breaking the protocol, as the searcher reports it
            err = ProviderError(f"unexpected {type(exc).__name__}: {exc}", provider=self.name)
            add(error=err)
            raise err from exc
        finally:
            _CALL.reset(token)
        response: dict[str, Any] = {"hits": [h.model_dump(mode="json") for h in hits]}
        if filters is not None and "filters" in key:  # asked of the searcher right after
            response["unapplied"] = [{"filter": u.filter, "reason": u.reason}
                                     for u in self.unapplied(filters)]
        add(response=response)
        return hits

    def unapplied(self, filters: SearchFilters) -> tuple[UnappliedFilter, ...]:
        return unapplied_filters(self.inner, filters)

    async def aclose(self) -> None:
        """Nothing: the wrapped provider stays with whoever built it."""


class ReplayProvider(_Listeners):
    """Stands in for a recorded provider of the same name; never touches the network."""

    supported_filters: frozenset[str]

    def __init__(self, cassette: Tape, name: str,
                 supported_filters: Collection[str] | None = None) -> None:
        super().__init__()
        self.name = name
        self._cassette = cassette
        if supported_filters is not None:
            self.supported_filters = frozenset(supported_filters)
        self._unapplied: dict[str, tuple[UnappliedFilter, ...]] = {}

    async def search(self, query: str, k: int, deadline: float | None, *,
                     filters: SearchFilters | None = None) -> Sequence[Hit]:
        got = await self._cassette.take("search", search_key(self.name, query, k, filters),
                                        provider=self.name)
        for change in got.health:
            self._tell(HealthChange(provider=change.provider, state=change.state,
                                    breaker=BreakerState(change.breaker), detail=change.detail))
        response = await self._cassette.outcome(got, ProviderError)
        unapplied = response.get("unapplied")
        if filters is not None and isinstance(unapplied, list):
            self._unapplied[canonical(_filters_json(filters))] = tuple(
                UnappliedFilter(str(u["filter"]), str(u["reason"]))
                for u in unapplied if isinstance(u, dict))
        raw = response.get("hits")
        return [Hit.model_validate(h) for h in (raw if isinstance(raw, list) else [])]

    def unapplied(self, filters: SearchFilters) -> tuple[UnappliedFilter, ...]:
        """What the recorded provider said it could not apply of these filters."""
        recorded = self._unapplied.get(canonical(_filters_json(filters)))
        if recorded is not None:
            return recorded
        declared: frozenset[str] = getattr(self, "supported_filters", frozenset())
        return tuple(UnappliedFilter(n, "not supported by the provider")
                     for n in filters.names() if n not in declared)


def describe_searcher(searcher: Searcher) -> WebSetup:
    """The searcher's providers and merge settings, for a cassette header."""
    providers = []
    for name, provider in searcher.providers.items():
        declared = supported_filters(provider)
        providers.append(ProviderSetup(
            name=name, supported_filters=tuple(sorted(declared)) if declared is not None else None))
    return WebSetup(
        providers=tuple(providers), primary=tuple(searcher.primary),
        fallback=tuple(searcher.fallback), hedge_delay_s=searcher.hedge_delay_s,
        blacklist=tuple(searcher.blacklist.rules), max_results=searcher.max_results,
        include_date=searcher.include_date, near_duplicate_bits=searcher.near_duplicate_bits,
        provider_timeout_s=searcher.provider_timeout_s)


class _SeenView(SeenUrls):
    """One search's view of the session's seen URLs, noting (or replaying) which it found.

    Parallel searches share the session's seen URLs, so which of them reports
    a web page depends on the order they finish in, which thread timing
    decides. A recording notes the hits each search found already seen; its
    replay finds exactly those, whatever order the searches finish in now.
    """

    __slots__ = ("_found", "_recorded", "_shared")

    def __init__(self, shared: SeenUrls, recorded: Collection[str] | None = None) -> None:
        super().__init__()
        self._shared = shared
        self._recorded = frozenset(recorded) if recorded is not None else None
        self._found: list[str] = []

    def __contains__(self, url: object) -> bool:
        found = url in (self._recorded if self._recorded is not None else self._shared)
        if found and isinstance(url, str):
            self._found.append(url)
        return found

    def __len__(self) -> int:
        return len(self._shared)

    def __iter__(self) -> Iterator[str]:
        return iter(self._shared)

    def add(self, url: str) -> bool:
        return self._shared.add(url)

    def snapshot(self) -> frozenset[str]:
        return self._shared.snapshot()

    def clear(self) -> None:
        self._shared.clear()


class TapedSearcher(Searcher):
    """The searcher of a recorded or replayed run (and of its copies with the run's corpus).

    Besides its providers' answers, each search's encounter with the
    session's seen URLs is taped (a ``seen`` interaction), so parallel
    searches merge exactly as they did when recorded.
    """

    def __init__(self, cassette: Tape, providers: Mapping[str, SearchProvider],
                 web: WebSetup) -> None:
        super().__init__(providers, primary=list(web.primary), fallback=list(web.fallback),
                         hedge_delay_s=web.hedge_delay_s, blacklist=Blacklist(web.blacklist),
                         max_results=web.max_results, include_date=web.include_date,
                         provider_timeout_s=web.provider_timeout_s,
                         near_duplicate_bits=web.near_duplicate_bits)
        self.cassette = cassette

    def with_providers(
        self,
        extra: Sequence[SearchProvider],
        *,
        provider_timeout_s: float | None = None,
        wrap: Callable[[SearchProvider], SearchProvider] | None = None,
    ) -> Searcher:
        copy = super().with_providers(extra, provider_timeout_s=provider_timeout_s, wrap=wrap)
        return TapedSearcher(self.cassette, copy.providers, describe_searcher(copy))

    async def search(
        self,
        queries: str | Sequence[str],
        *,
        k: int | None = None,
        providers: Sequence[str] = (),
        deadline: float | None = None,
        seen: SeenUrls | None = None,
        filters: SearchFilters | None = None,
        remember: bool = True,
    ) -> SearchOutcome:
        if seen is None:
            return await super().search(queries, k=k, providers=providers, deadline=deadline,
                                        filters=filters, remember=remember)
        key: dict[str, Any] = {"queries": [queries] if isinstance(queries, str) else
                               list(queries), "k": k, "providers": list(providers)}
        if filters is not None and not filters.is_empty:
            key["filters"] = _filters_json(filters)
        recorded: list[str] | None = None
        if self.cassette.mode == "replay":
            got = self.cassette.recall("seen", key)
            raw = got.response.get("seen") if got is not None and got.response else None
            recorded = [str(u) for u in raw] if isinstance(raw, list) else None
        view = _SeenView(seen, recorded)
        outcome = await super().search(queries, k=k, providers=providers, deadline=deadline,
                                       seen=view, filters=filters, remember=remember)
        if self.cassette.mode == "record":
            self.cassette.add("seen", key, response={"seen": view._found})
        return outcome


def recording_searcher(cassette: Tape, web: Searcher) -> TapedSearcher:
    """``web``'s shape over recording wrappers of its providers (closing stays with ``web``)."""
    providers: dict[str, SearchProvider] = {
        name: RecordingProvider(p, cassette) for name, p in web.providers.items()}
    return TapedSearcher(cassette, providers, describe_searcher(web))


def replay_searcher(cassette: Tape, web: WebSetup) -> TapedSearcher:
    """A searcher shaped like the recorded one, over stand-ins of its providers."""
    providers: dict[str, SearchProvider] = {
        p.name: ReplayProvider(cassette, p.name, p.supported_filters) for p in web.providers}
    return TapedSearcher(cassette, providers, web)
