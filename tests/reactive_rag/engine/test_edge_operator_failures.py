"""A user's operator that raises on an actor's edge costs one failed request, not the run.

Before, the request it carried was never answered: the run idled until its
wall-clock budget ran out (``budget.exhausted``) and ended on what it had.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from reactivex import operators as ops

from reactive_rag import Engine
from reactive_rag.index import CorpusIndex
from streams import (
    ActorFailed,
    AnswerRequested,
    Event,
    SearchFailed,
    SearchRequested,
    SubscriberDetached,
)

QUESTION = "Who founded Bayer and when?"
BUDGET = {"wall_s": 120}  # far more than a run over four documents takes


@pytest.fixture
def engine(index: CorpusIndex) -> Engine:
    return Engine(index)


class Exploding:
    """A ``map`` that raises on every event of one class (a persistently broken operator)."""

    def __init__(self, kind: type[Event]) -> None:
        self.kind = kind
        self.raised: list[Event] = []

    def explode(self, event: Event) -> Event:
        if isinstance(event, self.kind):
            self.raised.append(event)
            raise ValueError("boom")
        return event


class Counting:
    """A pass-through ``map`` that counts what it carried."""

    def __init__(self) -> None:
        self.carried = 0

    def count(self, event: Event) -> Event:
        self.carried += 1
        return event


def _one(events: tuple[Event, ...], cls: type[Event], match: Callable[[Event], bool]) -> Event:
    found = [e for e in events if isinstance(e, cls) and match(e)]
    assert len(found) == 1, found
    return found[0]


async def test_a_raising_operator_on_the_searcher_edge_fails_one_search(engine: Engine) -> None:
    bad = Exploding(SearchRequested)
    result = await engine.ask(QUESTION, collections=["demo"], budget=BUDGET,
                              edges={"searcher": [ops.map(bad.explode)]})
    carried = bad.raised[0]
    failed = _one(result.events, SearchFailed, lambda e: e.cause == carried.seq)
    assert isinstance(failed, SearchFailed) and isinstance(carried, SearchRequested)
    assert failed.call_id == carried.call_id and failed.query == carried.query
    assert failed.error.kind == "EdgeOperatorError" and not failed.error.retryable
    assert failed.error.message == (
        "edge operator 1 of 1 into 'searcher' (in explode) raised ValueError: boom")
    # Detached: it raised once, and the searches after it reached the searcher directly.
    assert len(bad.raised) == 1
    assert result.count("search.completed") >= 1
    detached = _one(result.events, SubscriberDetached, lambda e: True)
    assert isinstance(detached, SubscriberDetached) and detached.subscriber == "edge:searcher"
    assert detached.seq < failed.seq
    # The run went on at once: no deadline reached, the question answered.
    assert result.count("budget.exhausted") == 0
    assert result.outcome == "answered", result.reason


async def test_a_raising_operator_on_the_writer_edge_fails_one_answer(engine: Engine) -> None:
    bad = Exploding(AnswerRequested)
    result = await engine.ask(QUESTION, collections=["demo"], budget=BUDGET,
                              edges={"writer": [ops.map(bad.explode)]})
    carried = bad.raised[0]
    failed = _one(result.events, ActorFailed, lambda e: e.cause == carried.seq)
    assert isinstance(failed, ActorFailed)
    # The writer's own failure event, as when its handler raises: request and role named.
    assert failed.actor == "writer" and failed.request_type == "answer.requested"
    assert failed.error.role == "writer" and failed.error.kind == "EdgeOperatorError"
    assert "edge operator 1 of 1 into 'writer' (in explode) raised ValueError: boom" in (
        failed.error.message)
    assert len(bad.raised) == 1
    assert result.count("answer.drafted") >= 1 and result.count("budget.exhausted") == 0
    assert result.outcome == "answered", result.reason


async def test_other_subscribers_and_edges_go_on(engine: Engine) -> None:
    bad = Exploding(SearchRequested)
    other = Counting()
    handle = engine.start(QUESTION, collections=["demo"], budget=BUDGET,
                          edges={"searcher": [ops.map(bad.explode)],
                                 "reranker": [ops.map(other.count)]})
    watched: list[Event] = []
    handle.stream.subscribe(watched.append, name="watcher")
    result = await handle.wait()
    assert result.outcome == "answered", result.reason
    assert watched and watched[-1].type == "run.finished"
    assert [e.seq for e in watched] == [e.seq for e in result.events][-len(watched):]
    # The reranker's operator carried every rerank request, before and after the failure.
    assert other.carried == result.count("rerank.requested") > 0
    assert [name for name, _ in handle.stream.detached] == ["edge:searcher"]
