"""Tavily search API: ``POST /search`` with a bearer key and a JSON body.

Documented errors: 401 invalid key, 429 too many requests, 432 plan limit and
433 pay-as-you-go limit exceeded (quota), 5xx. Error bodies look like
``{"detail": {"error": "..."}}``.

Filters: ``start_date``/``end_date`` (``YYYY-MM-DD``, inclusive, any topic;
the older ``days`` works only with ``topic: news``), ``include_domains`` and
``exclude_domains`` (a domain covers its subdomains). Tavily has no language
parameter.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from streams import Hit, SearchFilters

from ._filtering import FilterPlan, UnappliedFilter, site_host
from ._http import HttpProvider, HttpReply

__all__ = ["TavilyProvider"]


class _Result(BaseModel):
    model_config = ConfigDict(extra="ignore")

    url: str
    title: str = ""
    content: str = ""
    score: float | None = None
    raw_content: str | None = None
    published_date: str | None = None


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore")

    query: str
    results: list[_Result]


class TavilyProvider(HttpProvider):
    """Tavily adapter (``options``: ``search_depth``, ``topic``, ``include_raw_content``)."""

    kind = "tavily"
    default_base_url = "https://api.tavily.com/search"
    supported_filters = frozenset({"date", "sites", "exclude_sites"})

    def _plan(self, filters: SearchFilters, today: _dt.date) -> FilterPlan:
        params: dict[str, str | tuple[str, ...]] = {}
        unapplied: list[UnappliedFilter] = []
        if filters.date_from:
            params["start_date"] = filters.date_from
        if filters.date_to:
            params["end_date"] = filters.date_to
        if filters.sites:
            params["include_domains"] = tuple(site_host(x) for x in filters.sites)
        if filters.exclude_sites:
            params["exclude_domains"] = tuple(site_host(x) for x in filters.exclude_sites)
        if filters.language:
            unapplied.append(UnappliedFilter("language", "Tavily has no language parameter"))
        if filters.doc_types:
            unapplied.append(UnappliedFilter("doc_types", "Tavily has no file-type parameter"))
        return FilterPlan(params=params, unapplied=tuple(unapplied))

    async def _request(self, query: str, k: int,
                       filter_params: Mapping[str, str | tuple[str, ...]] | None = None,
                       ) -> HttpReply:
        opts = self.settings.options
        body: dict[str, Any] = {
            "query": query,
            "max_results": min(k, 20),
            "search_depth": opts.get("search_depth", "basic"),
            "topic": opts.get("topic", "general"),
            "include_answer": False,
            "include_raw_content": opts.get("include_raw_content", "false") == "true",
        }
        for key, value in (filter_params or {}).items():
            body[key] = value if isinstance(value, str) else list(value)
        headers = {"Authorization": f"Bearer {self.api_key}", "Accept": "application/json"}
        return await self._fetch("POST", self.base_url, json_body=body, headers=headers)

    def _parse(self, reply: HttpReply, query: str, k: int) -> list[Hit]:
        doc = self._validate(_Response, self._json(reply))
        hits = [
            self._hit(url=r.url, title=r.title, snippet=r.content, content=r.raw_content,
                      score=r.score, published_at=r.published_date)
            for r in doc.results
        ]
        return [h for h in hits if h is not None]
