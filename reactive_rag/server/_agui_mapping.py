"""A run's events as AG-UI events: a pure fold, no I/O (``GET /v1/runs/{id}/agui`` uses it).

:class:`AguiMapper` takes a run's events in ``seq`` order and returns, for each,
the AG-UI events it stands for (often none or one, sometimes several). The
mapping of an event depends only on the events before it, so a client that
resumes after seq N gets, from a mapper that folded events 1..N first, exactly
the AG-UI events a client reading from the start got after N.

What maps to what (the table is in ``docs/agui.md``): ``run.started`` opens the
run (RUN_STARTED, then a STATE_SNAPSHOT of ``round``, ``evidence_count`` and
``budget``); plan rounds and the answer are steps; searches, reads and page
opens are tool calls; verified answer text is one assistant text message;
``budget.tick`` and ``evidence.registered`` are STATE_DELTA patches;
``run.finished`` ends the run (RUN_FINISHED, or RUN_ERROR when it failed or was
interrupted). Every other event type is passed on as a CUSTOM event named by
its type, whose value is the event's JSON.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Literal

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    CustomEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)

from reactive_rag.engine import RunResult
from streams import (
    ActorFailed,
    AnswerDelta,
    AnswerRequested,
    AnswerVerified,
    BudgetTick,
    ErrorInfo,
    Event,
    EvidenceRegistered,
    PageScraped,
    PlanDecided,
    PlanRequested,
    ReadCompleted,
    ReadFailed,
    ReadRequested,
    RunFinished,
    RunResumed,
    RunStarted,
    ScrapeFailed,
    ScrapeRequested,
    SearchCompleted,
    SearchFailed,
    SearchRequested,
)

__all__ = ["ANSWER_STEP", "BUDGET_FIELDS", "ERROR_OUTCOMES", "AguiMapper", "plan_step"]

ANSWER_STEP = "answer"
"""The step from the first ``answer.requested`` to ``answer.verified`` (or the run's end)."""

ERROR_OUTCOMES = frozenset({"failed", "interrupted"})
"""Outcomes that end the AG-UI run with RUN_ERROR (``code`` is the outcome); every other
outcome ends it with RUN_FINISHED."""

BUDGET_FIELDS = tuple(n for n in BudgetTick.model_fields if n not in Event.model_fields)
"""The ``budget`` object of the state: exactly ``budget.tick``'s payload fields."""

_ToolRequest = SearchRequested | ReadRequested | ScrapeRequested
_ToolResult = (SearchCompleted | SearchFailed | ReadCompleted | ReadFailed | PageScraped
               | ScrapeFailed)
_TOOL_NAMES: dict[type[Event], str] = {
    SearchRequested: "search", ReadRequested: "read", ScrapeRequested: "scrape"}


def plan_step(round_: int) -> str:
    """The step name of a plan round (``plan.requested`` to ``plan.decided``)."""
    return f"plan round {round_}"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _replace(values: dict[str, Any]) -> StateDeltaEvent:
    """A STATE_DELTA of RFC 6902 ``replace`` operations, one per path."""
    return StateDeltaEvent(delta=[{"op": "replace", "path": path, "value": value}
                                  for path, value in values.items()])


def _ms(event: Event) -> int | None:
    return round(event.ts * 1000) if event.ts else None


def _error(error: ErrorInfo) -> dict[str, Any]:
    return {"error": {"kind": error.kind, "message": error.describe()}}


def _tool_args(event: _ToolRequest) -> dict[str, Any]:
    """A tool request's arguments as the TOOL_CALL_ARGS JSON."""
    match event:
        case SearchRequested():
            args: dict[str, Any] = {"query": event.query, "collections": list(event.collections)}
            if event.providers:
                args["providers"] = list(event.providers)
            if not event.filters.is_empty:
                args["filters"] = event.filters.model_dump(mode="json", exclude_defaults=True)
            return args
        case ReadRequested():
            return {"chunk_id": event.chunk_id, "direction": event.direction,
                    "count": event.count}
        case ScrapeRequested():
            return {"url": event.url}


def _tool_result(event: _ToolResult | ActorFailed) -> dict[str, Any]:
    """A tool's answer as the TOOL_CALL_RESULT content (JSON text)."""
    match event:
        case SearchCompleted():
            hits = [{k: v for k, v in (("title", h.title), ("url", h.url),
                                       ("snippet", h.snippet), ("chunk_id", h.chunk_id))
                     if v is not None} for h in event.hits]
            out: dict[str, Any] = {"hits": hits}
            if event.errors:
                out["errors"] = [e.describe() for e in event.errors]
            return out
        case ReadCompleted():
            return {"chunks": [{"id": c.id, "title": c.title, "url": c.url, "text": c.text}
                               for c in event.chunks]}
        case PageScraped():
            return {"url": event.url, "title": event.title,
                    "chunk_ids": [c.id for c in event.chunks]}
        case SearchFailed() | ReadFailed() | ScrapeFailed() | ActorFailed():
            return _error(event.error)


def _limits(options: dict[str, Any]) -> dict[str, Any]:
    """The budget limits a run started with (``run.started.options["budget"]``)."""
    budget = options.get("budget")
    if not isinstance(budget, dict):
        return {}
    limits = {name: budget[name] for name in ("max_steps", "max_tool_calls", "max_tokens",
                                               "max_read_tokens")
              if isinstance(budget.get(name), int)}
    if isinstance(budget.get("wall_s"), int | float):
        limits["deadline_s"] = budget["wall_s"]
    return limits


class AguiMapper:
    """Folds one run's events, in ``seq`` order, into AG-UI events.

    Args:
        run_id: the run (RUN_STARTED's ``runId``; ids of its messages start with it).
        thread_id: the conversation the run belongs to (default: the run id).
    """

    def __init__(self, run_id: str, *, thread_id: str | None = None) -> None:
        self.run_id = run_id
        self.thread_id = thread_id or run_id
        self._state: dict[str, Any] = {
            "round": 0, "evidence_count": 0,
            "budget": BudgetTick().model_dump(include=set(BUDGET_FIELDS))}
        self._evidence: set[str] = set()
        self._registered: list[EvidenceRegistered] = []
        self._steps: list[str] = []
        self._plans: dict[int, str] = {}  # plan.requested seq -> its step
        self._calls: dict[int, str] = {}  # tool request seq -> toolCallId, until answered
        self._call_ids: set[str] = set()  # every toolCallId given out
        self._message: str | None = None  # the open text message
        self._messages = 0
        self._terminal: RunFinishedEvent | RunErrorEvent | None = None

    @property
    def state(self) -> dict[str, Any]:
        """The AG-UI state after the events folded so far (a copy)."""
        return copy.deepcopy(self._state)

    @property
    def terminal(self) -> RunFinishedEvent | RunErrorEvent | None:
        """The RUN_FINISHED / RUN_ERROR of the last ``run.finished`` folded, if any."""
        return self._terminal

    def snapshot(self) -> StateSnapshotEvent:
        """A STATE_SNAPSHOT of :attr:`state` (what a resuming client starts from)."""
        return StateSnapshotEvent(snapshot=self.state)

    def map(self, event: Event) -> list[BaseEvent]:
        """The AG-UI events ``event`` stands for (may be empty), in order."""
        out = self._map(event)
        ts = _ms(event)
        for agui in out:
            agui.timestamp = ts
        return out

    def _map(self, event: Event) -> list[BaseEvent]:
        match event:
            case RunStarted():
                self._state["budget"].update(_limits(event.options))
                return [self._run_started(event.question), self.snapshot()]
            case RunResumed():
                self._terminal = None
                return [self._run_started(None), self.snapshot()]
            case PlanRequested():
                name = plan_step(event.round)
                self._plans[event.seq] = name
                out = [*self._finish_step(name), *self._start_step(name)]
                if self._state["round"] != event.round:
                    self._state["round"] = event.round
                    out.append(_replace({"/round": event.round}))
                return out
            case PlanDecided():
                return self._finish_step(self._plans.pop(event.cause or 0, ""))
            case SearchRequested() | ReadRequested() | ScrapeRequested():
                return self._tool_call(event)
            case (SearchCompleted() | SearchFailed() | ReadCompleted() | ReadFailed()
                  | PageScraped() | ScrapeFailed()):
                return self._tool_result(event) or [self._custom(event)]
            case ActorFailed():
                out = self._tool_result(event)
                if event.request_type == "plan.requested":
                    out += self._finish_step(self._plans.pop(event.cause or 0, ""))
                return [*out, self._custom(event)]
            case EvidenceRegistered():
                return self._evidence_registered(event)
            case BudgetTick():
                return self._budget(event)
            case AnswerRequested():
                return self._start_step(ANSWER_STEP) if ANSWER_STEP not in self._steps else []
            case AnswerDelta():
                return self._text(event.text)
            case AnswerVerified():
                return [*self._end_text(), *self._finish_step(ANSWER_STEP)]
            case RunFinished():
                return self._run_finished(event)
        return [self._custom(event)]

    # --- run ------------------------------------------------------------------------------

    def _run_started(self, question: str | None) -> RunStartedEvent:
        """RUN_STARTED; ``question``: echoed as the input's user message (None: a resume)."""
        asked = None if question is None else RunAgentInput(
            thread_id=self.thread_id, run_id=self.run_id,
            messages=[UserMessage(id=f"{self.run_id}-question", content=question)])
        return RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id,
                               protocol_version=PROTOCOL_VERSION, input=asked)

    def _run_finished(self, event: RunFinished) -> list[BaseEvent]:
        out = [*self._end_text()]
        while self._steps:
            out += self._finish_step(self._steps[-1])
        terminal: RunFinishedEvent | RunErrorEvent
        if event.outcome in ERROR_OUTCOMES:
            terminal = RunErrorEvent(message=event.reason or f"the run {event.outcome}",
                                     code=event.outcome)
        else:
            result = RunResult.from_events([*self._registered, event])
            ended: dict[str, Any] = {"outcome": event.outcome, "answer": event.answer,
                                     "citations": [c.to_json() for c in result.citations],
                                     "reason": event.reason}
            if event.task is not None:  # handed_off: the background task that goes on
                ended["task"] = event.task.model_dump()
            terminal = RunFinishedEvent(
                thread_id=self.thread_id, run_id=self.run_id, result=ended,
                outcome=RunFinishedCancelledOutcome() if event.outcome == "cancelled" else None)
        self._terminal = terminal
        return [*out, terminal]

    # --- steps ----------------------------------------------------------------------------

    def _start_step(self, name: str) -> list[BaseEvent]:
        self._steps.append(name)
        return [StepStartedEvent(step_name=name)]

    def _finish_step(self, name: str) -> list[BaseEvent]:
        if name not in self._steps:
            return []
        self._steps.remove(name)
        return [StepFinishedEvent(step_name=name)]

    # --- tool calls -----------------------------------------------------------------------

    def _tool_call(self, event: _ToolRequest) -> list[BaseEvent]:
        name = _TOOL_NAMES[type(event)]
        call_id = event.call_id or f"{name}-{event.seq}"
        if call_id in self._call_ids:  # re-issued after a resume: a call of its own
            call_id = f"{call_id}-{event.seq}"
        self._call_ids.add(call_id)
        self._calls[event.seq] = call_id
        return [ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name),
                ToolCallArgsEvent(tool_call_id=call_id, delta=_json(_tool_args(event))),
                ToolCallEndEvent(tool_call_id=call_id)]

    def _tool_result(self, event: _ToolResult | ActorFailed) -> list[BaseEvent]:
        """The TOOL_CALL_RESULT of the call ``event`` answers (by ``cause``, else by call id)."""
        call_id = self._calls.pop(event.cause, None) if event.cause is not None else None
        wanted = "" if isinstance(event, ActorFailed) else event.call_id
        if call_id is None and wanted:
            seq = next((s for s, c in self._calls.items() if c == wanted), None)
            call_id = None if seq is None else self._calls.pop(seq)
        if call_id is None:
            return []
        return [ToolCallResultEvent(message_id=f"{self.run_id}-{call_id}-result",
                                    tool_call_id=call_id, role="tool",
                                    content=_json(_tool_result(event)))]

    # --- state ----------------------------------------------------------------------------

    def _evidence_registered(self, event: EvidenceRegistered) -> list[BaseEvent]:
        self._registered.append(event)
        self._evidence.update(c.id for c in event.chunks)
        if len(self._evidence) == self._state["evidence_count"]:
            return []
        self._state["evidence_count"] = len(self._evidence)
        return [_replace({"/evidence_count": len(self._evidence)})]

    def _budget(self, event: BudgetTick) -> list[BaseEvent]:
        budget = self._state["budget"]
        changed = {}
        for name in BUDGET_FIELDS:
            value = getattr(event, name)
            if budget[name] != value:
                budget[name] = changed[f"/budget/{name}"] = value
        return [_replace(changed)] if changed else []

    # --- text -----------------------------------------------------------------------------

    def _text(self, text: str) -> list[BaseEvent]:
        if not text:
            return []
        out: list[BaseEvent] = []
        if self._message is None:
            self._messages += 1
            suffix = "" if self._messages == 1 else f"-{self._messages}"
            self._message = f"{self.run_id}-answer{suffix}"
            role: Literal["assistant"] = "assistant"
            out.append(TextMessageStartEvent(message_id=self._message, role=role))
        out.append(TextMessageContentEvent(message_id=self._message, delta=text))
        return out

    def _end_text(self) -> list[BaseEvent]:
        if self._message is None:
            return []
        message, self._message = self._message, None
        return [TextMessageEndEvent(message_id=message)]

    # --- everything else ------------------------------------------------------------------

    def _custom(self, event: Event) -> CustomEvent:
        return CustomEvent(name=event.type, value=event.model_dump(mode="json"))
