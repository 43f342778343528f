"""A run's events folded into an A2A task: its snapshot, and the updates that build it.

The run store is the only state. ``GetTask`` folds the run's stored events into a
:class:`~a2a.types.Task`; a stream sends the updates of the same fold, event by
event, so what a stream showed and what ``GetTask`` answers cannot disagree. Every
id comes from the run (task id = context id = run id; a status message's id from
its event's seq), so one event gives the same ids however it is read.

States: ``submitted`` until ``run.started``, ``working`` while the run goes (a
status message says what it does: started, searching, writing), then by outcome:
``answered``, ``answered_from_evidence``, ``partial``, ``no_evidence`` and
``degraded`` are ``completed`` (the run did its work; without a verified answer the
status message says why), ``failed`` is ``failed``, ``cancelled`` is ``canceled``.
``interrupted`` (the server stopped while the run went on) is ``input-required``:
the task is not over, and a message naming it resumes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from reactive_rag.engine import RunResult
from reactive_rag.events import (
    AnswerDelta,
    AnswerRequested,
    Event,
    Outcome,
    RunFinished,
    RunResumed,
    RunStarted,
    SearchRequested,
)

__all__ = ["ANSWER_ARTIFACT_ID", "OUTCOME_STATES", "TERMINAL_STATES", "TaskFold", "Update"]

ANSWER_ARTIFACT_ID = "answer"
"""The one artifact of a task: the verified answer (text) and its citations (data)."""

OUTCOME_STATES: Mapping[Outcome, TaskState] = {
    "answered": TaskState.TASK_STATE_COMPLETED,
    "answered_from_evidence": TaskState.TASK_STATE_COMPLETED,
    "partial": TaskState.TASK_STATE_COMPLETED,
    "no_evidence": TaskState.TASK_STATE_COMPLETED,
    "degraded": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
    "interrupted": TaskState.TASK_STATE_INPUT_REQUIRED,
    "handed_off": TaskState.TASK_STATE_COMPLETED,  # the answer names the summary task
}
"""A run's outcome -> the state of its task."""

TERMINAL_STATES = frozenset({TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED,
                             TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED})

Update = TaskStatusUpdateEvent | TaskArtifactUpdateEvent

_INTERRUPTED = ("the server stopped while this task ran; send a message with this taskId "
                "to resume it from its stored events")
_NO_ANSWER: Mapping[Outcome, str] = {
    "no_evidence": "no evidence for this question was found in the collections searched",
    "degraded": "evidence was found but no answer passed verification",
    "failed": "the run failed",
    "cancelled": "the task was cancelled",
}


class TaskFold:
    """The A2A task of one run, built by applying the run's events in seq order.

    Args:
        run_id: the run, which is the task (and its context).
        question: the run's question, the task's one history message.
    """

    def __init__(self, run_id: str, question: str) -> None:
        self._run_id = run_id
        self._events: list[Event] = []
        self._streamed = ""
        self._task = Task(id=run_id, context_id=run_id,
                          status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                          history=[Message(message_id=f"{run_id}-question", role=Role.ROLE_USER,
                                           task_id=run_id, context_id=run_id,
                                           parts=[new_text_part(question)])])

    @property
    def task_id(self) -> str:
        """The task's id: its run's."""
        return self._run_id

    @property
    def last_seq(self) -> int:
        """The seq of the last event applied (0: none yet)."""
        return self._events[-1].seq if self._events else 0

    @property
    def state(self) -> TaskState:
        return self._task.status.state

    @property
    def terminal(self) -> bool:
        """True once the task is completed, failed or canceled (nothing more will change)."""
        return self._task.status.state in TERMINAL_STATES

    def snapshot(self) -> Task:
        """The task as of the last event applied (a copy)."""
        task = Task()
        task.CopyFrom(self._task)
        return task

    def apply(self, event: Event) -> list[Update]:
        """Take the run's next event; return the updates a stream sends for it.

        An event at or before the last one applied is ignored (a store that repeats
        an ended run's terminal event to a late subscriber adds nothing).
        """
        if self._events and event.seq <= self._events[-1].seq:
            return []
        self._events.append(event)
        match event:
            case RunStarted():
                self._task.metadata.update({"mode": event.mode,
                                            "collections": list(event.collections)})
                what = "research" if event.mode == "agent" else "one-shot search"
                return [self._status(event, TaskState.TASK_STATE_WORKING,
                                     f"{what} over {', '.join(event.collections)}")]
            case SearchRequested():
                return [self._status(event, TaskState.TASK_STATE_WORKING,
                                     f"searching: {event.query}")]
            case AnswerRequested():
                return [self._status(event, TaskState.TASK_STATE_WORKING,
                                     "writing the answer from the evidence")]
            case RunResumed():
                return [self._status(event, TaskState.TASK_STATE_WORKING,
                                     "resumed from the stored events")]
            case AnswerDelta():
                return [self._chunk(event.text)]
            case RunFinished():
                return self._finish(event)
        return []

    # --- updates ----------------------------------------------------------------------------

    def _status(self, event: Event, state: TaskState, text: str) -> TaskStatusUpdateEvent:
        status = TaskStatus(state=state, timestamp=datetime.fromtimestamp(event.ts, UTC))
        if text:
            status.message.CopyFrom(Message(
                message_id=f"{self._run_id}-{event.seq}", role=Role.ROLE_AGENT,
                task_id=self._run_id, context_id=self._run_id, parts=[new_text_part(text)]))
        self._task.status.CopyFrom(status)
        return TaskStatusUpdateEvent(task_id=self._run_id, context_id=self._run_id,
                                     status=status)

    def _artifact(self, parts: list[Part], *, append: bool,
                  last: bool) -> TaskArtifactUpdateEvent:
        return TaskArtifactUpdateEvent(
            task_id=self._run_id, context_id=self._run_id, append=append, last_chunk=last,
            artifact=Artifact(artifact_id=ANSWER_ARTIFACT_ID, name="answer", parts=parts))

    def _keep_answer(self, text: str, citations: list[dict[str, Any]] | None) -> None:
        parts = [new_text_part(text, media_type="text/plain")]
        if citations is not None:
            parts.append(new_data_part({"citations": citations}, media_type="application/json"))
        del self._task.artifacts[:]
        self._task.artifacts.append(Artifact(
            artifact_id=ANSWER_ARTIFACT_ID, name="answer",
            description="The verified answer (each claim quoted from a source, numbered) "
                        "and its citations.", parts=parts))

    def _chunk(self, text: str) -> TaskArtifactUpdateEvent:
        """Verified answer text as the run publishes it (a draft is never sent)."""
        first = not self._streamed
        self._streamed += text
        self._keep_answer(self._streamed, None)
        return self._artifact([new_text_part(text, media_type="text/plain")],
                              append=not first, last=False)

    def _finish(self, event: RunFinished) -> list[Update]:
        state = OUTCOME_STATES[event.outcome]
        if event.outcome == "interrupted":  # a resume may follow: the task is not over
            return [self._status(event, state, _INTERRUPTED)]
        self._task.metadata.update({"outcome": event.outcome})
        if event.task is not None:  # handed_off: the background task that goes on
            self._task.metadata.update({"task": event.task.model_dump()})
        result = RunResult.from_events(self._events)
        updates: list[Update] = []
        if result.answer or self._streamed:
            citations = [c.to_json() for c in result.citations]
            data = new_data_part({"citations": citations}, media_type="application/json")
            if result.answer.startswith(self._streamed):  # the rest: the run's notes, if any
                rest = result.answer[len(self._streamed):]
                parts = [new_text_part(rest, media_type="text/plain")] if rest else []
                updates.append(self._artifact([*parts, data], append=bool(self._streamed),
                                              last=True))
            else:  # the streamed text is not how the answer ends: the whole answer replaces it
                updates.append(self._artifact(
                    [new_text_part(result.answer, media_type="text/plain"), data],
                    append=False, last=True))
            self._keep_answer(result.answer, citations)
        said = result.reason if result.answer else (result.reason or _NO_ANSWER.get(
            event.outcome, ""))
        updates.append(self._status(event, state, said))
        return updates
