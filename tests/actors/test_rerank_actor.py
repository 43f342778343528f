"""RerankerActor: answers requests, turns failures into rerank.failed, never blocks the loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from actors import ActorRun
from actors.models import FloatMatrix, HashingEmbedder
from actors.rerank import Reranker, RerankerActor
from streams import Event, EvidenceChunk, RerankCompleted, RerankFailed, RerankRequested

TEXTS = [
    "Aspirin lowers fever by blocking prostaglandin synthesis.",
    "Basalt is a volcanic rock.",
    "Fever reduction with aspirin works through prostaglandin inhibition.",
    "Aspirin and fever: a review of prostaglandin pathways.",
]
CANDS = tuple(
    EvidenceChunk(id=f"c{i}", text=t, doc_id=f"d{i}", score=float(10 - i))
    for i, t in enumerate(TEXTS)
)


class FlakyEmbedder(HashingEmbedder):
    """Fails on queries containing 'boom'; optionally waits for the test to release it."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release: threading.Event | None = None
        self.thread_ids: list[int] = []

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        self.thread_ids.append(threading.get_ident())
        self.entered.set()
        if self.release is not None and not self.release.wait(timeout=20):
            raise TimeoutError("test never released the embedder")
        if any("boom" in t for t in texts):
            raise RuntimeError("embedding backend exploded")
        return super().embed_queries(texts)


async def _wait_for(run: ActorRun, types: set[str], count: int) -> list[Event]:
    async with asyncio.timeout(20):
        while True:
            got = [e for e in run.stream.history() if e.type in types]
            if len(got) >= count:
                return got
            await asyncio.sleep(0.01)


async def test_request_is_answered_with_kept_chunks() -> None:
    actor = RerankerActor(Reranker(HashingEmbedder(), floor=0.15))
    async with ActorRun("rr-1", [actor], deadline_s=30) as run:
        req = run.publish(RerankRequested(call_id="call-1", query="aspirin fever", candidates=CANDS,
                                          k=2))
        [done] = await _wait_for(run, {"rerank.completed"}, 1)
        run.finish("answered")
    assert isinstance(done, RerankCompleted) and req is not None
    assert (done.call_id, done.query, done.actor, done.cause) == (
        "call-1", "aspirin fever", "reranker", req.seq)
    assert len(done.chunks) == 2 and done.below_floor == 1
    assert {c.id for c in done.chunks} <= {"c0", "c2", "c3"}
    assert (done.chunks[0].score or 0) >= (done.chunks[1].score or 0)


async def test_nothing_relevant_is_an_empty_completion_not_a_failure() -> None:
    actor = RerankerActor(Reranker(HashingEmbedder(), floor=0.15))
    async with ActorRun("rr-2", [actor], deadline_s=30) as run:
        run.publish(RerankRequested(query="medieval poetry", candidates=CANDS, k=3))
        [done] = await _wait_for(run, {"rerank.completed", "rerank.failed"}, 1)
        run.finish("answered")
    assert isinstance(done, RerankCompleted)
    assert done.chunks == () and done.below_floor == len(CANDS)


async def test_failure_answers_rerank_failed_and_the_actor_keeps_serving() -> None:
    emb = FlakyEmbedder()
    actor = RerankerActor(Reranker(emb, floor=0.15))
    async with ActorRun("rr-3", [actor], deadline_s=30) as run:
        bad = run.publish(RerankRequested(call_id="bad", query="boom", candidates=CANDS))
        run.publish(RerankRequested(call_id="good", query="aspirin fever", candidates=CANDS))
        answers = await _wait_for(run, {"rerank.completed", "rerank.failed"}, 2)
        run.finish("answered")
    failed, ok = answers
    assert isinstance(failed, RerankFailed) and bad is not None
    assert (failed.call_id, failed.query, failed.cause) == ("bad", "boom", bad.seq)
    assert failed.error.kind == "RuntimeError" and "exploded" in failed.error.message
    assert isinstance(ok, RerankCompleted) and ok.call_id == "good" and ok.chunks


async def test_scoring_runs_off_the_event_loop() -> None:
    """The embedder blocks until this coroutine releases it: only possible off the loop."""
    emb = FlakyEmbedder()
    emb.release = threading.Event()
    actor = RerankerActor(Reranker(emb, floor=0.15))
    async with ActorRun("rr-4", [actor], deadline_s=30) as run:
        run.publish(RerankRequested(query="aspirin", candidates=CANDS))
        # the worker thread signals through a threading.Event; poll it from the loop
        await asyncio.wait_for(asyncio.to_thread(emb.entered.wait, 20), timeout=25)
        assert not [e for e in run.stream.history() if e.type == "rerank.completed"]
        emb.release.set()
        await _wait_for(run, {"rerank.completed"}, 1)
        run.finish("answered")
    assert emb.thread_ids and threading.get_ident() not in emb.thread_ids


async def test_edges_order_option() -> None:
    actor = RerankerActor(Reranker(HashingEmbedder(), floor=0.0), order="edges")
    ranked = Reranker(HashingEmbedder(), floor=0.0).rerank("aspirin fever", CANDS, 4).chunks
    async with ActorRun("rr-5", [actor], deadline_s=30) as run:
        run.publish(RerankRequested(query="aspirin fever", candidates=CANDS, k=4))
        [done] = await _wait_for(run, {"rerank.completed"}, 1)
        run.finish("answered")
    assert isinstance(done, RerankCompleted)
    assert [c.id for c in done.chunks] == [ranked[i].id for i in (0, 2, 3, 1)]
    with pytest.raises(ValueError):
        RerankerActor(Reranker(HashingEmbedder()), order="middle")  # type: ignore[arg-type]
