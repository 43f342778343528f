"""Fuzzing the API with hypothesis (random bodies, paths, headers): never a 5xx."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession, web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactive_rag.engine._engine import Engine
from reactive_rag.server import ServerConfig, create_app

from .._server_fixtures import build_index, two_tenants

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                max_size=4),
    max_leaves=12)
bodies = st.one_of(
    json_values,
    st.fixed_dictionaries({"question": st.text(max_size=50)}, optional={
        "mode": st.sampled_from(["agent", "rag", "x", 1]),
        "collections": st.lists(st.sampled_from(["demo", "secret", "", "../x", "a" * 200]),
                                max_size=3) | json_values,
        "budget": st.dictionaries(st.sampled_from(["wall_s", "max_steps", "x", "per_search_k",
                                                   "saturation_overlap"]),
                                  st.integers(-5, 10**9) | st.floats(allow_nan=False)
                                  | st.booleans() | st.text(max_size=3), max_size=3),
        "extra": json_values,
    }),
)
segments = st.text(st.characters(codec="ascii", exclude_characters="/?#"), min_size=0,
                   max_size=12)
paths = st.one_of(
    st.builds(lambda s: f"/v1/runs/{s}", segments),
    st.builds(lambda s, t: f"/v1/runs/{s}/{t}", segments,
              st.sampled_from(["events", "ws", "cancel", "x"])),
    st.sampled_from(["/v1/runs", "/v1/openapi.json", "/healthz", "/readyz", "/", "/v1",
                     "/v1/tasks", "/web/app.js", "/web/../_app.py"]),
    st.builds(lambda s: f"/v1/tasks/{s}", segments),
    st.builds(lambda s: f"/v1/tasks/{s}/events", segments),
)
header_values = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30)
headers = st.dictionaries(
    st.sampled_from(["Authorization", "Last-Event-ID", "Content-Type", "X-Any"]),
    header_values, max_size=3)
queries = st.dictionaries(st.sampled_from(["after", "limit", "cursor", "access_token"]),
                          header_values, max_size=2)


class _Server:
    """The app and a client session on a loop in a background thread (hypothesis is sync)."""

    def __init__(self, tmp: Path) -> None:
        self.index = build_index(tmp / "index")
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.base = ""
        self.call(self._start(tmp))

    def call(self, coro: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout=60)

    async def _start(self, tmp: Path) -> None:
        config = ServerConfig(store=str(tmp / "runs.db"), tenants=two_tenants(),
                              default_collections=("demo",))
        self.runner = web.AppRunner(create_app(config, engine=Engine(self.index)))
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.base = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        self.session = ClientSession()

    async def request(self, method: str, path: str, headers: dict[str, str],
                      params: dict[str, str], data: bytes | None) -> tuple[int, str]:
        async with self.session.request(method, self.base + path, headers=headers,
                                        params=params, data=data) as resp:
            text = (await resp.read())[:2000].decode(errors="replace")
            return resp.status, text

    async def _stop(self) -> None:
        await self.session.close()
        await self.runner.cleanup()

    def close(self) -> None:
        self.call(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
        self.index.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Server]:
    srv = _Server(tmp_path_factory.mktemp("fuzz"))
    yield srv
    srv.close()


def _check(status: int, text: str) -> None:
    assert status < 500, text
    if status >= 400:
        problem = json.loads(text)
        assert set(problem) >= {"type", "title", "status", "code", "detail"}
        assert "Traceback" not in text and "beta" not in problem["detail"]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=bodies, hdrs=headers, token=st.sampled_from(["acme", "none", "bad"]))
def test_random_run_bodies_never_cause_a_5xx(server: _Server, body: Any,
                                             hdrs: dict[str, str], token: str) -> None:
    hdrs = dict(hdrs)
    if token == "acme":
        hdrs["Authorization"] = "Bearer acme-token-123"
    hdrs.setdefault("Content-Type", "application/json")
    data = json.dumps(body).encode()
    status, text = server.call(server.request("POST", "/v1/runs", hdrs, {}, data))
    _check(status, text)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=paths, method=st.sampled_from(["GET", "POST", "PUT", "DELETE"]), hdrs=headers,
       params=queries, raw=st.binary(max_size=64) | st.none())
def test_random_paths_headers_and_queries_never_cause_a_5xx(
        server: _Server, path: str, method: str, hdrs: dict[str, str], params: dict[str, str],
        raw: bytes | None) -> None:
    hdrs = {"Authorization": "Bearer acme-token-123", **hdrs}
    if path.endswith("/ws"):
        path += "x"  # a plain GET on the WS route would ask for an upgrade
    status, text = server.call(server.request(method, path, hdrs, params, raw))
    assert status < 500, (path, text)
