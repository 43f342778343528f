"""The reranker as an actor: ``rerank.requested`` -> ``rerank.completed`` / ``rerank.failed``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Literal

from streams import ActorFailed, Event, RerankCompleted, RerankFailed, RerankRequested

from .._actor import Actor, ActorContext, error_info
from ._scoring import Reranker, edges_order

__all__ = ["RerankerActor", "rerank_failure"]


class RerankerActor(Actor):
    """Serves rerank requests with a :class:`Reranker`, off the event loop.

    Scoring (embedding, a cross-encoder) is CPU-bound, so it runs in a worker
    thread via ``asyncio.to_thread``; the loop keeps serving other actors. A
    request whose scoring raises is answered with ``rerank.failed`` carrying
    the error; the actor goes on serving the next request.

    Args:
        reranker: the scorer (its embedder should be cached for speed).
        order: ``"ranked"`` publishes chunks best first (the ``rerank.completed``
            contract); ``"edges"`` publishes them in prompt order, best at both
            ends (:func:`edges_order`), for writers that paste chunks verbatim.
        name: the actor's name in the run (default ``"reranker"``).
        timeout_s: cap per request (embedding 50 uncached passages on two busy
            cores takes seconds; cached passages take milliseconds).
    """

    name = "reranker"
    finalizes = True  # the final rerank picks the finalizer's evidence after the deadline
    handles = ("rerank.requested",)
    concurrency = 1
    timeout_s: float | None = 60.0

    def __init__(
        self,
        reranker: Reranker,
        *,
        order: Literal["ranked", "edges"] = "ranked",
        name: str | None = None,
        timeout_s: float | None = 60.0,
    ) -> None:
        if order not in ("ranked", "edges"):
            raise ValueError(f"unknown order {order!r}")
        self.reranker = reranker
        self.order = order
        self.timeout_s = timeout_s
        if name is not None:
            self.name = name

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        """Score the candidates in a thread and answer with the kept chunks."""
        if not isinstance(msg, RerankRequested):
            return None
        result = await asyncio.to_thread(self.reranker.rerank, msg.query, msg.candidates, msg.k)
        chunks = result.chunks if self.order == "ranked" else tuple(edges_order(result.chunks))
        return [
            RerankCompleted(
                call_id=msg.call_id, query=msg.query, chunks=chunks, below_floor=result.below_floor,
                similarity={s.chunk.id: round(s.dense, 4) for s in result.all_scored},
                embedder=self.reranker.embedder.name,
            )
        ]

    def on_failure(self, msg: Event, exc: BaseException) -> Event | None:
        """A failed request is answered with ``rerank.failed`` (same ``call_id``)."""
        return rerank_failure(msg, exc)


def rerank_failure(msg: Event, exc: BaseException) -> Event | None:
    """``rerank.failed`` for a rerank request, ``actor.failed`` for anything else.

    A function, not only the actor's hook, so a remote reranker's stand-in
    (:class:`actors.RayPlacement`'s ``on_failure``) answers alike when the
    worker holding the actor is out of reach.
    """
    if isinstance(msg, RerankRequested):
        return RerankFailed(call_id=msg.call_id, query=msg.query, error=error_info(exc))
    return ActorFailed(request_type=msg.type, error=error_info(exc))
