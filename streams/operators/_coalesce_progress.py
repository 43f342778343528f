from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from reactivex import Observable, abc
from reactivex.disposable import CompositeDisposable, SerialDisposable
from reactivex.scheduler import TimeoutScheduler

from .._events import Event, Priority


def coalesce_progress(
    interval: float | timedelta,
    scheduler: abc.SchedulerBase | None = None,
) -> Callable[[Observable[Event]], Observable[Event]]:
    """Thin out progress events to at most one per type per ``interval``.

    The first progress event of a type passes at once; later ones inside the
    window are held and only the newest is emitted when the window closes.
    Every other event passes immediately, after any held progress events, so
    the output stays in ``seq`` order. Completion flushes what is held.

    ::

        --t1-t2-t3--a---t4-------|   coalesce_progress(5 ticks)
        --t1--------(t3 a)-t4----|

    Args:
        interval: the window, seconds or a timedelta (> 0).
        scheduler: the clock (a ``TestScheduler`` in tests); default: timeouts.

    Raises:
        ValueError: ``interval`` is not positive.
    """
    window = interval if isinstance(interval, timedelta) else timedelta(seconds=interval)
    if window <= timedelta(0):
        raise ValueError("coalesce_progress needs a positive interval")

    def _coalesce(source: Observable[Event]) -> Observable[Event]:
        def subscribe(
            observer: abc.ObserverBase[Event], scheduler_: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            clock = scheduler or scheduler_ or TimeoutScheduler.singleton()
            lock = threading.RLock()
            held: dict[str, Event] = {}
            last_emit: dict[str, datetime] = {}
            timers: dict[str, SerialDisposable] = {}
            group = CompositeDisposable()

            def flush() -> None:
                for event in sorted(held.values(), key=lambda e: e.seq):
                    last_emit[event.type] = clock.now
                    observer.on_next(event)
                held.clear()
                for timer in timers.values():
                    timer.dispose()
                timers.clear()

            def close_window(kind: str) -> None:
                with lock:
                    timers.pop(kind, None)
                    event = held.pop(kind, None)
                    if event is not None:
                        last_emit[kind] = clock.now
                        observer.on_next(event)

            def on_next(event: Event) -> None:
                with lock:
                    if event.priority is not Priority.PROGRESS:
                        flush()
                        observer.on_next(event)
                        return
                    kind = event.type
                    now = clock.now
                    previous = last_emit.get(kind)
                    if previous is None or (kind not in held and now - previous >= window):
                        last_emit[kind] = now
                        observer.on_next(event)
                        return
                    held[kind] = event
                    if kind not in timers:
                        due = previous + window
                        timer = SerialDisposable()
                        timers[kind] = timer

                        def fire(_s: abc.SchedulerBase, _st: object, k: str = kind) -> None:
                            close_window(k)

                        timer.disposable = clock.schedule_absolute(due, fire)

            def on_error(exc: Exception) -> None:
                with lock:
                    observer.on_error(exc)

            def on_completed() -> None:
                with lock:
                    flush()
                    observer.on_completed()

            group.add(source.subscribe(on_next, on_error, on_completed, scheduler=scheduler_))
            group.add(_TimersDisposable(timers, lock))
            return group

        return Observable(subscribe)

    return _coalesce


class _TimersDisposable(abc.DisposableBase):
    def __init__(self, timers: dict[str, SerialDisposable], lock: threading.RLock) -> None:
        self._timers = timers
        self._lock = lock

    def dispose(self) -> None:
        with self._lock:
            for timer in self._timers.values():
                timer.dispose()
            self._timers.clear()
