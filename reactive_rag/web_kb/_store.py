"""All live sessions' knowledge bases, with a TTL and cleanup.

A session's state is dropped when the session ends (:meth:`WebKbStore.end`)
or when it was not used for ``ttl_s`` (:meth:`WebKbStore.sweep`, run
periodically while the store is entered with ``async with``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from types import TracebackType
from typing import Self

from reactive_rag.index import EmbedderLike

from ._hybrid import HybridWebKbIndex
from ._index import Bm25WebKbIndex, WebKbIndex
from ._kb import WebKnowledgeBase

__all__ = ["WebKbStore"]


class WebKbStore:
    """Creates, hands out and cleans up per-session knowledge bases.

    Args:
        ttl_s: idle time after which a session's state is dropped.
        embedder: if given (and no ``index_factory``), each session gets a hybrid
            BM25 + dense index over the corpus index, sharing this embedder;
            otherwise an in-memory BM25 index (no model needed).
        index_factory: makes each session's temporary index (overrides ``embedder``).
        clock: monotonic seconds (tests pass a fake clock).
        sweep_interval_s: how often the background sweeper runs (default ``ttl_s / 4``).
    """

    def __init__(
        self,
        ttl_s: float = 1800.0,
        *,
        embedder: EmbedderLike | None = None,
        index_factory: Callable[[], WebKbIndex] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sweep_interval_s: float | None = None,
    ) -> None:
        if ttl_s <= 0:
            raise ValueError("ttl_s must be positive")
        self.ttl_s = ttl_s
        if index_factory is None:
            if embedder is not None:
                shared = embedder

                def index_factory() -> WebKbIndex:
                    return HybridWebKbIndex(shared)
            else:
                index_factory = Bm25WebKbIndex
        self._factory: Callable[[], WebKbIndex] = index_factory
        self._clock = clock
        self._interval = sweep_interval_s if sweep_interval_s is not None else ttl_s / 4
        self._sessions: dict[str, WebKnowledgeBase] = {}
        self._sweeper: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def get(self, session_id: str) -> WebKnowledgeBase:
        """The session's knowledge base, created on first use (synchronous: no race).

        Handing it out counts as use: its TTL starts again, so a session whose
        runs only hold on to it is not swept in between.
        """
        kb = self._sessions.get(session_id)
        if kb is None or kb.closed:
            kb = WebKnowledgeBase(session_id, self._factory(), clock=self._clock)
            self._sessions[session_id] = kb
        else:
            kb.last_used = self._clock()
        return kb

    async def end(self, session_id: str) -> bool:
        """End a session now and drop its state; ``False`` if it did not exist."""
        kb = self._sessions.pop(session_id, None)
        if kb is None:
            return False
        await kb.close()
        return True

    async def sweep(self) -> list[str]:
        """Drop every session idle for longer than ``ttl_s``; return their ids."""
        now = self._clock()
        expired = [sid for sid, kb in self._sessions.items() if now - kb.last_used > self.ttl_s]
        for sid in expired:
            kb = self._sessions.pop(sid)
            await kb.close()
        return expired

    async def close(self) -> None:
        """Stop the sweeper and drop every session."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        for sid in list(self._sessions):
            await self.end(sid)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            await self.sweep()

    async def __aenter__(self) -> Self:
        self._sweeper = asyncio.create_task(self._sweep_forever(), name="session-sweeper")
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
