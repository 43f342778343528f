"""The searcher's logic, free of the actor runtime: fan-out, merge, dedup, filter.

A search asks every (query, provider) pair at once and waits for all of them
(all-settled: one provider failing never loses another's hits), each within
its own deadline inside the caller's. Fallback providers are asked when every
primary failed, or, with hedging, when none has answered within the hedge
delay. Hits are then merged round-robin across providers (so one provider
cannot crowd out the rest), URL-normalised, blacklisted, filtered against the
session's seen URLs and deduplicated by normalised URL and by SimHash of their
text, best first, up to ``k``. Corpus passages (hits with a ``chunk_id``) are
identified by their chunk, not their document's URL: several passages of one
document are distinct results, and the seen-URL set is for web pages only.

Structured filters go to every provider that declares them; afterwards the
searcher holds every provider's hits to what it can check exactly itself
(sites by the URL's host, date bounds on dated hits), so a provider that
could not apply a filter cannot leak past it. What stays unenforced is
reported per provider (``SearchOutcome.unapplied``).

The searcher is built once per tenant and shared by runs (its providers carry
their circuit breakers); the seen-URL set belongs to a session.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import aiohttp

from streams import Hit, SearchFilters

from ..providers import (
    Blacklist,
    CircuitBreaker,
    ProviderError,
    ProviderNotConfigured,
    ProviderRegistry,
    ProviderTimeout,
    ResilientProvider,
    RetryPolicy,
    SearchProvider,
    TenantSearchConfig,
    UnappliedFilter,
    date_bounds,
    default_registry,
    hit_date,
    search_with,
    site_matches,
    unapplied_filters,
    url_host,
)
from ..text import NearDuplicateIndex, normalize_url, simhash64

__all__ = ["SearchOutcome", "SearchStats", "Searcher", "SeenUrls", "filters_problem"]

_MIN_WORDS_FOR_SIMHASH = 8  # shorter texts collide too easily to call them duplicates


class SeenUrls:
    """The normalised URLs a session already holds.

    A session never gets such a page back from a later search, so it never
    re-reads or re-indexes it. :meth:`Searcher.search` adds what it returns
    (unless told not to); the searcher actor adds the pages its run registered
    instead, so a result passed over comes back. Updates happen between awaits,
    so concurrent searches of one session cannot lose each other's additions.
    """

    __slots__ = ("_urls",)

    def __init__(self, urls: Iterable[str] = ()) -> None:
        self._urls: set[str] = set(urls)

    def __contains__(self, url: object) -> bool:
        return url in self._urls

    def __len__(self) -> int:
        return len(self._urls)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._urls))

    def add(self, url: str) -> bool:
        """Remember ``url``; ``True`` if it was new."""
        if url in self._urls:
            return False
        self._urls.add(url)
        return True

    def add_web(self, raw: str) -> bool:
        """Remember a web page's URL in any spelling (normalised as results are);
        ``False`` for a URL that is no web page (a corpus passage's) or was known."""
        url = _web_url(raw)
        return url is not None and self.add(url)

    def snapshot(self) -> frozenset[str]:
        return frozenset(self._urls)

    def clear(self) -> None:
        self._urls.clear()


@dataclass(slots=True)
class SearchStats:
    """What the merge dropped, and why (for logs and tests)."""

    raw: int = 0
    invalid_url: int = 0
    blacklisted: int = 0
    seen_before: int = 0
    duplicate_url: int = 0
    near_duplicate: int = 0
    off_site: int = 0  # outside ``sites`` or inside ``exclude_sites``
    out_of_range: int = 0  # dated outside the date filter


@dataclass(frozen=True, slots=True)
class _Answer:
    provider: str
    query: str
    hits: Sequence[Hit] = ()
    error: ProviderError | None = None
    elapsed_s: float = 0.0
    unapplied: tuple[UnappliedFilter, ...] = ()  # what the hits were not held to
    off_site: int = 0
    out_of_range: int = 0
    undated: int = 0  # hits kept without a date while a date filter was asked

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """The merged result of one fan-out.

    Attributes:
        hits: deduplicated hits, best first, at most ``k``.
        providers: providers that answered (in configured order).
        errors: one typed error per failed (query, provider) pair.
        elapsed_s: per ``(provider, query)``, seconds until it settled.
        stats: what the merge dropped.
        unapplied: ``"provider: filter (why)"`` for each requested filter the
            returned hits of an answering provider were not held to.
    """

    hits: tuple[Hit, ...]
    providers: tuple[str, ...]
    errors: tuple[ProviderError, ...]
    elapsed_s: Mapping[tuple[str, str], float] = field(default_factory=dict)
    stats: SearchStats = field(default_factory=SearchStats)
    unapplied: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        """Every provider asked failed (nothing answered, not even an empty list)."""
        return not self.providers


class Searcher:
    """Fan-out over providers with merge, dedup and blacklist.

    Args:
        providers: providers by name, or a sequence (named by ``.name``), in
            priority order.
        primary: names asked on every search (default: all but ``fallback``).
        fallback: names asked only when the primaries failed, or when hedging.
        hedge_delay_s: when no primary has answered within this delay, ask the
            next fallback at once (``None``: fallback only after failure).
        blacklist: URL rules applied to normalised URLs.
        max_results: cap on ``k`` (the tenant's, lowered per agent).
        include_date: keep ``published_at`` on hits.
        provider_timeout_s: cap per provider call inside the caller's deadline.
        near_duplicate_bits: SimHash Hamming distance that counts as the same text.
    """

    def __init__(
        self,
        providers: Mapping[str, SearchProvider] | Sequence[SearchProvider],
        *,
        primary: Sequence[str] | None = None,
        fallback: Sequence[str] = (),
        hedge_delay_s: float | None = None,
        blacklist: Blacklist | None = None,
        max_results: int = 10,
        include_date: bool = True,
        provider_timeout_s: float | None = None,
        near_duplicate_bits: int = 3,
    ) -> None:
        if isinstance(providers, Mapping):
            self.providers: dict[str, SearchProvider] = dict(providers)
        else:
            self.providers = {p.name: p for p in providers}
        self.fallback = [n for n in fallback if n in self.providers]
        self.primary = list(primary) if primary is not None else [
            n for n in self.providers if n not in self.fallback]
        if max_results < 1:
            raise ValueError("max_results must be >= 1")
        self.hedge_delay_s = hedge_delay_s
        self.blacklist = blacklist or Blacklist()
        self.max_results = max_results
        self.include_date = include_date
        self.provider_timeout_s = provider_timeout_s
        self.near_duplicate_bits = near_duplicate_bits
        self._owned: list[SearchProvider] = []

    @classmethod
    def from_config(
        cls,
        tenant: TenantSearchConfig,
        *,
        agent: str | None = None,
        registry: ProviderRegistry | None = None,
        session: aiohttp.ClientSession | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Searcher:
        """Build a tenant's searcher: adapters behind retries and circuit breakers.

        Raises:
            ProviderNotConfigured: a configured provider lacks its key/URL, or
                the tenant has no provider at all.
        """
        if not tenant.providers:
            raise ProviderNotConfigured("the tenant configured no search provider")
        built = (registry or default_registry).build(tenant, session=session, env=env)
        wrapped: dict[str, SearchProvider] = {}
        for name, provider in built.items():
            s = tenant.provider(name)
            wrapped[name] = ResilientProvider(
                provider,
                retry=RetryPolicy(retries=s.retries, backoff_s=s.backoff_s,
                                  max_backoff_s=s.max_backoff_s),
                breaker=CircuitBreaker(name, failure_threshold=s.breaker_threshold,
                                       cool_down_s=s.breaker_cool_down_s),
            )
        searcher = cls(
            wrapped,
            primary=tenant.primary(),
            fallback=tenant.fallback,
            hedge_delay_s=tenant.hedge_delay_s,
            blacklist=Blacklist(tenant.blacklist),
            max_results=tenant.max_results_for(agent),
            include_date=tenant.include_date,
        )
        searcher._owned = list(wrapped.values())
        return searcher

    def with_providers(
        self,
        extra: Sequence[SearchProvider],
        *,
        provider_timeout_s: float | None = None,
        wrap: Callable[[SearchProvider], SearchProvider] | None = None,
    ) -> Searcher:
        """A searcher with ``extra`` primaries first (e.g. a run's local corpus) and this
        one's providers, fallback, hedging, blacklist and limits.

        ``wrap`` decorates each of this searcher's own providers for the copy (e.g.
        a per-session knowledge base in front of the web). The providers (and their
        circuit breakers) are shared, not copied; closing stays with this searcher.
        """
        names = [p.name for p in extra]
        own = {n: wrap(p) for n, p in self.providers.items()} if wrap else self.providers
        providers = {**{p.name: p for p in extra}, **own}
        return Searcher(
            providers,
            primary=names + [n for n in self.primary if n not in names],
            fallback=self.fallback,
            hedge_delay_s=self.hedge_delay_s,
            blacklist=self.blacklist,
            max_results=self.max_results,
            include_date=self.include_date,
            provider_timeout_s=(self.provider_timeout_s if provider_timeout_s is None
                                else provider_timeout_s),
            near_duplicate_bits=self.near_duplicate_bits,
        )

    async def aclose(self) -> None:
        """Close the providers this searcher built (their HTTP sessions)."""
        for provider in self._owned:
            closer = getattr(provider, "aclose", None)
            if closer is not None:
                with contextlib.suppress(Exception):
                    await closer()
        self._owned = []

    # --- fan-out -------------------------------------------------------------------------

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
        """Ask queries x providers in parallel and merge.

        Args:
            queries: one query or several (e.g. the planner's expansions).
            k: hits wanted (capped by ``max_results``).
            providers: names to ask instead of the primaries (unknown names
                fail as ``ProviderNotConfigured``, without a network call).
            deadline: absolute ``loop.time()`` after which nothing is awaited.
            seen: the session's seen URLs; hits already seen are dropped and
                (with ``remember``) the returned ones are added.
            filters: passed to providers that declare them, then checked on
                every provider's hits where the searcher can (see module doc).
            remember: add the returned hits to ``seen``; ``False`` when the
                caller marks only what it keeps (the searcher actor marks the
                results its run registered, so a result passed over comes back).

        Raises:
            ValueError: ``filters`` has a date range that ends before it starts.
        """
        active = filters if filters is not None and not filters.is_empty else None
        problem = filters_problem(active)
        if problem is not None:
            raise ValueError(problem)
        qs = [queries] if isinstance(queries, str) else [q for q in queries if q.strip()]
        want = min(k or self.max_results, self.max_results)
        # Over-fetch: the blacklist, dedup and the seen set remove some hits.
        fetch = want + min(want, 10)
        primary = list(providers) or self.primary
        fallback = [n for n in self.fallback if n not in primary] if not providers else []
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(self._one_query(q, fetch, primary, fallback, deadline,
                                                    active))
                     for q in qs]
        answers = [a for t in tasks for a in t.result()]
        return self._merge(answers, primary + fallback, want, seen, remember=remember)

    async def _one_query(
        self, query: str, k: int, primary: Sequence[str], fallback: Sequence[str],
        deadline: float | None, filters: SearchFilters | None = None,
    ) -> list[_Answer]:
        loop = asyncio.get_running_loop()
        answers: list[_Answer] = []
        pending: dict[asyncio.Task[_Answer], str] = {}
        from_fallback: set[str] = set()
        spare = list(fallback)

        def start(name: str) -> None:
            pending[asyncio.create_task(self._ask(name, query, k, deadline, filters))] = name

        for name in primary:
            start(name)
        hedge_at = (loop.time() + self.hedge_delay_s
                    if self.hedge_delay_s is not None and spare else None)
        try:
            while pending:
                timeout = None if hedge_at is None else max(0.0, hedge_at - loop.time())
                done, _ = await asyncio.wait(pending, timeout=timeout,
                                             return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    pending.pop(task)
                    answers.append(task.result())
                answered = any(a.ok for a in answers)
                if answered and any(a.ok and a.provider in from_fallback for a in answers):
                    break  # a hedge answered first: do not wait for the slow primary
                hedge_due = hedge_at is not None and loop.time() >= hedge_at
                if spare and not answered and (not pending or hedge_due):
                    name = spare.pop(0)
                    from_fallback.add(name)
                    start(name)
                    hedge_at = (loop.time() + self.hedge_delay_s
                                if self.hedge_delay_s is not None and spare else None)
                elif hedge_due:
                    hedge_at = None
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
            for task, name in pending.items():
                if not task.cancelled() and task.exception() is None:
                    answers.append(task.result())
                else:
                    answers.append(_Answer(name, query, error=ProviderTimeout(
                        "overtaken by a hedged fallback", provider=name)))
        return answers

    async def _ask(self, name: str, query: str, k: int, deadline: float | None,
                   filters: SearchFilters | None = None) -> _Answer:
        loop = asyncio.get_running_loop()
        started = loop.time()
        provider = self.providers.get(name)
        if provider is None:
            return _Answer(name, query, error=ProviderNotConfigured(
                f"not configured (configured: {sorted(self.providers)})", provider=name))
        limit = deadline
        if self.provider_timeout_s is not None:
            cap = started + self.provider_timeout_s
            limit = cap if limit is None else min(limit, cap)
        try:
            if limit is None:
                hits = await search_with(provider, query, k, None, filters)
            else:
                async with asyncio.timeout_at(limit):
                    hits = await search_with(provider, query, k, limit, filters)
            bad = next((h for h in hits if not isinstance(h, Hit)), None)
            if bad is not None:
                raise ProviderError(f"returned {type(bad).__name__}, not Hit", provider=name)
        except ProviderError as exc:
            return _Answer(name, query, error=exc, elapsed_s=loop.time() - started)
        except TimeoutError as exc:
            return _Answer(name, query, error=_timeout(name, exc),
                           elapsed_s=loop.time() - started)
        except Exception as exc:  # a provider that breaks the protocol fails alone
            err = ProviderError(f"unexpected {type(exc).__name__}: {exc}", provider=name)
            err.__cause__ = exc
            return _Answer(name, query, error=err, elapsed_s=loop.time() - started)
        elapsed = loop.time() - started
        if filters is None:
            return _Answer(name, query, hits=list(hits)[:k], elapsed_s=elapsed)
        return _held_to(_Answer(name, query, hits=list(hits)[:k], elapsed_s=elapsed),
                        filters, unapplied_filters(provider, filters))

    # --- merge ------------------------------------------------------------------------------

    def _merge(
        self, answers: list[_Answer], order: Sequence[str], k: int, seen: SeenUrls | None,
        *, remember: bool = True,
    ) -> SearchOutcome:
        rank = {n: i for i, n in enumerate(order)}
        ok = sorted((a for a in answers if a.ok), key=lambda a: rank.get(a.provider, len(rank)))
        stats = SearchStats(off_site=sum(a.off_site for a in ok),
                            out_of_range=sum(a.out_of_range for a in ok))
        candidates: list[Hit] = []
        lists = [list(a.hits) for a in ok]
        depth = max((len(x) for x in lists), default=0)
        for i in range(depth):  # round-robin by rank across (provider, query) lists
            candidates.extend(x[i] for x in lists if i < len(x))
        stats.raw = len(candidates)
        texts = [(h.content or h.snippet or "") for h in candidates]
        prints = [int(x) for x in simhash64(texts)] if candidates else []
        near: NearDuplicateIndex[int] = NearDuplicateIndex(self.near_duplicate_bits)
        kept: list[Hit] = []
        by_url: dict[str, int] = {}
        exact: set[str] = set()
        for hit, text, fp in zip(candidates, texts, prints, strict=True):
            passage = hit.chunk_id is not None  # a corpus passage: one of many per document
            url = _web_url(hit.url)
            if url is None:
                if not passage:
                    stats.invalid_url += 1
                    continue
                url = hit.url
            if self.blacklist.blocks(url):
                stats.blacklisted += 1
                continue
            if not passage and seen is not None and url in seen:
                stats.seen_before += 1
                continue
            key = f"chunk:{hit.chunk_id}" if passage else url
            if key in by_url:
                stats.duplicate_url += 1
                kept[by_url[key]] = _fill(kept[by_url[key]], hit, self.include_date)
                continue
            if len(kept) >= k:
                continue
            tokens = text.lower().split()
            if len(tokens) >= _MIN_WORDS_FOR_SIMHASH:
                norm = " ".join(tokens)
                if norm in exact or near.lookup(fp):
                    stats.near_duplicate += 1
                    continue
                exact.add(norm)
                near.add(len(kept), fp)
            update: dict[str, object] = {"url": url}
            if not self.include_date:
                update["published_at"] = None
            by_url[key] = len(kept)
            kept.append(hit.model_copy(update=update))
        if seen is not None and remember:
            for hit in kept:
                if hit.chunk_id is None:
                    seen.add(hit.url)
        providers = tuple(dict.fromkeys(a.provider for a in ok))
        return SearchOutcome(
            hits=tuple(kept),
            providers=providers,
            errors=tuple(a.error for a in answers if a.error is not None),
            elapsed_s={(a.provider, a.query): a.elapsed_s for a in answers},
            stats=stats,
            unapplied=_describe_unapplied(ok),
        )


def filters_problem(filters: SearchFilters | None) -> str | None:
    """Why ``filters`` cannot be searched (an inverted date range), else ``None``.

    ``SearchFilters`` validates each field; this is the one contradiction
    between fields, caught before any provider is asked (an API would reject
    it as a bad request and count it against its circuit breaker).
    """
    if filters is None:
        return None
    lo, hi = date_bounds(filters)
    if lo is not None and hi is not None and lo > hi:
        return f"date filter ends ({hi.isoformat()}) before it starts ({lo.isoformat()})"
    return None


def _held_to(answer: _Answer, filters: SearchFilters,
             unapplied: tuple[UnappliedFilter, ...]) -> _Answer:
    """``answer`` with its hits checked against what the searcher can check exactly.

    Sites are checked on every hit by its URL's host, so they are never left
    unapplied; a date bound is checked on dated hits, so it stays unapplied
    (for a provider that could not send it) only while undated hits remain.
    """
    lo, hi = date_bounds(filters)
    kept: list[Hit] = []
    off_site = out_of_range = undated = 0
    for hit in answer.hits:
        if filters.sites or filters.exclude_sites:
            host = url_host(hit.url)
            if ((filters.sites and not site_matches(host, filters.sites))
                    or site_matches(host, filters.exclude_sites)):
                off_site += 1
                continue
        if lo is not None or hi is not None:
            when = hit_date(hit.published_at)
            if when is None:
                undated += 1
            elif (lo is not None and when < lo) or (hi is not None and when > hi):
                out_of_range += 1
                continue
        kept.append(hit)
    left = tuple(u for u in unapplied
                 if u.filter not in ("sites", "exclude_sites")
                 and (u.filter != "date" or undated))
    return _Answer(answer.provider, answer.query, hits=kept, elapsed_s=answer.elapsed_s,
                   unapplied=left, off_site=off_site, out_of_range=out_of_range,
                   undated=undated)


def _describe_unapplied(answers: Sequence[_Answer]) -> tuple[str, ...]:
    """One line per (provider, filter), in provider order, over all queries."""
    found: dict[tuple[str, str], str] = {}
    undated: dict[str, int] = {}
    for answer in answers:
        for item in answer.unapplied:
            found.setdefault((answer.provider, item.filter), item.reason)
            if item.filter == "date":
                undated[answer.provider] = undated.get(answer.provider, 0) + answer.undated
    out = []
    for (provider, name), reason in found.items():
        if name == "date":
            n = undated[provider]
            reason = f"{reason}; {n} undated hit{'' if n == 1 else 's'} kept"
        out.append(UnappliedFilter(name, reason).describe(provider))
    return tuple(out)


def _fill(first: Hit, other: Hit, include_date: bool) -> Hit:
    """Keep the first copy of a URL, completing what it lacks from a later one."""
    update: dict[str, object] = {}
    if not first.content and other.content:
        update["content"] = other.content
    if include_date and not first.published_at and other.published_at:
        update["published_at"] = other.published_at
    if not first.snippet and other.snippet:
        update["snippet"] = other.snippet
    if not first.title and other.title:
        update["title"] = other.title
    return first.model_copy(update=update) if update else first


def _web_url(raw: str) -> str | None:
    """The normalised URL if it is an http(s) URL with a host, else ``None``."""
    try:
        url = normalize_url(raw)
    except ValueError:
        return None
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("http", "https") or not rest or rest.startswith("/"):
        return None
    return url


def _timeout(name: str, exc: BaseException) -> ProviderTimeout:
    err = ProviderTimeout("no answer before the deadline", provider=name)
    err.__cause__ = exc
    return err


