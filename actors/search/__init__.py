"""Web search: fan-out over providers, merge, dedup, blacklist, and the searcher actor."""

from ._format import SearchResultItem, SearchToolOutput, format_for_model, tool_output
from ._searcher import Searcher, SearchOutcome, SearchStats, SeenUrls, filters_problem
from ._searcher_actor import SearcherActor

__all__ = [
    "SearchOutcome",
    "SearchResultItem",
    "SearchStats",
    "SearchToolOutput",
    "Searcher",
    "SearcherActor",
    "SeenUrls",
    "filters_problem",
    "format_for_model",
    "tool_output",
]
