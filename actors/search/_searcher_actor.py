"""The searcher actor: ``search.requested`` -> ``search.completed`` | ``search.failed``.

It wraps a shared :class:`Searcher` (one per tenant, whose providers carry the
circuit breakers) and owns what is per run or per session: the seen-URL set and
the subscription that turns breaker changes into ``provider.health`` events.

The seen-URL set holds the web pages the run *registered* (``evidence.registered``),
not every result a search returned: a result the run passed over (its rerank put it
under the relevance floor for the query that found it) comes back when a later
search asks for it, typically the search for a bridge entity that names it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from streams import (
    ErrorInfo,
    Event,
    EvidenceRegistered,
    ProviderCall,
    ProviderHealth,
    SearchCompleted,
    SearchFailed,
    SearchRequested,
)

from .._actor import Actor, ActorContext, error_info
from ..providers import AllProvidersFailed, HealthChange, ProviderNotConfigured
from ._searcher import Searcher, SearchOutcome, SeenUrls, filters_problem

__all__ = ["SearcherActor"]


class SearcherActor(Actor):
    """Fan-out search over the tenant's providers, within the run's budget.

    Args:
        searcher: the tenant's searcher (shared across runs).
        seen: the session's seen URLs (a fresh set per actor by default): the web
            pages its runs registered, never returned by a later search.
        deadline_margin_s: time kept back from the run's remaining budget so
            the answer is published before the run's own deadline.
        close_searcher: close the searcher's providers when the run ends (for
            one-off runs that built their own searcher).
    """

    name = "searcher"
    handles = ("search.requested", "evidence.registered")
    concurrency = 4

    def __init__(
        self,
        searcher: Searcher,
        *,
        seen: SeenUrls | None = None,
        deadline_margin_s: float = 0.05,
        close_searcher: bool = False,
    ) -> None:
        self.searcher = searcher
        self.seen = seen if seen is not None else SeenUrls()
        self.deadline_margin_s = deadline_margin_s
        self._close_searcher = close_searcher
        self._listening: list[object] = []
        self._ctx: ActorContext | None = None

    @property
    def seen_urls(self) -> frozenset[str]:
        """Web pages this session's runs registered (normalised)."""
        return self.seen.snapshot()

    def on_restore(self, events: Sequence[Event]) -> None:
        """A resumed run's seen URLs: the web pages its stored log registered (only those)."""
        self.seen = SeenUrls()
        for event in events:
            if isinstance(event, EvidenceRegistered):
                for chunk in event.chunks:
                    self.seen.add_web(chunk.url)

    async def on_start(self, ctx: ActorContext) -> None:
        self._ctx = ctx
        for provider in self.searcher.providers.values():
            add = getattr(provider, "add_listener", None)
            if add is not None:
                add(self._on_health)
                self._listening.append(provider)

    async def on_stop(self, ctx: ActorContext) -> None:
        for provider in self._listening:
            remove = getattr(provider, "remove_listener", None)
            if remove is not None:
                remove(self._on_health)
        self._listening.clear()
        self._ctx = None
        if self._close_searcher:
            await self.searcher.aclose()

    def _on_health(self, change: HealthChange) -> None:
        if self._ctx is not None:
            self._ctx.emit(ProviderHealth(provider=change.provider, state=change.state,
                                          detail=change.detail))

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        if isinstance(msg, EvidenceRegistered):
            for chunk in msg.chunks:
                if chunk.url:
                    self.seen.add_web(chunk.url)
            return None
        assert isinstance(msg, SearchRequested)
        problem = filters_problem(msg.filters)
        if problem is not None:  # the planner's mistake: say so, ask nobody
            return [SearchFailed(call_id=msg.call_id, query=msg.query, error=ErrorInfo(
                kind="InvalidFilters", message=problem, retryable=False))]
        loop = asyncio.get_running_loop()
        remaining = ctx.remaining()
        deadline = None
        if remaining is not None:
            margin = min(self.deadline_margin_s, remaining * 0.1)
            deadline = loop.time() + max(0.0, remaining - margin)
        outcome = await self.searcher.search(
            msg.query, k=msg.k, providers=msg.providers, deadline=deadline, seen=self.seen,
            filters=msg.filters, remember=False)
        if outcome.failed:
            if not outcome.errors:
                error = error_info(ProviderNotConfigured("no search provider to ask"))
            else:
                error = error_info(AllProvidersFailed(outcome.errors))
            return [SearchFailed(call_id=msg.call_id, query=msg.query, error=error,
                                 provider_calls=self._provider_calls(outcome))]
        return [SearchCompleted(
            call_id=msg.call_id, query=msg.query, hits=outcome.hits,
            providers=outcome.providers,
            errors=tuple(error_info(e) for e in outcome.errors),
            unapplied=outcome.unapplied,
            provider_calls=self._provider_calls(outcome),
        )]

    def _provider_calls(self, outcome: SearchOutcome) -> tuple[ProviderCall, ...]:
        """Each asked provider's time and error kind (the slowest query's, if several).

        In the configured order, not the order they settled in, so a replayed
        run carries the same list.
        """
        failed = {e.provider: type(e).__name__ for e in outcome.errors if e.provider}
        elapsed: dict[str, float] = {}
        for (provider, _query), seconds in outcome.elapsed_s.items():
            elapsed[provider] = max(seconds, elapsed.get(provider, 0.0))
        rank = {name: i for i, name in enumerate(self.searcher.providers)}
        return tuple(ProviderCall(provider=name, elapsed_s=round(elapsed[name], 6),
                                  error=failed.get(name, ""))
                     for name in sorted(elapsed, key=lambda n: (rank.get(n, len(rank)), n)))

    def on_failure(self, msg: Event, exc: BaseException) -> Event | None:
        if isinstance(msg, SearchRequested):
            info = error_info(exc)
            if isinstance(exc, TimeoutError) and not str(exc):
                info = ErrorInfo(kind="TimeoutError", retryable=True,
                                 message="the search did not finish within the run's budget")
            return SearchFailed(call_id=msg.call_id, query=msg.query, error=info)
        return super().on_failure(msg, exc)
