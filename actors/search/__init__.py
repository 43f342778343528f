"""Web search: fan-out over providers, merge, dedup, blacklist, and the searcher actor."""

from ._searcher import Searcher, SearchOutcome, SearchStats, SeenUrls, filters_problem
from ._searcher_actor import SearcherActor

__all__ = [
    "SearchOutcome",
    "SearchStats",
    "Searcher",
    "SearcherActor",
    "SeenUrls",
    "filters_problem",
]
