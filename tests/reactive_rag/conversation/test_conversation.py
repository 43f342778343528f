"""Conversations: follow-ups rewritten from history, evidence reused, history rolled."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.models import HashingEmbedder
from reactive_rag import Engine
from reactive_rag.conversation import (
    FOLD_EVERY,
    VERBATIM,
    Conversation,
    SessionState,
    Turn,
    prepare_turn,
)
from reactive_rag.conversation._history import SUMMARY_TOKENS, HistorySummary, fold
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement.offline import rewrite_followup
from reactive_rag.web_kb import PriorEvidenceProvider
from streams import EvidenceChunk, QueryRewritten, RunStarted, SearchCompleted

from .._corpus import DOCS


def turn(question: str, answer: str = "", *, run_id: str = "r1",
         evidence: tuple[EvidenceChunk, ...] = ()) -> Turn:
    return Turn(run_id=run_id, question=question, standalone=question, outcome="answered",
                answer=answer, evidence=evidence)


@pytest.mark.parametrize(("history", "follow_up", "standalone"), [
    # a personal pronoun after "who <did>": the person the answer named
    ([turn("Who directed Ed Wood?", "Tim Burton directed Ed Wood in 1994.")],
     "And where was he born?", "And where was Tim Burton born?"),
    # "it" / "its" after a question about a thing: that thing
    ([turn("Tell me about Ed Wood.", "Ed Wood is a 1994 film.")],
     "Who directed it?", "Who directed Ed Wood?"),
    ([turn("What did the Sony Walkman do?", "It played cassettes.")],
     "What was its successor?", "What was Sony Walkman's successor?"),
    # "it" after "which ...?": the name the answer gave
    ([turn("Who first isolated aspirin?", "Felix Hoffmann, a chemist at Bayer."),
      turn("Which company did Felix Hoffmann work for?", "He was a chemist at Bayer.")],
     "When was it founded?", "When was Bayer founded?"),
    # ellipsis: "what about 2019?" swaps the year, "what about X?" the subject
    ([turn("Who won the Tour de France in 2018?", "Geraint Thomas won.")],
     "what about 2019?", "Who won the Tour de France in 2019?"),
    ([turn("When was Bayer founded?", "In 1863.")],
     "And what about Siemens?", "When was Siemens founded?"),
    # "her" before a noun is possessive, before nothing an object
    ([turn("Who wrote Frankenstein?", "Mary Shelley wrote it.")],
     "Who was her husband?", "Who was Mary Shelley's husband?"),
    # "which one" after a turn about two things: one of those two
    ([turn("How do Redis and Memcached store values?", "Redis keeps strings; Memcached items.")],
     "Which one has no size limit?", "Which of Redis or Memcached has no size limit?"),
    ([turn("What key-value stores are there?", "Redis keeps data in memory. Etcd is a store.")],
     "which of them is older?", "Which of Redis or Etcd is older?"),
])
def test_follow_ups_are_rewritten_from_the_history(history: list[Turn], follow_up: str,
                                                   standalone: str) -> None:
    rewrite = rewrite_followup(follow_up, history)
    assert rewrite.standalone == standalone
    assert rewrite.changed and rewrite.turns == (history[-1].run_id,)


def test_a_question_that_stands_alone_is_left_as_asked() -> None:
    history = [turn("Who directed Ed Wood?", "Tim Burton.")]
    # a new topic, and a question that names the person it refers back to
    for question in ("When was Bayer founded?", "Is Tim Burton's film about him?"):
        rewrite = rewrite_followup(question, history)
        assert rewrite.standalone == question
        assert not rewrite.changed and rewrite.resolved == {}
    assert not rewrite_followup("Where was he born?", []).changed  # nothing to resolve


def test_history_keeps_two_turns_verbatim_and_folds_every_three() -> None:
    turns = [turn(f"Question {i}?", f"Answer {i}. More text.", run_id=f"run{i}")
             for i in range(8)]
    summary = HistorySummary()
    folds = []
    for n in range(1, len(turns) + 1):
        before = summary.folded
        summary = fold(summary, turns[:n])
        if summary.folded != before:
            folds.append(n)
    assert folds == [VERBATIM + FOLD_EVERY, VERBATIM + 2 * FOLD_EVERY]
    assert summary.folded == 6 and summary.run_ids == tuple(f"run{i}" for i in range(6))
    assert "Question 0? -> Answer 0. [run run0]" in summary.text  # back-reference
    state = SessionState("s", "t", tuple(turns), summary)
    assert "Q: Question 7?" in state.history and "Q: Question 6?" in state.history
    assert "Q: Question 5?" not in state.history  # folded, not verbatim


def test_the_summary_is_token_bounded_newest_kept() -> None:
    long = [turn(f"Question {i}?", " ".join(["word"] * 60) + ".", run_id=f"run{i}")
            for i in range(30)]
    summary = HistorySummary()
    for n in range(1, len(long) + 1):
        summary = fold(summary, long[:n])
    assert len(summary.text.split()) <= SUMMARY_TOKENS
    assert "[run run26]" in summary.text  # the newest folded turn (27.. are not folded yet)
    assert "[run run0]" not in summary.text  # the oldest went first


def test_session_state_round_trips_through_json_and_refuses_garbage() -> None:
    chunk = EvidenceChunk(id="c1", text="Bayer was founded in 1863.", title="Bayer")
    state = SessionState("s1", "acme", (turn("When was Bayer founded?", "1863.",
                                             evidence=(chunk,)),))
    assert SessionState.from_json(state.to_json()) == state
    for bad in ({}, {"v": 99}, {**state.to_json(), "turns": [{"run_id": 1}]}, None):
        with pytest.raises(ValueError, match="session state"):
            SessionState.from_json(bad)


async def test_prior_evidence_is_searchable_and_keeps_chunk_ids() -> None:
    chunks = [EvidenceChunk(id="bayer#0", text="Bayer was founded in Barmen in 1863.",
                            title="Bayer", doc_id="bayer", next_id="bayer#1"),
              EvidenceChunk(id="tea#0", text="Tea is prepared from leaves.", title="Tea")]
    hits = await PriorEvidenceProvider(chunks).search("when was Bayer founded", 5, None)
    assert [h.chunk_id for h in hits] == ["bayer#0"]
    assert hits[0].content == chunks[0].text and hits[0].next_id == "bayer#1"


async def test_a_follow_up_in_a_session_is_rewritten_on_the_stream_and_answered(
    tmp_path: Path,
) -> None:
    index = CorpusIndex(tmp_path, HashingEmbedder())
    index.index_documents("demo", DOCS)
    engine = Engine(index)
    try:
        chat = Conversation(engine)
        first = await chat.ask("Who first isolated aspirin?", collections=("demo",))
        assert first.answered and "Felix Hoffmann" in first.answer
        second = await chat.ask("Which company did he work for?", collections=("demo",))
        rewritten = [e for e in second.events if isinstance(e, QueryRewritten)]
        assert len(rewritten) == 1 and rewritten[0].resolved == {"he": "Felix Hoffmann"}
        started = second.events[0]
        assert isinstance(started, RunStarted)
        assert started.question == "Which company did Felix Hoffmann work for?"
        assert "Bayer" in second.answer
        # earlier evidence came back through the session provider and is registered here
        providers = {p for e in second.events if isinstance(e, SearchCompleted)
                     for p in e.providers}
        assert "session" in providers
        for citation in second.citations:
            assert citation.chunk is not None and citation.chunk.id in second.evidence
        assert [t.standalone for t in chat.turns] == [
            "Who first isolated aspirin?", "Which company did Felix Hoffmann work for?"]
        chat.new()
        assert chat.turns == ()
        alone = await chat.ask("Which company did he work for?", collections=("demo",))
        assert not any(isinstance(e, QueryRewritten) for e in alone.events)
    finally:
        await engine.aclose()


def test_with_follow_up_rewriting_switched_off_a_follow_up_runs_as_asked() -> None:
    state = SessionState("s", "t", (turn("Who directed Ed Wood?", "Tim Burton."),))
    asked = prepare_turn(state, "Where was he born?", None)
    assert asked.standalone == "Where was he born?"
    assert asked.context.rewritten is not None and not asked.context.rewritten.resolved
    rewritten = prepare_turn(state, "Where was he born?", rewrite_followup)
    assert rewritten.standalone == "Where was Tim Burton born?"

