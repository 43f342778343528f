"""Google Programmable Search Engine through the Custom Search JSON API.

``GET https://www.googleapis.com/customsearch/v1?key=...&cx=...&q=...&num=...``
(``num`` is at most 10). A search without results has no ``items`` key.
Errors are ``{"error": {"code", "message", "errors": [{"reason"}], "status"}}``:
``keyInvalid`` (400) is an auth error, ``dailyLimitExceeded``/per-day quota a
quota error, ``rateLimitExceeded``/per-minute quota a rate limit.

Filters: ``dateRestrict=dN`` (the past N days, reaching back to
``date_from``), ``siteSearch`` with ``siteSearchFilter=i`` (one site) or
``e`` (exclude one site; the API takes a single site) and ``lr=lang_xx``.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from streams import Hit, SearchFilters

from ._exceptions import (
    ProviderAuthError,
    ProviderError,
    ProviderQuotaError,
    ProviderRateLimited,
)
from ._filtering import FilterPlan, UnappliedFilter, date_bounds, language_code, site_host
from ._http import HttpProvider, HttpReply, parse_retry_after

__all__ = ["GoogleCseProvider", "google_language"]

_OPTIONS = ("lr", "safe", "gl", "hl", "dateRestrict", "siteSearch")
_AUTH_REASONS = {"keyInvalid", "keyExpired", "accessNotConfigured", "forbidden",
                 "ipRefererBlocked", "authError"}
_QUOTA_REASONS = {"dailyLimitExceeded", "dailyLimitExceededUnreg", "quotaExceeded",
                  "billingNotEnabled"}
_RATE_REASONS = {"rateLimitExceeded", "userRateLimitExceeded"}
_DATE_KEYS = ("article:published_time", "og:updated_time", "date", "dc.date")
_LR = frozenset({"ar", "bg", "ca", "cs", "da", "de", "el", "en", "es", "et", "fi", "fr", "hr",
                 "hu", "id", "is", "it", "iw", "ja", "ko", "lt", "lv", "nl", "no", "pl", "pt",
                 "ro", "ru", "sk", "sl", "sr", "sv", "tr", "zh-CN", "zh-TW"})
_LR_ALIASES = {"he": "iw", "nb": "no", "nn": "no", "zh": "zh-CN"}


def google_language(language: str) -> str | None:
    """The ``lr`` value (``lang_xx``) for an ISO 639-1 code or tag, ``None`` if Google has none."""
    tag = language.strip().replace("_", "-")
    if tag.lower() in ("zh-tw", "zh-hant", "zh-hk"):
        return "lang_zh-TW"
    code = language_code(tag)
    code = _LR_ALIASES.get(code, code)
    return f"lang_{code}" if code in _LR else None


class _Item(BaseModel):
    model_config = ConfigDict(extra="ignore")

    link: str
    title: str = ""
    snippet: str = ""
    pagemap: dict[str, Any] | None = None


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore")

    kind: str
    items: list[_Item] = []


class GoogleCseProvider(HttpProvider):
    """Custom Search JSON API adapter; needs ``options.cx`` (the engine id) and a key."""

    kind = "google_cse"
    default_base_url = "https://www.googleapis.com/customsearch/v1"
    required_options = ("cx",)
    supported_filters = frozenset({"date", "sites", "exclude_sites", "language"})

    def _plan(self, filters: SearchFilters, today: _dt.date) -> FilterPlan:
        params: dict[str, str | tuple[str, ...]] = {}
        unapplied: list[UnappliedFilter] = []
        lo, hi = date_bounds(filters)
        if lo is not None:
            params["dateRestrict"] = f"d{max(1, (today - lo).days + 1)}"
        if hi is not None and hi < today:
            unapplied.append(UnappliedFilter(
                "date", f"dateRestrict cannot end before today, so the end {hi.isoformat()} "
                        "is not sent"))
        if len(filters.sites) == 1:
            params.update(siteSearch=site_host(filters.sites[0]), siteSearchFilter="i")
        elif filters.sites:
            unapplied.append(UnappliedFilter("sites", "siteSearch takes one site; filtered by "
                                                      "host instead"))
        if filters.exclude_sites:
            if len(filters.exclude_sites) == 1 and "siteSearch" not in params:
                params.update(siteSearch=site_host(filters.exclude_sites[0]),
                              siteSearchFilter="e")
            else:
                why = ("siteSearch already holds the included site" if "siteSearch" in params
                       else "siteSearch takes one site")
                unapplied.append(UnappliedFilter("exclude_sites",
                                                 f"{why}; filtered by host instead"))
        if filters.language:
            lr = google_language(filters.language)
            if lr is None:
                unapplied.append(UnappliedFilter(
                    "language", f"Google has no lr value for {filters.language!r}"))
            else:
                params["lr"] = lr
        if filters.doc_types:
            unapplied.append(UnappliedFilter(
                "doc_types", "document types are not file types; fileType is not sent"))
        return FilterPlan(params=params, unapplied=tuple(unapplied))

    async def _request(self, query: str, k: int,
                       filter_params: Mapping[str, str | tuple[str, ...]] | None = None,
                       ) -> HttpReply:
        params = {"key": self.api_key or "", "cx": self.settings.options["cx"], "q": query,
                  "num": str(min(k, 10))}
        for key in _OPTIONS:
            if self.settings.options.get(key):
                params[key] = self.settings.options[key]
        for key, value in (filter_params or {}).items():  # the request's filters win
            params[key] = value if isinstance(value, str) else ",".join(value)
        return await self._fetch("GET", self.base_url, params=params,
                                 headers={"Accept": "application/json"})

    def _classify(self, reply: HttpReply) -> ProviderError | None:
        reasons, status, message = _google_error(reply.body)
        msg = f"HTTP {reply.status} {status}: {message}".strip()
        if reasons & _AUTH_REASONS or "API key not valid" in message:
            return ProviderAuthError(msg, provider=self.name, status=reply.status)
        per_day = "per day" in message.lower()
        if reasons & _QUOTA_REASONS or (status == "RESOURCE_EXHAUSTED" and per_day):
            return ProviderQuotaError(msg, provider=self.name, status=reply.status)
        if reasons & _RATE_REASONS or reply.status == 429:
            return ProviderRateLimited(
                msg, provider=self.name, status=reply.status,
                retry_after=parse_retry_after(reply.headers.get("Retry-After")))
        return None

    def _parse(self, reply: HttpReply, query: str, k: int) -> list[Hit]:
        doc = self._validate(_Response, self._json(reply))
        hits = [
            self._hit(url=i.link, title=i.title, snippet=" ".join(i.snippet.split()),
                      published_at=_published(i.pagemap))
            for i in doc.items
        ]
        return [h for h in hits if h is not None]


def _google_error(body: bytes) -> tuple[set[str], str, str]:
    try:
        err = json.loads(body).get("error") or {}
        reasons = {str(e.get("reason", "")) for e in err.get("errors") or []}
        return reasons, str(err.get("status") or ""), str(err.get("message") or "")
    except (ValueError, AttributeError):
        return set(), "", ""


def _published(pagemap: dict[str, Any] | None) -> str | None:
    if not pagemap:
        return None
    metatags = pagemap.get("metatags")
    if isinstance(metatags, list):
        for tags in metatags:
            if isinstance(tags, dict):
                for key in _DATE_KEYS:
                    value = tags.get(key)
                    if isinstance(value, str) and value:
                        return value
    return None
