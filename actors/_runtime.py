"""The actor runtime of one run: mailboxes, workers, deadline, terminal claim.

The run owns its tasks as an ``asyncio.TaskGroup`` would (every task it starts
is cancelled or finished, and awaited, before its ``async with`` block is left),
without a group's per-run cost. Each actor gets a bounded mailbox fed by a
type-indexed tap on the run stream (or by the user's operators for that edge)
and up to ``concurrency`` worker tasks, started when a message arrives and ended
when the mailbox is empty. Completion and cancellation race for one atomic
terminal claim; the winner's teardown cancels every in-flight handler, awaits
it, stops the actors, and only then publishes the one ``run.finished``. The
loser changes nothing, and nothing an actor publishes after the claim reaches
the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import sysconfig
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self
from weakref import getweakrefcount

from reactivex import abc

from streams import (
    BudgetExhausted,
    Claim,
    Event,
    Outcome,
    RunCancelRequested,
    RunFinished,
    RunStream,
    RunUsage,
    TaskLink,
)

from ._actor import Actor, ActorContext
from ._edges import Edge, EdgeOperator
from ._exceptions import ActorStartError, MailboxFull

__all__ = ["ActorRun", "ActorStats", "EdgeOperator"]


@dataclass(frozen=True, slots=True)
class ActorStats:
    """Mailbox depth and counters of one actor (for monitors)."""

    name: str
    depth: int
    mailbox_size: int
    in_flight: int
    processed: int
    failed: int
    rejected: int


class _RunContext:
    """The runtime's :class:`~actors.ActorContext`: one actor's view of one run."""

    __slots__ = ("_actor", "_run")

    def __init__(self, run: ActorRun, actor: Actor) -> None:
        self._run = run
        self._actor = actor

    @property
    def run_id(self) -> str:
        return self._run.run_id

    def emit(self, event: Event, cause: Event | int | None = None) -> Event | None:
        """Publish now (e.g. streamed deltas); ``None`` if the run already ended."""
        seq = cause.seq if isinstance(cause, Event) else cause
        return self._run._publish_from(self._actor, event, seq)

    def remaining(self) -> float | None:
        """Seconds left before the run's deadline (``None``: no deadline)."""
        return self._run.remaining()

    def finish(
        self, outcome: Outcome, *, reason: str = "", answer: str = "",
        claims: Sequence[Claim] = (), task: TaskLink | None = None,
    ) -> bool:
        """Claim the run's end; ``False`` if something else claimed it first."""
        return self._run.finish(outcome, reason=reason, answer=answer, claims=claims,
                                task=task)


class _Mailbox:
    """One actor's bounded queue and the workers draining it.

    Workers start on demand: a delivery starts one while fewer than
    ``concurrency`` are active, and a worker ends when the queue is empty. An
    idle actor holds no task, so a run costs one task per busy actor, and the
    end of a run has no idle workers to cancel and await.
    """

    __slots__ = ("actor", "failed", "in_flight", "processed", "queue", "rejected",
                 "subscription", "workers")

    def __init__(self, actor: Actor) -> None:
        self.actor = actor
        self.queue: deque[Event] = deque()
        self.subscription: abc.DisposableBase | None = None
        self.workers: set[asyncio.Task[None]] = set()
        self.in_flight = 0
        self.processed = 0
        self.failed = 0
        self.rejected = 0


class ActorRun:
    """Runs a set of actors over one run stream, as an async context manager.

    Args:
        stream: the run's stream (or a run id to create one).
        actors: one instance per actor for this run (actors keep per-run state).
        edges: user operators inserted on the edge into an actor, by actor name;
            one that raises answers the message it carried with the actor's
            failure event and is detached (:class:`~actors._edges.Edge`).
        deadline_s: wall-clock budget; at the deadline ``budget.exhausted``
            (``wall_clock``) is published, and if nothing ends the run within
            ``grace_s`` after it, the run ends as ``failed``.
        elapsed_s: wall-clock time the run already used before this runtime
            (a run resumed after a crash): the deadline comes that much sooner,
            at once if the budget is spent.
        stop_timeout_s: how long ``on_stop`` hooks may take at teardown.
        usage: counts what the run used from its events (every event stamped
            before ``run.finished``); ``run.finished`` carries the count.

    Leaving the ``async with`` block before the run finished cancels it. Events
    reach the actors from the event loop's thread (publish from other threads
    through ``loop.call_soon_threadsafe``).
    """

    def __init__(
        self,
        stream: RunStream | str,
        actors: Sequence[Actor],
        *,
        edges: Mapping[str, Sequence[EdgeOperator]] | None = None,
        deadline_s: float | None = None,
        grace_s: float = 2.0,
        stop_timeout_s: float = 2.0,
        elapsed_s: float = 0.0,
        usage: Callable[[Sequence[Event]], RunUsage] | None = None,
    ) -> None:
        self.stream = stream if isinstance(stream, RunStream) else RunStream(stream)
        names = [a.name for a in actors]
        if not all(names):
            raise ValueError("every actor needs a non-empty `name`")
        if len(set(names)) != len(names):
            raise ValueError(f"actor names must be unique within a run: {names}")
        for a in actors:
            if a.concurrency < 1 or a.mailbox_size < 1:
                raise ValueError(f"actor {a.name!r}: concurrency and mailbox_size must be >= 1")
        if edges:
            unknown = set(edges) - set(names)
            if unknown:
                raise ValueError(f"edges name unknown actors: {sorted(unknown)}")
        if deadline_s is not None and deadline_s <= 0:
            raise ValueError("deadline_s must be positive")
        if elapsed_s < 0:
            raise ValueError("elapsed_s must not be negative")
        self._actors = list(actors)
        self._edges = dict(edges) if edges else {}
        self._deadline_s = deadline_s
        self._elapsed_s = elapsed_s
        self._usage = usage
        self._grace_s = grace_s
        self._stop_timeout_s = stop_timeout_s
        self._mailboxes: list[_Mailbox] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deadline: float | None = None
        self._timer: asyncio.Task[None] | None = None
        self._teardown: asyncio.Task[None] | None = None
        self._terminal: RunFinished | None = None
        self._done = asyncio.Event()
        self._dropped_after_claim = 0
        self._started = False

    @property
    def run_id(self) -> str:
        return self.stream.run_id

    @property
    def outcome(self) -> Outcome | None:
        """The claimed outcome (set at the claim, before ``run.finished`` is published)."""
        return None if self._terminal is None else self._terminal.outcome

    # --- lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._started:
            raise RuntimeError("an ActorRun can be entered only once")
        self._started = True
        self._loop = loop = asyncio.get_running_loop()
        if self._deadline_s is not None:
            self._deadline = loop.time() + self._deadline_s - self._elapsed_s
        try:
            for actor in self._actors:
                box = _Mailbox(actor)
                self._mailboxes.append(box)
                if type(actor).on_start is Actor.on_start:
                    continue
                try:
                    await actor.on_start(self.context_for(actor))
                except Exception as exc:
                    raise ActorStartError(
                        f"actor {actor.name!r} failed to start: {type(exc).__name__}: {exc}"
                    ) from exc
            for box in self._mailboxes:
                self._open_mailbox(box)
            if self._deadline is not None:
                self._timer = loop.create_task(self._watch_deadline(), name="deadline")
        except BaseException as exc:
            self._claim("failed", reason=str(exc))
            try:
                await self._await_teardown()
            finally:
                await self._close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        if self._terminal is None:
            if exc is None:
                self._claim("cancelled", reason="run scope exited before the run finished")
            elif isinstance(exc, asyncio.CancelledError):
                self._claim("cancelled", reason="the task running the run was cancelled")
            else:
                self._claim("failed", reason=f"{type(exc).__name__}: {exc}")
        try:
            if not self._done.is_set():
                await self._await_teardown()
        finally:
            await self._close()  # the body's own exception propagates unchanged
        return None

    async def _close(self) -> None:
        """Await every task the run started; all are cancelled or finishing by now."""
        tasks = [t for t in self._tasks() if not t.done()]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _tasks(self) -> list[asyncio.Task[Any]]:
        tasks: list[asyncio.Task[Any]] = []
        for box in self._mailboxes:
            if box.workers:
                tasks.extend(box.workers)
        if self._timer is not None:
            tasks.append(self._timer)
        if self._teardown is not None:
            tasks.append(self._teardown)
        return tasks

    async def wait(self) -> RunFinished:
        """Wait for ``run.finished`` to be published and return it."""
        if not self._done.is_set():
            await self._done.wait()
        finished = self.stream.finished
        assert finished is not None
        return finished

    # --- ending -------------------------------------------------------------------------

    def finish(
        self, outcome: Outcome, *, reason: str = "", answer: str = "",
        claims: Sequence[Claim] = (), task: TaskLink | None = None,
    ) -> bool:
        """Claim the end of the run with ``outcome``; ``False`` if already claimed.

        ``task``: the background task a ``handed_off`` run passed its question to.
        """
        if outcome == "cancelled":
            return self.cancel(reason)
        return self._claim(outcome, reason=reason, answer=answer, claims=tuple(claims),
                           task=task)

    def cancel(self, reason: str = "") -> bool:
        """Cancel the run: in-flight handlers are cancelled mid-await.

        Returns ``False`` (and changes nothing) if the run already ended or is ending.
        """
        if self._terminal is not None:
            return False
        self.stream.try_publish(RunCancelRequested(reason=reason))
        return self._claim("cancelled", reason=reason or "cancelled")

    def _claim(
        self, outcome: Outcome, *, reason: str = "", answer: str = "",
        claims: tuple[Claim, ...] = (), task: TaskLink | None = None,
    ) -> bool:
        if self._terminal is not None:
            return False
        self._terminal = _run_finished(outcome, reason, answer, claims, task)
        if self._loop is None:
            return True  # not entered yet: __aenter__ / __aexit__ end it
        if self._quiescent():
            self._finish_now()
        elif self._teardown is None:
            self._teardown = self._loop.create_task(self._shutdown(), name="teardown")
        return True

    def _quiescent(self) -> bool:
        """True if no handler but the caller's is mid-await and no actor has an on_stop hook.

        Then nothing can publish between the claim and ``run.finished``, so the run
        can end synchronously instead of through a teardown task (the common case:
        an actor finishing the run from its own handler).
        """
        try:
            current = asyncio.current_task()
        except RuntimeError:
            return False
        for box in self._mailboxes:
            busy = box.in_flight - (1 if current in box.workers else 0)
            if busy or type(box.actor).on_stop is not Actor.on_stop:
                return False
        return True

    def _finish_now(self) -> None:
        self._stop_tasks()  # no other handler is mid-await; __aexit__ awaits the rest
        self._publish_terminal()

    def _stop_tasks(self) -> list[asyncio.Task[Any]]:
        """Stop edge subscriptions, cancel workers and the deadline timer; return those tasks.

        Taps need no disposal: deliveries after the claim are dropped, and the
        stream lets go of its taps with ``run.finished``. The calling task is
        cancelled too when it is one of them (a worker that finished the run
        stops at its next await).
        """
        for box in self._mailboxes:
            if box.subscription is not None and box.actor.name in self._edges:
                box.subscription.dispose()  # a reactivex subscription through user operators
            # Dropping the tap also breaks the cycle box -> tap -> deliver -> box,
            # so a finished run is freed by reference counting, not left to the
            # cyclic GC (whose passes were a quarter of a short run's time).
            box.subscription = None
        tasks = [t for t in self._tasks() if t is not self._teardown and not t.done()]
        for t in tasks:
            t.cancel()
        return tasks

    def _publish_terminal(self) -> None:
        assert self._terminal is not None
        terminal = self._terminal
        if self._usage is not None:
            stamped = self.stream.stamped()
            if stamped is not None:
                with contextlib.suppress(Exception):  # a broken count never blocks the end
                    terminal = terminal.model_copy(update={"usage": self._usage(stamped)})
        self.stream.try_publish(terminal, actor="runtime")  # (a copy: it may be shared)
        self._done.set()

    async def _await_teardown(self) -> None:
        if self._teardown is None:
            await self._shutdown()
            return
        # Teardown must finish even if the awaiting task is cancelled again.
        try:
            await asyncio.shield(self._teardown)
        except asyncio.CancelledError:
            await asyncio.shield(self._teardown)
            raise

    async def _shutdown(self) -> None:
        if self._done.is_set():
            return
        current = asyncio.current_task()
        tasks = [t for t in self._stop_tasks() if t is not current]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for box in self._mailboxes:
            if type(box.actor).on_stop is Actor.on_stop:
                continue  # nothing to release
            with contextlib.suppress(Exception, asyncio.TimeoutError):
                async with asyncio.timeout(self._stop_timeout_s):
                    await box.actor.on_stop(self.context_for(box.actor))
        self._publish_terminal()

    # --- messages -----------------------------------------------------------------------

    def publish(self, event: Event, *, actor: str | None = None,
                cause: int | None = None) -> Event | None:
        """Publish from outside any actor (the application); dropped once the run ended."""
        if self._terminal is not None:
            self._dropped_after_claim += 1
            return None
        return self.stream.try_publish(event, actor=actor, cause=cause)

    def _publish_from(self, actor: Actor, event: Event, cause: int | None,
                      owned: bool = False) -> Event | None:
        if self._terminal is not None:
            self._dropped_after_claim += 1
            return None
        if event.cause is not None:
            cause = event.cause
        return self.stream.try_publish(event, actor=actor.name, cause=cause, owned=owned)

    def context_for(self, actor: Actor) -> ActorContext:
        """What ``actor``'s handlers get: emit, remaining time, the end claim (no raw stream)."""
        return _RunContext(self, actor)

    def remaining(self) -> float | None:
        """Seconds left before the deadline, never negative (``None``: no deadline)."""
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - asyncio.get_running_loop().time())

    def _open_mailbox(self, box: _Mailbox) -> None:
        actor = box.actor

        def deliver(msg: Event) -> None:  # (few closure cells: each is an object per run)
            if self._terminal is not None:
                return  # the run is ending: nothing new is handled
            queue = box.queue
            if len(queue) >= actor.mailbox_size:
                box.rejected += 1
                self._answer_failure(box, msg, MailboxFull(
                    f"actor {actor.name!r} mailbox is full ({actor.mailbox_size} requests)"))
                return
            queue.append(msg)
            if len(box.workers) < actor.concurrency:
                self._start_worker(box)

        def edge_failed(msg: Event, exc: Exception) -> None:  # as if its handler raised
            box.failed += 1
            self._answer_failure(box, msg, exc)

        edge_ops = self._edges.get(actor.name, ())
        if edge_ops:
            box.subscription = Edge(self.stream, actor.name, actor.handles, edge_ops, deliver,
                                    edge_failed)
        else:  # no user operators on this edge: the stream's type-indexed fast path
            box.subscription = self.stream.tap(actor.handles, deliver,
                                               name=f"mailbox:{actor.name}")

    def _start_worker(self, box: _Mailbox) -> None:
        assert self._loop is not None
        box.workers.add(self._loop.create_task(self._work(box), name=box.actor.name))

    async def _work(self, box: _Mailbox) -> None:
        """Drain the mailbox, then end (the next delivery starts a new worker).

        The worker leaves ``box.workers`` itself, in the same step as its last
        look at the queue, so a delivery never counts on a worker that will not
        come back for its message.
        """
        actor, queue = box.actor, box.queue
        ctx = self.context_for(actor)
        timed = actor.timeout_s is not None or self._deadline is not None
        me = asyncio.current_task()
        try:
            while queue and self._terminal is None:
                msg = queue.popleft()
                box.in_flight += 1
                try:
                    if not timed:
                        out = await actor.on_receive(msg, ctx)
                    else:
                        async with asyncio.timeout(self._request_timeout(actor)):
                            out = await actor.on_receive(msg, ctx)
                except Exception as exc:
                    box.failed += 1
                    self._answer_failure(box, msg, exc)
                    continue
                except asyncio.CancelledError as exc:
                    if me is None or me.cancelling():
                        raise  # the run is stopping this worker
                    # The handler's own await was cancelled (a future someone else
                    # cancelled): a failure of this request, not of the actor.
                    box.failed += 1
                    self._answer_failure(box, msg, exc)
                    continue
                finally:
                    box.in_flight -= 1
                box.processed += 1
                if out:
                    # A list made for this return, of events made for it: nobody
                    # else can see them, so the stream stamps them in place instead
                    # of copying (numpy's ndarray.resize makes the same refcheck).
                    # Counted here, not in a helper, so the expected counts hold:
                    # `out` is held by this frame alone (+1 for the call), each
                    # event by the list and the loop variable alone (+1).
                    fresh = _REFCHECK and type(out) is list and _getrefcount(out) == 2
                    for event in out:
                        owned = fresh and _getrefcount(event) == 3 and not getweakrefcount(event)
                        self._publish_from(actor, event, msg.seq, owned)
        finally:
            if me is not None:
                box.workers.discard(me)

    def _request_timeout(self, actor: Actor) -> float | None:
        """The actor's cap, further capped by the time the run has left.

        One deadline rules every actor; a finalizer also gets the grace after
        it, which is what the grace is for (answering from the evidence held).
        """
        if self._deadline is None:
            return actor.timeout_s
        end = self._deadline + (self._grace_s if actor.finalizes else 0.0)
        left = max(0.0, end - asyncio.get_running_loop().time())
        return left if actor.timeout_s is None else min(actor.timeout_s, left)

    def _answer_failure(self, box: _Mailbox, msg: Event, exc: BaseException) -> None:
        try:
            failure = box.actor.on_failure(msg, exc)
        except Exception as hook_exc:  # a broken hook still answers the request
            failure = Actor.on_failure(box.actor, msg, hook_exc)
        if failure is not None:
            self._publish_from(box.actor, failure, msg.seq)

    async def _watch_deadline(self) -> None:
        assert self._deadline is not None and self._deadline_s is not None
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, self._deadline - loop.time()))
        self.publish(BudgetExhausted(resource="wall_clock", used=self._deadline_s,
                                     limit=self._deadline_s))
        await asyncio.sleep(self._grace_s)
        self._claim("failed", reason=f"deadline of {self._deadline_s:g}s passed with no answer")

    # --- monitoring -----------------------------------------------------------------------

    def statistics(self) -> list[ActorStats]:
        """Per-actor mailbox depth and counters."""
        return [
            ActorStats(
                name=b.actor.name,
                depth=len(b.queue),
                mailbox_size=b.actor.mailbox_size,
                in_flight=b.in_flight,
                processed=b.processed,
                failed=b.failed,
                rejected=b.rejected,
            )
            for b in self._mailboxes
        ]


# Reference counts prove a handler's returned events private on CPython up to
# 3.13 with the GIL. 3.14 skips some reference count changes (borrowed
# references) and free-threaded builds count differently, so there the counts
# mean something else and the events are copied as before.
_REFCHECK = (sys.implementation.name == "cpython" and sys.version_info < (3, 14)
             and not sysconfig.get_config_var("Py_GIL_DISABLED"))
_getrefcount = sys.getrefcount
_BARE_FINISHED: dict[str, RunFinished] = {}  # outcome -> shared terminal event, see below


def _run_finished(outcome: Outcome, reason: str, answer: str,
                  claims: tuple[Claim, ...], task: TaskLink | None = None) -> RunFinished:
    """The terminal event, validated with only the fields that differ from their defaults.

    A bare outcome (no reason, answer or claims) is validated once and shared:
    the stream publishes a stamped copy of it.
    """
    if not (reason or answer or claims or task):
        bare = _BARE_FINISHED.get(outcome)
        if bare is None:
            bare = _BARE_FINISHED[outcome] = RunFinished(outcome=outcome)
        return bare
    fields: dict[str, Any] = {"outcome": outcome}
    if reason:
        fields["reason"] = reason
    if answer:
        fields["answer"] = answer
    if claims:
        fields["claims"] = claims
    if task is not None:
        fields["task"] = task
    return RunFinished(**fields)
