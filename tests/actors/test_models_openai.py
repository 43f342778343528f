"""OpenAIEmbedder against a real local server speaking the /v1/embeddings protocol."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from actors import error_info
from actors.models import (
    Embedder,
    EmbeddingAuthError,
    EmbeddingConnectionError,
    EmbeddingError,
    EmbeddingRateLimited,
    EmbeddingRequestError,
    EmbeddingResponseError,
    EmbeddingServerError,
    EmbeddingTimeout,
    HashingEmbedder,
    OpenAIEmbedder,
)


@dataclass
class Script:
    """What the fake server answers: queued failures first, then real embeddings."""

    failures: list[tuple[int, Any, dict[str, str]]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    delay_s: float = 0.0
    slow_requests: int | None = None  # only this many requests are delayed (None: all)
    shuffle: bool = True


STATE = web.AppKey("state", Script)
_model = HashingEmbedder(32)


async def embeddings(request: web.Request) -> web.StreamResponse:
    script = request.app[STATE]
    body = await request.json()
    script.requests.append(body)
    script.auth.append(request.headers.get("Authorization"))
    if script.delay_s and script.slow_requests != 0:
        if script.slow_requests is not None:
            script.slow_requests -= 1
        await asyncio.sleep(script.delay_s)
    if script.failures:
        status, payload, headers = script.failures.pop(0)
        text = payload if isinstance(payload, str) else json.dumps(payload)
        return web.Response(status=status, text=text, headers=headers)
    vectors = _model.embed_passages(body["input"]) * 3.0  # unnormalised on purpose
    data = [{"object": "embedding", "index": i, "embedding": v.tolist()}
            for i, v in enumerate(vectors)]
    if script.shuffle:
        data.reverse()  # servers may answer out of order; `index` decides
    return web.json_response({"object": "list", "data": data, "model": body["model"]})


@pytest.fixture
async def server() -> AsyncIterator[tuple[TestServer, Script]]:
    app = web.Application()
    script = Script()
    app[STATE] = script
    app.router.add_post("/v1/embeddings", embeddings)
    srv = TestServer(app, host="127.0.0.1")
    await srv.start_server()
    try:
        yield srv, script
    finally:
        await srv.close()


def _url(srv: TestServer) -> str:
    return str(srv.make_url("/"))


async def test_happy_path_batches_orders_and_normalises(
    server: tuple[TestServer, Script],
) -> None:
    srv, script = server
    texts = [f"text number {i} about cats" for i in range(5)]
    async with OpenAIEmbedder(_url(srv), "tiny-embed", api_key="sk-test", batch_size=2) as emb:
        v = await emb.aembed_passages(texts)
        q = await emb.aembed_queries(["cats"])
    assert [len(r["input"]) for r in script.requests] == [2, 2, 1, 1]
    assert all(r["model"] == "tiny-embed" for r in script.requests)
    assert script.auth[0] == "Bearer sk-test"
    assert v.shape == (5, 32) and emb.dim == 32 and q.shape == (1, 32)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(v, _model.embed_passages(texts), atol=1e-5)


async def test_base_url_with_v1_and_prefixes(server: tuple[TestServer, Script]) -> None:
    srv, script = server
    async with OpenAIEmbedder(
        _url(srv) + "v1/", "e5", query_prefix="query: ", passage_prefix="passage: "
    ) as emb:
        await emb.aembed_queries(["q"])
        await emb.aembed_passages(["p"])
    assert [r["input"] for r in script.requests] == [["query: q"], ["passage: p"]]
    assert script.auth == [None, None]


@pytest.mark.parametrize(
    ("status", "payload", "headers", "error"),
    [
        (401, {"error": {"message": "bad key"}}, {}, EmbeddingAuthError),
        (403, "forbidden", {}, EmbeddingAuthError),
        (429, "slow down", {"Retry-After": "7"}, EmbeddingRateLimited),
        (500, "boom", {}, EmbeddingServerError),
        (503, "", {}, EmbeddingServerError),
        (400, {"error": {"message": "input too long"}}, {}, EmbeddingRequestError),
        (200, "not json at all", {}, EmbeddingResponseError),
        (200, {"data": "nope"}, {}, EmbeddingResponseError),
        (200, {"data": [{"index": 0, "embedding": [0.1, 0.2]},
                        {"index": 1, "embedding": [0.3]}]}, {}, EmbeddingResponseError),
        (200, {"data": [{"index": 0, "embedding": [1.0]}]}, {}, EmbeddingResponseError),
        (200, {"object": "list"}, {}, EmbeddingResponseError),
    ],
)
async def test_failures_are_typed(
    server: tuple[TestServer, Script],
    status: int,
    payload: Any,
    headers: dict[str, str],
    error: type[EmbeddingError],
) -> None:
    srv, script = server
    script.failures.append((status, payload, headers))
    async with OpenAIEmbedder(_url(srv), "m", max_retries=0) as emb:
        with pytest.raises(error) as exc_info:
            await emb.aembed_passages(["a", "b"])
    if status != 200:
        assert exc_info.value.status == status
        assert f"HTTP {status}" in str(exc_info.value)
    if status == 429:
        assert isinstance(exc_info.value, EmbeddingRateLimited)
        assert exc_info.value.retry_after == 7.0
    info = error_info(exc_info.value)
    assert info.retryable == (status == 429 or status >= 500)


async def test_429_and_5xx_are_retried_then_succeed(server: tuple[TestServer, Script]) -> None:
    srv, script = server
    script.failures += [(429, "wait", {"Retry-After": "0"}), (502, "bad gateway", {})]
    async with OpenAIEmbedder(_url(srv), "m", max_retries=2, backoff_s=0.01) as emb:
        v = await emb.aembed_passages(["x"])
    assert v.shape == (1, 32) and len(script.requests) == 3


async def test_a_503_says_when_to_come_back(server: tuple[TestServer, Script]) -> None:
    srv, script = server
    script.failures += [(503, "maintenance", {"Retry-After": "30"})]
    async with OpenAIEmbedder(_url(srv), "m", max_retries=0) as emb:
        with pytest.raises(EmbeddingServerError) as info:
            await emb.aembed_passages(["x"])
    assert info.value.retry_after == 30.0 and info.value.status == 503


async def test_retries_give_up(server: tuple[TestServer, Script]) -> None:
    srv, script = server
    script.failures += [(500, "a", {}), (500, "b", {}), (500, "c", {})]
    async with OpenAIEmbedder(_url(srv), "m", max_retries=1, backoff_s=0.01) as emb:
        with pytest.raises(EmbeddingServerError, match="HTTP 500: b"):
            await emb.aembed_passages(["x"])
    assert len(script.requests) == 2


async def test_retry_after_is_honoured_up_to_the_backoff_cap(
    server: tuple[TestServer, Script],
) -> None:
    srv, script = server
    script.failures += [(429, "wait", {"Retry-After": "60"})]
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    async with OpenAIEmbedder(_url(srv), "m", max_retries=1, backoff_s=0.01,
                              max_backoff_s=0.05, sleep=record) as emb:
        v = await emb.aembed_passages(["x"])
    assert v.shape == (1, 32) and len(script.requests) == 2
    assert waits == [0.05]  # the cap, not the 60 s asked for


async def test_timeout_is_typed(server: tuple[TestServer, Script]) -> None:
    srv, script = server
    script.delay_s = 1.0
    async with OpenAIEmbedder(_url(srv), "m", timeout_s=0.1) as emb:
        with pytest.raises(EmbeddingTimeout):
            await emb.aembed_passages(["x"])


async def test_a_timed_out_attempt_is_retried_like_a_5xx(
    server: tuple[TestServer, Script],
) -> None:
    """Embeddings follow the chat client's and the providers' rule: a timeout is retryable."""
    srv, script = server
    script.delay_s, script.slow_requests = 1.0, 1
    async with OpenAIEmbedder(_url(srv), "m", timeout_s=0.2, max_retries=1,
                              backoff_s=0.01) as emb:
        v = await emb.aembed_passages(["x"])
    assert v.shape == (1, 32) and len(script.requests) == 2


async def test_unreachable_server_is_a_connection_error() -> None:
    srv = TestServer(web.Application(), host="127.0.0.1")
    await srv.start_server()
    url = _url(srv)
    await srv.close()  # nothing listens there any more
    async with OpenAIEmbedder(url, "m", max_retries=0) as emb:
        with pytest.raises(EmbeddingConnectionError):
            await emb.aembed_passages(["x"])


async def test_dimension_change_is_malformed(server: tuple[TestServer, Script]) -> None:
    srv, _ = server
    async with OpenAIEmbedder(_url(srv), "m", dim=16) as emb:
        with pytest.raises(EmbeddingResponseError, match="expected 16-d"):
            await emb.aembed_passages(["x"])


async def test_sync_wrappers_work_from_a_worker_thread(server: tuple[TestServer, Script]) -> None:
    srv, _ = server
    emb = OpenAIEmbedder(_url(srv), "m")
    assert isinstance(emb, Embedder)
    v = await asyncio.to_thread(emb.embed_passages, ["hello world"])
    q = await asyncio.to_thread(emb.embed_queries, ["hello"])
    assert v.shape == (1, 32) and q.shape == (1, 32)
    with pytest.raises(RuntimeError, match="aembed_"):
        emb.embed_passages(["called on the loop thread"])
    await emb.aclose()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        OpenAIEmbedder("http://127.0.0.1:1", "m", batch_size=0)
