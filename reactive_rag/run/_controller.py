"""The controller actor: hosts the pure state machine on the run stream.

It feeds every fact the machine cares about into :func:`step`, publishes the
commands it returns (with ``cause`` = the fact that led to them) and claims the
run's end on a :class:`Finish`. A bug in orchestration never kills the run: it
falls back to the one-shot path once and says so in the stream.
"""

from __future__ import annotations

from collections.abc import Sequence

from actors import Actor, ActorContext
from streams import (
    ActorFailed,
    Event,
    ReadFailed,
    ReadRequested,
    RerankFailed,
    RerankRequested,
    ScrapeFailed,
    ScrapeRequested,
    SearchFailed,
    SearchRequested,
)

from ._exceptions import IllegalTransition
from ._machine import Command, Finish, RunState, fall_back_to_rag, step

__all__ = ["RunController"]

_TOOL_REQUESTS = (SearchRequested, ReadRequested, ScrapeRequested, RerankRequested)


class RunController(Actor):
    """Drives one run: facts in, commands out, one terminal claim."""

    name = "controller"
    handles = (
        "run.started", "plan.decided", "search.completed", "search.failed", "read.completed",
        "read.failed", "page.scraped", "scrape.failed", "rerank.completed", "rerank.failed",
        "evidence.selected",
        "answer.drafted", "answer.verified", "verify.failed", "budget.exhausted", "actor.failed",
    )

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.ignored: list[str] = []
        self._requests: dict[int, Event] = {}

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        if msg.actor == self.name:
            return None  # our own announcements (budget.exhausted) coming back
        fact = self._as_tool_failure(msg) if isinstance(msg, ActorFailed) else msg
        try:
            state, commands = step(self.state, fact)
        except IllegalTransition as exc:
            self.ignored.append(f"{msg.type} seq {msg.seq}: {exc}")
            return None
        except Exception as exc:  # an orchestration bug: degrade to the one-shot path
            state, commands = fall_back_to_rag(self.state, f"{type(exc).__name__}: {exc}")
        self.state = state
        self._carry_out(commands, ctx, msg)
        return None

    def _carry_out(self, commands: Sequence[Command], ctx: ActorContext, cause: Event) -> None:
        for command in commands:
            if isinstance(command, Finish):
                ctx.finish(command.outcome, reason=command.reason, answer=command.answer,
                           claims=command.claims)
                return
            published = ctx.emit(command, cause)
            if published is not None and isinstance(published, _TOOL_REQUESTS):
                self._requests[published.seq] = published

    def _as_tool_failure(self, failed: ActorFailed) -> Event:
        """A generic actor failure answering a tool request, as that tool's failure fact."""
        request = self._requests.get(failed.cause or -1)
        if request is None:
            return failed
        match request:
            case SearchRequested():
                return SearchFailed(call_id=request.call_id, query=request.query,
                                    error=failed.error, ts=failed.ts)
            case ReadRequested():
                return ReadFailed(call_id=request.call_id, chunk_id=request.chunk_id,
                                  error=failed.error, ts=failed.ts)
            case ScrapeRequested():
                return ScrapeFailed(call_id=request.call_id, url=request.url,
                                    error=failed.error, ts=failed.ts)
            case RerankRequested():
                return RerankFailed(call_id=request.call_id, query=request.query,
                                    error=failed.error, ts=failed.ts)
        return failed  # pragma: no cover - every recorded request type is matched
