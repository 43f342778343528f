"""Actors for the Ray placement tests, built inside Ray workers by picklable factories.

They live in an importable module (not the test file) so a worker unpickles
their factories by reference, as it would a user's.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from actors import Actor, ActorContext, init_ray, ray_module
from actors.models import HashingEmbedder
from actors.rerank import Reranker, RerankerActor
from streams import (
    AnswerDelta,
    Event,
    EvidenceChunk,
    RerankCompleted,
    RerankRequested,
)

TEXTS = [
    "Aspirin lowers fever by blocking prostaglandin synthesis.",
    "Basalt is a volcanic rock.",
    "Fever reduction with aspirin works through prostaglandin inhibition.",
    "Aspirin and fever: a review of prostaglandin pathways.",
]
CANDIDATES = tuple(
    EvidenceChunk(id=f"c{i}", text=t, doc_id=f"d{i}", score=float(10 - i))
    for i, t in enumerate(TEXTS)
)


def local_ray() -> Iterator[Any]:
    """A local Ray cluster on loopback (2 CPUs, no dashboard, no telemetry), then its end.

    For a module-scoped fixture. Skips without Ray, unless ``REACTIVE_RAG_REQUIRE_RAY=1``
    (CI), where a missing Ray fails.
    """
    if os.environ.get("REACTIVE_RAG_REQUIRE_RAY") != "1":
        pytest.importorskip("ray", reason="Ray is not installed (pip install 'reactive-rag[ray]')")
    ray = ray_module()
    init_ray(num_cpus=2)
    yield ray
    ray.shutdown()


def hashing_reranker() -> RerankerActor:
    """The real reranker actor over the deterministic hashing embedder."""
    return RerankerActor(Reranker(HashingEmbedder(), floor=0.15))


class StreamingReranker(RerankerActor):
    """Emits a delta mid-call (ctx.emit), then answers: effects must replay in order."""

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        ctx.emit(AnswerDelta(text=f"scoring {ctx.run_id}"), cause=msg)
        return await super().on_receive(msg, ctx)


def streaming_reranker() -> StreamingReranker:
    return StreamingReranker(Reranker(HashingEmbedder(), floor=0.15))


class SlowActor(Actor):
    """Hangs on ``query == "hang"`` until cancelled; records the cancel in ``marker``.

    Any other query is answered at once with the run's remaining time in
    ``below_floor`` (whole seconds), so a test sees what deadline reached the worker.
    """

    name = "slow"
    handles = ("rerank.requested",)
    concurrency = 4
    timeout_s: float | None = None

    def __init__(self, marker: str, timeout_s: float | None = None) -> None:
        self.marker = Path(marker)
        self.timeout_s = timeout_s

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        assert isinstance(msg, RerankRequested)
        if msg.query == "hang":
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.marker.write_text(f"cancelled {msg.call_id}")
                raise
        left = ctx.remaining()
        return [RerankCompleted(call_id=msg.call_id, query=msg.query,
                                below_floor=-1 if left is None else round(left))]


class DyingActor(Actor):
    """Kills its own worker process on ``query == "die"``; answers anything else."""

    name = "dying"
    handles = ("rerank.requested",)

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        assert isinstance(msg, RerankRequested)
        if msg.query == "die":
            os._exit(1)
        return [RerankCompleted(call_id=msg.call_id, query=msg.query, below_floor=os.getpid())]


class BrokenActor(RerankerActor):
    """Raises inside the worker: its own on_failure (rerank.failed) must answer."""

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        raise ValueError("scoring backend exploded")


def broken_reranker() -> BrokenActor:
    return BrokenActor(Reranker(HashingEmbedder()))


class LiveActor(Actor):
    """Emits while it runs, from the loop and from a thread; waits for the test's go.

    Every query first emits ``started`` and three ``thread-i`` deltas (from a
    worker thread), then: ``wait`` waits for the ``go`` file, emits ``resumed``
    and answers; ``hang`` sleeps until cancelled (recording the cancel in
    ``marker``); ``die`` waits for ``go`` and kills its worker process; ``bad``
    emits an event that cannot cross (an int beyond 64 bits); ``not-event``
    emits a string.
    """

    name = "live"
    handles = ("rerank.requested",)
    concurrency = 4
    timeout_s: float | None = None

    def __init__(self, folder: str, timeout_s: float | None = None) -> None:
        self.folder = Path(folder)
        self.timeout_s = timeout_s

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        assert isinstance(msg, RerankRequested)
        ctx.emit(AnswerDelta(text="started"), cause=msg)
        await asyncio.to_thread(
            lambda: [ctx.emit(AnswerDelta(text=f"thread-{i}"), cause=msg) for i in range(3)])
        if msg.query == "hang":
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                (self.folder / "cancelled").write_text(f"cancelled {msg.call_id}")
                raise
        elif msg.query == "bad":
            ctx.emit(RerankCompleted(call_id=msg.call_id, query="x", below_floor=2**70))
        elif msg.query == "not-event":
            ctx.emit("not an event")  # type: ignore[arg-type]
        else:
            go = self.folder / f"go-{msg.call_id}"
            async with asyncio.timeout(60):  # (a file: the test runs in another process)
                while True:
                    if go.exists():
                        break
                    await asyncio.sleep(0.01)
            if msg.query == "die":
                os._exit(1)
            ctx.emit(AnswerDelta(text="resumed"), cause=msg)
        return [RerankCompleted(call_id=msg.call_id, query=msg.query)]
