"""The run stream: a hot observable of one run's events, stamped and ordered.

Publishing is synchronous and cheap. The stream assigns a gap-free, strictly
increasing ``seq`` (also across threads) and a timestamp on a copy of the event
(the caller's stays as it was built, unless the caller hands it over with
``owned=True``), then delivers it to every subscriber. A publish made *while*
events are being delivered (a subscriber reacting to an event) is queued and
delivered after the current one, so every subscriber sees events in ``seq`` order.

A subscriber that raises is isolated: it is detached, the failure is reported
as a ``subscriber.detached`` event, and the run and the other subscribers go on.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import cast

import reactivex
from pydantic import BaseModel
from reactivex import Observable, abc
from reactivex.disposable import Disposable
from reactivex.subject import Subject

from ._events import Event, RunFinished, SubscriberDetached
from ._exceptions import StreamClosed

__all__ = ["RunStream"]

_SubscriberErrorHandler = Callable[[abc.ObserverBase[Event], Exception], None]


class _IsolatingSubject(Subject[Event]):
    """A Subject whose delivery loop survives an observer that raises."""

    def __init__(self, on_observer_error: _SubscriberErrorHandler) -> None:
        super().__init__()
        self._on_observer_error = on_observer_error

    def _on_next_core(self, value: Event) -> None:
        with self.lock:
            observers = self.observers.copy()
        for observer in observers:
            try:
                observer.on_next(value)
            except Exception as exc:  # a subscriber's bug must not reach the run
                self._detach(observer)
                self._on_observer_error(observer, exc)

    def _detach(self, observer: abc.ObserverBase[Event]) -> None:
        with self.lock:
            if observer in self.observers:
                self.observers.remove(observer)


class RunStream:
    """The ordered, stamped event stream of one run.

    Args:
        run_id: stamped on every event published here.
        keep_history: keep every delivered event in memory so late subscribers
            can :meth:`replay` (the run store does this durably for long runs).
        clock: wall-clock source for ``ts`` (injectable for tests).
    """

    def __init__(
        self,
        run_id: str,
        *,
        keep_history: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not run_id:
            raise ValueError("run_id must be a non-empty string")
        self.run_id = run_id
        self._clock = clock
        # Created on first use: a run nobody observes (bare actor runs, benches)
        # never pays for the Subject and its locks.
        self._subject: _IsolatingSubject | None = None
        self._lock = threading.Lock()
        self._seq = 0
        self._pending: deque[Event] = deque()
        self._dispatching = False
        self._finished: RunFinished | None = None
        self._history: list[Event] | None = [] if keep_history else None
        self._last_delivered = 0
        self._detached: list[tuple[str, str]] = []
        self._taps: dict[str, tuple[_Tap, ...]] = {}

    @classmethod
    def continuing(
        cls,
        run_id: str,
        events: Sequence[Event],
        *,
        keep_history: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> RunStream:
        """A stream that goes on from a stored log (a run resumed after a crash).

        ``events`` are the run's stored events, ``seq`` 1, 2, ... without a
        gap. They are the stream's history (with ``keep_history``, so
        :meth:`history` and :meth:`replay` start with them) and the next
        published event gets the last stored ``seq`` + 1; nothing is delivered
        for them. A stored ``run.finished`` (the ``interrupted`` terminal a
        resume continues) does not close the stream: the next one does.

        Raises:
            ValueError: an event of another run, or seqs that are not 1..n.
        """
        stream = cls(run_id, keep_history=keep_history, clock=clock)
        for expected, event in enumerate(events, 1):
            if event.run_id and event.run_id != run_id:
                raise ValueError(f"event seq {event.seq} is of run {event.run_id!r}, "
                                 f"not {run_id!r}")
            if event.seq != expected:
                raise ValueError(f"stored events must have seq 1..n without a gap: "
                                 f"expected seq {expected}, got {event.seq}")
        if stream._history is not None:
            stream._history.extend(events)
        stream._seq = stream._last_delivered = len(events)
        return stream

    # --- observing --------------------------------------------------------------

    @property
    def events(self) -> Observable[Event]:
        """The hot observable: subscribers see events published after they subscribe."""
        return self._observable()

    @property
    def observer_count(self) -> int:
        """Observers attached to :attr:`events` (taps not counted); for leak checks."""
        subject = self._subject
        return 0 if subject is None else len(subject.observers)

    def _observable(self) -> _IsolatingSubject:
        subject = self._subject
        if subject is None:
            with self._lock:
                subject = self._subject
                if subject is None:
                    subject = _IsolatingSubject(self._report_subscriber_error)
                    if self._finished is not None and self._last_delivered >= self._finished.seq:
                        subject.on_completed()  # late subscribers see a completed stream
                    self._subject = subject
        return subject

    @property
    def last_seq(self) -> int:
        """``seq`` of the last event delivered to subscribers."""
        return self._last_delivered

    @property
    def finished(self) -> RunFinished | None:
        """The terminal event once published, else ``None``."""
        return self._finished

    @property
    def detached(self) -> list[tuple[str, str]]:
        """``(subscriber, reason)`` for every subscriber the stream cut off."""
        return list(self._detached)

    def subscribe(
        self,
        on_next: Callable[[Event], None],
        *,
        name: str,
        operators: Sequence[Callable[[Observable[Event]], Observable[Event]]] = (),
        on_completed: Callable[[], None] | None = None,
    ) -> abc.DisposableBase:
        """Subscribe a named callback, optionally behind operators.

        If the callback (or an operator) raises, this subscriber alone is
        detached and the reason published as ``subscriber.detached``.
        """
        source: Observable[Event] = self._observable()
        if operators:
            source = source.pipe(*operators)
        holder: list[abc.DisposableBase] = []
        failed = False

        def guarded(event: Event) -> None:
            nonlocal failed
            if failed:
                return
            try:
                on_next(event)
            except Exception as exc:
                failed = True
                if holder:
                    holder[0].dispose()
                self.report_detached(name, f"subscriber raised {type(exc).__name__}: {exc}")

        def on_error(exc: Exception) -> None:
            nonlocal failed
            if not failed:
                failed = True
                self.report_detached(name, f"operator raised {type(exc).__name__}: {exc}")

        def completed() -> None:
            if on_completed is not None and not failed:
                on_completed()

        subscription = source.subscribe(guarded, on_error, completed)
        holder.append(subscription)
        return subscription

    def tap(self, types: Iterable[str], callback: Callable[[Event], None], *,
            name: str) -> abc.DisposableBase:
        """Route events of ``types`` straight to ``callback`` (a type-indexed subscription).

        The cheap path the actor runtime feeds mailboxes with: one dict lookup
        per event instead of a filter per subscriber. Delivered in ``seq``
        order together with the observable's subscribers; a callback that
        raises is detached and reported like any subscriber.
        """
        entry = _Tap(self, name, callback, tuple(dict.fromkeys(types)))
        # Tap lists are copied on write, never mutated, so delivery iterates a
        # snapshot without copying it on every event.
        self._lock.acquire()
        try:
            taps = self._taps
            for kind in entry.kinds:
                taps[kind] = (*taps.get(kind, ()), entry)
        finally:
            self._lock.release()
        return entry

    def _remove_tap(self, entry: _Tap) -> None:
        with self._lock:
            for kind in entry.kinds:
                taps = self._taps.get(kind, ())
                if entry in taps:
                    rest = tuple(t for t in taps if t is not entry)
                    if rest:
                        self._taps[kind] = rest
                    else:
                        del self._taps[kind]

    def history(self, after_seq: int = 0) -> list[Event]:
        """Delivered events with ``seq > after_seq`` (empty if history is off)."""
        if self._history is None:
            return []
        if after_seq <= 0:
            return list(self._history)
        # seq starts at 1 and is gap-free, so the index is seq - 1.
        return self._history[after_seq:]

    def stamped(self) -> list[Event] | None:
        """Every event stamped so far, in seq order: the delivered ones and those still
        waiting for the current delivery to end (``None`` if history is off).

        What the run's last event can summarise while it is being built.
        """
        with self._lock:
            if self._history is None:
                return None
            return [*self._history, *self._pending]

    def replay(self, after_seq: int = 0) -> Observable[Event]:
        """Events with ``seq > after_seq``: the stored ones, then live, no gap, no duplicate.

        Completes after ``run.finished``.
        """
        if self._history is None:
            raise RuntimeError("replay needs keep_history=True (or a run store)")

        def subscribe(
            observer: abc.ObserverBase[Event], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            # Delivery happens on the publishing thread and past events are in
            # history before they reach live subscribers, so subscribing first
            # and sending the backlog after would duplicate; do it under the lock
            # that delivery appends to history with.
            subject = self._observable()  # before the lock: creating it takes the lock
            with self._lock:
                backlog = self.history(after_seq)
                sent_up_to = backlog[-1].seq if backlog else after_seq
                done = self._finished is not None and self._last_delivered >= self._finished.seq

                def on_next(event: Event) -> None:
                    if event.seq > sent_up_to:
                        observer.on_next(event)

                live = None if done else subject.subscribe(
                    on_next, observer.on_error, observer.on_completed
                )
            for event in backlog:
                observer.on_next(event)
            if done:
                observer.on_completed()
                return Disposable()
            assert live is not None
            return live

        return reactivex.create(subscribe)

    # --- publishing -------------------------------------------------------------

    def publish(self, event: Event, *, actor: str | None = None,
                cause: int | None = None) -> Event:
        """Stamp ``event`` with run id, seq and time, deliver it, and return the stamped copy.

        ``actor`` and ``cause``, when given, are set in the same copy (else the
        event keeps its own).

        Raises:
            StreamClosed: the run already published ``run.finished``.
        """
        stamped = self.try_publish(event, actor=actor, cause=cause)
        if stamped is None:
            raise StreamClosed(f"run {self.run_id} already finished; cannot publish {event.type!r}")
        return stamped

    def try_publish(self, event: Event, *, actor: str | None = None,
                    cause: int | None = None, owned: bool = False) -> Event | None:
        """Like :meth:`publish`, but returns ``None`` instead of raising once finished.

        ``owned=True`` says the caller holds the only reference to ``event`` and
        hands it over: the stream then stamps that object instead of a copy
        (nobody else can see it change). The actor runtime passes it for the
        events a handler returned, when reference counts prove them private.

        This is the hot path of every hop, so the stamped copy is made inline:
        the same result as ``model_copy(update=...)`` (the values were validated
        when the event was built and the stream's own are well-typed) at a
        fraction of the cost.
        """
        lock = self._lock
        lock.acquire()  # (explicit acquire/release: a `with` costs three times as much here)
        try:
            if self._finished is not None:
                return None
            seq = self._seq = self._seq + 1
            if actor is None:
                stamp = _STAMP if cause is None else _STAMP_CAUSE
            else:
                stamp = _STAMP_ACTOR if cause is None else _STAMP_ACTOR_CAUSE
            if owned:
                stamped = event
                fields = event.__dict__
                event.__pydantic_fields_set__.update(stamp)
            else:
                stamped = _new_instance(type(event))
                fields = event.__dict__.copy()  # (filled in below, once it is the copy's)
                _set_dict(stamped, fields)
                _set_fields_set(stamped, event.__pydantic_fields_set__ | stamp)
                _set_extra(stamped, None)
                _set_private(stamped, None)
            if actor is not None:
                fields["actor"] = actor
            if cause is not None:
                fields["cause"] = cause
            fields["run_id"] = self.run_id
            fields["seq"] = seq
            fields["ts"] = self._clock()
            if fields["type"] == "run.finished":  # (isinstance on models is slow)
                self._finished = cast(RunFinished, stamped)
            if self._dispatching:  # re-entrant: delivered after the current event
                self._pending.append(stamped)
                return stamped
            self._dispatching = True
            taps = self._record(stamped)
        finally:
            lock.release()
        current = stamped
        pending = self._pending
        try:
            while True:  # deliver `current`, then whatever was published meanwhile
                if taps:
                    for entry in taps:
                        if entry.dead:
                            continue
                        try:
                            entry.callback(current)
                        except Exception as exc:
                            entry.dead = True
                            self.report_detached(entry.name,
                                                 f"tap raised {type(exc).__name__}: {exc}")
                subject = self._subject  # None until someone observes: then this costs nothing
                if subject is not None and subject.observers:
                    subject.on_next(current)
                if current is self._finished:
                    self._taps = {}  # nothing is published after this: let the mailboxes go
                    if subject is not None:  # (one created after the read above starts completed)
                        subject.on_completed()
                lock.acquire()
                try:
                    if not pending:
                        self._dispatching = False
                        return stamped
                    current = pending.popleft()
                    taps = self._record(current)
                finally:
                    lock.release()
        except BaseException:
            with lock:
                self._dispatching = False
            raise

    def _record(self, event: Event) -> tuple[_Tap, ...] | None:
        """Under the lock: append to history (replay reads it); return the event's taps."""
        if self._history is not None:
            self._history.append(event)
        self._last_delivered = event.seq
        return self._taps.get(event.type)

    # --- isolation ----------------------------------------------------------------

    def _report_subscriber_error(self, observer: abc.ObserverBase[Event], exc: Exception) -> None:
        name = _observer_name(observer)
        reason = f"subscriber raised {type(exc).__name__}: {exc}"
        self.report_detached(name, reason)
        with contextlib.suppress(Exception):  # it already failed once; nothing to add
            observer.on_error(exc)

    def report_detached(self, subscriber: str, reason: str) -> None:
        """Record that a subscriber was cut off and say so on the stream."""
        self._detached.append((subscriber, reason))
        self.try_publish(SubscriberDetached(subscriber=subscriber, reason=reason))

    def __iter__(self) -> Iterator[Event]:
        """Iterate the delivered history (convenience for tests and tools)."""
        return iter(self.history())


class _Tap(abc.DisposableBase):
    """One tap: its callback, the types it gets, and its own disposal."""

    __slots__ = ("callback", "dead", "kinds", "name", "stream")

    def __init__(self, stream: RunStream, name: str, callback: Callable[[Event], None],
                 kinds: tuple[str, ...]) -> None:
        self.stream = stream
        self.name = name
        self.callback = callback
        self.kinds = kinds
        self.dead = False

    def dispose(self) -> None:
        if not self.dead:
            self.dead = True
            self.stream._remove_tap(self)


_new_instance = object.__new__
# pydantic's slots, set through their descriptors (what object.__setattr__ does, minus the lookup)
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_STAMP = frozenset({"run_id", "seq", "ts"})  # the fields a publish sets, for fields_set
_STAMP_ACTOR = _STAMP | {"actor"}
_STAMP_CAUSE = _STAMP | {"cause"}
_STAMP_ACTOR_CAUSE = _STAMP_ACTOR | {"cause"}


def _observer_name(observer: abc.ObserverBase[Event]) -> str:
    name = getattr(observer, "name", None)
    if isinstance(name, str):
        return name
    return type(observer).__name__
