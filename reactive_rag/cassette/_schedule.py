"""The order the run's controller took its facts in, recorded and enforced on replay.

Replayed answers come back in their recorded order, but a run also does local
work concurrently (corpus searches and reranks in threads), so the results of
parallel calls can reach the state machine in another order than when
recorded, and the run would register its evidence in another order (and ask a
chat model something it was never asked). The recording notes the order the
controller received its inputs in; the replay holds an input that arrives
early until the ones recorded before it have arrived (each wait bounded), so
the replayed run decides exactly as the recorded one did.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence

from reactivex import Observable, abc
from reactivex import operators as ops
from reactivex.disposable import CompositeDisposable, Disposable

from streams import Event

__all__ = ["EdgeOperator", "Turn", "recording_gate", "replay_gate", "turn_of"]

EdgeOperator = Callable[[Observable[Event]], Observable[Event]]
Turn = tuple[str, str]
"""An input of the controller as ``(type, call_id)`` (``call_id`` empty when it has none)."""


def turn_of(event: Event) -> Turn:
    return event.type, str(getattr(event, "call_id", "") or "")


def recording_gate(log: list[Turn]) -> EdgeOperator:
    """Pass events through, noting their order in ``log``."""
    return ops.do_action(on_next=lambda e: log.append(turn_of(e)))


def replay_gate(schedule: Sequence[Turn], wait_s: float) -> EdgeOperator:
    """Deliver events in ``schedule`` order; one ahead of its turn waits at most ``wait_s``.

    An event the schedule does not know passes at once (the run went another
    way); after a wait times out, the missing predecessors are given up on.
    """
    positions: dict[tuple[str, str, int], int] = {}
    seen: Counter[Turn] = Counter()
    for index, turn in enumerate(schedule):
        positions[(*turn, seen[turn])] = index
        seen[turn] += 1

    def gate(source: Observable[Event]) -> Observable[Event]:
        def subscribe(observer: abc.ObserverBase[Event],
                      scheduler: abc.SchedulerBase | None = None) -> abc.DisposableBase:
            loop = asyncio.get_running_loop()
            arrived: Counter[Turn] = Counter()
            held: dict[int, Event] = {}
            done: set[int] = set()
            state = {"next": 0}
            timer: list[asyncio.TimerHandle] = []

            def stop_timer() -> None:
                while timer:
                    timer.pop().cancel()

            def flush() -> None:
                while True:
                    while state["next"] in done:
                        state["next"] += 1
                    event = held.pop(state["next"], None)
                    if event is None:
                        break
                    done.add(state["next"])
                    observer.on_next(event)
                stop_timer()
                if held:
                    timer.append(loop.call_later(wait_s, give_up))

            def give_up() -> None:
                timer.clear()
                if held:  # the predecessors of the earliest held event are not coming
                    done.update(range(state["next"], min(held)))
                    flush()

            def on_next(event: Event) -> None:
                turn = turn_of(event)
                index = positions.get((*turn, arrived[turn]))
                arrived[turn] += 1
                if index is None or index < state["next"]:
                    observer.on_next(event)
                    return
                held[index] = event
                if index == state["next"]:
                    flush()
                elif not timer:
                    timer.append(loop.call_later(wait_s, give_up))

            def on_completed() -> None:
                stop_timer()
                for index in sorted(held):
                    observer.on_next(held.pop(index))
                observer.on_completed()

            def on_error(error: Exception) -> None:
                stop_timer()
                observer.on_error(error)

            subscription = source.subscribe(on_next, on_error, on_completed,
                                            scheduler=scheduler)
            return CompositeDisposable(subscription, Disposable(stop_timer))

        return Observable(subscribe)

    return gate
