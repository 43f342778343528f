"""Events of a background task's stream (registered with the codecs).

A task publishes on its own :class:`~streams.RunStream` (whose ``run_id`` is
the task id): ``task.started`` (with where it resumed), ``task.progress``
after every chunk, and exactly one ``task.finished`` last.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import JsonValue

from streams import Event, Priority, register_event

__all__ = ["TaskFinished", "TaskProgress", "TaskStarted"]


@register_event
class TaskStarted(Event):
    """A runner picked the task up; ``resumed_from`` chunks were already done."""

    type: Literal["task.started"] = "task.started"
    task_id: str
    kind: str
    doc_id: str = ""
    total: int = 0
    resumed_from: int = 0
    attempt: int = 1


@register_event
class TaskProgress(Event):
    """One more unit of work is done and persisted."""

    type: Literal["task.progress"] = "task.progress"
    task_id: str
    done: int
    total: int
    progress: float
    priority: ClassVar[Priority] = Priority.PROGRESS


@register_event
class TaskFinished(Event):
    """The task ended (``done``, ``failed`` or ``cancelled``); always its last event."""

    type: Literal["task.finished"] = "task.finished"
    task_id: str
    status: Literal["done", "failed", "cancelled"]
    result: JsonValue = None
    error: str = ""
    priority: ClassVar[Priority] = Priority.ESSENTIAL
