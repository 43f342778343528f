"""Crash resume: a run interrupted at any event goes on from its stored log to one terminal.

A real offline run is recorded to completion; then every prefix of its log,
closed with the ``run.finished(interrupted)`` crash recovery stores, is
resumed with :meth:`Engine.resume`. Each resume publishes ``run.resumed``
first, continues the seqs without a gap, ends with exactly one new
``run.finished``, and (the offline policies being deterministic) answers as
the uninterrupted run did, citing only evidence registered in the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from actors.models import HashingEmbedder
from actors.providers import TenantSearchConfig
from actors.scrape import FetchConfig, ScrapeConfig, ScraperActor, UrlGuard
from actors.search import Searcher
from reactive_rag.agent import WriterActor
from reactive_rag.engine._engine import Engine, RunResult
from reactive_rag.index import CorpusIndex, Document
from reactive_rag.judgement import Decision, Draft, PlannerView
from reactive_rag.judgement.model import ChatPlanner
from reactive_rag.judgement.offline import ExtractiveWriter, OfflinePlanner
from reactive_rag.run import RunConfigError
from reactive_rag.store import Recorder, RunMeta, SqliteRunStore
from streams import (
    AnswerDrafted,
    AnswerRequested,
    Claim,
    Conflict,
    ConflictSide,
    Event,
    EvidenceChunk,
    EvidenceRegistered,
    PlanDecided,
    RunFinished,
    RunResumed,
    RunStarted,
    ToolCall,
)
from tests.actors._scrape_fixtures import local_server
from tests.actors._web_fixtures import Result, fake_web

QUESTIONS = [
    ("Who founded Bayer and when?", "agent"),
    ("Who isolated aspirin and where did he work?", "agent"),
    ("Who isolated aspirin?", "rag"),
]


@pytest.fixture
def engine(index: CorpusIndex) -> Engine:
    return Engine(index)


def interrupted(prefix: Sequence[Event], *, downtime_s: float = 5.0) -> list[Event]:
    """``prefix`` closed as crash recovery closes a run the crash left running."""
    last = prefix[-1]
    return [*prefix, RunFinished(outcome="interrupted", reason="crash", run_id=last.run_id,
                                 seq=last.seq + 1, ts=last.ts + downtime_s, actor="store")]


def check_resumed(result: RunResult, stored: Sequence[Event], *, attempt: int = 1) -> list[Event]:
    """The invariants of every resumed run; returns the events after the stored ones."""
    events = list(result.events)
    assert events[: len(stored)] == list(stored)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # no gap, no reuse
    new = events[len(stored):]
    first = new[0]
    assert isinstance(first, RunResumed), [e.type for e in new]
    assert (first.after_seq, first.attempt) == (stored[-1].seq, attempt)
    assert [e.type for e in new].count("run.finished") == 1 and new[-1].type == "run.finished"
    assert result.outcome == new[-1].outcome  # type: ignore[attr-defined]
    registered = {c.id for e in events if isinstance(e, EvidenceRegistered) for c in e.chunks}
    for cite in result.citations:  # the registry rule, across the resume
        assert cite.claim.source_id in registered and cite.chunk is not None
        assert " ".join(cite.claim.quote.split()) in " ".join(cite.chunk.text.split())
    assert RunResult.from_events(events).outcome == result.outcome
    return new


def same_answer(resumed: RunResult, original: RunResult) -> None:
    assert resumed.outcome == original.outcome, resumed.reason
    assert resumed.answer == original.answer
    assert [c.claim for c in resumed.citations] == [c.claim for c in original.citations]


class PlainPlanner:
    """The offline planner behind a policy with no ``replay`` (as a chat planner is)."""

    name = "plain"

    def __init__(self) -> None:
        self._inner = OfflinePlanner()

    async def decide(self, view: PlannerView) -> Decision:
        return await self._inner.decide(view)


@pytest.mark.parametrize(("question", "mode"), QUESTIONS)
async def test_every_prefix_of_a_run_resumes_to_the_same_answer(
        engine: Engine, question: str, mode: str) -> None:
    original = await engine.ask(question, collections=["demo"], mode=mode)
    assert original.outcome == "answered", original.reason
    log = list(original.events)
    for k in range(1, len(log)):  # run.started alone ... everything but run.finished
        stored = interrupted(log[:k])
        result = await asyncio.wait_for(engine.resume(stored).wait(), 20)
        check_resumed(result, stored)
        same_answer(result, original)
    assert engine.runs == {}


async def test_every_prefix_resumes_with_a_planner_that_cannot_replay(
        index: CorpusIndex) -> None:
    engine = Engine(index, planner=PlainPlanner)
    original = await engine.ask(QUESTIONS[1][0], collections=["demo"])
    log = list(original.events)
    for k in range(1, len(log)):
        stored = interrupted(log[:k])
        result = await asyncio.wait_for(engine.resume(stored).wait(), 20)
        check_resumed(result, stored)
        assert result.outcome == "answered", (k, result.reason)


@pytest.fixture(scope="module")
def web_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CorpusIndex]:
    idx = CorpusIndex(tmp_path_factory.mktemp("resume-web"), HashingEmbedder())
    idx.index_documents("demo", [Document(id="tea", title="Tea",
                                          text="Tea is an aromatic beverage made from leaves.")])
    yield idx
    idx.close()


def _loopback_scraper() -> ScraperActor:
    return ScraperActor(ScrapeConfig(fetch=FetchConfig(guard=UrlGuard.allowing("127.0.0.1"))))


async def test_every_prefix_of_a_web_run_that_opened_a_page_resumes(
        web_index: CorpusIndex) -> None:
    async with local_server() as (pages, _), fake_web() as web_api:
        base = str(pages.make_url("")).rstrip("/")
        web_api.results["searxng"] = [
            Result(url=f"{base}/article/1", title="Bayer company history",
                   snippet="Friedrich Bayer founded the dye company Bayer in Barmen in 1863 "
                           "together with Johann Friedrich Weskott."),
            Result(url=f"{base}/article/2", title="Barmen dye works",
                   snippet="The dye works in Barmen grew into a chemical company."),
        ]
        searcher = Searcher.from_config(TenantSearchConfig(
            providers={"searxng": web_api.settings("searxng", backoff_s=0.01)}))
        engine = Engine(web_index, web=searcher, scraper=_loopback_scraper)
        try:
            original = await engine.ask("Who founded the Bayer company in 1863?",
                                        collections=["demo"])
            assert original.outcome == "answered" and original.count("page.scraped") >= 1
            log = list(original.events)
            for k in range(1, len(log)):
                stored = interrupted(log[:k])
                result = await asyncio.wait_for(engine.resume(stored).wait(), 20)
                check_resumed(result, stored)
                same_answer(result, original)
                # a page opened before the crash is not opened again
                opened = [e.url for e in result.events if e.type == "page.scraped"]  # type: ignore[attr-defined]
                assert len(opened) == len(set(opened)), k
        finally:
            await searcher.aclose()


async def test_a_resumed_run_that_crashes_again_resumes_again(engine: Engine) -> None:
    original = await engine.ask(QUESTIONS[0][0], collections=["demo"])
    log = list(original.events)
    for k in (4, len(log) // 2, len(log) - 3):
        first_log = interrupted(log[:k])
        first = await engine.resume(first_log).wait()
        new = check_resumed(first, first_log)
        for j in range(1, len(new) - 1):  # crash again after j new events
            second_log = interrupted([*first_log, *new[:j]], downtime_s=60.0)
            second = await asyncio.wait_for(engine.resume(second_log).wait(), 20)
            check_resumed(second, second_log, attempt=2)
            same_answer(second, original)


async def test_a_log_that_did_not_end_interrupted_is_refused(engine: Engine) -> None:
    finished = list((await engine.ask(QUESTIONS[0][0], collections=["demo"])).events)
    with pytest.raises(RunConfigError, match="ended answered: only an interrupted run"):
        engine.resume(finished)
    with pytest.raises(RunConfigError, match="has not ended"):
        engine.resume(finished[:5])
    with pytest.raises(RunConfigError, match=r"no run\.started"):
        engine.resume(interrupted(finished[1:5]))
    with pytest.raises(RunConfigError, match="without a gap"):
        engine.resume(interrupted([finished[0], *finished[2:6]]))
    moved = finished[0].model_copy(update={"collections": ("elsewhere",)})
    with pytest.raises(RunConfigError, match="not indexed here"):
        engine.resume(interrupted([moved, *finished[1:6]]))
    assert engine.runs == {}


async def test_the_wall_clock_goes_on_from_the_time_used_before_the_crash(
        engine: Engine) -> None:
    log = list((await engine.ask(QUESTIONS[0][0], collections=["demo"],
                                 budget={"wall_s": 60})).events)
    # the run had used 20 s when it crashed (the planner was slow), then was down an hour
    k = 3  # run.started, plan.requested, budget.tick: the planner had not answered
    used = [*log[:2], log[2].model_copy(update={"ts": log[0].ts + 20.0})]
    stored = interrupted(used, downtime_s=3600.0)
    result = await engine.resume(stored).wait()
    new = check_resumed(result, stored)
    resumed = new[0]
    assert isinstance(resumed, RunResumed) and resumed.elapsed_s == pytest.approx(20.0)
    ticks = [e for e in new if e.type == "budget.tick"]
    assert ticks and all(20.0 <= t.elapsed_s < 40.0 for t in ticks)  # type: ignore[attr-defined]
    replanned = [e for e in new if e.type == "plan.requested"]
    assert replanned and replanned[0].remaining_s == pytest.approx(40.0)  # type: ignore[attr-defined]
    assert result.outcome == "answered" and len(log) > k


async def test_a_spent_budget_resumes_straight_into_the_finalizer(engine: Engine) -> None:
    log = list((await engine.ask(QUESTIONS[0][0], collections=["demo"],
                                 budget={"wall_s": 30})).events)
    second_plan = [e.seq for e in log if e.type == "plan.requested"][1]
    for k, outcome in ((3, "no_evidence"), (second_plan + 1, "answered_from_evidence")):
        prefix = log[:k]
        prefix[-1] = prefix[-1].model_copy(update={"ts": log[0].ts + 31.0})
        stored = interrupted(prefix)
        result = await asyncio.wait_for(engine.resume(stored).wait(), 10)
        new = check_resumed(result, stored)
        assert new[1].type == "budget.exhausted" and result.outcome == outcome, result.reason
        assert "wall clock budget ran out" in result.reason
        assert not [e for e in new if e.type in ("plan.requested", "search.requested")]
        for j in range(1, len(new) - 1):  # and crashing again in the finalizer
            again = interrupted([*stored, *new[:j]])
            second = await asyncio.wait_for(engine.resume(again).wait(), 10)
            check_resumed(second, again, attempt=2)
            assert (second.outcome, second.answer) == (result.outcome, result.answer)


class GatedPlanner:
    """The offline planner, held at a gate before each decision."""

    name = "gated"
    gate: asyncio.Event | None = None
    asked: asyncio.Event | None = None  # set when a decision is asked for

    def __init__(self) -> None:
        self._inner = OfflinePlanner()

    async def decide(self, view: PlannerView) -> Decision:
        assert GatedPlanner.gate is not None and GatedPlanner.asked is not None
        GatedPlanner.asked.set()
        await GatedPlanner.gate.wait()
        return await self._inner.decide(view)


async def test_cancelling_a_resumed_run_ends_it_cancelled(index: CorpusIndex) -> None:
    engine = Engine(index, planner=GatedPlanner)
    GatedPlanner.gate, GatedPlanner.asked = asyncio.Event(), asyncio.Event()
    try:
        handle = engine.start(QUESTIONS[0][0], collections=["demo"])
        await asyncio.wait_for(GatedPlanner.asked.wait(), 10)
        stored = interrupted(handle.stream.history()[:3])  # started, plan.requested, tick
        assert [e.type for e in stored][1:3] == ["plan.requested", "budget.tick"]
        handle.cancel()
        await handle.wait()
        GatedPlanner.asked.clear()
        resumed = engine.resume(stored)
        await asyncio.wait_for(GatedPlanner.asked.wait(), 10)  # asked again, at the gate
        assert resumed.cancel("changed my mind")
        result = await asyncio.wait_for(resumed.wait(), 10)
        new = check_resumed(result, stored)
        assert result.outcome == "cancelled" and result.reason == "changed my mind"
        assert [e.type for e in new][-2:] == ["run.cancel_requested", "run.finished"]
        # a cancel before the resumed run has begun is kept too
        early = engine.resume(stored)
        assert early.cancel("at once")
        assert (await early.wait()).outcome == "cancelled"
        # a crash after the cancel had won (its terminal lost): the resume ends it cancelled
        lost = interrupted(list(result.events)[:-1])
        again = await asyncio.wait_for(engine.resume(lost).wait(), 10)
        assert check_resumed(again, lost, attempt=2)[1].type == "run.cancel_requested"
        assert (again.outcome, again.reason) == ("cancelled", "changed my mind")
    finally:
        GatedPlanner.gate = GatedPlanner.asked = None


async def test_a_run_resumed_from_a_store_is_recorded_after_its_stored_events(
        engine: Engine, tmp_path: Path) -> None:
    log = list((await engine.ask(QUESTIONS[0][0], collections=["demo"])).events)
    async with SqliteRunStore(tmp_path / "runs.db", owner="resume-test") as store:
        run_id = log[0].run_id
        await store.create_run(RunMeta(run_id=run_id, tenant="default",
                                       question=QUESTIONS[0][0], mode="agent"))
        await store.append(run_id, log[:12])
        assert await store.mark_interrupted() == [run_id]  # what recovery does after a crash
        await store.reopen(run_id)
        stored = [e async for e in store.events(run_id)]
        assert stored[-1].type == "run.finished" and len(stored) == 13
        handle = engine.resume(stored)
        async with Recorder(store, handle.stream):
            result = await handle.wait()
        record = await store.get_run(run_id)
        assert (record.status, record.outcome) == ("finished", "answered")
        kept = [e async for e in store.events(run_id)]
        assert kept == list(result.events) and record.last_seq == len(kept)
        check_resumed(RunResult.from_events(kept), stored)


async def test_the_writer_restores_its_last_draft_and_the_conflicts_it_showed() -> None:
    class Remembering:
        name = "remembering"
        restored: list[tuple[str, tuple[Claim, ...]]] = []

        async def write(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
            raise AssertionError("not called by restore")

        def restore_draft(self, question: str, claims: Sequence[Claim]) -> None:
            self.restored.append((question, tuple(claims)))

    a = EvidenceChunk(id="a", text="Bayer was founded in 1863.", title="A")
    b = EvidenceChunk(id="b", text="Bayer was founded in 1862.", title="B")
    conflict = Conflict(subject="Bayer", attribute="founded", sides=(
        ConflictSide(chunk_id="a", value="1863", quote="Bayer was founded in 1863."),
        ConflictSide(chunk_id="b", value="1862", quote="Bayer was founded in 1862.")))
    own = Claim(statement="Bayer was founded in 1863.", source_id="a",
                quote="Bayer was founded in 1863.")
    side_claims = [Claim(statement="x", source_id="a", quote="q"),
                   Claim(statement="y", source_id="b", quote="q")]
    events: list[Event] = [
        RunStarted(question="When was Bayer founded?", seq=1),
        EvidenceRegistered(chunks=(a, b), seq=2, actor="controller"),
        AnswerRequested(evidence_ids=("a", "b"), conflicts=(conflict,), seq=3,
                        actor="controller"),
        AnswerDrafted(text="...", claims=(own, *side_claims), seq=4, actor="writer", cause=3),
    ]
    policy = Remembering()
    writer = WriterActor(policy)
    writer.on_restore(events)
    assert policy.restored == [("When was Bayer founded?", (own,))]
    assert (writer._own, writer._appended) == (1, (0, 0))
    assert set(writer.view.evidence) == {"a", "b"}



def test_a_chat_planner_opens_a_new_conversation_and_keeps_the_used_call_ids() -> None:
    planner = ChatPlanner(cast(Any, object()))  # the model is not called by restore
    planner.messages.append({"role": "user", "content": "a conversation before the crash"})
    used = ToolCall(id="chat-1-0", tool="search", args={"query": "q"})
    planner.restore([PlanDecided(action="search", calls=(used,), actor="planner", seq=3)])
    assert planner.messages == []
    assert planner._unique_id("chat-1-0", 1, 0) != "chat-1-0"  # never the same id twice


class FirstDraftMisquotes:
    """The extractive writer, but its first draft misquotes every claim (a repair follows)."""

    name = "first-draft-misquotes"

    def __init__(self, embedder: Any) -> None:
        self._inner = ExtractiveWriter(embedder, max_claims=3, min_gain=0.15)

    async def write(self, question: str, evidence: Sequence[EvidenceChunk], *, mode: Any,
                    errors: Sequence[Any] = ()) -> Draft:
        draft = await self._inner.write(question, evidence,
                                        mode="answer" if mode == "repair" else mode)
        if mode == "repair":
            return draft
        wrong = tuple(c.model_copy(update={"quote": "words that are not in the source"})
                      for c in draft.claims)
        return Draft(text=draft.text, claims=wrong)


async def test_every_prefix_of_a_run_with_a_repaired_draft_resumes(index: CorpusIndex) -> None:
    engine = Engine(index, writer=lambda: FirstDraftMisquotes(index.embedder))
    original = await engine.ask(QUESTIONS[0][0], collections=["demo"])
    assert original.outcome == "answered" and original.count("verify.failed") == 1
    log = list(original.events)
    for k in range(log.index(next(e for e in log if e.type == "answer.requested")), len(log)):
        stored = interrupted(log[:k])
        result = await asyncio.wait_for(engine.resume(stored).wait(), 20)
        check_resumed(result, stored)
        same_answer(result, original)
