"""Crash resume goes through declared hooks: ``Actor.on_restore`` and the policy hooks.

A resumed run's fresh actors each get the stored log in their ``on_restore``
before anything else happens to them (``on_start``, the first message); a
planner or writer policy gets its declared hooks (:class:`PlannerHooks`,
:class:`WriterHooks`), with no-op defaults from :class:`PlannerBase` /
:class:`WriterBase`, and a policy that declares none still resumes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from actors import Actor, ActorContext
from reactive_rag.agent import PlannerActor
from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement import (
    Decision,
    PlannerBase,
    PlannerHooks,
    PlannerView,
    WriterBase,
    WriterHooks,
)
from reactive_rag.judgement.model import ChatPlanner, ChatWriter
from reactive_rag.judgement.offline import ExtractiveWriter, OfflinePlanner
from streams import Event, PlanDecided, PlanRequested, RunFinished, RunStarted

QUESTION = "Who founded Bayer and when?"


class Probe(Actor):
    """Notes every hook the runtime and the engine call, in order."""

    name = "probe"
    handles = ("run.resumed", "plan.requested", "budget.tick")

    def __init__(self, calls: list[tuple[str, tuple[int, ...]]]) -> None:
        self.calls = calls

    def on_restore(self, events: Sequence[Event]) -> None:
        self.calls.append(("restore", tuple(e.seq for e in events)))

    async def on_start(self, ctx: ActorContext) -> None:
        self.calls.append(("start", ()))

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        self.calls.append(("receive", (msg.seq,)))
        return None


def _interrupted(prefix: Sequence[Event]) -> list[Event]:
    last = prefix[-1]
    return [*prefix, RunFinished(outcome="interrupted", reason="crash", run_id=last.run_id,
                                 seq=last.seq + 1, ts=last.ts + 1.0, actor="store")]


async def test_on_restore_gets_the_stored_events_before_the_first_message(
        index: CorpusIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(index)
    original = await engine.ask(QUESTION, collections=["demo"])
    stored = _interrupted(list(original.events)[:6])
    calls: list[tuple[str, tuple[int, ...]]] = []
    build = Engine._actors

    def with_probe(self: Engine, *args: object, **kwargs: object) -> list[Actor]:
        return [*build(self, *args, **kwargs), Probe(calls)]  # type: ignore[arg-type]

    monkeypatch.setattr(Engine, "_actors", with_probe)
    result = await asyncio.wait_for(engine.resume(stored).wait(), 20)
    assert result.outcome == original.outcome
    kinds = [kind for kind, _ in calls]
    assert kinds[:2] == ["restore", "start"] and kinds.count("restore") == 1
    assert calls[0][1] == tuple(range(1, len(stored) + 1))  # the whole log, in seq order
    received = [seqs[0] for kind, seqs in calls if kind == "receive"]
    assert received and min(received) > stored[-1].seq  # only what came after the resume


async def test_a_fresh_run_never_calls_on_restore(
        index: CorpusIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    Actor().on_restore([RunStarted(question="q", seq=1)])  # the default keeps nothing
    calls: list[tuple[str, tuple[int, ...]]] = []
    build = Engine._actors

    def with_probe(self: Engine, *args: object, **kwargs: object) -> list[Actor]:
        return [*build(self, *args, **kwargs), Probe(calls)]  # type: ignore[arg-type]

    monkeypatch.setattr(Engine, "_actors", with_probe)
    result = await Engine(index).ask(QUESTION, collections=["demo"])
    assert result.outcome == "answered"
    assert calls[0] == ("start", ()) and all(kind != "restore" for kind, _ in calls)


def test_the_shipped_policies_declare_their_hooks() -> None:
    for planner in (OfflinePlanner(), ChatPlanner(object())):  # type: ignore[arg-type]
        assert isinstance(planner, PlannerBase) and isinstance(planner, PlannerHooks)
    for writer in (ExtractiveWriter(), ChatWriter(object())):  # type: ignore[arg-type]
        assert isinstance(writer, WriterBase) and isinstance(writer, WriterHooks)
    view = PlannerView(question="q", round=1, evidence=(), queries=())
    assert ChatPlanner(object()).replay(view) is None  # type: ignore[arg-type]
    assert OfflinePlanner().replay(view) is not None


class Remembering(PlannerBase):
    """A stateful planner that cannot replay: its ``restore`` gets the log."""

    name = "remembering"

    def __init__(self) -> None:
        self.restored: list[int] = []
        self.replayed = 0

    async def decide(self, view: PlannerView) -> Decision:  # pragma: no cover
        raise AssertionError("not asked on restore")

    def replay(self, view: PlannerView) -> Decision | None:
        self.replayed += 1
        return None

    def restore(self, events: Sequence[Event]) -> None:
        self.restored = [e.seq for e in events]


def test_the_planner_host_calls_the_declared_policy_hooks() -> None:
    events: list[Event] = [
        RunStarted(question="q", seq=1),
        PlanRequested(round=1, seq=2, actor="controller", cause=1),
        PlanDecided(action="answer", seq=3, actor="planner", cause=2),
    ]
    policy = Remembering()
    PlannerActor(policy).on_restore(events)
    assert policy.restored == [1, 2, 3] and policy.replayed == 1


def test_a_policy_without_hooks_is_not_asked_for_them() -> None:
    class Plain:
        name = "plain"

        async def decide(self, view: PlannerView) -> Decision:  # pragma: no cover
            return Decision(action="answer")

    assert not isinstance(Plain(), PlannerHooks)
    PlannerActor(Plain()).on_restore([RunStarted(question="q", seq=1)])  # no error
