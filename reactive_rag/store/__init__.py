"""Durable runs: the run store protocol, the SQLite, Redis and PostgreSQL stores, the recorder.

A :class:`Recorder` subscribes to a run's stream and writes every event, in
order, to a :class:`RunStore`; readers replay a stored run or attach to a live
one from any ``seq`` with no gap and no duplicate. Each writing store is an
owner with a lease (renewed by a :class:`LeaseKeeper`); runs of owners whose
lease expired are marked interrupted by the others, and can be reopened.
Conversation sessions (:class:`SessionStore`, :class:`SessionRecord`: opaque JSON
with a sliding TTL) are a protocol of their own, kept beside the runs (a
:class:`ServerStore` is both); background tasks (:class:`TaskStore`) are part of
:class:`RunStore` (``_tasks_sqlite`` and :mod:`.backends` implement it).

:class:`RedisRunStore` and :class:`PostgresRunStore` are imported on first use,
so the ``redis`` package, and ``psycopg`` (the ``postgres`` extra), are only
needed by those who use them.
"""

from typing import TYPE_CHECKING, Any

from ._base import StoreBase, session_id_ok
from ._cancel_requests import CancelRequest, CancelRequests
from ._exceptions import (
    AmbiguousRunId,
    InvalidCursor,
    RunAlreadyFinished,
    RunExists,
    RunNotFound,
    RunNotResumable,
    RunOwnedElsewhere,
    RunStillRunning,
    SeqConflict,
    SessionExists,
    SessionNotFound,
    StoreClosed,
    StoreCorrupt,
    StoreError,
    StoreReadOnly,
    StoreUnavailable,
    TaskAlreadyFinished,
    TaskExists,
    TaskNotFound,
)
from ._lease import LeaseKeeper, default_owner
from ._protocol import (
    BackgroundTask,
    RunMeta,
    RunPage,
    RunRecord,
    RunStatus,
    RunStore,
    ServerStore,
    SessionRecord,
    SessionStore,
    TaskStatus,
    TaskStore,
    TaskUpdate,
)
from ._recorder import Recorder, RecorderStats
from ._resolve import resolve_run_id
from ._sqlite import SqliteRunStore

if TYPE_CHECKING:
    from .backends import PostgresRunStore, RedisRunStore

__all__ = [
    "AmbiguousRunId",
    "BackgroundTask",
    "CancelRequest",
    "CancelRequests",
    "InvalidCursor",
    "LeaseKeeper",
    "PostgresRunStore",
    "Recorder",
    "RecorderStats",
    "RedisRunStore",
    "RunAlreadyFinished",
    "RunExists",
    "RunMeta",
    "RunNotFound",
    "RunNotResumable",
    "RunOwnedElsewhere",
    "RunPage",
    "RunRecord",
    "RunStatus",
    "RunStillRunning",
    "RunStore",
    "SeqConflict",
    "ServerStore",
    "SessionExists",
    "SessionNotFound",
    "SessionRecord",
    "SessionStore",
    "SqliteRunStore",
    "StoreBase",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreReadOnly",
    "StoreUnavailable",
    "TaskAlreadyFinished",
    "TaskExists",
    "TaskNotFound",
    "TaskStatus",
    "TaskStore",
    "TaskUpdate",
    "default_owner",
    "resolve_run_id",
    "session_id_ok",
]


def __getattr__(name: str) -> Any:
    """The server-grade stores, imported on first use (:mod:`.backends` decides how)."""
    if name in ("PostgresRunStore", "RedisRunStore"):
        from . import backends

        return getattr(backends, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
