"""The reader actor: "read on" from a found passage to its neighbours in the source."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from actors import Actor, ActorContext, error_info
from streams import Event, ReadCompleted, ReadFailed, ReadRequested

from .index import Chunk, ChunkNotFound, CollectionNotFound, CorpusIndex

__all__ = ["OutOfScope", "ReaderActor"]


class OutOfScope(LookupError):
    """A chunk id this run may not read (unknown, or in a collection it may not search)."""

    retryable = False


class ReaderActor(Actor):
    """Serves ``read.requested`` from the corpus index, only within the run's collections.

    Scope is enforced here, in code, for every id (including ids a model made
    up): a chunk is read only if it exists in one of the allowed collections.
    """

    name = "reader"
    handles = ("read.requested",)
    timeout_s = 10.0

    def __init__(self, index: CorpusIndex, collections: Sequence[str]) -> None:
        self.index = index
        self.collections = tuple(collections)

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event]:
        assert isinstance(msg, ReadRequested)
        chunks = await asyncio.to_thread(self._read, msg)
        return [ReadCompleted(call_id=msg.call_id, chunk_id=msg.chunk_id,
                              chunks=tuple(c.to_evidence() for c in chunks))]

    def _read(self, msg: ReadRequested) -> list[Chunk]:
        count = max(1, min(msg.count, 3))
        for collection in self.collections:
            try:
                return self.index.neighbours(msg.chunk_id, msg.direction, count,
                                             collection=collection)
            except (ChunkNotFound, CollectionNotFound):
                continue
        raise OutOfScope(f"chunk {msg.chunk_id!r} is not in the collections this run may read")

    def on_failure(self, msg: Event, exc: BaseException) -> Event | None:
        assert isinstance(msg, ReadRequested)
        return ReadFailed(call_id=msg.call_id, chunk_id=msg.chunk_id, error=error_info(exc))
