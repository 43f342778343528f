"""The one small protocol every search provider implements (web APIs and local corpora)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from streams import Hit

__all__ = ["SearchProvider", "time_left"]


@runtime_checkable
class SearchProvider(Protocol):
    """A source of search hits.

    ``deadline`` is an absolute ``asyncio`` loop time (``loop.time()``) after
    which the caller no longer waits; ``None`` means no deadline. A provider
    raises a ``ProviderError`` subclass on failure (never returns garbage) and
    must not outlive the deadline.
    """

    name: str

    async def search(self, query: str, k: int, deadline: float | None) -> Sequence[Hit]:
        """Return up to ``k`` hits for ``query``, best first."""
        ...


def time_left(deadline: float | None) -> float | None:
    """Seconds until ``deadline`` (never negative), or ``None`` for no deadline."""
    if deadline is None:
        return None
    return max(0.0, deadline - asyncio.get_running_loop().time())
