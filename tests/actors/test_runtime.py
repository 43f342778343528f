"""The actor runtime: routing, failures as events, concurrency, cancellation, shutdown."""

from __future__ import annotations

import asyncio
import random
import weakref
from collections.abc import Sequence

import pytest
from reactivex import operators as ops

from actors import Actor, ActorContext, ActorRun, ActorStartError
from actors._actor import error_info
from actors._runtime import _REFCHECK
from streams import (
    ActorFailed,
    BudgetExhausted,
    Event,
    RunFinished,
    SearchCompleted,
    SearchFailed,
    SearchRequested,
)
from tests._eventually import eventually


class Searcher(Actor):
    """Answers every search; fails on queries that say so; can be held mid-await."""

    name = "searcher"
    handles = ("search.requested",)

    def __init__(self, gate: asyncio.Event | None = None) -> None:
        self.gate = gate
        self.started = self.stopped = False
        self.cancelled = 0
        self.in_flight = 0
        self.max_in_flight = 0

    async def on_start(self, ctx: ActorContext) -> None:
        self.started = True

    async def on_stop(self, ctx: ActorContext) -> None:
        self.stopped = True

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event]:
        assert isinstance(msg, SearchRequested)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                await self.gate.wait()
            if msg.query == "boom":
                raise ConnectionError("provider down")
            return [SearchCompleted(query=msg.query)]
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1


class Finisher(Actor):
    name = "finisher"
    handles = ("search.completed",)

    def __init__(self, after: int = 1) -> None:
        self.after = after
        self.seen = 0

    async def on_receive(self, msg: Event, ctx: ActorContext) -> None:
        self.seen += 1
        if self.seen >= self.after:
            ctx.finish("answered", answer="done")


def types(run: ActorRun) -> list[str]:
    return [e.type for e in run.stream.history()]


async def test_request_is_answered_with_actor_and_cause_set() -> None:
    async with ActorRun("r", [Searcher(), Finisher()]) as run:
        req = run.publish(SearchRequested(query="q"))
        finished = await asyncio.wait_for(run.wait(), 5)
    assert finished.outcome == "answered" and finished.answer == "done"
    reply = run.stream.history()[1]
    assert isinstance(reply, SearchCompleted)
    assert reply.actor == "searcher" and req is not None and reply.cause == req.seq
    assert types(run)[-1] == "run.finished"


async def test_a_failing_handler_answers_its_request_and_keeps_serving() -> None:
    async with ActorRun("r", [Searcher(), Finisher(after=2)]) as run:
        run.publish(SearchRequested(query="boom"))
        run.publish(SearchRequested(query="a"))
        run.publish(SearchRequested(query="b"))
        await asyncio.wait_for(run.wait(), 5)
    failures = [e for e in run.stream.history() if isinstance(e, ActorFailed)]
    assert len(failures) == 1
    assert failures[0].cause == 1 and failures[0].request_type == "search.requested"
    error = failures[0].error
    assert error.kind == "ConnectionError" and "provider down" in error.message
    assert run.outcome == "answered"


async def test_on_failure_can_answer_with_a_domain_failure_event() -> None:
    class DomainSearcher(Searcher):
        def on_failure(self, msg: Event, exc: BaseException) -> Event:
            assert isinstance(msg, SearchRequested)
            return SearchFailed(query=msg.query, error=error_info(exc))

    async with ActorRun("r", [DomainSearcher()]) as run:
        run.publish(SearchRequested(query="boom"))
        await eventually(lambda: "search.failed" in types(run), "the domain failure event")
        run.finish("degraded")
    assert "search.failed" in types(run)


async def test_concurrency_is_bounded_per_actor() -> None:
    class Wide(Searcher):
        concurrency = 3

    gate = asyncio.Event()
    searcher = Wide(gate)
    async with ActorRun("r", [searcher, Finisher(after=10)]) as run:
        for i in range(10):
            run.publish(SearchRequested(query=str(i)))
        # All ten delivered: three in the handler, the other seven still queued.
        await eventually(lambda: searcher.in_flight == 3 and run.statistics()[0].depth == 7,
                         "three handlers in flight and seven requests queued")
        gate.set()
        await asyncio.wait_for(run.wait(), 5)
    assert searcher.max_in_flight == 3


async def test_a_full_mailbox_refuses_with_a_failure_instead_of_blocking() -> None:
    class Tiny(Searcher):
        mailbox_size = 2

    gate = asyncio.Event()
    async with ActorRun("r", [Tiny(gate)]) as run:
        for i in range(6):  # 1 in the handler after the first await, 2 queued, rest refused
            run.publish(SearchRequested(query=str(i)))
            await asyncio.sleep(0)
        refused = [e for e in run.stream.history() if isinstance(e, ActorFailed)]
        assert refused and all(e.error.kind == "MailboxFull" for e in refused)
        assert refused[0].error.retryable
        gate.set()
        await eventually(lambda: types(run).count("search.completed") == 6 - len(refused),
                         "every accepted request answered")
        run.finish("answered")
    assert [s.rejected for s in run.statistics()] == [len(refused)]


async def test_user_operators_on_an_actor_edge_filter_its_input() -> None:
    searcher = Searcher()
    no_spam = ops.filter(lambda e: not (isinstance(e, SearchRequested) and "spam" in e.query))
    async with ActorRun("r", [searcher, Finisher(after=1)],
                        edges={"searcher": [no_spam]}) as run:
        run.publish(SearchRequested(query="spam offer"))
        run.publish(SearchRequested(query="real"))
        await asyncio.wait_for(run.wait(), 5)
    completed = [e for e in run.stream.history() if isinstance(e, SearchCompleted)]
    assert [e.query for e in completed] == ["real"]


async def test_cancel_interrupts_handlers_mid_await_with_one_terminal_event() -> None:
    gate = asyncio.Event()  # never set: the handler is stuck in an await
    searcher = Searcher(gate)
    async with ActorRun("r", [searcher]) as run:
        run.publish(SearchRequested(query="slow"))
        await eventually(lambda: searcher.in_flight == 1, "the handler stuck mid-await")
        assert run.cancel("user pressed stop")
        assert not run.cancel("again")
        assert not run.finish("answered")
        finished = await asyncio.wait_for(run.wait(), 5)
    assert searcher.cancelled == 1 and searcher.stopped
    assert finished.outcome == "cancelled" and finished.reason == "user pressed stop"
    assert types(run)[-2:] == ["run.cancel_requested", "run.finished"]
    assert types(run).count("run.finished") == 1


@pytest.mark.parametrize("seed", range(40))
async def test_cancel_and_completion_race_for_one_terminal_claim(seed: int) -> None:
    rng = random.Random(seed)

    class Racer(Actor):
        name = "racer"
        handles = ("search.completed",)

        async def on_receive(self, msg: Event, ctx: ActorContext) -> None:
            for _ in range(rng.randint(0, 3)):
                await asyncio.sleep(0)
            ctx.finish("answered")

    async with ActorRun("r", [Searcher(), Racer()]) as run:
        run.publish(SearchRequested(query="q"))
        for _ in range(rng.randint(0, 6)):
            await asyncio.sleep(0)
        cancel_won = run.cancel("race")
        finished = await asyncio.wait_for(run.wait(), 5)
    assert types(run).count("run.finished") == 1 and types(run)[-1] == "run.finished"
    assert finished.outcome == ("cancelled" if cancel_won else "answered")
    assert run.outcome == finished.outcome


async def test_nothing_an_actor_publishes_after_the_claim_reaches_the_stream() -> None:
    class Chatty(Actor):
        name = "chatty"
        handles = ("search.requested",)

        async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event]:
            ctx.finish("answered")
            ctx.emit(SearchCompleted(query="late emit"))
            return [SearchCompleted(query="late return")]

    async with ActorRun("r", [Chatty()]) as run:
        run.publish(SearchRequested(query="q"))
        await asyncio.wait_for(run.wait(), 5)
    assert types(run) == ["search.requested", "run.finished"]


async def test_per_request_timeout_becomes_a_retryable_failure() -> None:
    class Slow(Searcher):
        timeout_s = 0.05

    async with ActorRun("r", [Slow(asyncio.Event())]) as run:
        run.publish(SearchRequested(query="q"))
        await eventually(lambda: "actor.failed" in types(run), "the timed-out request's failure")
        run.finish("degraded")
    failure = next(e for e in run.stream.history() if isinstance(e, ActorFailed))
    assert failure.error.kind == "TimeoutError" and failure.error.retryable


async def test_deadline_publishes_exhaustion_then_fails_a_run_nobody_ends() -> None:
    async with ActorRun("r", [Searcher(asyncio.Event())], deadline_s=0.1, grace_s=0.1) as run:
        run.publish(SearchRequested(query="q"))
        finished = await asyncio.wait_for(run.wait(), 5)
    exhausted = [e for e in run.stream.history() if isinstance(e, BudgetExhausted)]
    assert exhausted and exhausted[0].resource == "wall_clock"
    assert finished.outcome == "failed" and "deadline" in finished.reason
    # the handler was given no more than the run had left
    assert any(isinstance(e, ActorFailed) and e.error.kind == "TimeoutError"
               for e in run.stream.history())


async def test_clean_shutdown_leaves_no_task_or_subscription() -> None:
    before = asyncio.all_tasks()
    searcher = Searcher(asyncio.Event())
    async with ActorRun("r", [searcher, Finisher()]) as run:
        run.publish(SearchRequested(query="q"))
        await eventually(lambda: searcher.in_flight == 1, "the handler stuck mid-await")
        run.cancel()
        await run.wait()
    assert asyncio.all_tasks() == before
    assert run.stream.observer_count == 0
    assert searcher.started and searcher.stopped


async def test_leaving_the_scope_early_cancels_the_run() -> None:
    async with ActorRun("r", [Searcher(asyncio.Event())]) as run:
        run.publish(SearchRequested(query="q"))
    finished = run.stream.finished
    assert finished is not None and finished.outcome == "cancelled"


async def test_cancelling_the_hosting_task_cancels_the_run_and_propagates() -> None:
    holder: list[ActorRun] = []
    searcher = Searcher(asyncio.Event())

    async def host() -> None:
        async with ActorRun("r", [searcher]) as run:
            holder.append(run)
            run.publish(SearchRequested(query="q"))
            await run.wait()

    task = asyncio.create_task(host())
    # The handler runs only once the host has published and is waiting for the end.
    await eventually(lambda: searcher.in_flight == 1, "the run hosted and its handler busy")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    finished = holder[0].stream.finished
    assert isinstance(finished, RunFinished) and finished.outcome == "cancelled"


async def test_an_actor_that_fails_to_start_fails_the_run_clearly() -> None:
    class Broken(Searcher):
        async def on_start(self, ctx: ActorContext) -> None:
            raise OSError("index missing")

    run = ActorRun("r", [Broken()])
    with pytest.raises(ActorStartError, match="index missing"):
        async with run:
            pass
    assert run.stream.finished is not None and run.stream.finished.outcome == "failed"


def test_bad_configuration_is_refused_up_front() -> None:
    with pytest.raises(ValueError, match="unique"):
        ActorRun("r", [Searcher(), Searcher()])
    with pytest.raises(ValueError, match="unknown actors"):
        ActorRun("r", [Searcher()], edges={"nobody": []})
    with pytest.raises(ValueError, match="deadline"):
        ActorRun("r", [Searcher()], deadline_s=0)


async def test_an_error_in_the_run_scope_propagates_unchanged_and_fails_the_run() -> None:
    run = ActorRun("r", [Searcher(asyncio.Event())])
    with pytest.raises(ValueError, match="app bug"):
        async with run:
            run.publish(SearchRequested(query="q"))
            raise ValueError("app bug")
    finished = run.stream.finished
    assert finished is not None and finished.outcome == "failed" and "app bug" in finished.reason


def worker_tasks(name: str) -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == name]


async def test_an_idle_actor_holds_no_task_and_wakes_for_the_next_message() -> None:
    searcher = Searcher()
    async with ActorRun("r", [searcher, Finisher(after=2)]) as run:
        assert worker_tasks("searcher") == []  # started, nothing to do: no task
        run.publish(SearchRequested(query="a"))
        for _ in range(5):
            await asyncio.sleep(0)
        assert worker_tasks("searcher") == []  # drained its mailbox and ended
        run.publish(SearchRequested(query="b"))  # a new worker picks this up
        finished = await asyncio.wait_for(run.wait(), 5)
    assert finished.outcome == "answered"
    assert types(run).count("search.completed") == 2


async def test_messages_arriving_while_a_worker_drains_are_all_handled_in_order() -> None:
    handled: list[str] = []

    class Echo(Actor):
        name = "echo"
        handles = ("search.requested",)

        async def on_receive(self, msg: Event, ctx: ActorContext) -> None:
            assert isinstance(msg, SearchRequested)
            handled.append(msg.query)
            if len(handled) % 3 == 0:
                await asyncio.sleep(0)  # sometimes yield mid-drain
            if len(handled) == 50:
                ctx.finish("answered")

    async with ActorRun("r", [Echo()]) as run:
        for i in range(50):
            run.publish(SearchRequested(query=str(i)))
            if i % 7 == 0:
                await asyncio.sleep(0)  # let the worker run dry and end now and then
        await asyncio.wait_for(run.wait(), 5)
    assert handled == [str(i) for i in range(50)]


async def test_a_finished_run_lets_go_of_its_actors() -> None:
    import gc
    import weakref

    searcher = Searcher()
    ref = weakref.ref(searcher)
    async with ActorRun("r", [searcher, Finisher()]) as run:
        run.publish(SearchRequested(query="a"))
        await asyncio.wait_for(run.wait(), 5)
    stream = run.stream
    del run, searcher
    gc.collect()
    assert ref() is None  # the stream a caller keeps does not keep the run's actors alive
    assert stream.finished is not None


async def test_a_finished_run_leaves_no_reference_cycle_for_the_gc() -> None:
    import gc

    class Relay(Actor):
        name = "relay"
        handles = ("search.requested",)

        async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
            assert isinstance(msg, SearchRequested)
            if len(msg.query) >= 5:
                ctx.finish("answered")
                return None
            return [SearchRequested(query=msg.query + "x")]

    async def one() -> None:
        async with ActorRun("r", [Relay()]) as run:
            run.publish(SearchRequested(query="x"))
            await run.wait()

    await one()  # warm up (first-use caches)
    gc.collect()
    gc.disable()
    try:
        for _ in range(20):
            await one()
        # everything a run allocated was freed by reference counting already
        assert gc.collect() == 0
    finally:
        gc.enable()


async def test_a_handler_whose_await_is_cancelled_from_outside_fails_only_that_request() -> None:
    pending: list[asyncio.Future[None]] = []

    class Waiter(Searcher):
        async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event]:
            assert isinstance(msg, SearchRequested)
            if msg.query == "wait":
                fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                pending.append(fut)
                await fut  # someone else cancels this future
            return [SearchCompleted(query=msg.query)]

    async with ActorRun("r", [Waiter(), Finisher()]) as run:
        run.publish(SearchRequested(query="wait"))
        run.publish(SearchRequested(query="next"))  # queued behind the waiting one
        for _ in range(3):
            await asyncio.sleep(0)
        pending[0].cancel()
        finished = await asyncio.wait_for(run.wait(), 5)
    failed = [e for e in run.stream.history() if isinstance(e, ActorFailed)]
    assert [f.error.kind for f in failed] == ["CancelledError"]
    assert finished.outcome == "answered"  # the queued request was still served
    assert [e.query for e in run.stream.history() if isinstance(e, SearchCompleted)] == ["next"]


class Returner(Actor):
    """Answers a search in one of the ways a handler can hold on to what it returns."""

    name = "returner"
    handles = ("search.requested",)

    def __init__(self, how: str) -> None:
        self.how = how
        self.kept: list[Event] = []
        self.kept_list: list[Event] = []
        self.ref: weakref.ref[Event] | None = None
        self.returned_id = 0

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event]:
        event = SearchCompleted(query="q", cause=msg.seq)
        self.returned_id = id(event)
        if self.how == "kept":
            self.kept.append(event)
        elif self.how == "weakref":
            self.ref = weakref.ref(event)
        elif self.how == "kept_list":
            self.kept_list = [event]
            return self.kept_list
        return [event]


async def _published_answer(actor: Returner) -> Event:
    async with ActorRun("r", [actor, Finisher()]) as run:
        run.publish(SearchRequested(query="q"))
        await asyncio.wait_for(run.wait(), 5)
    return next(e for e in run.stream.history() if e.type == "search.completed")


async def test_an_event_the_handler_made_and_returned_is_published_stamped() -> None:
    actor = Returner("fresh")
    published = await _published_answer(actor)
    assert (published.run_id, published.seq, published.actor) == ("r", 2, "returner")


@pytest.mark.skipif(not _REFCHECK, reason="the no-copy path needs CPython's reference counts "
                    "(up to 3.13, with the GIL); elsewhere events are copied")
async def test_an_event_only_the_handler_made_and_returned_is_published_without_a_copy() -> None:
    actor = Returner("fresh")
    published = await _published_answer(actor)
    assert id(published) == actor.returned_id
    assert (published.run_id, published.seq, published.actor) == ("r", 2, "returner")


@pytest.mark.parametrize("how", ["kept", "kept_list", "weakref"])
async def test_an_event_the_handler_still_holds_is_never_stamped_under_its_feet(how: str) -> None:
    actor = Returner(how)
    published = await _published_answer(actor)
    assert (published.run_id, published.seq, published.actor) == ("r", 2, "returner")
    assert id(published) != actor.returned_id or how == "weakref"
    if how == "weakref":
        assert actor.ref is not None and actor.ref() is None  # the original died: a copy went out
    else:
        held = (actor.kept or actor.kept_list)[0]
        assert (held.run_id, held.seq, held.actor) == ("", 0, "")  # what the handler built


async def test_runs_ending_with_the_same_bare_outcome_each_publish_their_own_terminal() -> None:
    class BareFinisher(Finisher):
        async def on_receive(self, msg: Event, ctx: ActorContext) -> None:
            ctx.finish("answered")  # no reason, answer or claims

    finished = []
    for run_id in ("r1", "r2"):
        async with ActorRun(run_id, [Returner("fresh"), BareFinisher()]) as run:
            run.publish(SearchRequested(query="q"))
            finished.append(await asyncio.wait_for(run.wait(), 5))
    assert [(f.run_id, f.seq, f.outcome) for f in finished] == [("r1", 3, "answered"),
                                                                 ("r2", 3, "answered")]
    assert finished[0] is not finished[1]
