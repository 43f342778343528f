"""Cancel requests in the shared store: recorded for the run's owner, taken by it once.

Two stores on one backend stand for two servers (owners ``api-1`` and ``api-2``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reactive_rag.store import CancelRequest, RunMeta, RunNotFound, StoreReadOnly

from .._store_fixtures import (
    BACKENDS,
    AnyStore,
    drop_namespace,
    finished,
    make_store,
    namespace_of,
    stamped,
)


@contextlib.asynccontextmanager
async def two_owners(backend: str, tmp_path: Path) -> AsyncIterator[tuple[AnyStore, AnyStore]]:
    first = make_store(backend, tmp_path, owner="api-1")
    await first.open()
    second = make_store(backend, tmp_path, owner="api-2", **namespace_of(first))
    await second.open()
    try:
        yield first, second
    finally:
        await drop_namespace(first)
        await second.close()
        await first.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_cancel_recorded_on_one_owner_is_taken_once_by_the_runs_owner(
        backend: str, tmp_path: Path) -> None:
    async with two_owners(backend, tmp_path) as (owner, other):
        await owner.create_run(RunMeta(run_id="r1", tenant="acme", question="q"))
        assert await other.request_cancel("r1", "acme", "stop it") is True
        assert await other.take_cancel_requests() == []  # not the other owner's to act on
        assert await owner.take_cancel_requests() == [CancelRequest("r1", "stop it")]
        assert await owner.take_cancel_requests() == []  # taken: acted on once


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_cancel_of_an_ended_run_is_not_recorded(backend: str, tmp_path: Path) -> None:
    async with two_owners(backend, tmp_path) as (owner, other):
        await owner.create_run(RunMeta(run_id="r1", tenant="acme", question="q"))
        await owner.append("r1", stamped("r1", [finished()]))
        assert await other.request_cancel("r1", "acme", "too late") is False
        assert await owner.take_cancel_requests() == []


@pytest.mark.parametrize("backend", BACKENDS)
async def test_another_tenants_run_or_a_missing_one_cannot_be_cancelled(
        backend: str, tmp_path: Path) -> None:
    async with two_owners(backend, tmp_path) as (owner, other):
        await owner.create_run(RunMeta(run_id="r1", tenant="acme", question="q"))
        with pytest.raises(RunNotFound):
            await other.request_cancel("r1", "beta", "not yours")
        with pytest.raises(RunNotFound):
            await other.request_cancel("nope", None, "no such run")
        assert await owner.take_cancel_requests() == []


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_read_only_store_records_no_cancel(backend: str, tmp_path: Path) -> None:
    async with two_owners(backend, tmp_path) as (owner, _):
        await owner.create_run(RunMeta(run_id="r1", tenant="acme", question="q"))
        reader = make_store(backend, tmp_path, read_only=True, **namespace_of(owner))
        async with reader:
            with pytest.raises(StoreReadOnly):
                await reader.request_cancel("r1", "acme", "read-only")
            assert await reader.take_cancel_requests() == []
