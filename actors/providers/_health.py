"""Provider health: retries with backoff and a circuit breaker per provider.

A flaky provider costs a search a retry; a dead one costs nothing, because its
breaker opens and calls are refused at once (``CircuitOpen``) until a single
probe after the cool-down shows it is back. Quota and auth errors are never
retried (waiting does not give a key or a plan back), but they do count
against the breaker. Every state change is reported to listeners, which the
searcher turns into ``provider.health`` events::

    CLOSED --N consecutive failures--> OPEN --cool-down--> HALF_OPEN --probe ok--> CLOSED
                                         ^                     |
                                         +----probe failed-----+

Breakers outlive runs (one per provider per process), so a provider that went
down in one run is skipped by the next one.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from streams import Hit, SearchFilters

from .._http_core import retry_call
from ._exceptions import CircuitOpen, ProviderError, ProviderTimeout
from ._filtering import UnappliedFilter, unapplied_filters
from ._filtering import supported_filters as _supported
from ._protocol import SearchProvider, search_with

__all__ = [
    "BreakerState",
    "CircuitBreaker",
    "HealthChange",
    "HealthListener",
    "ResilientProvider",
    "RetryPolicy",
]


class BreakerState(enum.Enum):
    """Where a provider's circuit is."""

    CLOSED = "closed"  # calls flow; consecutive failures are counted
    OPEN = "open"  # calls are refused with CircuitOpen until the cool-down has passed
    HALF_OPEN = "half_open"  # one probe call is let through; its outcome decides


_HEALTH: dict[BreakerState, Literal["up", "down", "probing"]] = {
    BreakerState.CLOSED: "up",
    BreakerState.OPEN: "down",
    BreakerState.HALF_OPEN: "probing",
}


@dataclass(frozen=True, slots=True)
class HealthChange:
    """A breaker changed state; ``state`` uses the ``provider.health`` vocabulary."""

    provider: str
    state: Literal["up", "down", "probing"]
    breaker: BreakerState
    detail: str = ""


HealthListener = Callable[[HealthChange], None]


class CircuitBreaker:
    """Consecutive-failure circuit breaker with a single half-open probe.

    Each admitted call gets a token (the breaker's generation); outcomes of
    calls admitted before the last state change are ignored, so a slow call
    started while closed cannot close a breaker that has since opened.

    Args:
        name: the provider's name, carried by :class:`HealthChange`.
        failure_threshold: consecutive failures that open the circuit.
        cool_down_s: seconds open before a probe is allowed.
        clock: monotonic seconds (injectable so tests need not sleep).
    """

    def __init__(
        self,
        name: str,
        *,
        failure_threshold: int = 5,
        cool_down_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be >= 1")
        if cool_down_s < 0:
            raise ValueError("cool_down_s must be >= 0")
        self.name = name
        self.failure_threshold = failure_threshold
        self.cool_down_s = cool_down_s
        self._clock = clock
        self._state = BreakerState.CLOSED
        self._generation = 0
        self._failures = 0
        self._opened_at = 0.0
        self._probing = False
        self._listeners: list[HealthListener] = []
        self.transitions = 0

    @property
    def state(self) -> BreakerState:
        return self._state

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    def add_listener(self, listener: HealthListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: HealthListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def acquire(self) -> int:
        """Admit one call and return its token.

        Raises:
            CircuitOpen: the circuit is open (cool-down not over) or a probe is
                already in flight.
        """
        if self._state is BreakerState.OPEN:
            left = self._opened_at + self.cool_down_s - self._clock()
            if left > 0:
                raise CircuitOpen(f"circuit open, next probe in {left:.1f}s", provider=self.name)
            self._move(BreakerState.HALF_OPEN, "cool-down over, probing")
        if self._state is BreakerState.HALF_OPEN:
            if self._probing:
                raise CircuitOpen("circuit half-open, probe in flight", provider=self.name)
            self._probing = True
        return self._generation

    def record_success(self, token: int) -> None:
        """The call admitted with ``token`` succeeded."""
        if token != self._generation:
            return
        self._failures = 0
        if self._state is not BreakerState.CLOSED:
            self._move(BreakerState.CLOSED, "probe succeeded")

    def record_failure(self, token: int, exc: BaseException | None = None) -> None:
        """The call admitted with ``token`` failed in a way that counts."""
        if token != self._generation:
            return
        reason = f"{type(exc).__name__}: {exc}" if exc is not None else "failure"
        if self._state is BreakerState.HALF_OPEN:
            self._move(BreakerState.OPEN, f"probe failed ({reason})")
            return
        self._failures += 1
        if self._state is BreakerState.CLOSED and self._failures >= self.failure_threshold:
            self._move(BreakerState.OPEN, f"{self._failures} consecutive failures ({reason})")

    def release(self, token: int) -> None:
        """The call ended without a verdict (cancelled, not counted): free the probe slot."""
        if token == self._generation and self._state is BreakerState.HALF_OPEN:
            self._probing = False

    def _move(self, state: BreakerState, detail: str) -> None:
        self._state = state
        self._generation += 1
        self._probing = False
        self.transitions += 1
        if state is BreakerState.OPEN:
            self._opened_at = self._clock()
        if state is BreakerState.CLOSED:
            self._failures = 0
        change = HealthChange(provider=self.name, state=_HEALTH[state], breaker=state,
                              detail=detail[:500])
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:  # a monitor's bug must not break searches
                continue


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a provider call is retried.

    Attributes:
        retries: extra attempts after the first, for retryable errors only.
        backoff_s: base of the exponential backoff (full jitter).
        max_backoff_s: cap of one backoff sleep.
        max_retry_after_s: a ``Retry-After`` longer than this is not waited
            for (the error goes to the caller, who can use another provider).
    """

    retries: int = 2
    backoff_s: float = 0.2
    max_backoff_s: float = 5.0
    max_retry_after_s: float = 30.0


class ResilientProvider:
    """A provider behind retries and a circuit breaker; itself a :class:`SearchProvider`.

    Args:
        provider: the adapter to protect.
        retry: the retry policy.
        breaker: the provider's breaker (defaults to a new one).
        sleep: the backoff sleep (injectable so tests can record the waits).
    """

    def __init__(
        self,
        provider: SearchProvider,
        *,
        retry: RetryPolicy | None = None,
        breaker: CircuitBreaker | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.inner = provider
        self._sleep = sleep
        self.name = provider.name
        self.retry = retry or RetryPolicy()
        self.breaker = breaker or CircuitBreaker(provider.name)
        self.calls = 0

    def add_listener(self, listener: HealthListener) -> None:
        self.breaker.add_listener(listener)

    def remove_listener(self, listener: HealthListener) -> None:
        self.breaker.remove_listener(listener)

    @property
    def supported_filters(self) -> frozenset[str]:
        """The inner provider's filters (none if it takes no ``filters=``)."""
        return _supported(self.inner) or frozenset()

    def unapplied(self, filters: SearchFilters) -> tuple[UnappliedFilter, ...]:
        """What the inner provider does not apply (all of it if it takes no filters)."""
        return unapplied_filters(self.inner, filters)

    async def aclose(self) -> None:
        closer = getattr(self.inner, "aclose", None)
        if closer is not None:
            await closer()

    async def search(self, query: str, k: int, deadline: float | None, *,
                     filters: SearchFilters | None = None) -> Sequence[Hit]:
        """Search with retries; the last error is raised as is (typed).

        ``filters`` reach the inner provider only if it declares ``supported_filters``.
        """
        last: list[ProviderError] = []
        policy = self.retry

        async def attempt() -> Sequence[Hit]:
            try:
                return await self._once(query, k, deadline, filters)
            except ProviderError as exc:
                if not isinstance(exc, CircuitOpen):
                    last.append(exc)
                raise

        try:
            return await retry_call(
                attempt, retryable=_retryable, retries=policy.retries, deadline=deadline,
                backoff_s=policy.backoff_s, max_backoff_s=policy.max_backoff_s, jitter=True,
                max_retry_after_s=policy.max_retry_after_s, sleep=self._sleep,
            )
        except CircuitOpen as exc:
            if last:  # the breaker opened between our attempts: report what really failed
                raise last[-1] from exc
            raise

    async def _once(self, query: str, k: int, deadline: float | None,
                    filters: SearchFilters | None = None) -> Sequence[Hit]:
        token = self.breaker.acquire()
        self.calls += 1
        try:
            if deadline is None:
                hits = await search_with(self.inner, query, k, deadline, filters)
            else:
                try:
                    async with asyncio.timeout_at(deadline):
                        hits = await search_with(self.inner, query, k, deadline, filters)
                except TimeoutError as exc:
                    if isinstance(exc, ProviderError):
                        raise
                    raise ProviderTimeout("no answer before the deadline",
                                          provider=self.name) from exc
        except ProviderError as exc:
            if exc.counts_as_failure:
                self.breaker.record_failure(token, exc)
            else:
                self.breaker.release(token)
            raise
        except Exception as exc:  # a third-party provider broke the protocol
            self.breaker.record_failure(token, exc)
            raise ProviderError(f"unexpected {type(exc).__name__}: {exc}",
                                provider=self.name) from exc
        except BaseException:
            self.breaker.release(token)
            raise
        self.breaker.record_success(token)
        return hits


def _retryable(exc: BaseException) -> bool:
    return (isinstance(exc, ProviderError) and exc.retryable
            and not isinstance(exc, CircuitOpen))
