"""The finalize grace is really given to the finalizer: a writer that awaits is not cut at once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement import Decision, Draft, PlannerView
from reactive_rag.judgement.offline import ExtractiveWriter
from streams import ClaimError, EvidenceChunk, ToolCall, WriteMode


class SearchThenStall:
    """Searches once, then thinks past the run's deadline (a slow model)."""

    name = "stalling"

    async def decide(self, view: PlannerView) -> Decision:
        if view.round == 1:
            return Decision(action="search", calls=(
                ToolCall(id="s1", tool="search", args={"query": view.question}),))
        await asyncio.sleep(30)
        raise AssertionError("unreachable: the deadline cuts this turn")


class AwaitingWriter:
    """The extractive writer behind an await (a chat server's latency)."""

    name = "awaiting"

    def __init__(self, inner: ExtractiveWriter, delay_s: float) -> None:
        self.inner, self.delay_s = inner, delay_s

    async def write(self, question: str, evidence: Sequence[EvidenceChunk], *, mode: WriteMode,
                    errors: Sequence[ClaimError] = ()) -> Draft:
        await asyncio.sleep(self.delay_s)
        return await self.inner.write(question, evidence, mode=mode, errors=errors)


def _engine(index: CorpusIndex, delay_s: float) -> Engine:
    return Engine(index, planner=SearchThenStall,
                  writer=lambda: AwaitingWriter(ExtractiveWriter(index.embedder), delay_s))


async def test_a_writer_that_awaits_within_the_grace_answers_from_the_evidence(
        index: CorpusIndex) -> None:
    result = await _engine(index, 0.5).ask("Who founded Bayer?", collections=["demo"],
                                           budget={"wall_s": 1.0, "finalize_s": 10.0})
    assert result.outcome == "answered_from_evidence", result.reason
    assert result.count("budget.exhausted") >= 1 and result.citations


async def test_a_writer_slower_than_the_grace_ends_the_run_as_failed_not_hung(
        index: CorpusIndex) -> None:
    result = await _engine(index, 30.0).ask("Who founded Bayer?", collections=["demo"],
                                            budget={"wall_s": 0.5, "finalize_s": 0.5})
    assert result.outcome in ("failed", "degraded")

