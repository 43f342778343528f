"""Answerability in the pure machine: write, search the gap, answer partially, or no evidence.

Each situation is built as a state (evidence held, final rerank in, a judge
with a fixed verdict), then driven with the events the actors would send.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from reactive_rag.judgement import Answerability
from reactive_rag.judgement.offline import offline_judgement
from reactive_rag.run import Budget, Finish, Phase, RunState, call_signature, initial_state, step
from streams import (
    AnswerabilityJudged,
    AnswerDrafted,
    AnswerRequested,
    AnswerVerified,
    BudgetExhausted,
    Claim,
    EvidenceChunk,
    PlanDecided,
    RerankCompleted,
    RerankRequested,
    RunStarted,
    SearchCompleted,
    SearchRequested,
    ToolCall,
)

QUESTION = "When was the founder of Acme born?"


def chunk(cid: str) -> EvidenceChunk:
    return EvidenceChunk(id=cid, text=f"text of {cid}", doc_id=cid, score=1.0)


def of(commands: list, cls: type) -> list:  # type: ignore[type-arg]
    return [c for c in commands if isinstance(c, cls)]


class FixedJudge:
    """A judge that answers with queued verdicts and records what it was shown."""

    def __init__(self, *verdicts: Answerability) -> None:
        self.verdicts = list(verdicts)
        self.seen: list[tuple[str, list[str], list[str]]] = []

    def __call__(self, question: str, chosen: Sequence[EvidenceChunk],
                 held: Sequence[EvidenceChunk]) -> Answerability:
        self.seen.append((question, [c.id for c in chosen], [c.id for c in held]))
        return self.verdicts.pop(0) if len(self.verdicts) > 1 else self.verdicts[0]


def selecting(judge: FixedJudge, *, mode: str = "agent", budget: Budget | None = None,
              held: Sequence[str] = ("a", "b")) -> RunState:
    """A run that holds evidence and has just asked for the final rerank."""
    state = initial_state(budget=budget, judgement=offline_judgement(sufficiency=judge))
    state, _ = step(state, RunStarted(question=QUESTION, mode=mode, ts=100.0))
    return replace(state, phase=Phase.SELECTING, write_mode="answer", tool_calls=1, steps=1,
                   evidence={i: chunk(i) for i in held})


def final_rerank(state: RunState, ids: Sequence[str], ts: float = 105.0) -> tuple[RunState, list]:  # type: ignore[type-arg]
    return step(state, RerankCompleted(call_id="final", query=QUESTION,
                                       chunks=tuple(chunk(i) for i in ids), ts=ts))


def verified(state: RunState, ts: float = 106.0) -> tuple[RunState, list]:  # type: ignore[type-arg]
    claims = (Claim(statement="Jo was born in 1950.", source_id="a", quote="text of a"),)
    state, _ = step(state, AnswerDrafted(text="Jo was born in 1950. [1]", claims=claims,
                                         attempt=state.write_attempt, ts=ts))
    return step(state, AnswerVerified(text="Jo was born in 1950. [1]", claims=claims,
                                      attempt=state.write_attempt, ts=ts))


ANSWERABLE = Answerability("answerable", "when", covered=("Acme", "born", "the date asked for"))
PARTIAL = Answerability("partial", "when", covered=("Acme",), missing=("born",),
                        reason="the evidence does not cover born", searches=("Acme founder born",))
NONE = Answerability("unanswerable", "when", missing=("Acme",), reason="nothing found covers Acme",
                     searches=("Acme",))


def test_answerable_evidence_goes_to_the_writer_and_ends_answered() -> None:
    judge = FixedJudge(ANSWERABLE)
    state, cmds = final_rerank(selecting(judge), ["a", "b"])
    judged = of(cmds, AnswerabilityJudged)[0]
    assert judged.verdict == "answerable" and judged.searches == ()
    assert of(cmds, AnswerRequested)[0].evidence_ids == ("a", "b")
    assert judge.seen == [(QUESTION, ["a", "b"], ["a", "b"])]
    state, cmds = verified(state)
    finish = of(cmds, Finish)[0]
    assert finish.outcome == "answered"
    assert finish.answer == "Jo was born in 1950. [1]"  # no note under a full answer


def test_unanswerable_evidence_searches_the_missing_part_first() -> None:
    judge = FixedJudge(NONE, ANSWERABLE)
    state, cmds = final_rerank(selecting(judge), ["a", "b"])
    assert of(cmds, AnswerabilityJudged)[0].searches == ("Acme",)
    request = of(cmds, SearchRequested)[0]
    assert request.query == "Acme"
    assert not of(cmds, AnswerRequested) and not of(cmds, Finish)
    assert state.phase is Phase.ACTING and state.gap_rounds == 1 and state.tool_calls == 2


def test_unanswerable_after_the_gap_search_ends_no_evidence_with_the_reason() -> None:
    judge = FixedJudge(NONE)
    state = replace(selecting(judge), gap_rounds=1)  # the gap search already ran
    state, cmds = final_rerank(state, ["a", "b"])
    assert not of(cmds, SearchRequested) and not of(cmds, AnswerRequested)
    finish = of(cmds, Finish)[0]
    assert finish.outcome == "no_evidence"
    assert "Acme" in finish.reason
    assert state.phase is Phase.DONE


def test_partial_evidence_ends_partial_and_the_answer_says_what_is_missing() -> None:
    judge = FixedJudge(PARTIAL)
    state = replace(selecting(judge), gap_rounds=1)
    state, cmds = final_rerank(state, ["a", "b"])
    assert of(cmds, AnswerRequested), "a partial answer is still written from the evidence"
    state, cmds = verified(state)
    finish = of(cmds, Finish)[0]
    assert finish.outcome == "partial"
    assert finish.answer.startswith("Jo was born in 1950. [1]")
    assert "'born'" in finish.answer and "Partial answer" in finish.answer
    assert finish.claims and finish.claims[0].source_id == "a"


def test_no_gap_search_when_the_tool_budget_is_spent() -> None:
    judge = FixedJudge(NONE)
    state = replace(selecting(judge, budget=Budget(max_tool_calls=1)))
    state, cmds = final_rerank(state, ["a"])
    assert not of(cmds, SearchRequested)
    assert of(cmds, AnswerabilityJudged)[0].searches == ()
    assert of(cmds, Finish)[0].outcome == "no_evidence"


def test_a_gap_query_already_made_is_not_repeated() -> None:
    judge = FixedJudge(PARTIAL)
    state = selecting(judge)
    made = call_signature(ToolCall(id="x", tool="search", args={"query": "Acme founder born"}))
    repeat = replace(state, seen_signatures=state.seen_signatures | {made})
    repeat, cmds = final_rerank(repeat, ["a"])
    assert not of(cmds, SearchRequested)
    assert of(cmds, AnswerRequested)  # goes on to the partial answer


def test_one_shot_rag_never_searches_the_gap() -> None:
    judge = FixedJudge(NONE)
    _, cmds = final_rerank(selecting(judge, mode="rag"), ["a", "b"])
    assert not of(cmds, SearchRequested)
    assert of(cmds, Finish)[0].outcome == "no_evidence"


def test_held_chunks_the_judge_names_join_the_writers_evidence() -> None:
    judge = FixedJudge(replace(ANSWERABLE, extra_ids=("c", "not-held")))
    _, cmds = final_rerank(selecting(judge, held=("a", "b", "c")), ["a", "b"])
    assert of(cmds, AnswerRequested)[0].evidence_ids == ("a", "b", "c")


def test_after_the_gap_round_the_planner_is_asked_again_then_judged_again() -> None:
    judge = FixedJudge(PARTIAL, ANSWERABLE)
    state, cmds = final_rerank(selecting(judge), ["a", "b"])
    call_id = of(cmds, SearchRequested)[0].call_id
    state, cmds = step(state, SearchCompleted(call_id=call_id, query="Acme founder born",
                                              hits=(), ts=106.0))
    # empty search: the round ends and the agent plans again
    state, cmds = step(state, PlanDecided(action="answer", ts=107.0))
    assert of(cmds, RerankRequested)
    state, cmds = final_rerank(state, ["a", "b"], ts=108.0)
    assert [j.verdict for j in of(cmds, AnswerabilityJudged)] == ["answerable"]
    state, cmds = verified(state, ts=109.0)
    assert of(cmds, Finish)[0].outcome == "answered"


def test_finalizer_answer_carries_a_plain_note_about_the_limit() -> None:
    judge = FixedJudge(ANSWERABLE)
    state = initial_state(budget=Budget(wall_s=5.0), judgement=offline_judgement(sufficiency=judge))
    state, _ = step(state, RunStarted(question=QUESTION, ts=100.0))
    state = replace(state, evidence={"a": chunk("a")})
    state, cmds = step(state, BudgetExhausted(resource="wall_clock", used=5.0, limit=5.0,
                                              actor="runtime", ts=106.0))
    assert state.phase is Phase.SELECTING and state.write_mode == "finalize"
    state, cmds = final_rerank(state, ["a"], ts=106.5)
    state, cmds = verified(state, ts=107.0)
    finish = of(cmds, Finish)[0]
    assert finish.outcome == "answered_from_evidence"
    assert "time budget ran out" in finish.answer and "may be incomplete" in finish.answer


def test_finalizer_with_unanswering_evidence_ends_no_evidence_and_names_the_budget() -> None:
    judge = FixedJudge(NONE)
    state = initial_state(budget=Budget(max_tool_calls=1),
                          judgement=offline_judgement(sufficiency=judge))
    state, _ = step(state, RunStarted(question=QUESTION, ts=100.0))
    state = replace(state, evidence={"a": chunk("a")}, tool_calls=1, phase=Phase.PLANNING)
    state, cmds = step(state, PlanDecided(action="search", calls=(
        ToolCall(id="s2", tool="search", args={"query": "more"}),), ts=101.0))
    assert state.write_mode == "finalize"
    state, cmds = final_rerank(state, ["a"], ts=102.0)
    finish = of(cmds, Finish)[0]
    assert finish.outcome == "no_evidence"
    assert "tool calls budget ran out" in finish.reason


def test_without_a_judge_the_machine_writes_as_before() -> None:
    state = initial_state(judgement=offline_judgement(sufficiency=None))
    state, _ = step(state, RunStarted(question=QUESTION, ts=100.0))
    state = replace(state, phase=Phase.SELECTING, evidence={"a": chunk("a")})
    state, cmds = final_rerank(state, ["a"])
    assert not of(cmds, AnswerabilityJudged)
    assert of(cmds, AnswerRequested)
