"""The worker side of a remote actor: one actor instance inside a Ray actor process.

:class:`ActorHost` is a plain class; :class:`actors.RayPlacement` turns it into
a Ray actor class (``ray.remote``) so this module imports no Ray. Its methods
are ``async``, which makes it an *async* Ray actor: ``ray.cancel`` on a call
cancels the handler's ``asyncio`` task mid-await, as a timeout or a run
cancel does to a local handler. :meth:`ActorHost.handle` is an async
generator, so Ray runs it as a *streaming* generator task: what the handler
emits is yielded (as progress frames) while it runs, and the reply comes last.

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
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from streams import Claim, Event, Outcome, TaskLink, decode_msgpack

from ._actor import Actor, error_info
from ._ray_wire import Emit, Finish, PackedEffect, RemoteReply, encode_frame, pack_effect

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
    """The :class:`~actors.ActorContext` of one remote call: queues effects for the run.

    ``emit`` and ``finish`` cannot reach the run's stream from here; they are
    packed at once (so an event that cannot cross fails the ``emit`` call, in
    the handler, as a local publish error would) and queued in order for the
    host to send; ``wake`` tells it there is something to send. Both may be
    called from the handler's threads too (``asyncio.to_thread``). ``emit``
    returns the event unstamped and ``finish`` returns ``True`` (the claim is
    only requested; the run decides).
    """

    __slots__ = ("_deadline", "_run_id", "_wake", "pending")

    def __init__(self, run_id: str, remaining: float | None,
                 wake: Callable[[], None] | None = None) -> None:
        self._run_id = run_id
        self._deadline = None if remaining is None else time.monotonic() + remaining
        self._wake = wake
        self.pending: deque[PackedEffect] = deque()

    @property
    def run_id(self) -> str:
        return self._run_id

    def emit(self, event: Event, cause: Event | int | None = None) -> Event | None:
        seq = cause.seq if isinstance(cause, Event) else cause
        if seq is not None and isinstance(event, Event) and event.cause is None:
            event = event.model_copy(update={"cause": seq})
        self._queue(pack_effect(Emit(event)))
        return event

    def remaining(self) -> float | None:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())

    def finish(self, outcome: Outcome, *, reason: str = "", answer: str = "",
               claims: Sequence[Claim] = (), task: TaskLink | None = None) -> bool:
        # ``task`` is the run controller's (a hand-off), and the controller never runs on Ray
        self._queue(pack_effect(Finish(outcome, reason, answer, tuple(claims))))
        return True

    def _queue(self, packed: PackedEffect) -> None:
        self.pending.append(packed)
        if self._wake is not None:
            self._wake()

    def take(self) -> list[PackedEffect]:
        """The queued effects, oldest first, removed (safe against a thread appending)."""
        pending = self.pending
        out: list[PackedEffect] = []
        while pending:
            out.append(pending.popleft())
        return out


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

    async def handle(self, request: bytes, run_id: str,
                     remaining: float | None) -> AsyncIterator[bytes]:
        """Serve one request: progress frames while the handler runs, then its reply frame.

        The handler runs in a task of its own so this generator can yield what it
        emits meanwhile; effects that pile up between two wake-ups go in one frame.
        When Ray cancels the call, the cancel lands here and is passed on to the
        handler, which is awaited before the cancel goes on.
        """
        await self._ensure_started()
        msg = decode_msgpack(request)
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()
        wake = asyncio.Event()

        def poke() -> None:
            if threading.get_ident() == loop_thread:
                wake.set()
            else:  # an emit from the handler's worker thread
                loop.call_soon_threadsafe(wake.set)

        ctx = _HostContext(run_id, remaining, poke)
        task = asyncio.ensure_future(self._serve(msg, ctx))
        task.add_done_callback(lambda _: wake.set())
        try:
            while not task.done():
                await wake.wait()
                wake.clear()
                if not task.done() and ctx.pending:
                    yield encode_frame(ctx.take())
            reply = task.result()
            yield encode_frame(ctx.take(), reply)
        finally:
            if not task.done():
                task.cancel()
                await asyncio.wait([task])  # (its cancel is its own; ours goes on after)

    async def call(self, request: bytes, run_id: str, remaining: float | None) -> bytes:
        """Serve one request in one reply frame (what the handler emitted travels with it).

        The plain Ray call: cheaper per hop than :meth:`handle`'s stream (~0.5 ms
        of the caller's CPU), for actors whose emitted events need not be live.
        """
        await self._ensure_started()
        ctx = _HostContext(run_id, remaining)
        reply = await self._serve(decode_msgpack(request), ctx)
        return encode_frame(ctx.take(), reply)

    async def _serve(self, msg: Event, ctx: _HostContext) -> RemoteReply:
        """The handler's outcome as a reply (effects travel apart, through ``ctx``)."""
        try:
            out = await self._actor.on_receive(msg, ctx)
        except Exception as exc:  # answered like a local handler's failure
            try:
                failure = self._actor.on_failure(msg, exc)
            except Exception as hook_exc:
                failure = Actor.on_failure(self._actor, msg, hook_exc)
            return RemoteReply(error=error_info(exc), failure=failure)
        return RemoteReply(out=None if out is None else tuple(out))

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
