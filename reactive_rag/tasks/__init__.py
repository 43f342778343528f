"""Persisted background tasks: whole-document summaries that outlive clients and restarts.

:class:`TaskManager` stores a task before it starts, persists progress after
every chunk and resumes unfinished tasks after a restart; ``task_routes``
serves them over HTTP (see :mod:`reactive_rag.tasks._http` for mounting).
"""

from ._events import TaskFinished, TaskProgress, TaskStarted
from ._exceptions import DocumentNotFound, TaskError, UnknownTask
from ._http import (
    TASK_ALLOWS,
    TASK_MANAGER,
    TASK_PROBLEM_CODES,
    TASK_TENANT,
    openapi_paths,
    setup_routes,
    task_routes,
    task_view,
    tasks_context,
)
from ._manager import SUMMARY_KIND, TaskManager
from ._summary import SummaryState, split_sentences

__all__ = [
    "SUMMARY_KIND",
    "TASK_ALLOWS",
    "TASK_MANAGER",
    "TASK_PROBLEM_CODES",
    "TASK_TENANT",
    "DocumentNotFound",
    "SummaryState",
    "TaskError",
    "TaskFinished",
    "TaskManager",
    "TaskProgress",
    "TaskStarted",
    "UnknownTask",
    "openapi_paths",
    "setup_routes",
    "split_sentences",
    "task_routes",
    "task_view",
    "tasks_context",
]
