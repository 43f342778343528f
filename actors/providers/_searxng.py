"""SearXNG: the self-hosted metasearch engine, through its JSON search API.

``GET {base_url}/search?q=...&format=json``. The instance must list ``json``
under ``search.formats`` in ``settings.yml``; otherwise it answers 403, which
is reported as an auth error with that hint. When every upstream engine of the
instance failed, SearXNG still answers 200 with no results and the engines in
``unresponsive_engines``: that is an outage, not an empty result.

Filters: ``time_range`` (day/week/month/year, the smallest that reaches back
to ``date_from``) and ``language``. Sites are not sent: ``site:`` in the
query works only on some upstream engines, so the searcher filters by host.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from streams import Hit, SearchFilters

from ._exceptions import ProviderAuthError, ProviderError, ProviderUnavailable
from ._filtering import FilterPlan, UnappliedFilter, relative_date
from ._http import HttpProvider, HttpReply

__all__ = ["SearxngProvider"]

_OPTIONS = ("categories", "engines", "language", "safesearch", "time_range")


class _Result(BaseModel):
    model_config = ConfigDict(extra="ignore")

    url: str
    title: str = ""
    content: str | None = None
    engine: str | None = None
    publishedDate: str | None = None  # the API's field name
    score: float | None = None


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore")

    query: str | int | float | None = None
    results: list[_Result]
    unresponsive_engines: list[Any] = []


class SearxngProvider(HttpProvider):
    """SearXNG JSON API adapter (no key; ``base_url`` is the instance root)."""

    kind = "searxng"
    needs_api_key = False
    supported_filters = frozenset({"date", "language"})

    def _plan(self, filters: SearchFilters, today: _dt.date) -> FilterPlan:
        params: dict[str, str | tuple[str, ...]] = {}
        unapplied: list[UnappliedFilter] = []
        window, missing = relative_date(filters, today, "time_range")
        if window is not None:
            params["time_range"] = window
        if missing is not None:
            unapplied.append(missing)
        if filters.language:
            params["language"] = filters.language
        why = "site: in the query depends on the upstream engine; filtered by host instead"
        unapplied += [UnappliedFilter(n, why) for n in ("sites", "exclude_sites")
                      if getattr(filters, n)]
        if filters.doc_types:
            unapplied.append(UnappliedFilter("doc_types", "SearXNG has no file-type parameter"))
        return FilterPlan(params=params, unapplied=tuple(unapplied))

    async def _request(self, query: str, k: int,
                       filter_params: Mapping[str, str | tuple[str, ...]] | None = None,
                       ) -> HttpReply:
        params = {"q": query, "format": "json", "pageno": "1"}
        for key in _OPTIONS:
            if self.settings.options.get(key):
                params[key] = self.settings.options[key]
        for key, value in (filter_params or {}).items():  # the request's filters win
            params[key] = value if isinstance(value, str) else ",".join(value)
        headers = {"Accept": "application/json"}
        if self.api_key:  # instances behind an auth proxy
            headers["Authorization"] = f"Bearer {self.api_key}"
        return await self._fetch("GET", self.base_url / "search", params=params, headers=headers)

    def _classify(self, reply: HttpReply) -> ProviderError | None:
        if reply.status == 403:
            return ProviderAuthError(
                "HTTP 403: the instance refuses the JSON API (add `json` to search.formats "
                "in settings.yml) or the request", provider=self.name, status=403)
        return None

    def _parse(self, reply: HttpReply, query: str, k: int) -> list[Hit]:
        doc = self._validate(_Response, self._json(reply))
        if not doc.results and doc.unresponsive_engines:
            engines = ", ".join(_engine_name(e) for e in doc.unresponsive_engines)
            raise ProviderUnavailable(f"every engine was unresponsive ({engines})",
                                      provider=self.name, status=reply.status)
        hits = [
            self._hit(url=r.url, title=r.title, snippet=r.content or "",
                      published_at=r.publishedDate, score=r.score)
            for r in doc.results
        ]
        return [h for h in hits if h is not None]


def _engine_name(entry: Any) -> str:
    if isinstance(entry, list | tuple) and entry:
        return ": ".join(str(x) for x in entry)
    return str(entry)
