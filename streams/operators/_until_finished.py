from __future__ import annotations

from collections.abc import Callable

from reactivex import Observable
from reactivex import operators as ops

from .._events import Event, RunFinished


def until_finished() -> Callable[[Observable[Event]], Observable[Event]]:
    """Pass events through and complete right after ``run.finished``.

    ::

        --a--b--F--c--|   until_finished()
        --a--b--(F|)
    """
    return ops.take_while(lambda e: not isinstance(e, RunFinished), inclusive=True)
