"""Session lifetimes: state is dropped when the session ends or sits idle past its TTL."""

from __future__ import annotations

import asyncio

import pytest

from reactive_rag.web_kb import WebKbClosed, WebKbStore
from streams import Hit


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_one_knowledge_base_per_session() -> None:
    store = WebKbStore()
    a = store.get("a")
    assert store.get("a") is a and store.get("b") is not a
    assert len(store) == 2
    await store.close()


async def test_ending_a_session_drops_its_state() -> None:
    store = WebKbStore()
    kb = store.get("a")
    await kb.add_hits([Hit(url="https://x.example/", snippet="some text about deltas")])
    assert await store.end("a") is True
    assert await store.end("a") is False
    assert "a" not in store
    with pytest.raises(WebKbClosed):
        await kb.query("deltas")
    fresh = store.get("a")  # the same id later starts from nothing
    assert fresh is not kb and len(fresh) == 0 and fresh.seen_urls == frozenset()
    await store.close()


async def test_idle_sessions_expire_and_used_ones_survive() -> None:
    clock = FakeClock()
    store = WebKbStore(ttl_s=60, clock=clock)
    idle, busy = store.get("idle"), store.get("busy")
    clock.now += 45
    await busy.claim_urls(["https://x.example/"])  # use refreshes the TTL
    clock.now += 30
    assert await store.sweep() == ["idle"]
    assert idle.closed and not busy.closed
    clock.now += 61
    assert await store.sweep() == ["busy"]
    assert len(store) == 0


async def test_the_background_sweeper_cleans_up_while_the_store_is_open() -> None:
    clock = FakeClock()
    async with WebKbStore(ttl_s=60, clock=clock, sweep_interval_s=0.01) as store:
        kb = store.get("a")
        clock.now += 61
        async with asyncio.timeout(5):
            while "a" in store:  # noqa: ASYNC110 - waiting for the background sweeper
                await asyncio.sleep(0.01)
        assert kb.closed
        store.get("b")
    assert len(store) == 0  # leaving the store ends every session


def test_ttl_must_be_positive() -> None:
    with pytest.raises(ValueError):
        WebKbStore(ttl_s=0)
