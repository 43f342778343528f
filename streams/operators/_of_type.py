from __future__ import annotations

from collections.abc import Callable

from reactivex import Observable
from reactivex import operators as ops

from .._events import EVENT_TYPES, Event


def of_type(*types: str | type[Event]) -> Callable[[Observable[Event]], Observable[Event]]:
    """Keep only events of the given types (``"search.requested"`` or the class).

    ::

        --a--b--c--|   of_type(a, c)
        --a-----c--|

    Raises:
        ValueError: no type given, or a type string that no event class declares.
    """
    if not types:
        raise ValueError("of_type needs at least one event type")
    wanted: set[str] = set()
    for t in types:
        if isinstance(t, str):
            if t not in EVENT_TYPES:
                raise ValueError(f"of_type: unknown event type {t!r}")
            wanted.add(t)
        elif isinstance(t, type) and issubclass(t, Event):
            wanted.add(t.model_fields["type"].default)
        else:
            raise ValueError(f"of_type: expected an event type string or class, got {t!r}")
    frozen = frozenset(wanted)
    return ops.filter(lambda e: e.type in frozen)
