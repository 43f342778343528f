"""A search reply says how each provider did (``provider_calls``), for the run's timeline."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from actors.providers import ProviderUnavailable
from actors.search import Searcher, SearcherActor
from streams import Hit, SearchCompleted, SearchFailed, SearchRequested

from .test_searcher_actor import answers, run_searches


class _Slow:
    name = "slow"

    async def search(self, query: str, k: int, deadline: float) -> Sequence[Hit]:
        await asyncio.sleep(0.2)
        return [Hit(url="https://slow.test/a", title="a")]


class _Fast:
    name = "fast"

    async def search(self, query: str, k: int, deadline: float) -> Sequence[Hit]:
        return [Hit(url="https://fast.test/b", title="b")]


class _Down:
    name = "down"

    async def search(self, query: str, k: int, deadline: float) -> Sequence[Hit]:
        raise ProviderUnavailable("connection refused", provider=self.name)


async def test_each_provider_is_timed_in_configured_order_and_a_failing_one_named() -> None:
    actor = SearcherActor(Searcher([_Slow(), _Down(), _Fast()]))
    (reply,) = answers(await run_searches(actor, [SearchRequested(call_id="c1", query="q")]))
    assert isinstance(reply, SearchCompleted)
    calls = {c.provider: c for c in reply.provider_calls}
    assert [c.provider for c in reply.provider_calls] == ["slow", "down", "fast"]
    assert calls["down"].error == "ProviderUnavailable" and calls["slow"].error == ""
    assert calls["slow"].elapsed_s > calls["fast"].elapsed_s  # the slow one shows as slow


async def test_a_search_every_provider_failed_still_says_who_failed() -> None:
    actor = SearcherActor(Searcher([_Down()]))
    (reply,) = answers(await run_searches(actor, [SearchRequested(call_id="c1", query="q")]))
    assert isinstance(reply, SearchFailed)
    assert [(c.provider, c.error) for c in reply.provider_calls] == [
        ("down", "ProviderUnavailable")]
