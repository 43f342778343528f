"""What a remote handler emits reaches the run's stream while it runs, in order, before its reply.

The handler (``LiveActor``, in a Ray worker) waits on a file the test writes only
after it saw the handler's events on the stream: an event that came with the
reply instead would hang the test, not pass it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import ActorRun, RayOptions, RayPlacement
from streams import ActorFailed, AnswerDelta, Event, RerankCompleted, RerankRequested

from .._eventually import eventually
from ._ray_fixtures import LiveActor

pytestmark = pytest.mark.slow  # a local Ray cluster

SMALL = RayOptions(num_cpus=0.1, max_restarts=0, start_timeout_s=90, live_events=True)
BEFORE_THE_WAIT = ["started", "thread-0", "thread-1", "thread-2"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("live")


@pytest.fixture(scope="module")
def placement(ray: Any, folder: Path) -> Iterator[RayPlacement]:
    """One replica serving every test here (each test uses its own call ids)."""
    placement = RayPlacement(functools.partial(LiveActor, str(folder)), SMALL).start_blocking()
    yield placement
    asyncio.run(placement.shutdown())


def _request(query: str, call_id: str) -> RerankRequested:
    return RerankRequested(call_id=call_id, query=query, candidates=())


def _deltas(run: ActorRun) -> list[AnswerDelta]:
    return [e for e in run.stream.history() if isinstance(e, AnswerDelta)]


def _answers(run: ActorRun) -> list[Event]:
    return [e for e in run.stream.history()
            if e.type in ("rerank.completed", "actor.failed")]


async def test_emitted_events_arrive_while_the_handler_runs_in_order(
    placement: RayPlacement, folder: Path,
) -> None:
    async with ActorRun("live-order", [placement.actor()], deadline_s=60) as run:
        req = run.publish(_request("wait", "order-1"))
        assert req is not None
        await eventually(lambda: len(_deltas(run)) == len(BEFORE_THE_WAIT),
                    "the events the handler emits before it waits")
        # the handler is still waiting for us: nothing answered, the call in flight
        assert _answers(run) == []
        assert placement.in_flight() == [1]
        (folder / "go-order-1").touch()
        await eventually(lambda: _answers(run) != [])
        run.finish("answered")
    events = [e for e in run.stream.history() if e.type != "run.finished"]
    assert [e.type for e in events] == ["rerank.requested", *["answer.delta"] * 5,
                                        "rerank.completed"]
    assert [d.text for d in _deltas(run)] == [*BEFORE_THE_WAIT, "resumed"]
    assert all(e.cause == req.seq and e.actor == "live" for e in events[1:])
    assert isinstance(events[-1], RerankCompleted)


async def test_cancelling_the_run_mid_stream_stops_the_remote_handler(
    placement: RayPlacement, folder: Path,
) -> None:
    async with ActorRun("live-cancel", [placement.actor()]) as run:
        run.publish(_request("hang", "cancel-1"))
        await eventually(lambda: len(_deltas(run)) == len(BEFORE_THE_WAIT),
                    "the events the handler emits before it waits")
        run.cancel("user pressed stop")
        finished = await run.wait()
    assert finished.outcome == "cancelled"
    marker = folder / "cancelled"
    await eventually(lambda: marker.exists() and marker.stat().st_size > 0)
    assert marker.read_text() == "cancelled cancel-1"
    await eventually(lambda: placement.in_flight() == [0])


@pytest.mark.parametrize(("query", "kind", "says"), [
    ("bad", "EncodeError", "cannot encode 'rerank.completed' event"),
    ("not-event", "TypeError", "ctx.emit takes an Event, got str"),
])
async def test_an_emit_that_cannot_cross_fails_the_handler_not_the_replica(
    placement: RayPlacement, folder: Path, query: str, kind: str, says: str,
) -> None:
    async with ActorRun(f"live-{query}", [placement.actor()], deadline_s=60) as run:
        run.publish(_request(query, f"{query}-1"))
        await eventually(lambda: _answers(run) != [])
        (failed,) = _answers(run)
        # the replica serves on: a good request right after is answered
        run.publish(_request("wait", f"{query}-2"))
        (folder / f"go-{query}-2").touch()
        await eventually(lambda: len(_answers(run)) == 2)
        run.finish("answered")
    assert isinstance(failed, ActorFailed)
    assert failed.error.kind == kind
    assert says in failed.error.message
    # what the handler emitted before the bad emit still reached the stream, first
    assert [d.text for d in _deltas(run)][:4] == BEFORE_THE_WAIT
    assert isinstance(_answers(run)[1], RerankCompleted)


async def test_a_worker_dying_mid_stream_fails_the_request(ray: Any, tmp_path: Path) -> None:
    factory = functools.partial(LiveActor, str(tmp_path))
    async with (RayPlacement(factory, SMALL) as dying,
                ActorRun("live-die", [dying.actor()], deadline_s=60) as run):
        run.publish(_request("die", "die-1"))
        await eventually(lambda: len(_deltas(run)) == len(BEFORE_THE_WAIT),
                    "the events the handler emits before it waits")
        (tmp_path / "go-die-1").touch()
        await eventually(lambda: _answers(run) != [])
        run.finish("answered")
    (failed,) = _answers(run)
    assert isinstance(failed, ActorFailed)
    assert failed.error.kind == "RemoteActorDied"
    assert [d.text for d in _deltas(run)] == BEFORE_THE_WAIT


async def test_a_timeout_mid_stream_cancels_the_remote_handler(ray: Any, tmp_path: Path) -> None:
    factory = functools.partial(LiveActor, str(tmp_path), timeout_s=2.0)
    async with (RayPlacement(factory, SMALL) as timed,
                ActorRun("live-timeout", [timed.actor()], deadline_s=60) as run):
        run.publish(_request("hang", "timeout-1"))
        await eventually(lambda: _answers(run) != [])
        run.finish("answered")
        marker = tmp_path / "cancelled"
        await eventually(lambda: marker.exists() and marker.stat().st_size > 0)
    (failed,) = _answers(run)
    assert isinstance(failed, ActorFailed)
    assert failed.error.kind == "TimeoutError"
    assert [d.text for d in _deltas(run)] == BEFORE_THE_WAIT  # sent before the timeout
    assert marker.read_text() == "cancelled timeout-1"
