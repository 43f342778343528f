"""Context compression: key points with back-references, the recall tool, auto-reload."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement import Answerability, Decision, PlannerView
from reactive_rag.judgement._policy import planner_context_tokens
from reactive_rag.judgement.offline import offline_judgement
from reactive_rag.judgement.offline._points import (
    MAX_POINTS,
    POINT_WORDS,
    compress_round,
    trim_words,
)
from reactive_rag.run import Budget, Phase, RunState, initial_state, step
from streams import (
    EvidenceChunk,
    Hit,
    KeyPoint,
    PlanDecided,
    PlanRequested,
    PointRecalled,
    QueryStat,
    RerankCompleted,
    RunStarted,
    SearchCompleted,
    SearchRequested,
    ToolCall,
    ToolRejected,
)

QUESTION = "Which team does the MVP of the 2015 Diamond Head Classic play for?"
LONG = (
    "The tournament, held every year in Honolulu, brings together college teams from across "
    "the country and many fans travel to watch the games in the arena near the beach while "
    "the players enjoy the warm weather of the islands during the holidays, and in the "
    "2015 Diamond Head Classic the MVP award went to Buddy Hield of the Oklahoma Sooners, "
    "who scored 1,234 points that season and was drafted on June 23, 2016 by the New "
    "Orleans Pelicans before he joined the Sacramento Kings."
)


def chunk(cid: str, text: str, title: str = "") -> EvidenceChunk:
    return EvidenceChunk(id=cid, text=text, doc_id=cid.split("#")[0], title=title or cid,
                         url=f"doc://{cid}", source="local:demo", score=1.0)


def of(commands: Sequence[object], cls: type) -> list:  # type: ignore[type-arg]
    return [c for c in commands if isinstance(c, cls)]


# --- the compressor ----------------------------------------------------------------------


def test_points_keep_numbers_dates_and_names_within_about_fifty_words() -> None:
    points = compress_round(QUESTION, [chunk("d#0", LONG, "Diamond Head Classic")], 1)
    assert points and points[0].chunk_ids == ("d#0",) and points[0].round == 1
    text = points[0].text
    assert len(LONG.split()) > POINT_WORDS
    assert len(text.split()) <= POINT_WORDS + 8
    for kept in ("2015", "Diamond Head Classic", "Buddy Hield", "Oklahoma Sooners", "1,234"):
        assert kept in text, (kept, text)


def test_a_cut_never_splits_a_date_a_number_or_a_name() -> None:
    words = ["filler"] * 45 + ["on", "December", "25,", "2015", "Buddy", "Hield", "scored",
                               "1,234,567", "points"] + ["tail"] * 20
    text = " ".join(words)
    cut = trim_words(text, frozenset({"scor", "point"}), 50)
    for whole in ("December 25, 2015", "Buddy Hield", "1,234,567"):
        assert whole in cut or whole.split()[0] not in cut, (whole, cut)
    assert len(cut.split()) <= 58


def test_at_most_five_points_a_round_each_citing_its_chunks() -> None:
    chunks = [chunk(f"d{i}#0", f"In {1990 + i} the Diamond Head Classic MVP was Player{i} "
                               f"Smith of Team{i}. The 2015 team played in Honolulu {i} times.")
              for i in range(12)]
    points = compress_round(QUESTION, chunks, 3)
    assert 0 < len(points) <= MAX_POINTS
    assert [p.id for p in points] == [f"k3-{n}" for n in range(1, len(points) + 1)]
    held = {c.id: c.text for c in chunks}
    for p in points:
        assert p.chunk_ids and all(c in held for c in p.chunk_ids)
        assert all(p.text.strip("\u2026") in held[c] for c in p.chunk_ids)


def test_a_sentence_shared_by_overlapping_chunks_is_one_point_citing_both() -> None:
    shared = "Buddy Hield was the MVP of the 2015 Diamond Head Classic."
    points = compress_round(QUESTION, [chunk("a#0", shared + " He is tall."),
                                       chunk("a#1", shared + " He shoots well.")], 1)
    assert points[0].text == shared and points[0].chunk_ids == ("a#0", "a#1")


def test_sentences_about_something_else_make_no_point() -> None:
    points = compress_round(QUESTION, [chunk("tea#0", "Tea is brewed from Camellia sinensis "
                                                      "leaves in China since 2737 BC.")], 1)
    assert points == ()


# --- the machine: points in the plan request, recall, auto-reload ------------------------------


def _hit(c: EvidenceChunk) -> Hit:
    return Hit(url=c.url, title=c.title, content=c.text, chunk_id=c.id, doc_id=c.doc_id,
               source=c.source)


EVIDENCE = [chunk("classic#0", LONG, "2015 Diamond Head Classic"),
            chunk("kings#0", "The Sacramento Kings are an American professional basketball team "
                             "based in Sacramento, California, founded in 1923.",
                  "Sacramento Kings")]


def _after_round_one(budget: Budget | None = None,
                     judge: object = None) -> tuple[RunState, PlanRequested]:
    state = initial_state(budget=budget or Budget(compress_context=True),
                          judgement=offline_judgement(sufficiency=judge))  # type: ignore[arg-type]
    state, _ = step(state, RunStarted(question=QUESTION, ts=100.0))
    call = ToolCall(id="s1", tool="search", args={"query": "Diamond Head Classic MVP"})
    state, _ = step(state, PlanDecided(action="search", calls=(call,), ts=100.5))
    state, _ = step(state, SearchCompleted(call_id="s1", query="q",
                                           hits=tuple(_hit(c) for c in EVIDENCE), ts=101.0))
    state, cmds = step(state, RerankCompleted(call_id="s1", query="q", chunks=tuple(EVIDENCE),
                                              ts=101.0))
    return state, of(cmds, PlanRequested)[0]


def test_the_plan_request_carries_the_rounds_points_and_no_chunk_in_full() -> None:
    state, request = _after_round_one()
    assert request.compressed and request.round == 2 and request.expanded == ()
    assert 0 < len(request.points) <= MAX_POINTS
    assert state.points == request.points
    assert {c for p in request.points for c in p.chunk_ids} <= set(state.evidence)


def test_compression_is_off_by_default() -> None:
    state, request = _after_round_one(Budget())
    assert not request.compressed and request.points == () and state.points == ()


def test_recall_reloads_the_exact_chunks_without_a_tool_call() -> None:
    state, request = _after_round_one()
    point = request.points[0]
    recall = ToolCall(id="r1", tool="recall", args={"point": point.id})
    used = state.tool_calls
    state, cmds = step(state, PlanDecided(action="recall", calls=(recall,), ts=102.0))
    recalled = of(cmds, PointRecalled)[0]
    assert recalled.point == point.id and recalled.chunk_ids == point.chunk_ids
    assert not of(cmds, SearchRequested) and state.tool_calls == used  # no I/O, no budget
    following = of(cmds, PlanRequested)[0]
    assert following.round == 3 and set(following.expanded) == set(point.chunk_ids)
    assert state.saturated_rounds == 0  # a round of recalls is not a saturated search


def test_recall_of_an_unknown_point_is_a_typed_refusal() -> None:
    state, _ = _after_round_one()
    recall = ToolCall(id="r1", tool="recall", args={"point": "k9-9"})
    state, cmds = step(state, PlanDecided(action="recall", calls=(recall,), ts=102.0))
    rejected = of(cmds, ToolRejected)[0]
    assert rejected.tool == "recall" and rejected.call_id == "r1"
    assert not of(cmds, PointRecalled)
    feedback = of(cmds, PlanRequested)[0].feedback
    assert [(f.kind, f.tool, f.call_id) for f in feedback] == [("rejected", "recall", "r1")]


def test_a_point_whose_chunk_is_chosen_again_is_reloaded_automatically() -> None:
    def judge(question: str, chosen: Sequence[EvidenceChunk],
              held: Sequence[EvidenceChunk]) -> Answerability:
        return Answerability("partial", "who", covered=("Diamond Head Classic",),
                             missing=("team",), searches=("Buddy Hield team",))

    state, request = _after_round_one(judge=judge)
    point = request.points[0]
    state = replace(state, selects=False)
    state, _ = step(state, PlanDecided(action="answer", ts=102.0))
    assert state.phase is Phase.SELECTING
    state, cmds = step(state, RerankCompleted(call_id="final", query=QUESTION,
                                              chunks=(EVIDENCE[0],), ts=103.0))
    gap = of(cmds, SearchRequested)[0]  # the judge's search for the missing part
    state, cmds = step(state, SearchCompleted(call_id=gap.call_id, query=gap.query, hits=(),
                                              ts=104.0))
    following = of(cmds, PlanRequested)[0]
    assert set(point.chunk_ids) <= set(following.expanded)
    assert EVIDENCE[0].id in following.expanded


# --- the planner's view and its context tokens ------------------------------------------------


def test_planner_context_tokens_count_what_the_view_shows() -> None:
    view = PlannerView(
        question="a b c", round=2, evidence=[chunk("x#0", "one two three four")],
        queries=[], points=[KeyPoint(id="k1-1", text="five six", chunk_ids=("x#0",))])
    assert planner_context_tokens(view) == 3 + 4 + 2


class _Recorder:
    """Searches once, recalls the first point, then answers; keeps every view it saw."""

    name = "recorder"

    def __init__(self) -> None:
        self.views: list[PlannerView] = []

    async def decide(self, view: PlannerView) -> Decision:
        self.views.append(view)
        if view.round == 1:
            return Decision(action="search", calls=(ToolCall(
                id="s1", tool="search", args={"query": "Bayer founded"}),))
        if view.round == 2 and view.points:
            return Decision(action="recall", calls=(ToolCall(
                id="r1", tool="recall", args={"point": view.points[0].id}),))
        return Decision(action="answer")


async def test_a_compressed_run_shows_points_then_the_recalled_chunk_in_full(
        index: CorpusIndex) -> None:
    recorder = _Recorder()
    engine = Engine(index, planner=lambda: recorder)
    result = await engine.ask("Who founded Bayer and when?", collections=["demo"],
                              budget={"compress_context": True})
    assert result.outcome == "answered", result.reason
    _, second, third = recorder.views[:3]
    assert second.compressed and second.points and all(c.text == "" for c in second.evidence)
    point = second.points[0]
    full = {c.id: c for c in third.evidence if c.text}
    assert set(full) == set(point.chunk_ids)
    for cid in point.chunk_ids:  # the very chunk registered: same id, same text
        assert full[cid] == result.evidence[cid]
    assert any(e.type == "point.recalled" for e in result.events)
    tokens = [e.context_tokens for e in result.events if isinstance(e, PlanDecided)]
    assert len(tokens) == 3 and all(t > 0 for t in tokens)


@pytest.mark.parametrize("question", ["Who founded Bayer and when?", "Who first isolated aspirin?"])
async def test_an_offline_run_with_compression_still_answers(index: CorpusIndex,
                                                             question: str) -> None:
    engine = Engine(index)
    plain = await engine.ask(question, collections=["demo"])
    result = await engine.ask(question, collections=["demo"], budget={"compress_context": True})
    assert result.outcome == "answered", result.reason
    assert result.citations
    for cite in result.citations:
        assert cite.chunk is not None and cite.claim.quote in cite.chunk.text
    requests = [e for e in result.events if isinstance(e, PlanRequested)]
    assert all(r.compressed for r in requests) and any(r.points for r in requests)

    def context(events: Sequence[object]) -> list[int]:
        return [e.context_tokens for e in events if isinstance(e, PlanDecided)]

    assert sum(context(result.events)) <= sum(context(plain.events))


def test_query_stats_keep_their_shape_in_a_compressed_request() -> None:
    _, request = _after_round_one()
    assert request.queries == (QueryStat(query="Diamond Head Classic MVP", hits=2,
                                         new_evidence=2, chunk_ids=("classic#0", "kings#0")),)


async def test_a_compressed_run_folds_back_to_the_same_points_and_views(
        index: CorpusIndex) -> None:
    from reactive_rag.agent import PlannerActor
    from reactive_rag.judgement.offline import OfflinePlanner
    from reactive_rag.run import RunController

    engine = Engine(index)
    result = await engine.ask("Who founded Bayer and when?", collections=["demo"],
                              budget={"compress_context": True})
    shown = tuple(p for e in result.events if isinstance(e, PlanRequested) for p in e.points)
    controller = RunController(initial_state(budget=Budget(compress_context=True),
                                             judgement=offline_judgement()))
    controller.on_restore(result.events)  # a crash resume folds the log through the machine
    assert controller.state.points == shown and shown
    planner = PlannerActor(OfflinePlanner())
    planner.on_restore(result.events)
    assert tuple(planner.points.values()) == shown
