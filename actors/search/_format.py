"""The search tool's output: a text block for models and structured data for UIs.

Models read numbered results with short, truncated content and a hint that the
full page can be read (scraped) by URL; UIs get the same results as data with
a ``display_type`` so they can render cards instead of text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from streams import ErrorInfo, Hit

__all__ = ["SearchResultItem", "SearchToolOutput", "format_for_model", "tool_output"]

READ_HINT = "[truncated: scrape this URL to read the full page]"


class SearchResultItem(BaseModel):
    """One result as a UI shows it."""

    model_config = ConfigDict(frozen=True)

    index: int
    title: str
    url: str
    snippet: str
    source: str = ""
    published_at: str | None = None
    truncated: bool = False


class SearchToolOutput(BaseModel):
    """What the search tool returns: ``text`` for the model, ``results`` for a UI."""

    model_config = ConfigDict(frozen=True)

    display_type: Literal["search_results"] = "search_results"
    query: str = ""
    text: str
    results: tuple[SearchResultItem, ...] = ()
    errors: tuple[str, ...] = ()


def _truncate(text: str, limit: int) -> tuple[str, bool]:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text, False
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,.;:") + "…", True


def _items(hits: Sequence[Hit], max_chars: int) -> list[SearchResultItem]:
    items = []
    for i, hit in enumerate(hits, 1):
        body = hit.content or hit.snippet or ""
        text, cut = _truncate(body, max_chars)
        items.append(SearchResultItem(
            index=i, title=" ".join(hit.title.split()) or hit.url, url=hit.url, snippet=text,
            source=hit.source, published_at=hit.published_at, truncated=cut))
    return items


def format_for_model(
    hits: Sequence[Hit], *, query: str = "", max_chars: int = 500,
    errors: Sequence[ErrorInfo] = (),
) -> str:
    """Numbered results with truncated content, ready to paste into a prompt.

    Args:
        hits: merged hits, best first.
        query: shown in the header when given.
        max_chars: content kept per result; longer content ends with a hint to
            scrape the page.
        errors: provider failures, listed briefly so the model knows results
            may be partial.
    """
    header = f'Search results for "{query}"' if query else "Search results"
    lines = [f"{header}:" if hits else f"{header}: no results. Try other words."]
    for item in _items(hits, max_chars):
        lines.append("")
        lines.append(f"[{item.index}] {item.title}")
        lines.append(f"    URL: {item.url}")
        if item.published_at:
            lines.append(f"    Published: {item.published_at}")
        if item.snippet:
            lines.append(f"    {item.snippet}")
        if item.truncated:
            lines.append(f"    {READ_HINT}")
    if errors:
        lines.append("")
        lines.append("Note: some providers failed, results may be incomplete: "
                     + "; ".join(e.message for e in errors))
    return "\n".join(lines)


def tool_output(
    hits: Sequence[Hit], *, query: str = "", max_chars: int = 500,
    errors: Sequence[ErrorInfo] = (),
) -> SearchToolOutput:
    """The model text and the structured results together."""
    return SearchToolOutput(
        query=query,
        text=format_for_model(hits, query=query, max_chars=max_chars, errors=errors),
        results=tuple(_items(hits, max_chars)),
        errors=tuple(e.message for e in errors),
    )
