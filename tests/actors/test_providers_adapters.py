"""Each web adapter against a local server speaking the real API format."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actors.providers import (
    BraveProvider,
    DuckDuckGoProvider,
    GoogleCseProvider,
    HttpProvider,
    ProviderAuthError,
    ProviderBadResponse,
    ProviderNotConfigured,
    ProviderQuotaError,
    ProviderRateLimited,
    ProviderSettings,
    ProviderTimeout,
    ProviderUnavailable,
    SearchProvider,
    SearxngProvider,
    TavilyProvider,
)
from actors.providers._http import HttpReply

from ._web_fixtures import PROVIDERS, FakeWeb, Result, default_results, fake_web

CLASSES: dict[str, type[HttpProvider]] = {
    "searxng": SearxngProvider, "brave": BraveProvider, "google_cse": GoogleCseProvider,
    "tavily": TavilyProvider, "duckduckgo": DuckDuckGoProvider,
}
KEYED = ("brave", "google_cse", "tavily")


def make(web: FakeWeb, provider: str, **kw: Any) -> HttpProvider:
    return CLASSES[provider](web.settings(provider, **kw), name=provider)


async def search(web: FakeWeb, provider: str, query: str = "rust async", k: int = 10,
                 deadline_s: float | None = 5.0, **kw: Any) -> list[Any]:
    async with make(web, provider, **kw) as p:
        deadline = None if deadline_s is None else asyncio.get_running_loop().time() + deadline_s
        return list(await p.search(query, k, deadline))


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_happy_path_maps_the_real_format_to_hits(provider: str) -> None:
    async with fake_web() as web:
        hits = await search(web, provider)
        assert isinstance(make(web, provider), SearchProvider)
    expected = default_results(provider, "rust async")
    assert [h.url for h in hits] == [r.url for r in expected]
    assert [h.title for h in hits] == [r.title for r in expected]
    assert [h.snippet for h in hits] == [r.snippet for r in expected]
    assert {h.source for h in hits} == {provider}
    if provider != "duckduckgo":  # the HTML page carries no dates
        assert [h.published_at for h in hits] == [r.published for r in expected]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_request_carries_query_count_and_credentials(provider: str) -> None:
    async with fake_web() as web:
        await search(web, provider, query="héllo world", k=4)
        seen = web.last_request[provider]
    assert seen["query"] == "héllo world"
    if provider in ("brave", "google_cse", "tavily"):
        assert seen["k"] == 4
    if provider == "searxng":
        assert seen["params"]["format"] == "json"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_k_caps_the_hits(provider: str) -> None:
    async with fake_web() as web:
        web.results[provider] = default_results(provider, "q", n=8)
        hits = await search(web, provider, query="q", k=2)
    assert len(hits) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_empty_result_is_an_empty_list_not_an_error(provider: str) -> None:
    async with fake_web() as web:
        web.mode[provider] = "empty"
        assert await search(web, provider) == []


ERRORS: list[tuple[str, str, type[Exception]]] = [
    *[(p, "auth", ProviderAuthError) for p in ("searxng", *KEYED)],
    *[(p, "quota", ProviderQuotaError) for p in ("searxng", *KEYED)],
    *[(p, "rate_limit", ProviderRateLimited) for p in PROVIDERS],
    *[(p, "unavailable", ProviderUnavailable) for p in PROVIDERS],
    *[(p, "html", ProviderBadResponse) for p in ("searxng", *KEYED)],
    ("duckduckgo", "html", ProviderRateLimited),  # a challenge page instead of results
    *[(p, "malformed", ProviderBadResponse) for p in PROVIDERS],
    *[(p, "schema", ProviderBadResponse) for p in PROVIDERS],
]


@pytest.mark.parametrize(("provider", "fault", "error"), ERRORS)
async def test_each_error_signal_becomes_its_typed_error(
    provider: str, fault: str, error: type[Exception]
) -> None:
    async with fake_web() as web:
        web.mode[provider] = fault
        with pytest.raises(error) as info:
            await search(web, provider)
    assert info.value.provider == provider  # type: ignore[attr-defined]
    assert str(info.value).startswith(f"{provider}: ")


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_slow_response_past_the_deadline_is_a_timeout(provider: str) -> None:
    async with fake_web() as web:
        web.mode[provider] = "slow"
        with pytest.raises(ProviderTimeout) as info:
            await search(web, provider, deadline_s=0.2)
    assert isinstance(info.value, TimeoutError)
    assert info.value.retryable


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_timeout_setting_caps_a_call_without_deadline(provider: str) -> None:
    async with fake_web() as web:
        web.mode[provider] = "slow"
        with pytest.raises(ProviderTimeout):
            await search(web, provider, deadline_s=None, timeout_s=0.2)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_connection_refused_is_unavailable(provider: str) -> None:
    async with fake_web() as web:
        url = web.url(provider)
    # the server is gone: the port refuses connections
    settings = ProviderSettings(kind=provider, base_url=url, api_key="k",
                                options={"cx": "c"} if provider == "google_cse" else {})
    async with CLASSES[provider](settings) as p:
        with pytest.raises(ProviderUnavailable):
            await p.search("q", 3, None)


async def test_rate_limit_carries_retry_after_from_the_api() -> None:
    async with fake_web() as web:
        for provider in ("searxng", "brave", "tavily"):
            web.mode[provider] = "rate_limit"
            with pytest.raises(ProviderRateLimited) as info:
                await search(web, provider)
            assert info.value.retry_after == 0.0, provider


async def test_unresponsive_engines_with_no_results_is_an_outage() -> None:
    async with fake_web() as web:
        web.mode["searxng"] = "ok"
        web.results["searxng"] = []
        provider = make(web, "searxng")
        reply = HttpReply(200, {}, b'{"query":"q","results":[],"unresponsive_engines":'
                          b'[["google","timeout"],["brave","HTTP error"]]}', "application/json")
        with pytest.raises(ProviderUnavailable, match="google: timeout"):
            provider._parse(reply, "q", 5)
        await provider.aclose()


def _reply(status: int, body: str, headers: dict[str, str] | None = None) -> HttpReply:
    return HttpReply(status, headers or {}, body.encode(), "application/json")


def test_google_daily_limit_is_quota_and_per_minute_is_rate_limit() -> None:
    p = GoogleCseProvider(ProviderSettings(kind="google_cse", api_key="k", options={"cx": "c"}))
    daily = _reply(403, '{"error":{"code":403,"message":"Daily Limit Exceeded","errors":'
                        '[{"reason":"dailyLimitExceeded","domain":"usageLimits"}]}}')
    with pytest.raises(ProviderQuotaError):
        p._raise_for_status(daily)
    minute = _reply(429, '{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":'
                         '"Quota exceeded for quota metric Queries and limit Queries per minute"}}')
    with pytest.raises(ProviderRateLimited):
        p._raise_for_status(minute)


def test_a_503_keeps_its_retry_after_for_the_retry_layer() -> None:
    """A provider in maintenance says when to come back; the health layer reads it."""
    p = SearxngProvider(ProviderSettings(kind="searxng", base_url="http://127.0.0.1:9"))
    with pytest.raises(ProviderUnavailable) as info:
        p._raise_for_status(_reply(503, "maintenance", {"Retry-After": "30"}))
    assert info.value.retry_after == 30.0 and info.value.retryable


def test_tavily_pay_as_you_go_limit_is_quota() -> None:
    p = TavilyProvider(ProviderSettings(kind="tavily", api_key="k"))
    with pytest.raises(ProviderQuotaError):
        p._raise_for_status(_reply(433, '{"detail":{"error":"exceeds the pay-as-you-go limit"}}'))


def test_retry_after_http_date_is_understood() -> None:
    from actors.providers import parse_retry_after

    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


async def test_duckduckgo_skips_ads_and_unwraps_redirect_links() -> None:
    async with fake_web() as web:
        web.results["duckduckgo"] = [Result(url="https://a.test/x?y=1&z=2", title="A & B",
                                            snippet="first  result\ntext")]
        hits = await search(web, "duckduckgo")
    assert [(h.url, h.title, h.snippet) for h in hits] == [
        ("https://a.test/x?y=1&z=2", "A & B", "first result text")]


async def test_results_without_http_urls_are_dropped() -> None:
    async with fake_web() as web:
        web.results["tavily"] = [Result(url="javascript:alert(1)", title="x", snippet="s"),
                                 Result(url="https://ok.test/", title="ok", snippet="s")]
        hits = await search(web, "tavily")
    assert [h.url for h in hits] == ["https://ok.test/"]


# --- refused before any network call ----------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "settings", "match"),
    [
        (BraveProvider, ProviderSettings(kind="brave"), "no api key"),
        (TavilyProvider, ProviderSettings(kind="tavily", api_key_env="NO_SUCH_VAR_XYZ"),
         "NO_SUCH_VAR_XYZ"),
        (GoogleCseProvider, ProviderSettings(kind="google_cse", api_key="k"), "cx"),
        (SearxngProvider, ProviderSettings(kind="searxng"), "base_url"),
        (SearxngProvider, ProviderSettings(kind="searxng", base_url="ftp://x"), "http"),
    ],
)
def test_unconfigured_provider_refuses_at_construction(
    cls: type[HttpProvider], settings: ProviderSettings, match: str
) -> None:
    with pytest.raises(ProviderNotConfigured, match=match):
        cls(settings, env={})


async def test_unconfigured_provider_never_reaches_the_network() -> None:
    async with fake_web() as web:
        with pytest.raises(ProviderNotConfigured):
            BraveProvider(web.settings("brave", api_key=None), env={})
        assert web.requests["brave"] == 0


async def test_api_key_from_env_and_from_secret_file(tmp_path: Any) -> None:
    async with fake_web() as web:
        secret = tmp_path / "tavily.key"
        secret.write_text("test-key-123\n")
        by_file = TavilyProvider(web.settings("tavily", api_key=None, api_key_file=secret))
        by_env = BraveProvider(web.settings("brave", api_key=None, api_key_env="BRAVE_KEY"),
                               env={"BRAVE_KEY": "test-key-123"})
        async with by_file, by_env:
            assert await by_file.search("q", 3, None)
            assert await by_env.search("q", 3, None)


async def test_wrong_key_is_an_auth_error_from_the_server() -> None:
    async with fake_web() as web:
        with pytest.raises(ProviderAuthError):
            await search(web, "tavily", api_key="wrong")
