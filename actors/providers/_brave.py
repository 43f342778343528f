"""Brave Search API (web search), ``GET /res/v1/web/search`` with ``X-Subscription-Token``.

Errors come as ``{"type": "ErrorResponse", "error": {"code": ..., "detail": ...}}``;
the ``code`` tells an invalid token (``SUBSCRIPTION_TOKEN_INVALID``, sent with
422 as well as 401/403) from a used-up plan (``QUOTA_LIMITED``) and a
per-second limit (``RATE_LIMITED``, with ``X-RateLimit-Reset``).
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict

from streams import Hit

from ._exceptions import (
    ProviderAuthError,
    ProviderError,
    ProviderQuotaError,
    ProviderRateLimited,
)
from ._http import HttpProvider, HttpReply, parse_retry_after

__all__ = ["BraveProvider"]

_OPTIONS = ("country", "search_lang", "ui_lang", "safesearch", "freshness")
_AUTH_CODES = {"SUBSCRIPTION_TOKEN_INVALID", "SUBSCRIPTION_NOT_FOUND", "UNAUTHORIZED",
               "OPTION_NOT_IN_PLAN"}


class _Result(BaseModel):
    model_config = ConfigDict(extra="ignore")

    url: str
    title: str = ""
    description: str = ""
    age: str | None = None
    page_age: str | None = None
    extra_snippets: list[str] | None = None


class _Web(BaseModel):
    model_config = ConfigDict(extra="ignore")

    results: list[_Result] = []


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str
    web: _Web | None = None  # absent when there are no web results


class BraveProvider(HttpProvider):
    """Brave Web Search adapter; ``base_url`` is the full web-search endpoint."""

    kind = "brave"
    default_base_url = "https://api.search.brave.com/res/v1/web/search"

    async def _request(self, query: str, k: int) -> HttpReply:
        params = {"q": query, "count": str(min(k, 20)), "text_decorations": "false"}
        for key in _OPTIONS:
            if self.settings.options.get(key):
                params[key] = self.settings.options[key]
        headers = {"Accept": "application/json", "X-Subscription-Token": self.api_key or ""}
        return await self._fetch("GET", self.base_url, params=params, headers=headers)

    def _classify(self, reply: HttpReply) -> ProviderError | None:
        code, detail = _error_code(reply.body)
        msg = f"HTTP {reply.status} {code}: {detail}".rstrip(": ")
        if code in _AUTH_CODES:
            return ProviderAuthError(msg, provider=self.name, status=reply.status)
        if code == "QUOTA_LIMITED":
            return ProviderQuotaError(msg, provider=self.name, status=reply.status)
        if code == "RATE_LIMITED" or reply.status == 429:
            retry = parse_retry_after(reply.headers.get("Retry-After"))
            reset = reply.headers.get("X-RateLimit-Reset")
            if retry is None and reset:  # "per-second, per-month" windows; the first is next
                retry = parse_retry_after(reset.split(",")[0])
            return ProviderRateLimited(msg, provider=self.name, status=reply.status,
                                       retry_after=retry)
        return None

    def _parse(self, reply: HttpReply, query: str, k: int) -> list[Hit]:
        doc = self._validate(_Response, self._json(reply))
        results = doc.web.results if doc.web is not None else []
        hits = [
            self._hit(url=r.url, title=r.title, snippet=r.description,
                      content="\n".join(r.extra_snippets) if r.extra_snippets else None,
                      published_at=r.page_age or r.age)
            for r in results
        ]
        return [h for h in hits if h is not None]


def _error_code(body: bytes) -> tuple[str, str]:
    try:
        doc = json.loads(body)
        err = doc.get("error") or {}
        return str(err.get("code") or ""), str(err.get("detail") or "")
    except (ValueError, AttributeError):
        return "", ""
