"""The context a handler gets: emit, remaining time and the end claim, never the raw stream."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from actors import Actor, ActorContext, ActorRun
from streams import Event, RunStarted, RunStream, SearchRequested


class Probe(Actor):
    name = "probe"
    handles = ("run.started",)

    def __init__(self) -> None:
        self.seen: list[object] = []

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        self.seen.append(ctx)
        emitted = ctx.emit(SearchRequested(query="early"), msg)
        assert emitted is not None and emitted.actor == "probe" and emitted.cause == msg.seq
        ctx.finish("answered", answer="done")
        return None


async def test_a_handler_publishes_only_through_its_context_stamped_as_itself() -> None:
    stream = RunStream("r1")
    probe = Probe()
    async with ActorRun(stream, [probe]) as run:
        run.publish(RunStarted(question="q"))
        await run.wait()
    (ctx,) = probe.seen
    assert not hasattr(ctx, "stream")  # no way around the runtime's stamps and end claim
    assert cast(ActorContext, ctx).run_id == "r1"
    types = [e.type for e in stream.history()]
    assert types == ["run.started", "search.requested", "run.finished"]
    assert stream.finished is not None and stream.finished.answer == "done"
