"""Shared HTTP plumbing of the web adapters: one request, typed errors out.

Every adapter differs in how it builds the request and reads the answer; they
all share the deadline, the session lifetime, the body cap and the mapping of
HTTP signalling (401/403, 402, 429 + Retry-After, 5xx, HTML instead of JSON,
malformed JSON, wrong schema) to :mod:`._exceptions`, read by the rules of
:mod:`actors._http_core` that the chat and embeddings clients share.
Structured filters go through :meth:`HttpProvider.filter_plan`, one pure
mapping per adapter, so what is sent and what is reported unapplied cannot
disagree.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import aiohttp
from pydantic import BaseModel, ValidationError
from yarl import URL

from streams import Hit, SearchFilters

from .._http_core import (
    FailureKind,
    HttpSession,
    classify,
    error_detail,
    looks_like_html,
    parse_retry_after,
)
from ._config import ProviderSettings
from ._exceptions import (
    ProviderAuthError,
    ProviderBadResponse,
    ProviderError,
    ProviderNotConfigured,
    ProviderQuotaError,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
)
from ._filtering import NO_FILTERS, Clock, FilterPlan, UnappliedFilter, utc_today

__all__ = ["HttpProvider", "HttpReply", "parse_retry_after"]

_M = TypeVar("_M", bound=BaseModel)

MAX_BODY_BYTES = 4 * 1024 * 1024
"""A search API answer larger than this is not an answer (protects memory)."""

USER_AGENT = "reactive-rag/0.1 (+https://github.com/reactive-rag)"


@dataclass(frozen=True, slots=True)
class HttpReply:
    """What an adapter needs of a response, read fully within the deadline."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    content_type: str

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


class HttpProvider:
    """Base of the aiohttp adapters.

    Args:
        settings: the tenant's settings for this provider (``base_url`` wins
            over :attr:`default_base_url`, so tests point it at 127.0.0.1).
        name: the name results and errors carry (defaults to :attr:`kind`).
        session: a shared ``aiohttp.ClientSession``; without one the provider
            opens its own on first use and closes it in :meth:`aclose`.
        env: where ``api_key_env`` is looked up (defaults to ``os.environ``).
        today: today's date for relative date filters (defaults to UTC today).

    Raises:
        ProviderNotConfigured: a required key or option is missing (checked
            here, so nothing unconfigured ever reaches the network).
    """

    kind: ClassVar[str] = ""
    default_base_url: ClassVar[str | None] = None
    needs_api_key: ClassVar[bool] = True
    required_options: ClassVar[tuple[str, ...]] = ()
    supported_filters: ClassVar[frozenset[str]] = frozenset()
    """Filter names :meth:`filter_plan` maps (none in this base: adapters add theirs)."""

    def __init__(
        self,
        settings: ProviderSettings | None = None,
        *,
        name: str | None = None,
        session: aiohttp.ClientSession | None = None,
        env: Mapping[str, str] | None = None,
        today: Clock | None = None,
    ) -> None:
        self.today: Clock = today or utc_today
        self.settings = settings or ProviderSettings(kind=self.kind)
        self.name = name or self.kind
        base = self.settings.base_url or self.default_base_url
        if not base:
            raise ProviderNotConfigured("no base_url configured", provider=self.name)
        self.base_url = URL(base)
        if self.base_url.scheme not in ("http", "https") or not self.base_url.host:
            raise ProviderNotConfigured(f"base_url {base!r} is not an http(s) URL",
                                        provider=self.name)
        self.api_key = self.settings.resolve_api_key(self.name, env, required=self.needs_api_key)
        missing = [o for o in self.required_options if not self.settings.options.get(o)]
        if missing:
            raise ProviderNotConfigured(f"missing option(s) {missing}", provider=self.name)
        self._http = HttpSession(session, lambda: aiohttp.ClientSession(
            headers={"User-Agent": USER_AGENT}, cookie_jar=aiohttp.DummyCookieJar()))

    # --- lifetime ---------------------------------------------------------------------

    async def __aenter__(self) -> HttpProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the session if this provider opened it."""
        await self._http.aclose()

    # --- the protocol -------------------------------------------------------------------

    async def search(self, query: str, k: int, deadline: float | None, *,
                     filters: SearchFilters | None = None) -> Sequence[Hit]:
        """Ask the API (``filters`` mapped by :meth:`filter_plan`); typed errors on failure."""
        if not query.strip():
            return []
        if self.settings.max_results is not None:
            k = min(k, self.settings.max_results)
        k = max(1, k)
        loop = asyncio.get_running_loop()
        cap = loop.time() + self.settings.timeout_s
        limit = cap if deadline is None else min(cap, deadline)
        plan = self.filter_plan(filters) if filters is not None else NO_FILTERS
        try:
            async with asyncio.timeout_at(limit):
                if plan.params:
                    reply = await self._request(query, k, plan.params)
                else:  # adapters written before filters keep their two-argument _request
                    reply = await self._request(query, k)
        except TimeoutError as exc:
            raise ProviderTimeout("no answer before the deadline", provider=self.name) from exc
        except aiohttp.ClientError as exc:
            raise ProviderUnavailable(f"{type(exc).__name__}: {exc}", provider=self.name) from exc
        self._raise_for_status(reply)
        return self._parse(reply, query, k)[:k]

    def filter_plan(self, filters: SearchFilters) -> FilterPlan:
        """The API parameters for ``filters`` and what cannot be sent (pure, uses :attr:`today`)."""
        if filters.is_empty:
            return NO_FILTERS
        plan = self._plan(filters, self.today())
        declared = tuple(UnappliedFilter(n, f"{self.kind or 'this API'} has no such parameter")
                         for n in filters.names() if n not in self.supported_filters)
        known = {u.filter for u in plan.unapplied}
        return FilterPlan(params=plan.params,
                          unapplied=plan.unapplied + tuple(u for u in declared
                                                           if u.filter not in known))

    def unapplied(self, filters: SearchFilters) -> tuple[UnappliedFilter, ...]:
        """The requested filters this provider does not send to its API, and why."""
        return self.filter_plan(filters).unapplied

    def _plan(self, filters: SearchFilters, today: _dt.date) -> FilterPlan:
        """Adapter hook: map the filters it supports (the base maps none)."""
        return NO_FILTERS

    async def _request(self, query: str, k: int,
                       filter_params: Mapping[str, str | tuple[str, ...]] | None = None,
                       ) -> HttpReply:
        """Send the API request and read the reply (subclasses call :meth:`_fetch`)."""
        raise NotImplementedError

    def _parse(self, reply: HttpReply, query: str, k: int) -> list[Hit]:
        """Turn a 2xx reply into hits; raise :class:`ProviderBadResponse` if it does not fit."""
        raise NotImplementedError

    async def _fetch(
        self, method: str, url: URL, *, params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None, json_body: Any = None,
        data: Mapping[str, str] | None = None,
    ) -> HttpReply:
        async with self._http.get().request(
            method, url, params=params, headers=headers, json=json_body, data=data,
            allow_redirects=True, max_redirects=3,
        ) as resp:
            declared = resp.content_length
            if declared is not None and declared > MAX_BODY_BYTES:
                raise ProviderBadResponse(f"answer of {declared} bytes is too large",
                                          provider=self.name, status=resp.status)
            chunks: list[bytes] = []
            size = 0
            async for chunk in resp.content.iter_chunked(65536):
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise ProviderBadResponse("answer is too large", provider=self.name,
                                              status=resp.status)
                chunks.append(chunk)
            return HttpReply(status=resp.status, headers=dict(resp.headers),
                             body=b"".join(chunks), content_type=resp.content_type)

    # --- error signalling ----------------------------------------------------------------

    def _raise_for_status(self, reply: HttpReply) -> None:
        """Map HTTP signalling to typed errors; adapters refine with :meth:`_classify`."""
        if 200 <= reply.status < 300:
            return
        refined = self._classify(reply)
        if refined is not None:
            raise refined
        raise self._generic_error(reply)

    def _classify(self, reply: HttpReply) -> ProviderError | None:
        """Adapter hook for API-specific codes (Tavily 432, Google ``reason``...)."""
        return None

    def _generic_error(self, reply: HttpReply) -> ProviderError:
        status = reply.status
        detail = error_detail(reply.text())
        msg = f"HTTP {status}" + (f": {detail}" if detail else "")
        failure = classify(status, reply.headers, quota_statuses=frozenset({402, 432, 433}))
        kind = failure.kind if failure is not None else FailureKind.REQUEST
        if kind is FailureKind.AUTH:
            return ProviderAuthError(msg, provider=self.name, status=status)
        if kind is FailureKind.QUOTA:
            return ProviderQuotaError(msg, provider=self.name, status=status)
        if kind is FailureKind.RATE_LIMITED:
            return ProviderRateLimited(msg, provider=self.name, status=status,
                                       retry_after=failure.retry_after if failure else None)
        if kind is FailureKind.SERVER:
            return ProviderUnavailable(msg, provider=self.name, status=status,
                                       retry_after=failure.retry_after if failure else None)
        return ProviderError(msg, provider=self.name, status=status)

    # --- decoding -----------------------------------------------------------------------------

    def _json(self, reply: HttpReply) -> Any:
        """The body as JSON; HTML or broken JSON is a :class:`ProviderBadResponse`."""
        if looks_like_html(reply.content_type, reply.body):
            raise ProviderBadResponse("HTML instead of JSON (blocked, captcha or wrong URL?)",
                                      provider=self.name, status=reply.status)
        try:
            return json.loads(reply.body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ProviderBadResponse(f"malformed JSON: {exc}", provider=self.name,
                                      status=reply.status) from exc

    def _validate(self, model: type[_M], data: Any) -> _M:
        """``data`` checked against the API's documented schema."""
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors()
            where = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
            what = errors[0]["msg"] if errors else str(exc)
            raise ProviderBadResponse(
                f"wrong schema at {where or 'root'}: {what}",
                provider=self.name, status=200,
            ) from exc

    def _hit(self, **fields: Any) -> Hit | None:
        """A :class:`Hit` from this provider, or ``None`` for a result without an http(s) URL."""
        url = str(fields.get("url") or "")
        if not url.lower().startswith(("http://", "https://")):
            return None
        fields["source"] = self.name
        return Hit(**fields)

