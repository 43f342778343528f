"""The worker side of a remote actor: one actor instance inside a Ray actor process.

:class:`ActorHost` is a plain class; :class:`actors.RayPlacement` turns it into
a Ray actor class (``ray.remote``) so this module imports no Ray. Its methods
are ``async``, which makes it an *async* Ray actor: ``ray.cancel`` on a call
cancels the handler's ``asyncio`` task mid-await, as a timeout or a run
cancel does to a local handler.

The hosted actor is built in the worker by a picklable factory (a class, a
``functools.partial``, a module-level function), not pickled from the run's
process: what makes an actor worth placing remotely (an ONNX session, a GPU
model, a browser) does not pickle, and a factory also rebuilds it when Ray
restarts a dead worker. One host serves the requests of every run using the
placement, so its actor must not keep per-run state; its ``on_start`` runs once
per worker process (again after a restart), ``on_stop`` at shutdown.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from streams import Claim, Event, Outcome, decode_msgpack

from ._actor import Actor, error_info
from ._ray_wire import Effect, Emit, Finish, RemoteReply, encode_reply

__all__ = ["ActorHost", "describe_actor"]

ActorFactory = Callable[[], Actor]


def describe_actor(actor: Actor) -> dict[str, Any]:
    """The limits a run's proxy copies from the hosted actor."""
    return {
        "name": actor.name,
        "handles": list(actor.handles),
        "concurrency": actor.concurrency,
        "mailbox_size": actor.mailbox_size,
        "timeout_s": actor.timeout_s,
        "finalizes": actor.finalizes,
    }


class _HostContext:
    """The :class:`~actors.ActorContext` of one remote call: records, replays at home.

    ``emit`` and ``finish`` cannot reach the run's stream from here; they are
    recorded in order and replayed by the run's proxy when the call returns,
    so emitted events arrive with the reply, not while the handler runs.
    ``emit`` returns the event unstamped and ``finish`` returns ``True``
    (the claim is only requested; the run decides).
    """

    __slots__ = ("_deadline", "_run_id", "effects")

    def __init__(self, run_id: str, remaining: float | None) -> None:
        self._run_id = run_id
        self._deadline = None if remaining is None else time.monotonic() + remaining
        self.effects: list[Effect] = []

    @property
    def run_id(self) -> str:
        return self._run_id

    def emit(self, event: Event, cause: Event | int | None = None) -> Event | None:
        seq = cause.seq if isinstance(cause, Event) else cause
        if seq is not None and event.cause is None:
            event = event.model_copy(update={"cause": seq})
        self.effects.append(Emit(event))
        return event

    def remaining(self) -> float | None:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())

    def finish(self, outcome: Outcome, *, reason: str = "", answer: str = "",
               claims: Sequence[Claim] = ()) -> bool:
        self.effects.append(Finish(outcome, reason, answer, tuple(claims)))
        return True


class ActorHost:
    """Hosts one actor built by ``factory``; serves its requests as msgpack bytes."""

    def __init__(self, factory: ActorFactory) -> None:
        actor = factory()
        if not isinstance(actor, Actor):
            raise TypeError(f"the factory must build an Actor, got {type(actor).__name__}")
        self._actor = actor
        self._started = False
        self._start_lock = asyncio.Lock()

    async def start(self) -> dict[str, Any]:
        """Run ``on_start`` (once per process) and return the actor's limits."""
        await self._ensure_started()
        return describe_actor(self._actor)

    async def _ensure_started(self) -> None:
        if self._started:
            return
        async with self._start_lock:
            if not self._started:
                await self._actor.on_start(_HostContext("", None))
                self._started = True

    async def handle(self, request: bytes, run_id: str, remaining: float | None) -> bytes:
        """Serve one request: the handler's effects, returned events or failure, packed."""
        await self._ensure_started()
        msg = decode_msgpack(request)
        ctx = _HostContext(run_id, remaining)
        try:
            out = await self._actor.on_receive(msg, ctx)
        except Exception as exc:  # answered like a local handler's failure
            try:
                failure = self._actor.on_failure(msg, exc)
            except Exception as hook_exc:
                failure = Actor.on_failure(self._actor, msg, hook_exc)
            return encode_reply(RemoteReply(effects=tuple(ctx.effects), error=error_info(exc),
                                            failure=failure))
        return encode_reply(RemoteReply(effects=tuple(ctx.effects),
                                        out=None if out is None else tuple(out)))

    async def cpu_seconds(self) -> float:
        """CPU time this worker process used so far (every thread: the model's too)."""
        return time.process_time()

    async def ping(self) -> int:
        """A no-op call: measures a hop and proves the process alive."""
        return 0

    async def stop(self) -> None:
        """Run the actor's ``on_stop`` (at the placement's shutdown)."""
        if self._started:
            await self._actor.on_stop(_HostContext("", None))
