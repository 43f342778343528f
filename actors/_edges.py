"""The user's operators on the edge into one actor, where a raising one costs one request.

An operator that raises ends its reactivex chain. Left at that, the message it
was carrying is never answered and every later message to the actor is lost,
so the run idles until its deadline. Here the edge knows which message is in
the chain and which operator raised: that message is answered with the
actor's failure event (the same one a raising handler gives), the operator
is detached (``subscriber.detached``) and the edge is rebuilt from the
operators that remain, so the next message reaches the actor at once.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence

from reactivex import Observable, abc
from reactivex import operators as ops
from reactivex.subject import Subject

from streams import Event, RunStream

__all__ = ["Edge", "EdgeOperator", "EdgeOperatorError"]

EdgeOperator = Callable[[Observable[Event]], Observable[Event]]


class EdgeOperatorError(Exception):
    """A user operator on an actor's edge raised while carrying a message."""

    retryable = False


class Edge(abc.DisposableBase):
    """Feeds ``deliver`` with the actor's messages through the user's operators.

    ``fail(msg, exc)`` answers a message an operator raised on. A message is
    known only while an operator handles it synchronously (``map``,
    ``filter``...); one held by a timed operator (``delay``, ``buffer``) when
    the operator fails is lost with it, as before.
    """

    def __init__(self, stream: RunStream, actor: str, types: Sequence[str],
                 operators: Sequence[EdgeOperator], deliver: Callable[[Event], None],
                 fail: Callable[[Event, Exception], None]) -> None:
        self._stream = stream
        self._actor = actor
        self._deliver = deliver
        self._fail = fail
        self._slots = list(enumerate(operators, 1))  # (position on the edge, operator)
        self._count = len(self._slots)
        self._entry: Subject[Event] = Subject()
        self._carrying: Event | None = None
        self._culprit: int | None = None  # index into _slots of the operator that raised
        self._chain: abc.DisposableBase | None = None
        self._closed = False
        self._build()
        self._tap = stream.tap(types, self._push, name=f"edge:{actor}")

    def _build(self) -> None:
        source: Observable[Event] = self._entry
        for index, (_, op) in enumerate(self._slots):
            # The first probe an error passes is the one right after the operator
            # that raised it (an error flows downstream only).
            source = op(source).pipe(ops.do_action(on_error=self._probe(index)))
        self._chain = source.subscribe(self._deliver, self._failed)

    def _probe(self, index: int) -> Callable[[Exception], None]:
        def seen(_: Exception) -> None:
            if self._culprit is None:
                self._culprit = index
        return seen

    def _push(self, msg: Event) -> None:
        if self._closed:
            return
        self._carrying = msg
        try:
            self._entry.on_next(msg)
        except Exception as exc:  # an operator raised out of on_next instead of on_error
            self._failed(exc)
        finally:
            self._carrying = None

    def _failed(self, exc: Exception) -> None:
        culprit, self._culprit = self._culprit, None
        msg = self._carrying
        self._carrying = None  # answered once, even if the rebuilt edge fails again
        if self._chain is not None:
            self._chain.dispose()
            self._chain = None
        if culprit is None:  # not told which one: none of them is trusted any more
            culprit_name = f"an operator on the edge into {self._actor!r}"
            dropped, self._slots = self._slots, []
        else:
            position = self._slots[culprit][0]
            culprit_name = f"edge operator {position} of {self._count} into {self._actor!r}"
            dropped = [self._slots.pop(culprit)]
        where = _raised_in(exc)
        error = EdgeOperatorError(
            f"{culprit_name}{where} raised {type(exc).__name__}: {exc}")
        self._stream.report_detached(f"edge:{self._actor}", str(error))
        if msg is not None:
            self._fail(msg, error)
        if not self._closed and dropped:
            self._build()  # the next message goes through the operators that remain

    def dispose(self) -> None:
        self._closed = True
        self._tap.dispose()
        if self._chain is not None:
            self._chain.dispose()
            self._chain = None


def _raised_in(exc: BaseException) -> str:
    """`` (in NAME)``: the function the error came from, the user's own in most cases."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f" (in {frames[-1].name})" if frames else ""
