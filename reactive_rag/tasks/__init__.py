"""Persisted background tasks: whole-document summaries that outlive clients and restarts.

:class:`TaskManager` stores a task before it starts, persists progress after
every chunk and resumes unfinished tasks after a restart. This is the domain
package (no HTTP): the server serves tasks over HTTP
(:mod:`reactive_rag.server._tasks`).
"""

from ._events import TaskFinished, TaskProgress, TaskStarted
from ._exceptions import DocumentNotFound, TaskError, UnknownTask
from ._manager import SUMMARY_KIND, TaskManager
from ._summary import SummaryState

__all__ = [
    "SUMMARY_KIND",
    "DocumentNotFound",
    "SummaryState",
    "TaskError",
    "TaskFinished",
    "TaskManager",
    "TaskProgress",
    "TaskStarted",
    "UnknownTask",
]
