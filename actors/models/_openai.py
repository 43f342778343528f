"""Adapter for OpenAI-compatible ``POST /v1/embeddings`` servers (vLLM, llama.cpp, TEI...)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import aiohttp
import numpy as np

from .._http_core import FailureKind, HttpSession, classify, error_detail, retry_call
from ._embedder import FloatMatrix, l2_normalize
from ._exceptions import (
    EmbeddingAuthError,
    EmbeddingConnectionError,
    EmbeddingError,
    EmbeddingRateLimited,
    EmbeddingRequestError,
    EmbeddingResponseError,
    EmbeddingServerError,
    EmbeddingTimeout,
)

__all__ = ["OpenAIEmbedder"]


class OpenAIEmbedder:
    """Embeddings from a server speaking the OpenAI embeddings protocol.

    Async first: ``aembed_queries``/``aembed_passages`` share one
    ``aiohttp.ClientSession`` (close it with ``aclose`` or ``async with``). The
    sync ``embed_queries``/``embed_passages`` satisfy :class:`Embedder` for code
    that runs embedders in a worker thread: each call opens a short-lived
    session on a private event loop, so they must not be called from a thread
    that is already running an event loop.

    Retryable failures (429, 5xx, timeouts, refused connections: an error's
    ``retryable``, the rule of every HTTP client here) are retried
    ``max_retries`` times with exponential backoff (honouring ``Retry-After`` up
    to ``max_backoff_s``) by :func:`actors._http_core.retry_call`; then, like
    every other failure, they raise a typed :class:`EmbeddingError`. Returned
    vectors are L2-normalised.

    Args:
        base_url: server root, with or without the trailing ``/v1``.
        model: model name sent in each request; also this embedder's ``name``.
        api_key: sent as ``Authorization: Bearer``; ``None`` sends no header.
        dim: the model's dimension if known; otherwise learned from the first answer.
        batch_size: texts per request.
        timeout_s: per-request timeout.
        query_prefix, passage_prefix: prepended to texts (e.g. ``"query: "`` for E5).
        sleep: how to wait between retries (tests pass a recorder), as for the chat client.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        dim: int = 0,
        batch_size: int = 64,
        timeout_s: float = 30.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_backoff_s: float = 10.0,
        query_prefix: str = "",
        passage_prefix: str = "",
        session: aiohttp.ClientSession | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if batch_size < 1 or max_retries < 0 or timeout_s <= 0:
            raise ValueError("batch_size >= 1, max_retries >= 0, timeout_s > 0")
        root = base_url.rstrip("/")
        self.url = root + ("/embeddings" if root.endswith("/v1") else "/v1/embeddings")
        self.name = model
        self.model = model
        self.dim = dim
        self._api_key = api_key
        self._batch_size = batch_size
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._max_retries = max_retries
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._query_prefix = query_prefix
        self._passage_prefix = passage_prefix
        self._http = HttpSession(session)
        self._sleep = sleep

    # --- async API ------------------------------------------------------------------

    async def aembed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed queries (with ``query_prefix``) using the shared session."""
        return await self._aembed([self._query_prefix + t for t in texts], self._http.get())

    async def aembed_passages(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed passages (with ``passage_prefix``) using the shared session."""
        return await self._aembed([self._passage_prefix + t for t in texts], self._http.get())

    async def aclose(self) -> None:
        """Close the session this embedder created (a passed-in session is left open)."""
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- sync API (Embedder protocol) ---------------------------------------------------

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        """Blocking :meth:`aembed_queries` for worker threads (no running loop allowed)."""
        return self._run_sync([self._query_prefix + t for t in texts])

    def embed_passages(self, texts: Sequence[str]) -> FloatMatrix:
        """Blocking :meth:`aembed_passages` for worker threads (no running loop allowed)."""
        return self._run_sync([self._passage_prefix + t for t in texts])

    def _run_sync(self, texts: list[str]) -> FloatMatrix:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                "OpenAIEmbedder.embed_* blocks; inside an event loop use aembed_* "
                "or run it with asyncio.to_thread"
            )

        async def once() -> FloatMatrix:
            async with aiohttp.ClientSession() as session:
                return await self._aembed(texts, session)

        return asyncio.run(once())

    # --- protocol ------------------------------------------------------------------------

    async def _aembed(self, texts: list[str], session: aiohttp.ClientSession) -> FloatMatrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        for start in range(0, len(texts), self._batch_size):
            parts.append(await self._request(texts[start : start + self._batch_size], session))
        out = l2_normalize(np.concatenate(parts, axis=0))
        if self.dim == 0:
            self.dim = int(out.shape[1])
        elif out.shape[1] != self.dim:
            raise EmbeddingResponseError(
                f"{self.url}: expected {self.dim}-d vectors, got {out.shape[1]}-d"
            )
        return out

    async def _request(self, batch: list[str], session: aiohttp.ClientSession) -> FloatMatrix:
        # the one rule of every HTTP client here: an error's ``retryable`` decides (429,
        # 5xx, timeouts, refused connections), at most ``max_retries`` more attempts
        return await retry_call(
            lambda: self._post(batch, session),
            retryable=lambda exc: isinstance(exc, EmbeddingError) and exc.retryable,
            retries=self._max_retries,
            backoff_s=self._backoff_s,
            max_backoff_s=self._max_backoff_s,
            retry_after_cap_s=self._max_backoff_s,
            sleep=self._sleep,
        )

    async def _post(self, batch: list[str], session: aiohttp.ClientSession) -> FloatMatrix:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        body = {"model": self.model, "input": batch, "encoding_format": "float"}
        try:
            async with session.post(
                self.url, json=body, headers=headers, timeout=self._timeout
            ) as resp:
                raw = await resp.read()
                status = resp.status
                headers = dict(resp.headers)
        except TimeoutError as exc:
            raise EmbeddingTimeout(f"{self.url}: no answer within the timeout") from exc
        except aiohttp.ClientError as exc:
            raise EmbeddingConnectionError(f"{self.url}: {type(exc).__name__}: {exc}") from exc
        if status != 200:
            raise _status_error(self.url, status, raw, headers)
        return _parse(self.url, raw, len(batch))


_ERRORS: dict[FailureKind, type[EmbeddingError]] = {
    FailureKind.AUTH: EmbeddingAuthError,
    FailureKind.SERVER: EmbeddingServerError,
}


def _status_error(
    url: str, status: int, raw: bytes, headers: Mapping[str, str]
) -> EmbeddingError:
    detail = error_detail(raw)
    msg = f"{url}: HTTP {status}: {detail}" if detail else f"{url}: HTTP {status}"
    failure = classify(status, headers, quota_statuses=frozenset())
    if failure is None:  # a 2xx other than 200: treated as before, a rejected request
        return EmbeddingRequestError(msg, status=status)
    if failure.kind is FailureKind.RATE_LIMITED:
        return EmbeddingRateLimited(msg, status=status, retry_after=failure.retry_after)
    if failure.kind is FailureKind.SERVER:
        return EmbeddingServerError(msg, status=status, retry_after=failure.retry_after)
    return _ERRORS.get(failure.kind, EmbeddingRequestError)(msg, status=status)


def _parse(url: str, raw: bytes, expected: int) -> FloatMatrix:
    try:
        payload: Any = json.loads(raw)
        data = payload["data"]
        if not isinstance(data, list):
            raise TypeError("`data` is not a list")
        rows = sorted(data, key=lambda d: int(d.get("index", 0)))
        matrix = np.array([r["embedding"] for r in rows], dtype=np.float32)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise EmbeddingResponseError(f"{url}: malformed embeddings response: {exc}") from exc
    if matrix.ndim != 2 or matrix.shape[0] != expected or matrix.shape[1] == 0:
        raise EmbeddingResponseError(
            f"{url}: expected {expected} embeddings, got array of shape {matrix.shape}"
        )
    if not np.all(np.isfinite(matrix)):
        raise EmbeddingResponseError(f"{url}: embeddings contain NaN or infinity")
    return matrix
