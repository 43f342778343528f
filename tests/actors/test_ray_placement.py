"""Remote actors on a real local Ray cluster: same events as local, cancels, deaths, deadlines.

Ray is an optional extra: without it these tests skip, unless
``REACTIVE_RAG_REQUIRE_RAY=1`` (CI), where a missing Ray fails them.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from pathlib import Path
from typing import Any

import pytest

from actors import (
    Actor,
    ActorRun,
    ActorStartError,
    RayNotInstalled,
    RayOptions,
    RayPlacement,
)
from actors.rerank import RerankerActor, rerank_failure
from streams import ActorFailed, Event, RerankCompleted, RerankFailed, RerankRequested

from .._eventually import eventually
from ._ray_fixtures import (
    CANDIDATES,
    DyingActor,
    SlowActor,
    broken_reranker,
    hashing_reranker,
    streaming_reranker,
)

pytestmark = pytest.mark.slow  # a local Ray cluster: ~40 s for the module

# a fraction of a CPU each, so every test's replicas fit a 2-CPU local cluster
SMALL = RayOptions(num_cpus=0.1, max_restarts=1, start_timeout_s=90)


def _request(query: str = "aspirin fever", call_id: str = "call-1") -> RerankRequested:
    return RerankRequested(call_id=call_id, query=query, candidates=CANDIDATES, k=2)


async def _wait_for(run: ActorRun, types: set[str], count: int = 1) -> list[Event]:
    async with asyncio.timeout(60):
        while True:
            got = [e for e in run.stream.history() if e.type in types]
            if len(got) >= count:
                return got
            await asyncio.sleep(0.01)


async def _until_served(run: ActorRun, query: str) -> RerankCompleted:
    """Ask until a request is answered: until Ray sees the death and restarts the worker,
    a request may fail too (each such failure typed as a dead worker, never a hang)."""
    served: list[RerankCompleted] = []
    attempts = 0

    async def ask() -> bool:
        nonlocal attempts
        attempts += 1
        req = run.publish(_request(query, f"{query}-{attempts}"))
        assert req is not None
        answered: list[Event] = []

        def answer() -> bool:
            answered[:] = [e for e in run.stream.history() if e.cause == req.seq][:1]
            return bool(answered)

        await eventually(answer, f"an answer to {query!r} (attempt {attempts})")
        if isinstance(answered[0], RerankCompleted):
            served.append(answered[0])
            return True
        assert isinstance(answered[0], RerankFailed | ActorFailed)
        assert answered[0].error.kind == "RemoteActorDied", answered[0].error
        return False

    # Retried (the interval is a poll interval) until served, however long the restart takes.
    await eventually(ask, f"{query!r} served after the worker died", timeout_s=120,
                     interval_s=0.2)
    return served[0]


async def _wait_file(path: Path) -> str:
    """What the remote handler wrote when it saw its cancel (it runs in another process).

    Waits for content, not for the file: ``write_text`` creates it empty first.
    """
    await eventually(lambda: path.exists() and path.stat().st_size > 0)
    return await asyncio.to_thread(path.read_text)


def _comparable(events: list[Event]) -> list[dict[str, Any]]:
    return [e.model_dump(exclude={"ts"}) for e in events]


async def _serve(actor: Actor, *requests: RerankRequested,
                 answers: set[str]) -> list[Event]:
    async with ActorRun("rr-same", [actor], deadline_s=60) as run:
        for req in requests:
            run.publish(req)
        await _wait_for(run, answers, len(requests))
        run.finish("answered")
    return [e for e in run.stream.history() if e.type != "run.finished"]


async def test_remote_reranker_publishes_the_same_events_as_local(ray: Any) -> None:
    requests = (_request(), _request("volcanic rock", "call-2"))
    local = await _serve(hashing_reranker(), *requests, answers={"rerank.completed"})
    # `like=` declares the limits, so a run can use the placement before it started:
    # its first request starts the replicas
    placement = RayPlacement(hashing_reranker, SMALL, like=RerankerActor)
    try:
        proxy = placement.actor()
        assert (proxy.name, proxy.handles, proxy.finalizes) == ("reranker",
                                                               ("rerank.requested",), True)
        assert not placement.started
        remote = await _serve(proxy, *requests, answers={"rerank.completed"})
        assert placement.started
    finally:
        await placement.shutdown()
    assert _comparable(remote) == _comparable(local)
    completed = [e for e in remote if isinstance(e, RerankCompleted)]
    assert [c.call_id for c in completed] == ["call-1", "call-2"]
    assert completed[0].chunks, "the remote reranker kept no chunk"


async def test_events_emitted_remotely_come_before_the_reply_as_locally(ray: Any) -> None:
    local = await _serve(streaming_reranker(), _request(), answers={"rerank.completed"})
    async with RayPlacement(streaming_reranker, SMALL) as placement:
        remote = await _serve(placement.actor(), _request(), answers={"rerank.completed"})
    assert [e.type for e in remote] == ["rerank.requested", "answer.delta", "rerank.completed"]
    assert _comparable(remote) == _comparable(local)
    assert remote[1].cause == remote[0].seq


async def test_a_raising_remote_handler_is_answered_by_its_own_on_failure(ray: Any) -> None:
    async with RayPlacement(broken_reranker, SMALL) as placement:
        events = await _serve(placement.actor(), _request(), _request("again", "call-2"),
                              answers={"rerank.failed"})
    failed = [e for e in events if isinstance(e, RerankFailed)]
    assert [f.call_id for f in failed] == ["call-1", "call-2"]
    assert failed[0].error.kind == "ValueError"
    assert "exploded" in failed[0].error.message
    assert failed[0].actor == "reranker"


async def test_a_timeout_cancels_the_remote_call(ray: Any, tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    factory = functools.partial(SlowActor, str(marker), timeout_s=0.5)
    async with RayPlacement(factory, SMALL) as placement:
        async with ActorRun("rr-timeout", [placement.actor()], deadline_s=60) as run:
            run.publish(_request("hang"))
            (failed,) = await _wait_for(run, {"actor.failed"})
            assert isinstance(failed, ActorFailed)
            assert failed.error.kind == "TimeoutError"
            assert await _wait_file(marker) == "cancelled call-1"
            run.publish(_request("after", "call-2"))  # the replica serves on
            (done,) = await _wait_for(run, {"rerank.completed"})
            assert done.cause is not None
            run.finish("answered")
        assert placement.in_flight() == [0]


async def test_cancelling_the_run_cancels_the_remote_call(ray: Any, tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    async with RayPlacement(functools.partial(SlowActor, str(marker)), SMALL) as placement:
        async with ActorRun("rr-cancel", [placement.actor()]) as run:
            run.publish(_request("hang"))
            await eventually(lambda: placement.in_flight() == [1])
            run.cancel("user pressed stop")
            finished = await run.wait()
        assert finished.outcome == "cancelled"
        assert await _wait_file(marker) == "cancelled call-1"


async def test_the_run_deadline_caps_the_remote_call(ray: Any, tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    async with RayPlacement(functools.partial(SlowActor, str(marker)), SMALL) as placement:
        async with ActorRun("rr-deadline", [placement.actor()], deadline_s=5.0,
                            grace_s=30.0) as run:
            run.publish(_request("how long", "call-0"))
            (first,) = await _wait_for(run, {"rerank.completed"})
            assert isinstance(first, RerankCompleted)
            assert 0 <= first.below_floor <= 5, "the worker did not get the run's deadline"
            run.publish(_request("hang"))
            (failed,) = await _wait_for(run, {"actor.failed"})
            assert isinstance(failed, ActorFailed)
            assert failed.error.kind == "TimeoutError"
            await _wait_for(run, {"budget.exhausted"})
            run.finish("answered")
        assert await _wait_file(marker) == "cancelled call-1"


async def test_a_worker_dying_mid_request_fails_it_and_the_restarted_worker_serves_on(
    ray: Any,
) -> None:
    async with RayPlacement(DyingActor, SMALL, on_failure=rerank_failure) as placement:
        async with ActorRun("rr-die", [placement.actor()], deadline_s=90) as run:
            run.publish(_request("pid?", "call-0"))
            (before,) = await _wait_for(run, {"rerank.completed"})
            assert isinstance(before, RerankCompleted)
            run.publish(_request("die"))
            (failed,) = await _wait_for(run, {"rerank.failed"})
            assert isinstance(failed, RerankFailed)
            assert failed.call_id == "call-1"
            assert failed.error.kind == "RemoteActorDied"
            assert failed.error.retryable
            done = await _until_served(run, "alive?")
            assert done.below_floor != before.below_floor  # a new worker process answered
            run.finish("answered")
        assert run.outcome == "answered"


async def test_a_ray_killed_worker_fails_its_request_as_actor_failed(
    ray: Any, tmp_path: Path,
) -> None:
    factory = functools.partial(SlowActor, str(tmp_path / "never"))
    placement = await RayPlacement(factory, SMALL).start()
    try:
        async with ActorRun("rr-kill", [placement.actor()], deadline_s=90) as run:
            run.publish(_request("hang"))
            await eventually(lambda: placement.in_flight() == [1])
            ray.kill(placement.ray_handles[0], no_restart=False)
            (failed,) = await _wait_for(run, {"actor.failed"})
            assert isinstance(failed, ActorFailed)
            assert failed.error.kind == "RemoteActorDied"
            await _until_served(run, "after restart")
            run.finish("answered")
    finally:
        await placement.shutdown()


def _explode() -> Actor:
    raise RuntimeError("no model on this node")


async def test_a_factory_that_raises_fails_the_start_with_its_reason(ray: Any) -> None:
    placement = RayPlacement(_explode, RayOptions(num_cpus=0.1, max_restarts=0))
    with pytest.raises(ActorStartError, match="no model on this node"):
        await placement.start()
    with pytest.raises(RuntimeError, match="not started"):
        placement.actor()


def test_without_ray_a_placement_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(RayNotInstalled, match=r"reactive-rag\[ray\]"):
        asyncio.run(RayPlacement(hashing_reranker).start())


def test_options_from_config_reject_unknown_keys() -> None:
    opts = RayOptions.from_mapping({"replicas": 2, "num_gpus": 1})
    assert (opts.replicas, opts.num_gpus) == (2, 1)
    with pytest.raises(ValueError, match="num_gpu"):
        RayOptions.from_mapping({"num_gpu": 1})
    with pytest.raises(ValueError, match="replicas"):
        RayOptions(replicas=0)
    assert RayOptions().live_events is False  # emitted events travel with the reply
    assert RayOptions.from_mapping({"live_events": True}).live_events is True
    with pytest.raises(ValueError, match="live_events must be true or false"):
        RayOptions.from_mapping({"live_events": "yes"})


async def test_a_request_after_shutdown_fails_plainly_instead_of_restarting(ray: Any) -> None:
    placement = await RayPlacement(hashing_reranker, SMALL).start()
    proxy = placement.actor()
    await placement.shutdown()
    async with ActorRun("rr-closed", [proxy], deadline_s=60) as run:
        run.publish(_request())
        (failed,) = await _wait_for(run, {"rerank.failed", "actor.failed"})
        run.finish("answered")
    assert isinstance(failed, ActorFailed)  # no on_failure given: the generic failure
    assert failed.error.kind == "RemoteCallFailed"
    assert "shut down" in failed.error.message
    assert not placement.started
