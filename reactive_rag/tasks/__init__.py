"""Persisted background tasks: whole-document summaries that outlive clients and restarts.

:class:`TaskManager` stores a task before it starts, persists progress after
every chunk and resumes unfinished tasks after a restart. Other kinds of work
(the server's collection builds) register with :meth:`TaskManager.register` and are
stored, followed and resumed the same way. This is the domain
package (no HTTP): the server serves tasks over HTTP
(:mod:`reactive_rag.server._tasks`).
"""

from ._events import TaskFinished, TaskProgress, TaskStarted
from ._exceptions import DocumentNotFound, TaskError, UnknownTask
from ._handoff import TASK_LINK, SummaryStarter, summary_starter, task_link
from ._manager import SUMMARY_KIND, TaskManager, TaskReport, TaskWork
from ._summary import SummaryState

__all__ = [
    "SUMMARY_KIND",
    "TASK_LINK",
    "DocumentNotFound",
    "SummaryStarter",
    "SummaryState",
    "TaskError",
    "TaskFinished",
    "TaskManager",
    "TaskProgress",
    "TaskReport",
    "TaskStarted",
    "TaskWork",
    "UnknownTask",
    "summary_starter",
    "task_link",
]
