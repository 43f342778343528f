"""The shared HTTP core: status classification, error detail, bounded retries."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from actors._http_core import (
    FailureKind,
    HttpSession,
    classify,
    error_detail,
    looks_like_html,
    parse_retry_after,
    retry_call,
)


class Flaky(Exception):
    def __init__(self, retry_after: float | None = None) -> None:
        super().__init__("flaky")
        self.retry_after = retry_after


class Fatal(Exception):
    pass


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (401, FailureKind.AUTH, False),
        (403, FailureKind.AUTH, False),
        (402, FailureKind.QUOTA, False),
        (429, FailureKind.RATE_LIMITED, True),
        (500, FailureKind.SERVER, True),
        (503, FailureKind.SERVER, True),
        (408, FailureKind.TIMEOUT, True),
        (400, FailureKind.REQUEST, False),
        (404, FailureKind.REQUEST, False),
    ],
)
def test_statuses_map_to_kinds(status: int, kind: FailureKind, retryable: bool) -> None:
    failure = classify(status, {})
    assert failure is not None
    assert (failure.kind, failure.status, failure.retryable) == (kind, status, retryable)


def test_2xx_is_fine_unless_it_is_an_html_page() -> None:
    assert classify(200) is None
    assert classify(204, content_type="application/json") is None
    failure = classify(200, content_type="text/html; charset=utf-8")
    assert failure is not None and failure.kind is FailureKind.BAD_RESPONSE


def test_quota_statuses_are_the_callers_choice() -> None:
    failure = classify(432, quota_statuses=frozenset({402, 432}))
    assert failure is not None and failure.kind is FailureKind.QUOTA
    failure = classify(402, quota_statuses=frozenset())
    assert failure is not None and failure.kind is FailureKind.REQUEST


def test_retry_after_is_read_in_both_forms() -> None:
    failure = classify(429, {"Retry-After": "7"})
    assert failure is not None and failure.retry_after == 7.0
    failure = classify(429, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})
    assert failure is not None and failure.retry_after == 0.0  # a date in the past
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after("inf") is None
    assert parse_retry_after("soon") is None


def test_error_detail_prefers_the_json_message_and_is_short() -> None:
    assert error_detail(b'{"error": {"message": "bad key"}}') == "bad key"
    assert error_detail(b"  a\n  b  ") == "a b"
    assert error_detail("x" * 10, 5) == "xxxx…"
    assert error_detail(b"y" * 10, 6, ellipsis="...") == "yyy..."
    assert error_detail(b"") == ""


def test_html_is_recognised_by_type_or_body() -> None:
    assert looks_like_html("text/html")
    assert looks_like_html("application/json", b"  <!DOCTYPE html>")
    assert not looks_like_html("application/json", b'{"a": 1}')


async def test_retryable_errors_are_retried_with_exponential_backoff() -> None:
    calls: list[int] = []
    sleeps = Sleeps()

    async def attempt() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise Flaky()
        return "ok"

    out = await retry_call(attempt, retryable=lambda e: isinstance(e, Flaky), retries=2,
                           backoff_s=0.5, max_backoff_s=8.0, sleep=sleeps)
    assert out == "ok" and len(calls) == 3 and sleeps.waits == [0.5, 1.0]


async def test_non_retryable_errors_and_exhausted_retries_raise_the_last_error() -> None:
    sleeps = Sleeps()

    async def fatal() -> None:
        raise Fatal()

    with pytest.raises(Fatal):
        await retry_call(fatal, retryable=lambda e: isinstance(e, Flaky), retries=3,
                         sleep=sleeps)
    assert sleeps.waits == []

    count = 0

    async def flaky() -> None:
        nonlocal count
        count += 1
        raise Flaky()

    with pytest.raises(Flaky):
        await retry_call(flaky, retryable=lambda e: isinstance(e, Flaky), retries=1,
                         sleep=sleeps)
    assert count == 2


async def test_retry_after_wins_and_can_be_capped_or_refused() -> None:
    async def run(**kw: float | None) -> tuple[int, list[float]]:
        sleeps, count = Sleeps(), 0

        async def attempt() -> None:
            nonlocal count
            count += 1
            raise Flaky(retry_after=12.0)

        with pytest.raises(Flaky):
            await retry_call(attempt, retryable=lambda e: isinstance(e, Flaky), retries=1,
                             backoff_s=0.1, max_backoff_s=1.0, sleep=sleeps, **kw)  # type: ignore[arg-type]
        return count, sleeps.waits

    assert await run() == (2, [12.0])
    assert await run(retry_after_cap_s=1.0) == (2, [1.0])
    assert await run(max_retry_after_s=5.0) == (1, [])


async def test_no_wait_that_ends_past_the_deadline() -> None:
    sleeps = Sleeps()
    count = 0

    async def attempt() -> None:
        nonlocal count
        count += 1
        raise Flaky(retry_after=10.0)

    deadline = asyncio.get_running_loop().time() + 2.0
    with pytest.raises(Flaky):
        await retry_call(attempt, retryable=lambda e: isinstance(e, Flaky), retries=5,
                         deadline=deadline, sleep=sleeps)
    assert count == 1 and sleeps.waits == []


async def test_jitter_stays_under_the_backoff() -> None:
    sleeps = Sleeps()

    async def attempt() -> None:
        raise Flaky()

    with pytest.raises(Flaky):
        await retry_call(attempt, retryable=lambda e: isinstance(e, Flaky), retries=4,
                         backoff_s=0.1, max_backoff_s=0.3, jitter=True, sleep=sleeps)
    assert len(sleeps.waits) == 4
    assert all(0 <= w <= min(0.3, 0.1 * 2**i) for i, w in enumerate(sleeps.waits))


# --- the session a client borrows or owns --------------------------------------------


async def test_a_borrowed_session_is_used_and_left_open_for_its_owner() -> None:
    async with aiohttp.ClientSession() as shared:
        http = HttpSession(shared)
        assert http.get() is shared
        await http.aclose()
        assert not shared.closed  # the caller still uses it for its other clients


async def test_an_own_session_is_made_once_and_closed_by_aclose() -> None:
    http = HttpSession()
    first = http.get()
    assert http.get() is first
    await http.aclose()
    assert first.closed
    again = http.get()  # a client used after aclose gets a fresh session, not a closed one
    assert again is not first and not again.closed
    await http.aclose()


async def test_a_borrowed_session_closed_by_its_owner_is_replaced_and_then_owned() -> None:
    shared = aiohttp.ClientSession()
    await shared.close()
    http = HttpSession(shared, factory=lambda: aiohttp.ClientSession(headers={"X-Probe": "1"}))
    own = http.get()
    assert own is not shared and own.headers["X-Probe"] == "1"
    await http.aclose()
    assert own.closed
