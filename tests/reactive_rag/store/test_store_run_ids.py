"""A run id prefix resolves to the one run it names, on every backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reactive_rag.store import AmbiguousRunId, RunMeta, RunNotFound, resolve_run_id

from .._store_fixtures import BACKENDS, AnyStore, open_store


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyStore]:
    async for s in open_store(request.param, tmp_path):
        for run_id, tenant in (("abc123", "t1"), ("abc999", "t1"), ("abd000", "t2"),
                               ("ab%_*?[x]", "t1"), ("abc", "t2")):
            await s.create_run(RunMeta(run_id=run_id, tenant=tenant, question="q"))
        yield s


async def test_a_unique_prefix_resolves_to_the_whole_id(store: AnyStore) -> None:
    assert await resolve_run_id(store, "abc1") == "abc123"
    assert await resolve_run_id(store, "abd") == "abd000"


async def test_an_exact_id_wins_over_longer_ids_it_prefixes(store: AnyStore) -> None:
    assert await resolve_run_id(store, "abc") == "abc"


async def test_an_ambiguous_prefix_lists_every_candidate(store: AnyStore) -> None:
    with pytest.raises(AmbiguousRunId) as caught:
        await resolve_run_id(store, "ab")
    assert caught.value.candidates == ("ab%_*?[x]", "abc", "abc123", "abc999", "abd000")
    assert "abc123" in str(caught.value) and "abd000" in str(caught.value)


async def test_an_unknown_or_empty_prefix_is_not_found(store: AnyStore) -> None:
    for prefix in ("zzz", "", "abc1234"):
        with pytest.raises(RunNotFound):
            await resolve_run_id(store, prefix)


async def test_wildcards_in_a_prefix_match_only_themselves(store: AnyStore) -> None:
    assert await resolve_run_id(store, "ab%") == "ab%_*?[x]"
    assert await resolve_run_id(store, "ab%_*?[") == "ab%_*?[x]"
    with pytest.raises(RunNotFound):
        await resolve_run_id(store, "a_c")


async def test_a_tenant_sees_only_its_own_runs(store: AnyStore) -> None:
    with pytest.raises(AmbiguousRunId) as caught:
        await resolve_run_id(store, "abc", tenant="t1")  # t2's exact "abc" is not t1's
    assert caught.value.candidates == ("abc123", "abc999")
    assert await resolve_run_id(store, "abc", tenant="t2") == "abc"
    assert await resolve_run_id(store, "abd", tenant="t2") == "abd000"
    with pytest.raises(RunNotFound):
        await resolve_run_id(store, "abd", tenant="t1")
