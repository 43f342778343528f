"""Tavily search API: ``POST /search`` with a bearer key and a JSON body.

Documented errors: 401 invalid key, 429 too many requests, 432 plan limit and
433 pay-as-you-go limit exceeded (quota), 5xx. Error bodies look like
``{"detail": {"error": "..."}}``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from streams import Hit

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

    async def _request(self, query: str, k: int) -> HttpReply:
        opts = self.settings.options
        body = {
            "query": query,
            "max_results": min(k, 20),
            "search_depth": opts.get("search_depth", "basic"),
            "topic": opts.get("topic", "general"),
            "include_answer": False,
            "include_raw_content": opts.get("include_raw_content", "false") == "true",
        }
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
