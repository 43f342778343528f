"""Engines for the engine-replica tests, built inside Ray workers by picklable factories.

In an importable module (not a test file) so a worker unpickles the factories
by reference, as it would a user's.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from actors.models import HashingEmbedder
from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement import Decision, PlannerView
from reactive_rag.judgement.offline import OfflinePlanner

from ._corpus import DOCS


class HangingPlanner:
    """The offline planner, but a question starting with "hang" never gets a decision."""

    name = "hanging"

    def __init__(self) -> None:
        self._inner = OfflinePlanner()

    async def decide(self, view: PlannerView) -> Decision:
        if view.question.startswith("hang"):
            await asyncio.sleep(600)
        return await self._inner.decide(view)


def demo_engine(root: str) -> Engine:
    """Built in each replica's worker: the demo corpus, opened from the shared path."""
    return Engine(CorpusIndex(root, HashingEmbedder()), planner=HangingPlanner)


def demo_index(root: Path) -> None:
    """The demo corpus (hashing embedder) at ``root``, closed again."""
    index = CorpusIndex(root, HashingEmbedder())
    index.index_documents("demo", DOCS)
    index.close()
