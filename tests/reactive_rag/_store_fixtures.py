"""Fixtures shared by the run-store tests: one store per backend, event builders."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest

from reactive_rag.store import RedisRunStore, SqliteRunStore
from streams import Event, Outcome, RunFinished, RunStream, SearchRequested

REDIS_ENV = "REACTIVE_RAG_TEST_REDIS_URL"
REDIS_URL = os.environ.get(REDIS_ENV)
NO_REDIS = (
    f"{REDIS_ENV} is not set: start a throwaway server with "
    "`eval \"$(bash scripts/start-test-services.sh)\"` (CI does)"
)

AnyStore = SqliteRunStore | RedisRunStore

NEEDS_REDIS = pytest.mark.skipif(REDIS_URL is None, reason=NO_REDIS)

BACKENDS = ["sqlite", pytest.param("redis", marks=NEEDS_REDIS)]


class Clock:
    """A shared, hand-moved Unix clock."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_store(backend: str, tmp_path: Path, **options: object) -> AnyStore:
    """A fresh, unopened store; Redis stores get a unique key prefix per test."""
    if backend == "sqlite":
        options.pop("prefix", None)
        return SqliteRunStore(tmp_path / "runs.db", **options)  # type: ignore[arg-type]
    assert REDIS_URL is not None
    prefix = options.pop("prefix", f"test-{uuid.uuid4().hex}:")
    return RedisRunStore(REDIS_URL, prefix=str(prefix), **options)  # type: ignore[arg-type]


async def drop_redis_prefix(store: AnyStore) -> None:
    """Delete every key of a Redis test store (keeps the shared server clean)."""
    if isinstance(store, RedisRunStore) and store._client is not None:
        client = store._client
        keys = [key async for key in client.scan_iter(match=f"{store.prefix}*")]
        if keys:
            await client.delete(*keys)


async def open_store(backend: str, tmp_path: Path, **options: object) -> AsyncIterator[AnyStore]:
    store = make_store(backend, tmp_path, **options)
    await store.open()
    try:
        yield store
    finally:
        await drop_redis_prefix(store)
        await store.close()


def stamped(run_id: str, events: Iterable[Event], start: int = 1) -> list[Event]:
    """Events as a stream would stamp them (run id, consecutive seq from ``start``)."""
    return [
        event.model_copy(update={"run_id": run_id, "seq": start + i, "ts": 1000.0 + i})
        for i, event in enumerate(events)
    ]


def searches(n: int) -> list[Event]:
    return [SearchRequested(query=f"q{i}") for i in range(n)]


def finished(outcome: Outcome = "answered") -> RunFinished:
    return RunFinished(outcome=outcome, answer="42")


def publish_all(stream: RunStream, events: Iterable[Event]) -> list[Event]:
    return [stream.publish(event) for event in events]
