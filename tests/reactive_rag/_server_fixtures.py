"""Helpers for the HTTP service tests: a small index, a test server, an SSE reader."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import ClientResponse, TCPConnector
from aiohttp.test_utils import TestClient, TestServer

from actors.models import HashingEmbedder
from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex, Document
from reactive_rag.judgement import Decision, PlannerView
from reactive_rag.judgement.offline import OfflinePlanner
from reactive_rag.server import ServerConfig, TenantConfig, create_app, hash_token
from reactive_rag.store import RunStore, SqliteRunStore

from ._corpus import DOCS

SECRET = "The vault combination is 4-8-15-16-23-42 and only beta may know it."

SECRET_DOCS = [Document(id="vault", title="Vault", text=SECRET)]

TOKENS = {"acme": "acme-token-123", "beta": "beta-token-456"}
QUESTION = "Who founded Bayer and when?"


def build_index(root: Path) -> CorpusIndex:
    """Two collections: ``demo`` (acme and beta) and ``secret`` (beta only)."""
    index = CorpusIndex(root, HashingEmbedder())
    index.index_documents("demo", DOCS)
    index.index_documents("secret", SECRET_DOCS)
    return index


def two_tenants(**limits: Any) -> dict[str, TenantConfig]:
    return {
        "acme": TenantConfig(token_sha256=(hash_token(TOKENS["acme"]),),
                             collections=("demo",), **limits),
        "beta": TenantConfig(token_sha256=(hash_token(TOKENS["beta"]),),
                             collections=("demo", "secret"), **limits),
    }


def auth(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[tenant]}"}


class GatedPlanner:
    """The offline planner, but every decision waits for a shared gate (holds runs open)."""

    name = "gated"
    gate: asyncio.Event | None = None

    def __init__(self) -> None:
        self._inner = OfflinePlanner()

    async def decide(self, view: PlannerView) -> Decision:
        if GatedPlanner.gate is not None:
            await GatedPlanner.gate.wait()
        return await self._inner.decide(view)


@asynccontextmanager
async def serve(tmp_path: Path, index: CorpusIndex, *, tenants: dict[str, TenantConfig] | None
                = None, planner: Callable[[], Any] | None = None,
                store: RunStore | None = None,
                **config: Any) -> AsyncIterator[TestClient[Any, Any]]:
    """A real server on 127.0.0.1 with a fresh SQLite store (or ``store``); yields a client."""
    cfg = ServerConfig(store=str(tmp_path / "runs.db"), tenants=tenants or {},
                       default_collections=("demo",), **config)
    engine = Engine(index, planner=planner)
    app = create_app(cfg, engine=engine, store=store)
    connector = TCPConnector(limit=0, force_close=False)
    async with TestClient(TestServer(app, host="127.0.0.1"), connector=connector) as client:
        yield client


@dataclass
class SseMessage:
    id: int | None
    event: str
    data: Any


@dataclass
class SseRead:
    messages: list[SseMessage] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)

    @property
    def events(self) -> list[SseMessage]:
        return [m for m in self.messages if m.id is not None]

    @property
    def seqs(self) -> list[int]:
        return [m.id for m in self.events if m.id is not None]


async def read_sse(resp: ClientResponse, *, limit: int | None = None,
                   delay_s: float = 0.0) -> SseRead:
    """Parse an SSE body until it ends (or ``limit`` events were read)."""
    out = SseRead()
    fields: dict[str, str] = {}
    while True:
        raw = await resp.content.readline()
        if not raw:
            break
        line = raw.decode().rstrip("\n")
        if line.startswith(":"):
            out.comments.append(line[1:].strip())
            continue
        if line:
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
            continue
        if "data" in fields:
            ident = fields.get("id")
            out.messages.append(SseMessage(int(ident) if ident else None,
                                           fields.get("event", "message"),
                                           json.loads(fields["data"])))
            if delay_s:
                await asyncio.sleep(delay_s)
            if limit is not None and len(out.events) >= limit:
                break
        fields = {}
    return out


async def start_run(client: TestClient[Any, Any], tenant: str | None = None,
                    **body: Any) -> str:
    payload = {"question": QUESTION, **body}
    resp = await client.post("/v1/runs", json=payload,
                             headers=auth(tenant) if tenant else None)
    assert resp.status == 201, await resp.text()
    run_id: str = (await resp.json())["run_id"]
    return run_id


async def open_store(path: Path) -> SqliteRunStore:
    store = SqliteRunStore(path)
    await store.open()
    return store
