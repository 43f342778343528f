"""With a chat model configured, the model decides; its failures have reasons and fallbacks.

Pure-machine situations: a model judge asked about sufficiency (the offline verdict only
a hint), a judge that fails (the rules stand in, said so), a planner whose model call
failed (one-shot retrieval, with the model, status and Retry-After in the reason), a
writer that failed (the offline writer's draft, said in the outcome), an answer claim
dropped twice (partial, never ``answered``), and the read-token budget.
"""

from __future__ import annotations

from dataclasses import replace

from actors.rerank import Credibility
from reactive_rag.judgement import Answerability
from reactive_rag.judgement.offline import offline_judgement
from reactive_rag.run import Budget, Finish, Phase, RunController, RunState, initial_state, step
from streams import (
    ActorFailed,
    AnswerabilityJudged,
    AnswerabilityRequested,
    AnswerDrafted,
    AnswerRequested,
    AnswerVerified,
    BudgetExhausted,
    Claim,
    ClaimError,
    Conflict,
    ConflictDetected,
    ConflictSide,
    ErrorInfo,
    EvidenceChunk,
    EvidenceRegistered,
    PlanRequested,
    RunFallback,
    RunStarted,
    SearchCompleted,
    SearchRequested,
    VerifyFailed,
)

from .test_run_answerability import FixedJudge, chunk, final_rerank, of

QUESTION = "When was the founder of Acme born?"
UNANSWERABLE = Answerability("unanswerable", "when", missing=("born",),
                             reason="no passage says when anyone was born")


def judging(hint: Answerability = UNANSWERABLE, *, credibility: Credibility | None = None,
            held: dict[str, EvidenceChunk] | None = None) -> tuple[RunState, list]:  # type: ignore[type-arg]
    """A run with a model judge whose final rerank just came in (the request is out)."""
    state = initial_state(judgement=offline_judgement(sufficiency=FixedJudge(hint)),
                          model_judges=True, credibility=credibility)
    state, _ = step(state, RunStarted(question=QUESTION, ts=100.0))
    evidence = held or {i: chunk(i) for i in ("a", "b")}
    state = replace(state, phase=Phase.SELECTING, write_mode="answer", tool_calls=1, steps=1,
                    evidence=evidence)
    return final_rerank(state, list(evidence))


def test_the_model_judge_is_asked_with_the_offline_verdict_as_a_hint_only() -> None:
    state, out = judging()
    (asked,) = of(out, AnswerabilityRequested)
    assert asked.evidence_ids == ("a", "b")
    assert (asked.hint_verdict, asked.hint_missing) == ("unanswerable", ("born",))
    assert state.phase is Phase.JUDGING and not of(out, AnswerRequested)
    # the model found the evidence enough: the offline "unanswerable" does not veto it
    state, out = step(state, AnswerabilityJudged(verdict="answerable", by="model", model="m",
                                                 actor="judge", ts=101.0))
    (write,) = of(out, AnswerRequested)
    assert write.evidence_ids == ("a", "b") and state.phase is Phase.WRITING


def test_the_models_unanswerable_ends_no_evidence_with_its_reason() -> None:
    state, _ = judging(Answerability("answerable", "when"))
    state, out = step(state, AnswerabilityJudged(
        verdict="unanswerable", by="model", reason="no passage names the founder",
        actor="judge", ts=101.0))
    # the offline hint said answerable; the model's "unanswerable" stands (it decides)
    (finish,) = of(out, Finish)
    assert finish.outcome == "no_evidence" and "no passage names the founder" in finish.reason
    assert not of(out, AnswerRequested)


def test_a_failing_model_judge_lets_the_offline_verdict_stand_in_and_says_so() -> None:
    state, _ = judging(Answerability("answerable", "when", covered=("Acme", "born")))
    failure = ErrorInfo(kind="ChatServerError", message="boom", status=503, model="m",
                        role="sufficiency judge")
    state, out = step(state, ActorFailed(request_type="answerability.requested",
                                         error=failure, actor="judge", ts=101.0))
    (judged,) = of(out, AnswerabilityJudged)
    assert judged.by == "offline" and judged.fallback == failure
    assert of(out, AnswerRequested)
    claims = (Claim(statement="Jo was born in 1950.", source_id="a", quote="text of a"),)
    state, _ = step(state, AnswerDrafted(text="x", claims=claims, attempt=1, ts=102.0))
    _, out = step(state, AnswerVerified(text="x [1]", claims=claims, attempt=1, ts=103.0))
    (finish,) = of(out, Finish)
    assert finish.outcome == "answered"
    assert "sufficiency judged offline" in finish.reason and "HTTP 503" in finish.reason


def test_the_models_conflicts_are_weighed_by_credibility_and_announced() -> None:
    held = {
        "blog": EvidenceChunk(id="blog", text="The model has 70 billion parameters.",
                              doc_id="blog", url="https://someblog.example.com/post",
                              title="My notes", score=1.0),
        "docs": EvidenceChunk(id="docs", text="The model has 130 billion parameters.",
                              doc_id="docs", url="https://docs.vendor.example.org/model",
                              title="Model card", score=1.0),
    }
    cred = Credibility(domains={"docs.vendor.example.org": 1.5, "someblog.example.com": 0.5})
    state, _ = judging(credibility=cred, held=held)
    conflict = Conflict(subject="the model", attribute="parameter count", sides=(
        ConflictSide(chunk_id="blog", value="70 billion", quote="70 billion parameters"),
        ConflictSide(chunk_id="docs", value="130 billion", quote="130 billion parameters")))
    state, out = step(state, AnswerabilityJudged(verdict="answerable", by="model",
                                                 conflicts=(conflict,), actor="judge", ts=101.0))
    (announced,) = of(out, ConflictDetected)
    assert announced.preferred == 1 and announced.sides[1].value == "130 billion"
    assert announced.sides[0].credibility < announced.sides[1].credibility
    (write,) = of(out, AnswerRequested)
    assert write.conflicts and write.conflicts[0].preferred == 1


def test_a_planner_model_failure_falls_back_with_a_typed_reason_that_reaches_the_outcome() -> None:
    state = initial_state(budget=Budget())
    state, out = step(state, RunStarted(question=QUESTION, ts=100.0))
    assert of(out, PlanRequested)
    limited = ErrorInfo(kind="ChatRateLimited", message="slow down", status=429,
                        retry_after_s=60.0, model="big-model", role="planner")
    state, out = step(state, ActorFailed(request_type="plan.requested", error=limited,
                                         actor="planner", ts=101.0))
    (fallback,) = of(out, RunFallback)
    assert fallback.error == limited and fallback.to_mode == "rag"
    for said in ("planner", "big-model", "HTTP 429", "60 s"):
        assert said in fallback.reason
    (search,) = of(out, SearchRequested)
    _, out = step(state, SearchCompleted(call_id=search.call_id, query=QUESTION, hits=(),
                                         ts=102.0))
    # nothing found: the outcome still says why the agent loop was left
    (finish,) = of(out, Finish)
    assert finish.outcome == "no_evidence" and "HTTP 429" in finish.reason


def test_a_stalled_planner_is_never_a_bare_exception_name() -> None:
    state = initial_state()
    state, _ = step(state, RunStarted(question=QUESTION, ts=100.0))
    stalled = ErrorInfo(kind="TimeoutError", message="TimeoutError", timeout_s=30.0,
                        role="planner", model="m")
    _, out = step(state, ActorFailed(request_type="plan.requested", error=stalled, ts=131.0))
    (fallback,) = of(out, RunFallback)
    assert fallback.reason.startswith("planner model 'm' timed out after 30 s")


def writing(state_ids: tuple[str, ...] = ("a", "b")) -> RunState:
    state = initial_state()
    state, _ = step(state, RunStarted(question=QUESTION, ts=100.0))
    state = replace(state, phase=Phase.SELECTING, write_mode="answer", tool_calls=1, steps=1,
                    evidence={i: chunk(i) for i in state_ids})
    state, _ = final_rerank(state, list(state_ids))
    assert state.phase is Phase.WRITING
    return state


def test_a_draft_by_the_offline_writer_standing_in_says_so_in_the_outcome() -> None:
    state = writing()
    claims = (Claim(statement="text of a", source_id="a", quote="text of a"),)
    down = ErrorInfo(kind="ChatServerError", message="down", status=500, model="m",
                     role="writer")
    state, _ = step(state, AnswerDrafted(text="text of a", claims=claims, fallback=down,
                                         ts=101.0))
    _, out = step(state, AnswerVerified(text="text of a [1]", claims=claims, ts=102.0))
    (finish,) = of(out, Finish)
    assert finish.outcome == "answered"
    assert "offline extractive writer" in finish.reason and "HTTP 500" in finish.reason


def test_an_answer_claim_dropped_twice_ends_partial_with_what_was_verified() -> None:
    state = writing()
    kept = (Claim(statement="Acme was founded by Jo.", source_id="a", quote="text of a"),)
    lost = (ClaimError(index=1, source_id="b", kind="unsupported", reason="adds 1950"),
            ClaimError(index=-1, source_id="b", kind="answer_dropped",
                       reason="claim 1, which states the answer, was dropped: adds 1950"))
    for attempt in (1, 2):
        state, _ = step(state, AnswerDrafted(text="x", claims=kept, attempt=attempt, ts=101.0))
        state, out = step(state, VerifyFailed(errors=lost, kept=kept, attempt=attempt,
                                              ts=102.0))
    (finish,) = of(out, Finish)
    assert finish.outcome == "partial" and finish.claims == kept
    assert "answer claim failed verification twice" in finish.reason
    assert "could not be verified" in finish.answer


def test_a_writer_failure_is_described_not_named() -> None:
    state = writing()
    stalled = ErrorInfo(kind="TimeoutError", message="TimeoutError", timeout_s=40.0,
                        role="writer", model="m")
    for _attempt in (1, 2):
        state, out = step(state, ActorFailed(request_type="answer.requested", error=stalled,
                                             ts=101.0))
    (finish,) = of(out, Finish)
    assert finish.outcome == "degraded"
    assert "writer model 'm' timed out after 40 s" in finish.reason


def test_text_shown_to_the_models_counts_against_the_read_token_budget() -> None:
    state = initial_state(budget=Budget(max_read_tokens=50))
    state, _ = step(state, RunStarted(question=QUESTION, ts=100.0))
    long = EvidenceChunk(id="long", text="word " * 100, doc_id="d", score=1.0)
    out: list = []  # type: ignore[type-arg]
    state = replace(state, evidence={"long": long}, read_tokens=125, phase=Phase.ACTING)
    from reactive_rag.run._machine import _request_plan  # the round boundary
    state, out = _request_plan(state, out)
    (exhausted,) = of(out, BudgetExhausted)
    assert exhausted.resource == "read_tokens" and exhausted.limit == 50.0
    assert not of(out, PlanRequested)


def test_registered_passages_are_counted_as_read() -> None:
    from reactive_rag.run._machine import _register
    state = initial_state()
    out: list = []  # type: ignore[type-arg]
    state = _register(state, [EvidenceChunk(id="c", text="x" * 400, doc_id="d")], out)
    assert state.read_tokens == 100 and of(out, EvidenceRegistered)


def test_a_resumed_run_asks_the_model_judge_again() -> None:
    state, out = judging(Answerability("answerable", "when"))
    (asked,) = of(out, AnswerabilityRequested)
    stored = asked.model_copy(update={"seq": 9, "actor": "controller", "cause": 8})
    controller = RunController(state)
    controller._log = [RunStarted(question=QUESTION, seq=1, ts=100.0), stored]
    assert controller._awaited([]) == [stored]


def test_a_budget_running_out_while_the_model_judges_does_not_restart_the_answer() -> None:
    state, _ = judging(Answerability("answerable", "when"))
    state, out = step(state, BudgetExhausted(resource="wall_clock", actor="runtime", ts=190.0))
    assert state.phase is Phase.JUDGING and state.exhausted == "wall_clock" and not out
    state, out = step(state, AnswerabilityJudged(verdict="answerable", by="model", actor="judge",
                                                 ts=191.0))
    assert of(out, AnswerRequested)


def test_the_model_judge_sees_the_held_passages_not_chosen_and_may_add_them() -> None:
    held = {i: chunk(i) for i in ("a", "b", "c", "d")}
    state, out = judging(Answerability("partial", "when", missing=("born",)), held=held)
    state = replace(state, phase=Phase.SELECTING)
    state, out = final_rerank(state, ["a", "b"])  # the rerank kept two; c, d left out
    (asked,) = of(out, AnswerabilityRequested)
    assert asked.evidence_ids == ("a", "b") and set(asked.other_ids) == {"c", "d"}
    state, out = step(state, AnswerabilityJudged(verdict="answerable", by="model",
                                                 added=("d",), actor="judge", ts=101.0))
    (write,) = of(out, AnswerRequested)
    assert write.evidence_ids == ("a", "b", "d")
