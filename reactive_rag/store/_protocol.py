"""The run-store contract: records, pages, background tasks, ``RunStore`` and ``TaskStore``.

A store keeps runs (who asked what, status, outcome) and every event of each
run in ``seq`` order, so a run can be replayed after the fact or attached to
while it is still going. The embedded SQLite store, the Redis store and the
PostgreSQL store implement :class:`RunStore`; the HTTP server and the CLI only
see the protocol.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, Self, runtime_checkable

from pydantic import JsonValue

from streams import Event, Outcome

from ._cancel_requests import CancelRequests

__all__ = [
    "AppendsNow",
    "BackgroundTask",
    "RunMeta",
    "RunPage",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "ServerStore",
    "SessionRecord",
    "SessionStore",
    "TaskStatus",
    "TaskStore",
    "TaskUpdate",
]

RunStatus = Literal["running", "finished", "interrupted"]

@dataclass(frozen=True, slots=True)
class RunMeta:
    """What a caller states when a run is created."""

    run_id: str
    tenant: str
    question: str
    mode: str = "agent"


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A stored run as readers see it (timestamps are Unix seconds)."""

    run_id: str
    tenant: str
    question: str
    mode: str
    status: RunStatus
    outcome: Outcome | None
    created_at: float
    updated_at: float
    last_seq: int
    cursor: str
    """Opaque token: pass it as ``before`` to list the runs older than this one."""


@dataclass(frozen=True, slots=True)
class RunPage:
    """One page of a tenant's runs, newest first."""

    runs: tuple[RunRecord, ...]
    next_before: str | None
    """Cursor for the next (older) page, ``None`` on the last page."""


class TaskStatus(enum.StrEnum):
    """Life of a background task; the last three are final and never overwritten."""

    PENDING = "pending"  # created, not yet picked up (or picked up by a process that died)
    RUNNING = "running"  # a runner is working on it and reports progress
    DONE = "done"  # result stored
    FAILED = "failed"  # error stored
    CANCELLED = "cancelled"  # someone gave up on it

    @property
    def final(self) -> bool:
        """True for statuses a task never leaves."""
        return self in (TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.CANCELLED)


@dataclass(frozen=True, slots=True)
class BackgroundTask:
    """A persisted unit of background work (e.g. a whole-document summary).

    Stored so that a restart can find unfinished tasks and run them again;
    ``params`` must be enough to redo the work from scratch.
    """

    task_id: str
    tenant: str
    kind: str
    run_id: str | None = None
    doc_id: str | None = None
    status: TaskStatus = TaskStatus.PENDING
    progress: float = 0.0
    params: dict[str, JsonValue] = field(default_factory=dict)
    result: JsonValue = None
    error: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class TaskUpdate:
    """A partial update of a task; ``None`` fields stay as they are."""

    status: TaskStatus | None = None
    progress: float | None = None
    result: JsonValue = None
    error: str | None = None

    def __post_init__(self) -> None:
        if self.progress is not None and not 0.0 <= self.progress <= 1.0:
            raise ValueError("progress must be within [0, 1]")


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A stored conversation session (timestamps are Unix seconds, by the store's clock).

    ``data`` is opaque to the store (the conversation's JSON state); the
    session lives ``ttl_s`` after it was last used (sliding TTL): every
    :meth:`SessionStore.get_session` that touches it and every
    :meth:`SessionStore.save_session` moves ``expires_at`` to now + ``ttl_s``.
    """

    session_id: str
    tenant: str
    data: dict[str, JsonValue]
    ttl_s: float
    created_at: float
    updated_at: float
    """When ``data`` last changed (created or saved); a touch leaves it alone."""
    expires_at: float


@runtime_checkable
class TaskStore(Protocol):
    """Durable background tasks (:class:`BackgroundTask`): what a task runner needs.

    Every run store implements it (``_tasks_sqlite``, ``_tasks_redis``,
    ``_tasks_postgres``), with the same open/closed, unavailable and read-only
    errors as their runs.
    """

    async def create_task(self, task: BackgroundTask) -> BackgroundTask:
        """Persist a new background task (timestamps are set by the store)."""
        ...

    async def update_task(self, task_id: str, update: TaskUpdate) -> BackgroundTask:
        """Apply ``update`` and return the task.

        Raises:
            TaskNotFound, TaskAlreadyFinished.
        """
        ...

    async def get_task(self, task_id: str, tenant: str | None = None) -> BackgroundTask:
        """One task, scoped to ``tenant``; raises TaskNotFound."""
        ...

    async def list_unfinished_tasks(self) -> list[BackgroundTask]:
        """Pending and running tasks, oldest first (what a restarted runner resumes)."""
        ...


@runtime_checkable
@runtime_checkable
class AppendsNow(Protocol):
    """A store that can sometimes commit an append at once, without waiting for anything."""

    def append_now(self, run_id: str, events: Sequence[Event]) -> int | None:
        """Like ``RunStore.append``, synchronously, when that cannot wait (on a lock, a
        disk flush, another thread); ``None`` (nothing written) otherwise."""


class RunStore(TaskStore, CancelRequests, Protocol):
    """Durable runs and their event logs.

    Every method raises :class:`~reactive_rag.store.StoreClosed` before
    :meth:`open` and after :meth:`close`, and
    :class:`~reactive_rag.store.StoreUnavailable` when the backend is down.
    A ``tenant`` argument of ``None`` means an operator (no tenant scope).

    Every writing store is an ``owner`` holding a lease that lasts
    ``lease_ttl_s`` after each :meth:`heartbeat`; the ``running`` runs of an
    owner whose lease expired (or who never had one, e.g. rows written before
    leases existed) were left by a process that is gone, and any other owner
    marks them ``interrupted`` (:meth:`recover_expired`).
    """

    owner: str
    """Who writes this store's runs: a configured name, or a unique id per store."""

    lease_ttl_s: float
    """How long this owner's lease lasts after a :meth:`heartbeat` (seconds)."""

    async def open(self) -> list[str]:
        """Connect, create the schema, write this owner's lease, then recover.

        Marks ``interrupted`` this owner's own ``running`` runs (a previous
        incarnation of the same configured owner crashed) and those of owners
        whose lease expired (as :meth:`recover_expired`). A read-only store
        writes and recovers nothing.

        Returns:
            ids of the runs that were marked interrupted.
        """
        ...

    async def close(self) -> None:
        """Delete this owner's lease (best effort), release connections; idempotent."""
        ...

    async def heartbeat(self) -> None:
        """Write or renew this owner's lease: it expires ``lease_ttl_s`` from now.

        Raises:
            StoreReadOnly: the store was opened read-only.
            StoreUnavailable: the backend is down or refuses the write.
        """
        ...

    async def recover_expired(self) -> list[str]:
        """Mark ``interrupted`` the running runs of other owners whose lease expired.

        Each such run gets the same terminal ``run.finished(interrupted)`` event
        at ``last_seq + 1`` as crash recovery on :meth:`open`, exactly once even
        when several replicas sweep at the same time. A read-only store returns
        ``[]`` and writes nothing.

        Returns:
            ids of the runs marked interrupted by this call.
        """
        ...

    async def reopen(self, run_id: str, tenant: str | None = None) -> RunRecord:
        """Resume an ``interrupted`` run: ``running`` again, owned by this owner.

        The outcome is cleared and the stored events stay as they are
        (including the ``run.finished(interrupted)`` that ends them); appends
        then continue at ``last_seq + 1``, and a later ``run.finished`` closes
        the run as usual. Atomic: of two concurrent reopens, one succeeds.

        Raises:
            RunNotFound: missing, or another tenant's.
            RunNotResumable: the run is running or finished, not interrupted.
            StoreReadOnly: the store was opened read-only.
        """
        ...

    async def __aenter__(self) -> Self:
        """:meth:`open`, as a context manager."""
        ...

    async def __aexit__(self, *exc_info: object) -> None:
        """:meth:`close`."""
        ...

    async def create_run(self, meta: RunMeta) -> RunRecord:
        """Store a new run in status ``running``.

        Raises:
            RunExists: the id is taken.
        """
        ...

    async def append(self, run_id: str, events: Sequence[Event]) -> int:
        """Store events in one transaction and return the run's new ``last_seq``.

        Events must continue the stored ``seq`` (``last_seq + 1``, ``+ 2``...);
        events at or below ``last_seq`` are ignored, so re-sending a batch is
        harmless. A ``run.finished`` event sets the run's status and outcome.
        A run :meth:`reopen` made ``running`` again takes events after its
        stored ``run.finished(interrupted)``.

        Raises:
            RunNotFound, RunAlreadyFinished, SeqConflict.
        """
        ...

    async def finish(self, run_id: str, outcome: Outcome) -> bool:
        """Close a running run with ``outcome``; False if it was already closed."""
        ...

    async def get_run(self, run_id: str, tenant: str | None = None) -> RunRecord:
        """One run, scoped to ``tenant``.

        Raises:
            RunNotFound: missing, or another tenant's.
        """
        ...

    async def list_runs(
        self, tenant: str, *, limit: int = 50, before: str | None = None
    ) -> RunPage:
        """A tenant's runs, newest first, ``limit`` per page.

        Raises:
            InvalidCursor: ``before`` is not a cursor this store issued.
        """
        ...

    async def run_ids_with_prefix(
        self, prefix: str, *, tenant: str | None = None, limit: int = 10
    ) -> list[str]:
        """Up to ``limit`` stored run ids that start with ``prefix``, sorted (for short ids).

        Scoped to ``tenant`` (``None``: an operator, every tenant).
        """
        ...

    def events(
        self, run_id: str, after_seq: int = 0, *, tenant: str | None = None
    ) -> AsyncIterator[Event]:
        """Replay the stored events with ``seq > after_seq`` (what is stored now).

        An async generator: scope errors (``RunNotFound``) surface on the first
        iteration. Close it early with ``contextlib.aclosing``.
        """
        ...

    def attach(
        self, run_id: str, after_seq: int = 0, *, tenant: str | None = None
    ) -> AsyncIterator[Event]:
        """Committed events with ``seq > after_seq``, stored tail then live, until the run ends.

        Only committed events are yielded (commit-before-deliver): when this
        process records the run, each event comes as soon as its batch is
        committed; otherwise the store is followed (another process may be
        writing). Ends after ``run.finished``; a ``run.finished(interrupted)``
        that a resume continued (a ``run.resumed`` follows) does not end it. A
        client already holding the last seq of an ended run (or a seq the store
        never had) gets the terminal event again, never an empty stream. If the
        store stopped taking the run's events, the stream ends with the
        ``run.finished(failed)`` the recorder will store once it can. An async
        generator: ``RunNotFound`` surfaces on the first iteration; closing it
        early (``contextlib.aclosing``) unsubscribes at once.
        """
        ...

    async def mark_interrupted(self) -> list[str]:
        """Mark this owner's ``running`` runs ``interrupted`` (outcome too); return their ids."""
        ...

    async def delete_run(self, run_id: str, tenant: str | None = None) -> None:
        """Delete an ended run: its record, its events and every index entry naming it.

        Atomic against appends and :meth:`reopen`: a run that is ``running`` (here
        or on another replica) is never deleted. Deleted ids are gone for good: the
        same id reads as a run that never existed.

        Raises:
            RunNotFound: missing, or another tenant's.
            RunStillRunning: the run is ``running``; cancel it first.
            StoreReadOnly: the store was opened read-only.
        """
        ...

    async def delete_runs_before(self, tenant: str, before_ts: float, *,
                                 limit: int = 100) -> list[str]:
        """Delete up to ``limit`` of ``tenant``'s ended runs last changed before ``before_ts``.

        "Last changed" is the run's ``updated_at`` (when its last event was
        stored: for an ended run, when it ended). ``running`` runs are never
        deleted. Oldest first; call again until fewer than ``limit`` come back.

        Returns:
            the ids deleted by this call.

        Raises:
            StoreReadOnly: the store was opened read-only.
        """
        ...


class SessionStore(Protocol):
    """Conversation sessions: opaque JSON state with a sliding TTL, scoped by tenant.

    Kept apart from :class:`RunStore`: a conversation is a sequence of runs, not part of
    one. The shipped stores implement both (:class:`ServerStore`).
    """

    async def create_session(self, session_id: str, tenant: str, data: dict[str, JsonValue],
                             *, ttl_s: float) -> SessionRecord:
        """Store a new session that expires ``ttl_s`` after its last use.

        ``session_id`` is 1 to 128 of ``A-Z a-z 0-9 _ -``; ``data`` any JSON object.

        Raises:
            SessionExists: the id is taken (by a session that has not expired).
            ValueError: a malformed id, an empty tenant, a ``ttl_s`` that is not
                a positive finite number, or ``data`` that is not JSON.
            StoreReadOnly: the store was opened read-only.
        """
        ...

    async def get_session(self, session_id: str, tenant: str | None = None, *,
                          touch: bool = True) -> SessionRecord:
        """One session, scoped to ``tenant``; ``touch`` also moves its expiry to now + TTL.

        A read-only store never writes: it reads as with ``touch=False``.

        Raises:
            SessionNotFound: missing, expired, malformed id, or another tenant's.
        """
        ...

    async def save_session(self, session_id: str, data: dict[str, JsonValue], *,
                           tenant: str | None = None) -> SessionRecord:
        """Replace the session's ``data`` and move its expiry to now + TTL.

        Raises:
            SessionNotFound: missing, expired, or another tenant's.
            ValueError: ``data`` is not JSON.
            StoreReadOnly: the store was opened read-only.
        """
        ...

    async def delete_session(self, session_id: str, tenant: str | None = None) -> bool:
        """Delete the session; False if there was none visible (missing, expired, others').

        Raises:
            StoreReadOnly: the store was opened read-only.
        """
        ...

    async def sweep_sessions(self) -> list[str]:
        """Delete every expired session and return their ids (a read-only store: ``[]``)."""
        ...


class ServerStore(RunStore, SessionStore, Protocol):
    """What the HTTP server keeps in one store: runs, background tasks and conversations."""
