"""Brave Search API (web search), ``GET /res/v1/web/search`` with ``X-Subscription-Token``.

Errors come as ``{"type": "ErrorResponse", "error": {"code": ..., "detail": ...}}``;
the ``code`` tells an invalid token (``SUBSCRIPTION_TOKEN_INVALID``, sent with
422 as well as 401/403) from a used-up plan (``QUOTA_LIMITED``) and a
per-second limit (``RATE_LIMITED``, with ``X-RateLimit-Reset``).

Filters: ``freshness`` (``pd``/``pw``/``pm``/``py`` for an open-ended "since",
``YYYY-MM-DDtoYYYY-MM-DD`` when there is an end or the start is more than a
year back) and ``search_lang`` (Brave's own codes: ``jp``, ``zh-hans``...).
Sites are not sent (the API has no parameter); the searcher filters by host.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from streams import Hit, SearchFilters

from ._exceptions import (
    ProviderAuthError,
    ProviderError,
    ProviderQuotaError,
    ProviderRateLimited,
)
from ._filtering import (
    FilterPlan,
    TimeWindow,
    UnappliedFilter,
    covering_window,
    date_bounds,
    language_code,
)
from ._http import HttpProvider, HttpReply, parse_retry_after

__all__ = ["BraveProvider", "brave_language"]

_OPTIONS = ("country", "search_lang", "ui_lang", "safesearch", "freshness")
_AUTH_CODES = {"SUBSCRIPTION_TOKEN_INVALID", "SUBSCRIPTION_NOT_FOUND", "UNAUTHORIZED",
               "OPTION_NOT_IN_PLAN"}
_FRESHNESS: dict[TimeWindow, str] = {"day": "pd", "week": "pw", "month": "pm", "year": "py"}
_SEARCH_LANGS = frozenset({
    "ar", "eu", "bn", "bg", "ca", "zh-hans", "zh-hant", "hr", "cs", "da", "nl", "en", "en-gb",
    "et", "fi", "fr", "gl", "de", "gu", "he", "hi", "hu", "is", "it", "jp", "kn", "ko", "lv",
    "lt", "ms", "ml", "mr", "nb", "pl", "pt-br", "pt-pt", "pa", "ro", "ru", "sr", "sk", "sl",
    "es", "sv", "ta", "te", "th", "tr", "uk", "vi"})
_LANG_ALIASES = {"ja": "jp", "zh": "zh-hans", "pt": "pt-br", "no": "nb", "iw": "he"}
_EPOCH = "1970-01-01"  # an explicit range needs a start; "since ever" is the epoch


def brave_language(language: str) -> str | None:
    """Brave's ``search_lang`` for an ISO 639-1 code or tag, ``None`` if Brave has none."""
    tag = language.strip().replace("_", "-").lower()
    if tag in _SEARCH_LANGS:
        return tag
    code = _LANG_ALIASES.get(language_code(tag), language_code(tag))
    return code if code in _SEARCH_LANGS else None


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
    supported_filters = frozenset({"date", "language"})

    def _plan(self, filters: SearchFilters, today: _dt.date) -> FilterPlan:
        params: dict[str, str | tuple[str, ...]] = {}
        unapplied: list[UnappliedFilter] = []
        lo, hi = date_bounds(filters)
        if lo is not None or hi is not None:
            window = covering_window(lo, today) if lo is not None and hi is None else None
            if window is not None:
                params["freshness"] = _FRESHNESS[window]
            else:
                start = lo.isoformat() if lo is not None else _EPOCH
                end = (hi or today).isoformat()
                params["freshness"] = f"{start}to{end}"
        if filters.language:
            lang = brave_language(filters.language)
            if lang is None:
                unapplied.append(UnappliedFilter(
                    "language", f"Brave has no search_lang for {filters.language!r}"))
            else:
                params["search_lang"] = lang
        why = "Brave has no site parameter; filtered by host instead"
        unapplied += [UnappliedFilter(n, why) for n in ("sites", "exclude_sites")
                      if getattr(filters, n)]
        if filters.doc_types:
            unapplied.append(UnappliedFilter("doc_types", "Brave has no file-type parameter"))
        return FilterPlan(params=params, unapplied=tuple(unapplied))

    async def _request(self, query: str, k: int,
                       filter_params: Mapping[str, str | tuple[str, ...]] | None = None,
                       ) -> HttpReply:
        params = {"q": query, "count": str(min(k, 20)), "text_decorations": "false"}
        for key in _OPTIONS:
            if self.settings.options.get(key):
                params[key] = self.settings.options[key]
        for key, value in (filter_params or {}).items():  # the request's filters win
            params[key] = value if isinstance(value, str) else ",".join(value)
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
