"""Google Programmable Search Engine through the Custom Search JSON API.

``GET https://www.googleapis.com/customsearch/v1?key=...&cx=...&q=...&num=...``
(``num`` is at most 10). A search without results has no ``items`` key.
Errors are ``{"error": {"code", "message", "errors": [{"reason"}], "status"}}``:
``keyInvalid`` (400) is an auth error, ``dailyLimitExceeded``/per-day quota a
quota error, ``rateLimitExceeded``/per-minute quota a rate limit.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from streams import Hit

from ._exceptions import (
    ProviderAuthError,
    ProviderError,
    ProviderQuotaError,
    ProviderRateLimited,
)
from ._http import HttpProvider, HttpReply, parse_retry_after

__all__ = ["GoogleCseProvider"]

_OPTIONS = ("lr", "safe", "gl", "hl", "dateRestrict", "siteSearch")
_AUTH_REASONS = {"keyInvalid", "keyExpired", "accessNotConfigured", "forbidden",
                 "ipRefererBlocked", "authError"}
_QUOTA_REASONS = {"dailyLimitExceeded", "dailyLimitExceededUnreg", "quotaExceeded",
                  "billingNotEnabled"}
_RATE_REASONS = {"rateLimitExceeded", "userRateLimitExceeded"}
_DATE_KEYS = ("article:published_time", "og:updated_time", "date", "dc.date")


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

    async def _request(self, query: str, k: int) -> HttpReply:
        params = {"key": self.api_key or "", "cx": self.settings.options["cx"], "q": query,
                  "num": str(min(k, 10))}
        for key in _OPTIONS:
            if self.settings.options.get(key):
                params[key] = self.settings.options[key]
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
