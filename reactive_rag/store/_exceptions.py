"""Errors of the run store.

Hierarchy::

    StoreError
    ├── RunNotFound(StoreError, LookupError)       missing id, or another tenant's id
    ├── AmbiguousRunId(StoreError, LookupError)    a run id prefix that several runs share
    ├── TaskNotFound(StoreError, LookupError)      missing background task id
    ├── SessionNotFound(StoreError, LookupError)   missing, expired or another tenant's session
    ├── RunExists(StoreError, ValueError)          create_run with an id in use
    ├── TaskExists(StoreError, ValueError)         create_task with an id in use
    ├── SessionExists(StoreError, ValueError)      create_session with an id in use
    ├── RunAlreadyFinished(StoreError)             append to a finished/interrupted run
    ├── RunOwnedElsewhere(RunAlreadyFinished)      append by a writer whose run was resumed
    │                                              elsewhere (it lost its lease)
    ├── RunNotResumable(StoreError)                reopen of a run that is not interrupted
    ├── RunStillRunning(StoreError)                delete of a run that is still running
    ├── TaskAlreadyFinished(StoreError)            update of a done/failed/cancelled task
    ├── SeqConflict(StoreError, ValueError)        appended events leave a gap in ``seq``
    ├── InvalidCursor(StoreError, ValueError)      a ``before`` page cursor we did not issue
    ├── StoreClosed(StoreError, RuntimeError)      used before open() or after close()
    ├── StoreReadOnly(StoreError, PermissionError) a write through a store opened read-only
    ├── StoreUnavailable(StoreError, ConnectionError)  backend unreachable (retryable)
    └── StoreCorrupt(StoreError)                   integrity check failed, or a stored
                                                   event no longer decodes

``RunNotFound`` is deliberately the same for a missing id and for a run of
another tenant, so an error never tells a caller that an id exists; so is
``SessionNotFound`` (which an expired session raises too).
"""

from __future__ import annotations

__all__ = [
    "AmbiguousRunId",
    "InvalidCursor",
    "RunAlreadyFinished",
    "RunExists",
    "RunNotFound",
    "RunNotResumable",
    "RunOwnedElsewhere",
    "RunStillRunning",
    "SeqConflict",
    "SessionExists",
    "SessionNotFound",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreReadOnly",
    "StoreUnavailable",
    "TaskAlreadyFinished",
    "TaskExists",
    "TaskNotFound",
]


class StoreError(Exception):
    """Base of every run-store error."""


class RunNotFound(StoreError, LookupError):
    """No such run for this caller (missing, or owned by another tenant)."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} not found")
        self.run_id = run_id


class AmbiguousRunId(StoreError, LookupError):
    """A run id prefix that more than one stored run starts with.

    ``candidates`` lists (some of) the matching ids, sorted, so a user can pick one.
    """

    def __init__(self, prefix: str, candidates: tuple[str, ...]) -> None:
        super().__init__(f"run id prefix {prefix!r} matches {len(candidates)}"
                         f"{'+' if len(candidates) >= 10 else ''} runs: {', '.join(candidates)}")
        self.prefix = prefix
        self.candidates = candidates


class TaskNotFound(StoreError, LookupError):
    """No such background task for this caller."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id!r} not found")
        self.task_id = task_id


class SessionNotFound(StoreError, LookupError):
    """No such session for this caller (missing, expired, or another tenant's)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id[:128]!r} not found")
        self.session_id = session_id


class SessionExists(StoreError, ValueError):
    """A live session with this id was already created."""


class RunExists(StoreError, ValueError):
    """A run with this id was already created."""


class TaskExists(StoreError, ValueError):
    """A background task with this id was already created."""


class RunAlreadyFinished(StoreError):
    """The run is finished or interrupted; its event log is closed."""


class RunOwnedElsewhere(RunAlreadyFinished):
    """The run was recovered and reopened by another owner: this writer's log is closed.

    Fences a writer that lost its lease (a paused or partitioned server) from
    appending into the run another server resumed.
    """


class RunNotResumable(StoreError):
    """Only an ``interrupted`` run can be reopened (this one is running or finished)."""

    def __init__(self, run_id: str, status: str) -> None:
        super().__init__(f"run {run_id!r} is {status}: only an interrupted run can be reopened")
        self.run_id = run_id
        self.status = status


class RunStillRunning(StoreError):
    """Only a run that ended (finished or interrupted) can be deleted: cancel it first."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} is still running: cancel it, then delete it")
        self.run_id = run_id


class TaskAlreadyFinished(StoreError):
    """The task reached a final status; it is never overwritten."""


class SeqConflict(StoreError, ValueError):
    """Appended events do not continue the stored ``seq`` without a gap."""


class InvalidCursor(StoreError, ValueError):
    """A page cursor that this store did not issue."""


class StoreClosed(StoreError, RuntimeError):
    """The store is not open."""


class StoreReadOnly(StoreError, PermissionError):
    """The store was opened read-only (an operator's view beside a live server)."""


class StoreUnavailable(StoreError, ConnectionError):
    """The storage backend cannot be reached; retrying may help."""


class StoreCorrupt(StoreError):
    """Stored data failed a check or no longer decodes."""
