"""DuckDuckGo without a key: the HTML endpoint ``html.duckduckgo.com/html/`` (selectolax).

Results are ``div.result`` blocks (ads carry ``result--ad`` and are skipped);
the link ``a.result__a`` points through ``//duckduckgo.com/l/?uddg=<url>``,
which is unwrapped. A page with ``.no-results`` is an empty result; a bot
challenge (HTTP 202, ``anomaly-modal`` or a challenge form) is a rate limit; a
page with neither results nor the results container is a bad response.

Filters: ``df`` (``d``/``w``/``m``/``y``, the smallest past window reaching
back to ``date_from``). ``kl`` is a region, not a language, and ``site:`` in
the query is not sent; the searcher filters by host instead.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from urllib.parse import parse_qs, urlsplit

from selectolax.lexbor import LexborHTMLParser, LexborNode

from streams import Hit, SearchFilters

from ._exceptions import ProviderBadResponse, ProviderError, ProviderRateLimited
from ._filtering import FilterPlan, TimeWindow, UnappliedFilter, relative_date
from ._http import HttpProvider, HttpReply, parse_retry_after

__all__ = ["DuckDuckGoProvider"]

_DF: dict[TimeWindow, str] = {"day": "d", "week": "w", "month": "m", "year": "y"}


class DuckDuckGoProvider(HttpProvider):
    """DuckDuckGo HTML adapter (``options.region``: a ``kl`` code such as ``us-en``)."""

    kind = "duckduckgo"
    default_base_url = "https://html.duckduckgo.com/html/"
    needs_api_key = False
    supported_filters = frozenset({"date"})

    def _plan(self, filters: SearchFilters, today: _dt.date) -> FilterPlan:
        params: dict[str, str | tuple[str, ...]] = {}
        unapplied: list[UnappliedFilter] = []
        window, missing = relative_date(filters, today, "df")
        if window is not None:
            params["df"] = _DF[window]
        if missing is not None:
            unapplied.append(missing)
        why = "the HTML endpoint has no site parameter; filtered by host instead"
        unapplied += [UnappliedFilter(n, why) for n in ("sites", "exclude_sites")
                      if getattr(filters, n)]
        if filters.language:
            unapplied.append(UnappliedFilter("language", "kl selects a region, set by "
                                                         "options.region, not a language"))
        if filters.doc_types:
            unapplied.append(UnappliedFilter("doc_types", "no file-type parameter"))
        return FilterPlan(params=params, unapplied=tuple(unapplied))

    async def _request(self, query: str, k: int,
                       filter_params: Mapping[str, str | tuple[str, ...]] | None = None,
                       ) -> HttpReply:
        data = {"q": query, "b": ""}
        if self.settings.options.get("region"):
            data["kl"] = self.settings.options["region"]
        for key, value in (filter_params or {}).items():
            data[key] = value if isinstance(value, str) else ",".join(value)
        headers = {"Accept": "text/html", "Referer": "https://html.duckduckgo.com/"}
        return await self._fetch("POST", self.base_url, data=data, headers=headers)

    def _classify(self, reply: HttpReply) -> ProviderError | None:
        if reply.status == 403:
            return ProviderRateLimited("HTTP 403: blocked as a bot", provider=self.name,
                                       status=403,
                                       retry_after=parse_retry_after(reply.headers.get("Retry-After")))
        return None

    def _parse(self, reply: HttpReply, query: str, k: int) -> list[Hit]:
        if "html" not in reply.content_type:
            raise ProviderBadResponse(f"expected an HTML page, got {reply.content_type!r}",
                                      provider=self.name, status=reply.status)
        tree = LexborHTMLParser(reply.text())
        if (reply.status == 202 or tree.css_first(".anomaly-modal, #challenge-form") is not None):
            raise ProviderRateLimited("bot challenge instead of results", provider=self.name,
                                      status=reply.status)
        blocks = tree.css("div.result")
        if not blocks:
            if tree.css_first(".no-results") is not None:
                return []
            if tree.css_first("#links, .serp__results, .results") is None:
                raise ProviderBadResponse("not a DuckDuckGo results page", provider=self.name,
                                          status=reply.status)
            return []
        hits: list[Hit] = []
        for block in blocks:
            if "result--ad" in (block.attributes.get("class") or ""):
                continue
            hit = self._block_hit(block)
            if hit is not None:
                hits.append(hit)
            if len(hits) >= k:
                break
        return hits

    def _block_hit(self, block: LexborNode) -> Hit | None:
        link = block.css_first("a.result__a")
        if link is None:
            return None
        url = _unwrap(link.attributes.get("href") or "")
        snippet = block.css_first(".result__snippet")
        return self._hit(
            url=url,
            title=link.text(strip=False).strip(),
            snippet=" ".join(snippet.text(strip=False).split()) if snippet is not None else "",
        )


def _unwrap(href: str) -> str:
    """The target of a ``/l/?uddg=`` redirect link, else ``href`` made absolute."""
    if href.startswith("//"):
        href = "https:" + href
    parts = urlsplit(href)
    if parts.path.startswith("/l/"):
        target = parse_qs(parts.query).get("uddg")
        if target:
            return target[0]
    return href
