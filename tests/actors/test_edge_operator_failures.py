"""The edge into an actor: a raising user operator answers the message it carried.

The engine-level tests (tests/reactive_rag/engine/) show the run going on; these
pin the edge itself: which operator is named and dropped, what remains, and that
the answer has the shape of a raising handler's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from reactivex import Observable, abc
from reactivex import operators as ops

from actors import ActorRun
from streams import ActorFailed, Event, SearchCompleted, SearchRequested, SubscriberDetached

from .test_runtime import Finisher, Searcher


def _raise_on(query: str) -> Callable[[Event], Event]:
    def explode(event: Event) -> Event:
        if isinstance(event, SearchRequested) and event.query == query:
            raise ValueError(f"cannot carry {query}")
        return event
    return explode


def _raising_from_on_next(source: Observable[Event]) -> Observable[Event]:
    """An operator that raises out of ``on_next`` instead of calling ``on_error``."""
    def subscribe(observer: abc.ObserverBase[Event],
                  scheduler: abc.SchedulerBase | None = None) -> abc.DisposableBase:
        def on_next(event: Event) -> None:
            if isinstance(event, SearchRequested) and event.query == "bad":
                raise RuntimeError("broken operator")
            observer.on_next(event)
        return source.subscribe(on_next, observer.on_error, observer.on_completed,
                                scheduler=scheduler)
    return Observable(subscribe)


def _completed(run: ActorRun) -> list[str]:
    return [e.query for e in run.stream.history() if isinstance(e, SearchCompleted)]


async def test_the_operator_that_raised_is_named_and_dropped_and_the_others_stay() -> None:
    no_spam = ops.filter(lambda e: not (isinstance(e, SearchRequested) and "spam" in e.query))
    async with ActorRun("r", [Searcher(), Finisher(after=2)],
                        edges={"searcher": [no_spam, ops.map(_raise_on("bad"))]}) as run:
        carried = run.publish(SearchRequested(query="bad"))
        run.publish(SearchRequested(query="spam offer"))
        run.publish(SearchRequested(query="bad"))  # the raising operator is gone
        run.publish(SearchRequested(query="real"))
        finished = await asyncio.wait_for(run.wait(), 5)
    assert finished.outcome == "answered"
    failures = [e for e in run.stream.history() if isinstance(e, ActorFailed)]
    assert carried is not None and [f.cause for f in failures] == [carried.seq]
    assert failures[0].actor == "searcher" and failures[0].request_type == "search.requested"
    assert failures[0].error.kind == "EdgeOperatorError"
    assert failures[0].error.message == (
        "edge operator 2 of 2 into 'searcher' (in explode) raised ValueError: cannot carry bad")
    assert _completed(run) == ["bad", "real"]  # the filter still keeps spam out
    detached = [e for e in run.stream.history() if isinstance(e, SubscriberDetached)]
    assert [d.subscriber for d in detached] == ["edge:searcher"]
    assert [s.failed for s in run.statistics()] == [1, 0]


async def test_an_operator_raising_out_of_on_next_still_answers_its_message() -> None:
    async with ActorRun("r", [Searcher(), Finisher(after=1)],
                        edges={"searcher": [_raising_from_on_next]}) as run:
        carried = run.publish(SearchRequested(query="bad"))
        run.publish(SearchRequested(query="bad"))
        await asyncio.wait_for(run.wait(), 5)
    failures = [e for e in run.stream.history() if isinstance(e, ActorFailed)]
    assert carried is not None and [f.cause for f in failures] == [carried.seq]
    assert failures[0].error.message.startswith(
        "an operator on the edge into 'searcher' (in on_next) raised RuntimeError")
    assert _completed(run) == ["bad"]


async def test_the_answer_has_the_shape_of_a_raising_handlers() -> None:
    async with ActorRun("r", [Searcher(), Finisher(after=1)],
                        edges={"searcher": [ops.map(_raise_on("bad"))]}) as run:
        by_edge = run.publish(SearchRequested(query="bad"))
        by_handler = run.publish(SearchRequested(query="boom"))  # Searcher's handler raises
        run.publish(SearchRequested(query="fine"))
        await asyncio.wait_for(run.wait(), 5)
    failures = {e.cause: e for e in run.stream.history() if isinstance(e, ActorFailed)}
    assert by_edge is not None and by_handler is not None
    edge, handler = failures[by_edge.seq], failures[by_handler.seq]
    assert edge.model_dump(include={"type", "actor", "request_type"}) == handler.model_dump(
        include={"type", "actor", "request_type"})
    assert (edge.error.kind, handler.error.kind) == ("EdgeOperatorError", "ConnectionError")

