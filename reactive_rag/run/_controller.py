"""The controller actor: hosts the pure state machine on the run stream.

It feeds every fact the machine cares about into :func:`step`, publishes the
commands it returns (with ``cause`` = the fact that led to them) and claims the
run's end on a :class:`Finish`. A bug in orchestration never kills the run: it
falls back to the one-shot path once and says so in the stream.

A run interrupted by a crash is carried on by a fresh controller:
:meth:`RunController.restore` folds the stored events through :func:`step`
exactly as the first controller saw them (its own events skipped, illegal
transitions swallowed, orchestration errors falling back), and
:meth:`RunController.resume` then issues again what the machine still waits
for: the commands the log lacks (a crash between a fact and the commands it
led to) and the requests that have no reply in the log.
"""

from __future__ import annotations

from collections.abc import Sequence

from actors import Actor, ActorContext
from streams import (
    ActorFailed,
    AnswerabilityRequested,
    AnswerDrafted,
    AnswerRequested,
    Event,
    HandoffRequested,
    PlanRequested,
    ReadFailed,
    ReadRequested,
    RerankFailed,
    RerankRequested,
    RunFinished,
    RunResumed,
    ScrapeFailed,
    ScrapeRequested,
    SearchFailed,
    SearchRequested,
    SelectionRequested,
)

from ._exceptions import IllegalTransition
from ._machine import FINAL_RERANK_ID, Command, Finish, Phase, RunState, fall_back_to_rag, step

__all__ = ["RunController"]

_TOOL_REQUESTS = (SearchRequested, ReadRequested, ScrapeRequested, RerankRequested)
_REQUESTS = (*_TOOL_REQUESTS, PlanRequested, SelectionRequested, AnswerabilityRequested,
             AnswerRequested, HandoffRequested)
"""Commands another actor answers: issued again on resume only while the machine waits."""
_ENVELOPE = {"run_id": "", "seq": 0, "ts": 0.0, "actor": "", "cause": None}


class RunController(Actor):
    """Drives one run: facts in, commands out, one terminal claim."""

    name = "controller"
    handles = (
        "run.started", "plan.decided", "search.completed", "search.failed", "read.completed",
        "read.failed", "page.scraped", "scrape.failed", "rerank.completed", "rerank.failed",
        "evidence.selected", "answerability.judged", "handoff.decided",
        "answer.drafted", "answer.verified", "verify.failed", "budget.exhausted", "actor.failed",
        "run.resumed",
    )

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.ignored: list[str] = []
        self._requests: dict[int, Event] = {}
        self._log: Sequence[Event] = ()  # the stored log a restore folded
        self._pending: list[tuple[int, Command]] = []  # (cause seq, command) the log lacks

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        commands = self._advance(msg)
        if commands:
            self._carry_out(commands, ctx, msg)
        return None

    def _advance(self, msg: Event) -> Sequence[Command] | None:
        """Feed one fact to the machine; the commands to carry out (``None``: not for us)."""
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
        return commands

    def _carry_out(self, commands: Sequence[Command], ctx: ActorContext,
                   cause: Event | int) -> None:
        for command in commands:
            if isinstance(command, Finish):
                ctx.finish(command.outcome, reason=command.reason, answer=command.answer,
                           claims=command.claims, task=command.task)
                return
            self._emit(command, ctx, cause)

    def _emit(self, command: Event, ctx: ActorContext, cause: Event | int) -> None:
        published = ctx.emit(command, cause)
        if published is not None and isinstance(published, _TOOL_REQUESTS):
            self._requests[published.seq] = published

    # --- crash resume ---------------------------------------------------------------------

    def on_restore(self, events: Sequence[Event]) -> None:
        """Rebuild the machine from a run's stored events (before the run is resumed).

        Every event this controller handles is fed to :func:`step` in ``seq``
        order, as the controller that wrote the log saw it (events of its own
        skipped, an actor failure answering a tool request translated through
        the stored requests, illegal transitions ignored, orchestration errors
        falling back); the commands are not carried out. Those the log lacks (a
        crash came between a fact and the commands it led to: a controller
        publishes them with that fact as their ``cause``, in order, so they are
        what is left over when the stored ones are matched in order) are kept
        for :meth:`resume`. The stored terminal ``run.finished`` is skipped.
        """
        published: dict[int, list[Event]] = {}
        for event in events:
            if event.actor == self.name and event.cause is not None:
                published.setdefault(event.cause, []).append(event)
        handled = set(self.handles)
        self._log = events
        self._pending = []
        for event in events:
            if event.actor == self.name:
                if isinstance(event, _TOOL_REQUESTS):
                    self._requests[event.seq] = event
                continue
            if isinstance(event, RunFinished) or event.type not in handled:
                continue
            commands = self._advance(event)
            if not commands:
                continue
            emitted: list[Event] = []
            finish: Finish | None = None
            for command in commands:
                if isinstance(command, Finish):
                    finish = command
                    break
                emitted.append(command)
            self._pending.extend((event.seq, c)
                                 for c in _unpublished(emitted, published.get(event.seq, [])))
            if finish is not None:
                self._pending.append((event.seq, finish))

    def resume(self, ctx: ActorContext, resumed: RunResumed) -> None:
        """Go on after :meth:`restore` (``resumed`` is the run's ``run.resumed``, published).

        Issues again what the machine waits for in its phase: the latest
        request of each awaited reply (the plan request, each in-flight tool
        call or its rerank, the final rerank, the selection, the writer's
        request, the draft the verifier has to check), as a copy caused by
        ``resumed``; and the commands the log lacks, with their original
        cause (requests among them only while awaited). A machine that
        already ended claims its end. A run with no time left issues no new
        plan or tool call: the deadline ends its search at once.
        """
        pending, self._pending = self._pending, []
        out_of_time = resumed.elapsed_s >= self.state.budget.wall_s
        awaited = self._awaited(pending)
        if out_of_time and self.state.phase in (Phase.PLANNING, Phase.ACTING):
            awaited = []
        kept = {id(e) for e in awaited}
        remaining = round(max(0.0, self.state.budget.wall_s - resumed.elapsed_s), 3)
        stored = {id(e) for e in self._log}
        for event in awaited:
            if id(event) in stored:  # a request (or the draft) the log holds: once more
                again = event.model_copy(update=_ENVELOPE)
                if isinstance(again, PlanRequested):
                    again = again.model_copy(update={"remaining_s": remaining})
                self._emit(again, ctx, resumed)
        for cause, command in pending:
            if isinstance(command, Finish):
                self._carry_out([command], ctx, cause)
                return
            if isinstance(command, _REQUESTS) and id(command) not in kept:
                continue  # superseded: the machine no longer waits for its reply
            self._emit(command, ctx, cause)

    def _awaited(self, pending: Sequence[tuple[int, Command]]) -> list[Event]:
        """The latest request (or draft) behind each reply the machine waits for."""
        state = self.state
        ours = [*(e for e in self._log if e.actor == self.name),
                *(c for _, c in pending if isinstance(c, Event))]

        def latest(kinds: type[Event] | tuple[type[Event], ...], among: Sequence[Event],
                   **fields: object) -> list[Event]:
            for event in reversed(among):
                if isinstance(event, kinds) and all(getattr(event, k, None) == v
                                                    for k, v in fields.items()):
                    return [event]
            return []

        match state.phase:
            case Phase.ROUTING:
                return latest(HandoffRequested, ours)
            case Phase.PLANNING:
                return latest(PlanRequested, ours)
            case Phase.ACTING:
                found: list[Event] = []
                for flight in state.in_flight:
                    if flight.stage == "tool":
                        found += latest((SearchRequested, ReadRequested, ScrapeRequested), ours,
                                        call_id=flight.call.id)
                    elif flight.stage == "rerank":
                        found += latest(RerankRequested, ours, call_id=flight.call.id)
                return sorted(found, key=lambda e: (e.seq == 0, e.seq))
            case Phase.SELECTING:
                return latest(RerankRequested, ours, call_id=FINAL_RERANK_ID)
            case Phase.CHOOSING:
                return latest(SelectionRequested, ours)
            case Phase.JUDGING:
                return latest(AnswerabilityRequested, ours)
            case Phase.WRITING:
                return latest(AnswerRequested, ours, attempt=state.write_attempt)
            case Phase.VERIFYING:
                return latest(AnswerDrafted, self._log, attempt=state.write_attempt)
        return []

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


def _unpublished(commands: Sequence[Event], stored: Sequence[Event]) -> list[Event]:
    """The commands not among ``stored`` (what was published for them, in order).

    Usually the stored ones are a prefix (the crash cut the commands short); a
    resume that left out a superseded request publishes the others, so the
    match is in order, by type and call id, not by count.
    """
    missing: list[Event] = []
    i = 0
    for command in commands:
        if (i < len(stored) and command.type == stored[i].type
                and getattr(command, "call_id", None) == getattr(stored[i], "call_id", None)):
            i += 1
        else:
            missing.append(command)
    return missing
