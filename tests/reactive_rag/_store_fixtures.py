"""Fixtures shared by the run-store tests: one store per backend, event builders."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import psycopg
import pytest

from reactive_rag.store import PostgresRunStore, RedisRunStore, SqliteRunStore
from streams import Event, Outcome, RunFinished, RunStream, SearchRequested

REDIS_ENV = "REACTIVE_RAG_TEST_REDIS_URL"
REDIS_URL = os.environ.get(REDIS_ENV)
NO_REDIS = (
    f"{REDIS_ENV} is not set: start a throwaway server with "
    "`eval \"$(bash scripts/start-test-services.sh)\"` (CI does)"
)

POSTGRES_ENV = "REACTIVE_RAG_TEST_POSTGRES_URL"
POSTGRES_URL = os.environ.get(POSTGRES_ENV)
NO_POSTGRES = (
    f"{POSTGRES_ENV} is not set: start a throwaway PostgreSQL with "
    "`eval \"$(bash scripts/start-test-services.sh)\"` (CI does)"
)

AnyStore = SqliteRunStore | RedisRunStore | PostgresRunStore

NEEDS_REDIS = pytest.mark.skipif(REDIS_URL is None, reason=NO_REDIS)
NEEDS_POSTGRES = pytest.mark.skipif(POSTGRES_URL is None, reason=NO_POSTGRES)

BACKENDS = ["sqlite", pytest.param("redis", marks=NEEDS_REDIS),
            pytest.param("postgres", marks=NEEDS_POSTGRES)]


class Clock:
    """A shared, hand-moved Unix clock."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def pg_schema(prefix: str) -> str:
    """The PostgreSQL schema standing for a Redis-style key ``prefix`` (same prefix, same one)."""
    return "test_" + hashlib.sha256(prefix.encode()).hexdigest()[:24]


def make_store(backend: str, tmp_path: Path, **options: object) -> AnyStore:
    """A fresh, unopened store; Redis stores get a unique key prefix per test, PostgreSQL
    stores a unique schema (from ``prefix`` too, so stores given one prefix share it)."""
    if backend == "sqlite":
        options.pop("prefix", None)
        return SqliteRunStore(tmp_path / "runs.db", **options)  # type: ignore[arg-type]
    prefix = str(options.pop("prefix", f"test-{uuid.uuid4().hex}:"))
    if backend == "postgres":
        assert POSTGRES_URL is not None
        schema = options.pop("schema", None) or pg_schema(prefix)
        return PostgresRunStore(POSTGRES_URL, schema=str(schema), **options)  # type: ignore[arg-type]
    assert backend == "redis" and REDIS_URL is not None
    return RedisRunStore(REDIS_URL, prefix=prefix, **options)  # type: ignore[arg-type]


def backend_of(store: AnyStore) -> str:
    """Which backend ``store`` is on (the ``backend`` argument of :func:`make_store`)."""
    if isinstance(store, RedisRunStore):
        return "redis"
    return "postgres" if isinstance(store, PostgresRunStore) else "sqlite"


def namespace_of(store: AnyStore) -> dict[str, object]:
    """Options for :func:`make_store` that open another store on ``store``'s data."""
    if isinstance(store, RedisRunStore):
        return {"prefix": store.prefix}
    return {"schema": store.schema} if isinstance(store, PostgresRunStore) else {}


async def drop_namespace(store: AnyStore) -> None:
    """Delete a server-grade test store's data (keeps the shared servers clean).

    Redis: every key under its prefix (through its own, open client). PostgreSQL:
    its whole schema, over a connection of its own (open store or not). SQLite:
    nothing (the file is in ``tmp_path``).
    """
    if isinstance(store, RedisRunStore) and store._client is not None:
        client = store._client
        keys = [key async for key in client.scan_iter(match=f"{store.prefix}*")]
        if keys:
            await client.delete(*keys)
    elif isinstance(store, PostgresRunStore):
        await drop_pg_schema(store.schema)


async def drop_pg_schema(schema: str) -> None:
    """``DROP SCHEMA ... CASCADE`` on the test server."""
    assert POSTGRES_URL is not None
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def open_store(backend: str, tmp_path: Path, **options: object) -> AsyncIterator[AnyStore]:
    store = make_store(backend, tmp_path, **options)
    await store.open()
    try:
        yield store
    finally:
        await drop_namespace(store)
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
