from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from reactivex import Observable, abc

from .._events import BudgetExhausted, BudgetTick, Event

_Resource = Literal["steps", "tool_calls", "tokens", "wall_clock"]


def budget_watch(
    *,
    max_steps: int | None = None,
    max_tool_calls: int | None = None,
    max_tokens: int | None = None,
    deadline_s: float | None = None,
) -> Callable[[Observable[Event]], Observable[Event]]:
    """Pass events through and add ``budget.exhausted`` when a tick crosses a limit.

    Limits given here apply; a tick's own ``max_*``/``deadline_s`` fields apply
    where no limit is given. Each resource is reported once per subscription,
    right after the tick that exhausted it (``cause`` = that tick's seq).

    ::

        --t(3/4)--t(4/4)--------|   budget_watch(max_tool_calls=4)
        --t(3/4)--(t(4/4) X)----|

    Raises:
        ValueError: a limit that is not positive.
    """
    for label, value in (("max_steps", max_steps), ("max_tool_calls", max_tool_calls),
                         ("max_tokens", max_tokens), ("deadline_s", deadline_s)):
        if value is not None and value <= 0:
            raise ValueError(f"budget_watch: {label} must be positive, got {value!r}")

    def _watch(source: Observable[Event]) -> Observable[Event]:
        def subscribe(
            observer: abc.ObserverBase[Event], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            reported: set[str] = set()

            def on_next(event: Event) -> None:
                observer.on_next(event)
                if not isinstance(event, BudgetTick):
                    return
                checks: tuple[tuple[_Resource, float, float | None], ...] = (
                    ("steps", event.steps, max_steps or event.max_steps),
                    ("tool_calls", event.tool_calls, max_tool_calls or event.max_tool_calls),
                    ("tokens", event.tokens, max_tokens or event.max_tokens),
                    ("wall_clock", event.elapsed_s, deadline_s or event.deadline_s),
                )
                for resource, used, limit in checks:
                    if limit is not None and used >= limit and resource not in reported:
                        reported.add(resource)
                        observer.on_next(BudgetExhausted(
                            resource=resource,
                            used=float(used), limit=float(limit),
                            run_id=event.run_id, cause=event.seq, actor="budget_watch",
                        ))

            return source.subscribe(on_next, observer.on_error, observer.on_completed,
                                    scheduler=scheduler)

        return Observable(subscribe)

    return _watch
