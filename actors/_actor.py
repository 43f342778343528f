"""The actor contract: what an actor declares and the hooks the runtime calls.

An actor never calls another actor. It declares the event types it handles;
the runtime feeds those to :meth:`Actor.on_receive` from a bounded mailbox and
publishes what the handler returns (or emits) with ``actor`` and ``cause`` set.
A handler that raises answers its request with :meth:`Actor.on_failure`'s
event; the actor and the run go on. A run resumed after a crash gets fresh
actors, each rebuilding its per-run state in :meth:`Actor.on_restore`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from streams import ActorFailed, Claim, ErrorInfo, Event, Outcome, TaskLink

__all__ = ["Actor", "ActorContext", "error_info"]


class ActorContext(Protocol):
    """What a handler may do besides returning events: emit, read the clock, end the run.

    The runtime hands each handler one (:meth:`actors.ActorRun.context_for`);
    an actor never sees the run's stream itself, so it cannot publish around
    the runtime (its ``actor`` and ``cause`` stamps, the run's end claim).
    """

    @property
    def run_id(self) -> str: ...

    def emit(self, event: Event, cause: Event | int | None = None) -> Event | None:
        """Publish now (e.g. streamed deltas); ``None`` if the run already ended."""
        ...

    def remaining(self) -> float | None:
        """Seconds left before the run's deadline (``None``: no deadline)."""
        ...

    def finish(self, outcome: Outcome, *, reason: str = "", answer: str = "",
               claims: Sequence[Claim] = (), task: TaskLink | None = None) -> bool:
        """Claim the run's end; ``False`` if something else claimed it first."""
        ...


class Actor:
    """Base class of every actor (pykka-style hooks: restore, start, receive, stop, failure).

    Class attributes (an instance may override them before the run starts):
        name: the ``actor`` stamped on what it publishes; unique within a run.
        handles: event ``type`` strings routed to this actor's mailbox.
        concurrency: requests handled at once (workers sharing the mailbox).
        mailbox_size: requests that may wait; a full mailbox answers the
            request with a failure event instead of blocking the stream.
        timeout_s: cap per request; the run's remaining time caps it further.
        finalizes: the actor answers after the deadline too (writer, verifier,
            final rerank): its requests are capped by the deadline *plus* the
            run's grace, so a finalizer that awaits is not cut at once.
    """

    name: str = ""
    handles: tuple[str, ...] = ()
    concurrency: int = 1
    mailbox_size: int = 1024
    timeout_s: float | None = None
    finalizes: bool = False

    def on_restore(self, events: Sequence[Event]) -> None:
        """Rebuild this actor's per-run state from a resumed run's stored events.

        Called only when a run interrupted by a crash is resumed, on the fresh
        actor, once, before :meth:`on_start` and before its mailbox starts:
        ``events`` is the run's whole stored log in ``seq`` order (ending with
        the ``run.finished(interrupted)`` crash recovery wrote). The actor sees
        none of them as messages; what it handles after this is new. The
        default keeps nothing (an actor with no per-run state).
        """

    async def on_start(self, ctx: ActorContext) -> None:
        """Called once before the first message (acquire resources here)."""

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        """Handle one request; return the events to publish (``cause`` defaults to ``msg``)."""
        raise NotImplementedError

    async def on_stop(self, ctx: ActorContext) -> None:
        """Called once when the run ends (release resources here)."""

    def on_failure(self, msg: Event, exc: BaseException) -> Event | None:
        """The event that answers ``msg`` when its handler raised or timed out.

        Override to answer with a domain failure (``search.failed``...); return
        ``None`` to publish nothing.
        """
        return ActorFailed(request_type=msg.type, error=error_info(exc))

    def describe(self) -> Mapping[str, Any]:
        """Static facts for monitors (name, handled types, limits)."""
        return {
            "name": self.name,
            "handles": list(self.handles),
            "concurrency": self.concurrency,
            "mailbox_size": self.mailbox_size,
        }


def error_info(exc: BaseException) -> ErrorInfo:
    """Turn an exception into the ``ErrorInfo`` carried by failure events."""
    retryable = bool(getattr(exc, "retryable", isinstance(exc, TimeoutError)))
    message = str(exc) or type(exc).__name__
    return ErrorInfo(kind=type(exc).__name__, message=message[:2000], retryable=retryable)
