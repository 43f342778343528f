"""A local stand-in for the five search APIs, in their real wire formats, with fault injection.

One aiohttp app serves every provider under its own prefix:

    GET  /searxng/search?q=...&format=json          SearXNG JSON API
    GET  /brave/res/v1/web/search?q=...&count=...   Brave Web Search (X-Subscription-Token)
    GET  /google/customsearch/v1?key&cx&q&num       Google Custom Search JSON API
    POST /tavily/search  {"query", "max_results"}   Tavily (Authorization: Bearer)
    POST /duckduckgo/html/   q=...                  DuckDuckGo HTML results page

``web.mode[provider]`` picks a behaviour (``ok``, ``empty``, ``auth``, ``quota``,
``rate_limit``, ``unavailable``, ``html``, ``malformed``, ``schema``, ``slow``);
``web.random_faults[provider] = rate`` injects a seeded mix of faults instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import quote

from aiohttp import web
from aiohttp.test_utils import TestServer

from actors.providers import ProviderSettings

PROVIDERS = ("searxng", "brave", "google_cse", "tavily", "duckduckgo")
PREFIX = {"searxng": "/searxng", "brave": "/brave/res/v1/web/search",
          "google_cse": "/google/customsearch/v1", "tavily": "/tavily/search",
          "duckduckgo": "/duckduckgo/html/"}
API_KEY = "test-key-123"
FAULTS = ("rate_limit", "unavailable", "slow", "garbage")


def words(seed: str, n: int = 12) -> str:
    """Distinct pseudo-words per seed, so unrelated snippets never look alike."""
    return " ".join(hashlib.blake2b(f"{seed}/{j}".encode(), digest_size=4).hexdigest()
                    for j in range(n))


@dataclass
class Result:
    url: str
    title: str
    snippet: str
    content: str | None = None
    published: str | None = None


def default_results(provider: str, query: str, n: int = 3) -> list[Result]:
    slug = quote(query.replace(" ", "-"), safe="-")
    return [
        Result(url=f"https://{provider.replace('_', '-')}.test/{slug}/{i}",
               title=f"{provider} result {i} for {query}",
               snippet=words(f"{provider}|{query}|{i}"),
               published=f"2024-05-0{i + 1}T10:00:00")
        for i in range(n)
    ]


# --- the real formats ---------------------------------------------------------------------


def searxng_body(query: str, results: list[Result]) -> dict[str, Any]:
    return {
        "query": query, "number_of_results": 0,
        "results": [
            {"url": r.url, "title": r.title, "content": r.snippet, "engine": "duckduckgo",
             "parsed_url": ["https", r.url.split("/")[2], "/", "", "", ""], "template":
             "default.html", "engines": ["duckduckgo", "brave"], "positions": [i + 1],
             "publishedDate": r.published, "score": 1.0 / (i + 1), "category": "general"}
            for i, r in enumerate(results)
        ],
        "answers": [], "corrections": [], "infoboxes": [], "suggestions": [],
        "unresponsive_engines": [],
    }


def brave_body(query: str, results: list[Result]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "search",
        "query": {"original": query, "show_strict_warning": False, "is_navigational": False,
                  "spellcheck_off": True, "country": "us", "more_results_available": True},
        "mixed": {"type": "mixed", "main": [{"type": "web", "index": i, "all": False}
                                            for i in range(len(results))]},
    }
    if results:
        body["web"] = {"type": "search", "family_friendly": True, "results": [
            {"title": r.title, "url": r.url, "is_source_local": False, "is_source_both": False,
             "description": r.snippet, "page_age": r.published, "age": "May 1, 2024",
             "language": "en", "family_friendly": True, "type": "search_result",
             "subtype": "generic", "meta_url": {"scheme": "https", "netloc": r.url.split("/")[2]},
             **({"extra_snippets": [r.content]} if r.content else {})}
            for r in results]}
    return body


def google_body(query: str, results: list[Result]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "customsearch#search",
        "url": {"type": "application/json", "template": "https://www.googleapis.com/..."},
        "queries": {"request": [{"title": "Google Custom Search - " + query,
                                 "searchTerms": query, "count": len(results)}]},
        "context": {"title": "test engine"},
        "searchInformation": {"searchTime": 0.2, "formattedSearchTime": "0.20",
                              "totalResults": str(len(results)),
                              "formattedTotalResults": str(len(results))},
    }
    if results:  # the API omits "items" when nothing matched
        body["items"] = [
            {"kind": "customsearch#result", "title": r.title, "htmlTitle": escape(r.title),
             "link": r.url, "displayLink": r.url.split("/")[2], "snippet": r.snippet,
             "htmlSnippet": escape(r.snippet), "formattedUrl": r.url,
             "pagemap": {"metatags": [{"article:published_time": r.published}]}
             if r.published else {}}
            for r in results]
    return body


def tavily_body(query: str, results: list[Result]) -> dict[str, Any]:
    return {
        "query": query, "follow_up_questions": None, "answer": None, "images": [],
        "results": [{"title": r.title, "url": r.url, "content": r.snippet,
                     "score": round(0.9 - 0.1 * i, 3), "raw_content": r.content,
                     **({"published_date": r.published} if r.published else {})}
                    for i, r in enumerate(results)],
        "response_time": 0.42,
    }


def ddg_html(query: str, results: list[Result]) -> str:
    blocks = [
        '<div class="result results_links results_links_deep result--ad">'
        '<div class="links_main links_deep result__body"><h2 class="result__title">'
        '<a rel="nofollow" class="result__a" href="https://duckduckgo.com/y.js?ad_domain=ads.test">'
        'Sponsored thing</a></h2><a class="result__snippet" href="#">Buy now</a></div></div>'
    ] if results else []
    for r in results:
        href = "//duckduckgo.com/l/?uddg=" + quote(r.url, safe="") + "&amp;rut=abc123"
        blocks.append(
            '<div class="result results_links results_links_deep web-result ">'
            '<div class="links_main links_deep result__body">'
            f'<h2 class="result__title"><a rel="nofollow" class="result__a" href="{href}">'
            f"{escape(r.title)}</a></h2>"
            '<div class="result__extras"><div class="result__extras__url">'
            f'<a class="result__url" href="{href}">{escape(r.url)}</a></div></div>'
            f'<a class="result__snippet" href="{href}">{escape(r.snippet)}</a>'
            '<div class="clear"></div></div></div>')
    if not results:
        blocks.append('<div class="no-results">No  results.</div>')
    return ("<!DOCTYPE html><html><head><title>" + escape(query) + " at DuckDuckGo</title>"
            '</head><body><div id="links" class="results">' + "".join(blocks)
            + "</div></body></html>")


# --- the real error signalling ------------------------------------------------------------


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(body, status=status, headers=headers)


def error_response(provider: str, fault: str) -> web.Response:
    """``fault`` in each API's own way of saying it."""
    if fault == "html":
        return web.Response(status=200, content_type="text/html",
                            text="<!DOCTYPE html><html><body><h1>Just a moment...</h1>"
                                 "<form id='challenge-form'></form></body></html>")
    if fault == "malformed":
        return web.Response(status=200, content_type="application/json",
                            text='{"results": [{"url": "https://x.test/", "title": "tr')
    if fault == "unavailable":
        if provider == "google_cse":
            return _json(503, {"error": {"code": 503, "message": "The service is currently "
                                         "unavailable.", "status": "UNAVAILABLE"}})
        return web.Response(status=503, text="503 Service Unavailable")
    if fault == "rate_limit":
        if provider == "brave":
            return _json(429, {"type": "ErrorResponse", "error": {
                "id": "e1", "status": 429, "code": "RATE_LIMITED",
                "detail": "Request rate limit exceeded for plan.",
                "meta": {"plan": "Free", "rate_limit": 1, "rate_current": 2}},
                "time": 1700000000}, headers={"X-RateLimit-Reset": "0, 1419704"})
        if provider == "google_cse":
            return _json(429, {"error": {
                "code": 429, "status": "RESOURCE_EXHAUSTED",
                "message": "Quota exceeded for quota metric 'Queries' and limit 'Queries per "
                           "minute' of service 'customsearch.googleapis.com'",
                "errors": [{"message": "rate", "domain": "global",
                            "reason": "rateLimitExceeded"}]}}, headers={"Retry-After": "0"})
        if provider == "tavily":
            return _json(429, {"detail": {"error": "Your request has been blocked due to "
                                          "excessive requests."}}, headers={"Retry-After": "0"})
        if provider == "duckduckgo":
            return web.Response(status=202, content_type="text/html",
                                text='<html><body><div class="anomaly-modal">Unfortunately, '
                                     "bots use DuckDuckGo too.</div></body></html>")
        return web.Response(status=429, text="Too Many Requests", headers={"Retry-After": "0"})
    if fault == "auth":
        if provider == "brave":
            return _json(422, {"type": "ErrorResponse", "error": {
                "id": "e2", "status": 422, "code": "SUBSCRIPTION_TOKEN_INVALID",
                "detail": "The provided subscription token is invalid."}, "time": 1})
        if provider == "google_cse":
            return _json(400, {"error": {
                "code": 400, "message": "API key not valid. Please pass a valid API key.",
                "errors": [{"message": "API key not valid.", "domain": "global",
                            "reason": "badRequest"}], "status": "INVALID_ARGUMENT",
                "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                             "reason": "API_KEY_INVALID"}]}})
        if provider == "tavily":
            return _json(401, {"detail": {"error": "Unauthorized: missing or invalid API key."}})
        return web.Response(status=403, text="403 Forbidden")  # searxng: json format disabled
    if fault == "quota":
        if provider == "brave":
            return _json(429, {"type": "ErrorResponse", "error": {
                "id": "e3", "status": 429, "code": "QUOTA_LIMITED",
                "detail": "Request quota limit exceeded for plan."}, "time": 1})
        if provider == "google_cse":
            return _json(429, {"error": {
                "code": 429, "status": "RESOURCE_EXHAUSTED",
                "message": "Quota exceeded for quota metric 'Queries' and limit 'Queries per "
                           "day' of service 'customsearch.googleapis.com'",
                "errors": [{"message": "quota", "domain": "global",
                            "reason": "rateLimitExceeded"}]}})
        if provider == "tavily":
            return _json(432, {"detail": {"error": "This request exceeds your plan's set "
                                          "usage limit. Please upgrade your plan."}})
        return web.Response(status=402, text="Payment Required")
    raise ValueError(fault)


def schema_error_body(provider: str) -> web.Response:
    bodies: dict[str, Any] = {
        "searxng": {"query": "x", "results": [{"title": "no url here"}]},
        "brave": {"web": {"results": [{"title": "t"}]}},  # no "type", no url
        "google_cse": {"kind": "customsearch#search", "items": [{"title": "no link"}]},
        "tavily": {"query": "x", "results": "not a list"},
    }
    if provider == "duckduckgo":
        return web.Response(status=200, content_type="text/html",
                            text="<html><body><p>Welcome to a page that is not a SERP"
                                 "</p></body></html>")
    return _json(200, bodies[provider])


# --- the server -------------------------------------------------------------------------------


@dataclass
class FakeWeb:
    """State of the fake APIs; tests flip ``mode``/``latency``/``results`` per provider."""

    base: str = ""
    mode: dict[str, str] = field(default_factory=lambda: dict.fromkeys(PROVIDERS, "ok"))
    latency: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PROVIDERS, 0.0))
    results: dict[str, list[Result]] = field(default_factory=dict)
    random_faults: dict[str, float] = field(default_factory=dict)
    slow_s: float = 5.0
    seed: int = 7
    requests: Counter[str] = field(default_factory=Counter)
    served_ok: list[tuple[str, str]] = field(default_factory=list)
    faults_served: Counter[tuple[str, str]] = field(default_factory=Counter)
    last_request: dict[str, dict[str, Any]] = field(default_factory=dict)
    _closing: asyncio.Event = field(default_factory=asyncio.Event)
    _rng: random.Random = field(default_factory=random.Random)

    def url(self, provider: str) -> str:
        return self.base + PREFIX[provider]

    def settings(self, provider: str, **kw: Any) -> ProviderSettings:
        opts = {"cx": "engine-1"} if provider == "google_cse" else {}
        opts.update(kw.pop("options", {}))
        defaults: dict[str, Any] = {"kind": provider, "base_url": self.url(provider),
                                    "options": opts, "timeout_s": 5.0}
        if provider in ("brave", "google_cse", "tavily"):
            defaults["api_key"] = API_KEY
        defaults.update(kw)
        return ProviderSettings(**defaults)

    async def _pause(self, seconds: float) -> None:
        if seconds > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), seconds)

    def _pick_fault(self, provider: str) -> str:
        rate = self.random_faults.get(provider)
        if rate is None:
            return self.mode[provider]
        if self._rng.random() >= rate:
            return "ok"
        return self._rng.choice(FAULTS)

    async def handle(self, request: web.Request, provider: str) -> web.StreamResponse:
        self.requests[provider] += 1
        payload: dict[str, Any] = {}
        fields: dict[str, str] = {}
        if request.method == "POST":
            if provider == "tavily":
                payload = await request.json()
                query, k = str(payload.get("query", "")), int(payload.get("max_results", 10))
            else:
                form = await request.post()
                fields = {key: str(value) for key, value in form.items()}
                query, k = str(form.get("q", "")), 10
        else:
            query = request.query.get("q", "")
            k = int(request.query.get("count") or request.query.get("num") or 10)
        # what arrived on the wire: query parameters, a JSON body, form fields
        self.last_request[provider] = {"query": query, "k": k, "headers": dict(request.headers),
                                       "params": dict(request.query), "json": payload,
                                       "form": fields}
        if not self._authorised(provider, request):
            return error_response(provider, "auth")
        await self._pause(self.latency[provider])
        fault = self._pick_fault(provider)
        if fault != "ok":
            self.faults_served[(provider, fault)] += 1
        slow = fault == "slow"
        if slow:
            await self._pause(self.slow_s)
            fault = "ok"
        elif fault == "garbage":
            fault = self._rng.choice(("html", "malformed", "schema"))
        if fault == "schema":
            return schema_error_body(provider)
        if fault not in ("ok", "empty"):
            return error_response(provider, fault)
        results = [] if fault == "empty" else self.results.get(
            provider, default_results(provider, query))[:k]
        if not slow:  # a slow answer reaches nobody: the client gave up on it
            self.served_ok.append((provider, query))
        if provider == "duckduckgo":
            return web.Response(text=ddg_html(query, results), content_type="text/html")
        body = {"searxng": searxng_body, "brave": brave_body, "google_cse": google_body,
                "tavily": tavily_body}[provider](query, results)
        return web.json_response(body)

    def _authorised(self, provider: str, request: web.Request) -> bool:
        if provider == "brave":
            return request.headers.get("X-Subscription-Token") == API_KEY
        if provider == "google_cse":
            return request.query.get("key") == API_KEY and bool(request.query.get("cx"))
        if provider == "tavily":
            return request.headers.get("Authorization") == f"Bearer {API_KEY}"
        if provider == "searxng":
            return request.query.get("format") == "json"
        return True

    def app(self) -> web.Application:
        app = web.Application()

        def route(provider: str) -> Any:
            async def handler(request: web.Request) -> web.StreamResponse:
                return await self.handle(request, provider)
            return handler

        app.router.add_get("/searxng/search", route("searxng"))
        app.router.add_get(PREFIX["brave"], route("brave"))
        app.router.add_get(PREFIX["google_cse"], route("google_cse"))
        app.router.add_post(PREFIX["tavily"], route("tavily"))
        app.router.add_post(PREFIX["duckduckgo"], route("duckduckgo"))
        return app


@asynccontextmanager
async def fake_web(seed: int = 7) -> AsyncIterator[FakeWeb]:
    """Start the fake APIs on 127.0.0.1; stops them (and wakes slow handlers) on exit."""
    state = FakeWeb(seed=seed)
    state._rng.seed(seed)
    server = TestServer(state.app(), host="127.0.0.1")
    await server.start_server()
    state.base = str(server.make_url("")).rstrip("/")
    try:
        yield state
    finally:
        state._closing.set()
        await server.close()

