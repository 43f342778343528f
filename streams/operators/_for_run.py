from __future__ import annotations

from collections.abc import Callable

from reactivex import Observable
from reactivex import operators as ops

from .._events import Event


def for_run(run_id: str) -> Callable[[Observable[Event]], Observable[Event]]:
    """Keep only the events of one run (on a bus that carries many).

    ::

        --a1--b2--c1--|   for_run("1")
        --a1------c1--|

    Raises:
        ValueError: ``run_id`` is empty.
    """
    if not isinstance(run_id, str) or not run_id:
        raise ValueError("for_run needs a non-empty run id")
    return ops.filter(lambda e: e.run_id == run_id)
