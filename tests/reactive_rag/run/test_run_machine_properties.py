"""Property tests: random worlds answering the machine's commands in random ways.

Whatever the world does (results, empties, failures, stale and duplicate replies,
time jumps, budget events), the machine: issues at most one Finish and nothing
after it; never exceeds its step or tool-call budget; never leaves a command
unanswered without moving on; and always ends when every command is answered.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactive_rag.run import Budget, Finish, Phase, initial_state, step
from streams import (
    ActorFailed,
    AnswerDrafted,
    AnswerRequested,
    AnswerVerified,
    BudgetExhausted,
    Claim,
    ClaimError,
    ErrorInfo,
    Event,
    EvidenceChunk,
    Hit,
    PageScraped,
    PlanDecided,
    PlanRequested,
    ReadCompleted,
    ReadFailed,
    ReadRequested,
    RerankCompleted,
    RerankFailed,
    RerankRequested,
    RunStarted,
    ScrapeRequested,
    SearchCompleted,
    SearchFailed,
    SearchRequested,
    ToolCall,
    VerifyFailed,
)

ERR = ErrorInfo(kind="Boom", message="injected")
ANSWERING = (Phase.SELECTING, Phase.WRITING, Phase.VERIFYING)


def _chunk(i: int) -> EvidenceChunk:
    return EvidenceChunk(id=f"d{i}#0", text=f"text {i}", doc_id=f"d{i}", score=float(i % 7))


class World:
    """Answers commands at random, sometimes late, twice, or never (then time passes)."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.now = 100.0
        self.call_counter = 0

    def draw(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.data.draw(strategy)

    def ids(self) -> list[int]:
        return self.draw(st.lists(st.integers(0, 12), max_size=5))

    def calls(self) -> tuple[ToolCall, ...]:
        out = []
        for _ in range(self.draw(st.integers(0, 3))):
            self.call_counter += 1
            call_id = self.draw(st.sampled_from([f"c{self.call_counter}", "c1", "dup"]))
            tool = self.draw(st.sampled_from(["search", "search", "read", "scrape", "answer"]))
            if tool == "search":
                args: dict[str, Any] = {"query": self.draw(st.sampled_from(
                    ["a", "b", "c", "A ", "", "long query words"]))}
            elif tool == "read":
                args = {"chunk_id": f"d{self.draw(st.integers(0, 12))}#0"}
            elif tool == "scrape":
                args = {"url": self.draw(st.sampled_from(["https://x.test/a", "ftp://no"]))}
            else:
                args = {}
            out.append(ToolCall(id=call_id, tool=tool, args=args))
        return tuple(out)

    def reply(self, command: Event) -> list[Event]:
        """Zero, one or two replies to one command."""
        self.now += self.draw(st.sampled_from([0.1, 0.5, 3.0, 30.0]))
        ts = self.now
        kind = self.draw(st.sampled_from(["ok", "ok", "ok", "fail", "none", "twice"]))
        replies: list[Event] = []
        match command:
            case PlanRequested():
                if kind == "fail":
                    replies = [ActorFailed(request_type="plan.requested", error=ERR, ts=ts)]
                else:
                    action = self.draw(st.sampled_from(["search", "read", "answer"]))
                    replies = [PlanDecided(action=action, calls=self.calls(),
                                           tokens=self.draw(st.integers(0, 5000)), ts=ts)]
            case SearchRequested():
                if kind == "fail":
                    replies = [SearchFailed(call_id=command.call_id, query=command.query,
                                            error=ERR, ts=ts)]
                else:
                    hits = tuple(Hit(url=f"u{i}", content=f"text {i}", chunk_id=f"d{i}#0")
                                 for i in self.ids())
                    replies = [SearchCompleted(call_id=command.call_id, query=command.query,
                                               hits=hits, ts=ts)]
            case ScrapeRequested():
                replies = [PageScraped(call_id=command.call_id, url=command.url,
                                       chunks=tuple(_chunk(i) for i in self.ids()), ts=ts)]
            case ReadRequested():
                if kind == "fail":
                    replies = [ReadFailed(call_id=command.call_id, chunk_id=command.chunk_id,
                                          error=ERR, ts=ts)]
                else:
                    replies = [ReadCompleted(call_id=command.call_id, chunk_id=command.chunk_id,
                                             chunks=tuple(_chunk(i) for i in self.ids()), ts=ts)]
            case RerankRequested():
                if kind == "fail":
                    replies = [RerankFailed(call_id=command.call_id, query=command.query,
                                            error=ERR, ts=ts)]
                else:
                    keep = self.draw(st.integers(0, len(command.candidates)))
                    replies = [RerankCompleted(call_id=command.call_id, query=command.query,
                                               chunks=command.candidates[:keep][:command.k],
                                               ts=ts)]
            case AnswerRequested():
                if kind == "fail":
                    replies = [ActorFailed(request_type="answer.requested", error=ERR, ts=ts)]
                else:
                    claims = (Claim(statement="s", source_id="d1#0", quote="text 1"),)
                    drafted = AnswerDrafted(text="s", claims=claims, attempt=command.attempt,
                                            ts=ts)
                    verdict: Event
                    if self.draw(st.booleans()):
                        verdict = AnswerVerified(text="s", claims=claims,
                                                 attempt=command.attempt, ts=ts)
                    else:
                        verdict = VerifyFailed(errors=(ClaimError(index=0, source_id="d1#0",
                                                                  reason="bad"),),
                                               attempt=command.attempt, ts=ts)
                    replies = [drafted, verdict]
            case _:
                return []
        if kind == "none":
            return []  # a lost reply: only time (the runtime's deadline) moves the run on
        if kind == "twice":
            return replies + replies
        return replies


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data(), st.sampled_from(["agent", "rag"]))
def test_random_worlds_end_once_within_budget(data: st.DataObject, mode: str) -> None:
    budget = Budget(max_steps=data.draw(st.integers(1, 6)),
                    max_tool_calls=data.draw(st.integers(1, 6)), wall_s=60.0,
                    max_tokens=data.draw(st.sampled_from([3000, 60_000])))
    world = World(data)
    state, commands = step(initial_state(budget=budget),
                           RunStarted(question="q", mode=mode, ts=world.now))
    finishes: list[Finish] = []
    pending: list[Event] = []
    deadline_passed = False
    for _ in range(400):
        for command in commands:
            if isinstance(command, Finish):
                finishes.append(command)
            else:
                pending.extend(world.reply(command))
        assert state.steps <= budget.max_steps
        assert state.tool_calls <= budget.max_tool_calls
        if state.phase is Phase.DONE:
            break
        if not pending:
            if deadline_passed and state.phase in ANSWERING:
                break  # the answer step itself lost its reply: the runtime's grace ends the run
            # nothing answers any more: the runtime's deadline is what moves the run on
            world.now += budget.wall_s
            deadline_passed = True
            pending.append(BudgetExhausted(resource="wall_clock", actor="runtime",
                                           ts=world.now))
        event = pending.pop(data.draw(st.integers(0, len(pending) - 1)))
        state, commands = step(state, event)
    assert len(finishes) <= 1
    if state.phase is Phase.DONE:
        assert len(finishes) == 1 and state.outcome == finishes[0].outcome
        # terminal states never change, whatever arrives afterwards
        assert step(state, BudgetExhausted(resource="steps", ts=world.now + 1)) == (state, [])
    else:
        # only a lost reply to the answer step can leave it open; never planning or acting
        assert deadline_passed and state.phase in ANSWERING
