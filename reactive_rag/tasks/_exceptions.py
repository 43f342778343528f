"""Errors of background tasks.

Hierarchy::

    TaskError
    ├── DocumentNotFound(TaskError, LookupError)   no such document in the collection
    └── UnknownTask(TaskError, LookupError)         no task with that id (or another tenant's)

Store errors (``TaskNotFound``...) are translated to these where they enter.
"""

from __future__ import annotations

__all__ = ["DocumentNotFound", "TaskError", "UnknownTask"]


class TaskError(Exception):
    """Root of the background-task errors."""


class DocumentNotFound(TaskError, LookupError):
    """The collection has no document with that id (or no such collection)."""


class UnknownTask(TaskError, LookupError):
    """No task with that id is visible to the caller."""
