"""The run stream: a hot observable of one run's events, stamped and ordered.

Publishing is synchronous and cheap. The stream assigns a gap-free, strictly
increasing ``seq`` (also across threads) and a timestamp, then delivers the
event to every subscriber. A publish made *while* events are being delivered
(a subscriber reacting to an event) is queued and delivered after the current
one, so every subscriber sees events in ``seq`` order.

A subscriber that raises is isolated: it is detached, the failure is reported
as a ``subscriber.detached`` event, and the run and the other subscribers go on.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import reactivex
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
        self._subject = _IsolatingSubject(self._report_subscriber_error)
        self._lock = threading.Lock()
        self._seq = 0
        self._pending: deque[Event] = deque()
        self._dispatching = False
        self._finished: RunFinished | None = None
        self._history: list[Event] | None = [] if keep_history else None
        self._last_delivered = 0
        self._detached: list[tuple[str, str]] = []
        self._taps: dict[str, list[_Tap]] = {}

    # --- observing --------------------------------------------------------------

    @property
    def events(self) -> Observable[Event]:
        """The hot observable: subscribers see events published after they subscribe."""
        return self._subject

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
        source: Observable[Event] = self._subject
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
        entry = _Tap(name, callback)
        kinds = tuple(dict.fromkeys(types))
        with self._lock:
            for kind in kinds:
                self._taps.setdefault(kind, []).append(entry)

        def remove() -> None:
            with self._lock:
                for kind in kinds:
                    taps = self._taps.get(kind)
                    if taps is not None and entry in taps:
                        taps.remove(entry)

        return Disposable(remove)

    def history(self, after_seq: int = 0) -> list[Event]:
        """Delivered events with ``seq > after_seq`` (empty if history is off)."""
        if self._history is None:
            return []
        if after_seq <= 0:
            return list(self._history)
        # seq starts at 1 and is gap-free, so the index is seq - 1.
        return self._history[after_seq:]

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
            with self._lock:
                backlog = self.history(after_seq)
                sent_up_to = backlog[-1].seq if backlog else after_seq
                done = self._finished is not None and self._last_delivered >= self._finished.seq

                def on_next(event: Event) -> None:
                    if event.seq > sent_up_to:
                        observer.on_next(event)

                live = None if done else self._subject.subscribe(
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

    def publish(self, event: Event, **envelope: Any) -> Event:
        """Stamp ``event`` with run id, seq and time, deliver it, and return the stamped copy.

        Extra keyword arguments set other envelope fields (``actor``, ``cause``)
        in the same copy.

        Raises:
            StreamClosed: the run already published ``run.finished``.
        """
        with self._lock:
            if self._finished is not None:
                raise StreamClosed(
                    f"run {self.run_id} already finished; cannot publish {event.type!r}"
                )
            self._seq += 1
            envelope["run_id"] = self.run_id
            envelope["seq"] = self._seq
            envelope["ts"] = self._clock()
            stamped = _stamped_copy(event, envelope)
            if isinstance(stamped, RunFinished):
                self._finished = stamped
            if self._dispatching:  # re-entrant: delivered after the current event
                self._pending.append(stamped)
                return stamped
            self._dispatching = True
            taps = self._record(stamped)
        try:
            self._dispatch(stamped, taps)
            while True:
                with self._lock:
                    if not self._pending:
                        self._dispatching = False
                        return stamped
                    queued = self._pending.popleft()
                    taps = self._record(queued)
                self._dispatch(queued, taps)
        except BaseException:
            with self._lock:
                self._dispatching = False
            raise

    def try_publish(self, event: Event, **envelope: Any) -> Event | None:
        """Like :meth:`publish`, but returns ``None`` instead of raising once finished."""
        try:
            return self.publish(event, **envelope)
        except StreamClosed:
            return None

    def _record(self, event: Event) -> list[_Tap] | None:
        """Under the lock: append to history (replay reads it) and snapshot the taps."""
        if self._history is not None:
            self._history.append(event)
        self._last_delivered = event.seq
        taps = self._taps.get(event.type)
        return list(taps) if taps else None

    def _dispatch(self, event: Event, taps: list[_Tap] | None) -> None:
        if taps:
            self._deliver_to_taps(taps, event)
        subject = self._subject
        if subject.observers:  # the common case of no observable subscriber costs nothing
            subject.on_next(event)
        if isinstance(event, RunFinished):
            subject.on_completed()

    def _deliver_to_taps(self, taps: list[_Tap], event: Event) -> None:
        for entry in taps:
            if entry.dead:
                continue
            try:
                entry.callback(event)
            except Exception as exc:
                entry.dead = True
                self.report_detached(entry.name, f"tap raised {type(exc).__name__}: {exc}")

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


class _Tap:
    __slots__ = ("callback", "dead", "name")

    def __init__(self, name: str, callback: Callable[[Event], None]) -> None:
        self.name = name
        self.callback = callback
        self.dead = False


def _stamped_copy(event: Event, envelope: dict[str, Any]) -> Event:
    """A copy of ``event`` with envelope fields set, without re-validation.

    Same result as ``model_copy(update=...)`` (the values were validated when
    the event was built and the stream's own are well-typed) at half the cost;
    publish is on every hop.
    """
    new = object.__new__(type(event))
    fields = event.__dict__.copy()
    fields.update(envelope)
    object.__setattr__(new, "__dict__", fields)
    object.__setattr__(new, "__pydantic_fields_set__",
                       event.__pydantic_fields_set__ | envelope.keys())
    object.__setattr__(new, "__pydantic_extra__", None)
    object.__setattr__(new, "__pydantic_private__", None)
    return new


def _observer_name(observer: abc.ObserverBase[Event]) -> str:
    name = getattr(observer, "name", None)
    if isinstance(name, str):
        return name
    return type(observer).__name__
