"""Retries, backoff honouring Retry-After, and the per-provider circuit breaker."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from actors.providers import (
    BreakerState,
    CircuitBreaker,
    CircuitOpen,
    HealthChange,
    ProviderAuthError,
    ProviderError,
    ProviderQuotaError,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
    ResilientProvider,
    RetryPolicy,
    SearxngProvider,
)
from streams import Hit

from ._web_fixtures import fake_web


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Scripted:
    """A provider that plays a script of errors and successes."""

    name = "scripted"

    def __init__(self, script: Sequence[BaseException | None], delay: float = 0.0) -> None:
        self.script = list(script)
        self.calls = 0
        self.delay = delay

    async def search(self, query: str, k: int, deadline: float | None) -> Sequence[Hit]:
        self.calls += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        step = self.script.pop(0) if self.script else None
        if step is not None:
            raise step
        return [Hit(url="https://ok.test/", source=self.name)]


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def breaker(threshold: int = 3, cool: float = 10.0) -> tuple[CircuitBreaker, Clock,
                                                             list[HealthChange]]:
    clock = Clock()
    b = CircuitBreaker("p", failure_threshold=threshold, cool_down_s=cool, clock=clock)
    changes: list[HealthChange] = []
    b.add_listener(changes.append)
    return b, clock, changes


def fail(b: CircuitBreaker, n: int) -> None:
    for _ in range(n):
        b.record_failure(b.acquire(), ProviderUnavailable("down"))


def test_breaker_opens_after_n_consecutive_failures_only() -> None:
    b, _, changes = breaker(threshold=3)
    fail(b, 2)
    b.record_success(b.acquire())  # a success resets the count
    fail(b, 2)
    assert b.state is BreakerState.CLOSED and changes == []
    fail(b, 1)
    assert b.state.value == "open"
    assert [c.state for c in changes] == ["down"]
    assert "3 consecutive failures" in changes[0].detail


def test_open_breaker_refuses_until_cool_down_then_lets_one_probe() -> None:
    b, clock, changes = breaker(threshold=1, cool=10.0)
    fail(b, 1)
    with pytest.raises(CircuitOpen, match="next probe in"):
        b.acquire()
    clock.now += 10.0
    probe = b.acquire()
    assert b.state is BreakerState.HALF_OPEN
    with pytest.raises(CircuitOpen, match="probe in flight"):
        b.acquire()
    b.record_success(probe)
    assert b.state.value == "closed"
    assert [c.state for c in changes] == ["down", "probing", "up"]


def test_failed_probe_reopens_for_another_cool_down() -> None:
    b, clock, changes = breaker(threshold=1, cool=5.0)
    fail(b, 1)
    clock.now += 5.0
    b.record_failure(b.acquire(), ProviderTimeout("slow"))
    assert b.state is BreakerState.OPEN
    with pytest.raises(CircuitOpen):
        b.acquire()
    clock.now += 5.0
    b.record_success(b.acquire())
    assert [c.state for c in changes] == ["down", "probing", "down", "probing", "up"]


def test_cancelled_probe_frees_the_probe_slot() -> None:
    b, clock, _ = breaker(threshold=1, cool=1.0)
    fail(b, 1)
    clock.now += 1.0
    b.release(b.acquire())
    assert b.state is BreakerState.HALF_OPEN
    b.record_success(b.acquire())
    assert b.state.value == "closed"


def test_late_outcome_of_a_call_admitted_before_opening_is_ignored() -> None:
    b, _, changes = breaker(threshold=1, cool=1.0)
    early = b.acquire()
    fail(b, 1)
    b.record_success(early)  # started while closed; must not close the open breaker
    assert b.state is BreakerState.OPEN
    assert [c.state for c in changes] == ["down"]


def test_a_broken_listener_does_not_break_the_breaker() -> None:
    b, _, changes = breaker(threshold=1)

    def boom(change: HealthChange) -> None:
        raise RuntimeError("monitor bug")

    b.add_listener(boom)
    fail(b, 1)
    assert b.state is BreakerState.OPEN and len(changes) == 1


async def test_retryable_error_is_retried_then_succeeds() -> None:
    inner = Scripted([ProviderUnavailable("503"), None])
    sleeps = Sleeps()
    p = ResilientProvider(inner, retry=RetryPolicy(retries=2, backoff_s=0.01), sleep=sleeps)
    hits = await p.search("q", 3, None)
    assert [h.url for h in hits] == ["https://ok.test/"] and inner.calls == 2
    assert len(sleeps.waits) == 1 and 0 <= sleeps.waits[0] <= 5.0


async def test_backoff_honours_retry_after() -> None:
    inner = Scripted([ProviderRateLimited("429", retry_after=1.5), None])
    sleeps = Sleeps()
    p = ResilientProvider(inner, retry=RetryPolicy(retries=1, backoff_s=0.01), sleep=sleeps)
    await p.search("q", 3, None)
    assert sleeps.waits == [1.5]


async def test_backoff_grows_exponentially_with_jitter_and_is_capped() -> None:
    inner = Scripted([ProviderUnavailable("x")] * 6 + [None])
    sleeps = Sleeps()
    policy = RetryPolicy(retries=6, backoff_s=0.1, max_backoff_s=0.5)
    await ResilientProvider(inner, retry=policy, sleep=sleeps,
                            breaker=CircuitBreaker("s", failure_threshold=10)).search("q", 3, None)
    assert len(sleeps.waits) == 6
    assert all(0 <= w <= 0.5 for w in sleeps.waits)
    assert all(w <= 0.1 * 2 ** i for i, w in enumerate(sleeps.waits))


@pytest.mark.parametrize("error", [ProviderQuotaError("432"), ProviderAuthError("401")])
async def test_quota_and_auth_errors_are_never_retried(error: ProviderError) -> None:
    inner = Scripted([error, None])
    p = ResilientProvider(inner, retry=RetryPolicy(retries=3), sleep=Sleeps())
    with pytest.raises(type(error)):
        await p.search("q", 3, None)
    assert inner.calls == 1


async def test_no_retry_when_retry_after_exceeds_the_deadline() -> None:
    inner = Scripted([ProviderRateLimited("429", retry_after=30.0), None])
    p = ResilientProvider(inner, retry=RetryPolicy(retries=3), sleep=Sleeps())
    deadline = asyncio.get_running_loop().time() + 1.0
    with pytest.raises(ProviderRateLimited):
        await p.search("q", 3, deadline)
    assert inner.calls == 1


async def test_no_retry_when_retry_after_is_longer_than_the_policy_allows() -> None:
    inner = Scripted([ProviderRateLimited("429", retry_after=3600.0), None])
    p = ResilientProvider(inner, retry=RetryPolicy(retries=3, max_retry_after_s=60),
                          sleep=Sleeps())
    with pytest.raises(ProviderRateLimited):
        await p.search("q", 3, None)
    assert inner.calls == 1


async def test_provider_outliving_the_deadline_is_cut_with_a_timeout() -> None:
    inner = Scripted([None], delay=5.0)
    p = ResilientProvider(inner, retry=RetryPolicy(retries=0))
    with pytest.raises(ProviderTimeout):
        await p.search("q", 3, asyncio.get_running_loop().time() + 0.05)


async def test_foreign_exception_is_translated_and_counted() -> None:
    inner = Scripted([KeyError("oops")])
    p = ResilientProvider(inner, retry=RetryPolicy(retries=0),
                          breaker=CircuitBreaker("scripted", failure_threshold=1))
    with pytest.raises(ProviderError, match="unexpected KeyError"):
        await p.search("q", 3, None)
    assert p.breaker.state is BreakerState.OPEN


async def test_open_breaker_stops_calls_reaching_the_provider() -> None:
    async with fake_web() as web:
        web.mode["searxng"] = "unavailable"
        changes: list[HealthChange] = []
        clock = Clock()
        p = ResilientProvider(
            SearxngProvider(web.settings("searxng")),
            retry=RetryPolicy(retries=0),
            breaker=CircuitBreaker("searxng", failure_threshold=3, cool_down_s=30, clock=clock),
        )
        p.add_listener(changes.append)
        async with p.inner:  # type: ignore[attr-defined]
            for _ in range(3):
                with pytest.raises(ProviderUnavailable):
                    await p.search("q", 3, None)
            for _ in range(5):
                with pytest.raises(CircuitOpen):
                    await p.search("q", 3, None)
            assert web.requests["searxng"] == 3  # refused calls never reached the server
            web.mode["searxng"] = "ok"
            clock.now += 30
            assert await p.search("q", 3, None)
            assert web.requests["searxng"] == 4
    assert [c.state for c in changes] == ["down", "probing", "up"]


async def test_breaker_opening_mid_retries_reports_the_real_error() -> None:
    inner = Scripted([ProviderUnavailable("HTTP 503"), None])
    p = ResilientProvider(inner, retry=RetryPolicy(retries=2, backoff_s=0.0), sleep=Sleeps(),
                          breaker=CircuitBreaker("s", failure_threshold=1, cool_down_s=60))
    with pytest.raises(ProviderUnavailable, match="HTTP 503"):
        await p.search("q", 3, None)
    assert inner.calls == 1
    with pytest.raises(CircuitOpen):  # later searches are refused at once
        await p.search("q", 3, None)
