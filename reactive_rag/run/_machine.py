"""The run's rules as a pure state machine: ``step(state, event) -> (state, commands)``.

No I/O and no clock: time comes in through events (``ts``). Side effects are
commands (events to publish, or a :class:`Finish`); their results come back as
events. Any situation can be built directly as a :class:`RunState` in a test.

Tool calls decided in one model turn are queued and run one at a time; before
each, the machine re-checks the budget, duplicates (same call id; else same
tool and normalised arguments), the read-on limit and the arguments themselves.

Before the writer is asked, an injected answerability judge says whether the
chosen evidence covers every part of the question; the machine then writes,
searches once more for the missing part, writes a *partial* answer that says
what is missing, or ends with ``no_evidence``.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from actors.rerank import Credibility
from streams import (
    ActorFailed,
    AnswerabilityJudged,
    AnswerDrafted,
    AnswerRequested,
    AnswerVerified,
    BudgetExhausted,
    BudgetTick,
    Claim,
    ClaimError,
    Conflict,
    Event,
    EvidenceChunk,
    EvidenceRegistered,
    Hit,
    LoopDetected,
    Outcome,
    PageScraped,
    PlanDecided,
    PlanRequested,
    QueryStat,
    ReadCompleted,
    ReadFailed,
    ReadRequested,
    RerankCompleted,
    RerankFailed,
    RerankRequested,
    RunFallback,
    RunStarted,
    ScrapeFailed,
    ScrapeRequested,
    SearchCompleted,
    SearchFailed,
    SearchRequested,
    ToolCall,
    ToolRejected,
    VerifyFailed,
)

from ._answerability import Answerability, AnswerabilityJudge, limits_note, partial_note
from ._budget import Budget
from ._conflicts import conflicts_for_answer
from ._exceptions import IllegalTransition

__all__ = [
    "Command",
    "EvidenceSelector",
    "Finish",
    "InFlight",
    "Phase",
    "RunState",
    "WriteMode",
    "call_signature",
    "chunk_from_hit",
    "fall_back_to_rag",
    "initial_state",
    "step",
]

FINAL_RERANK_ID = "final"
WriteMode = Literal["answer", "finalize"]


class Phase(enum.Enum):
    """Where a run is; ``DONE`` never changes."""

    PENDING = "pending"  # created; run.started not seen yet
    PLANNING = "planning"  # a plan.requested is out; waiting for plan.decided
    ACTING = "acting"  # one queued tool call (or its rerank) is in flight
    SELECTING = "selecting"  # the final rerank picks the writer's evidence
    WRITING = "writing"  # answer.requested is out; waiting for answer.drafted
    VERIFYING = "verifying"  # a draft is out; waiting for answer.verified / verify.failed
    DONE = "done"  # terminal: a Finish command was issued


@dataclass(frozen=True, slots=True)
class InFlight:
    """The one tool call being executed, and at which stage."""

    call: ToolCall
    stage: Literal["tool", "rerank"] = "tool"
    hits: int = 0
    candidates: tuple[EvidenceChunk, ...] = ()

    @property
    def query(self) -> str:
        """The search query as sent (empty for reads and scrapes)."""
        return str(self.call.args.get("query", "")).strip()


@dataclass(frozen=True, slots=True)
class Finish:
    """Command: claim the run's end with this outcome (the runtime publishes run.finished)."""

    outcome: Outcome
    reason: str = ""
    answer: str = ""
    claims: tuple[Claim, ...] = ()


Command = Event | Finish

EvidenceSelector = Callable[[str, Sequence[EvidenceChunk], Sequence[str], int],
                            Sequence[EvidenceChunk]]
"""``(question, reranked evidence, queries made, k) -> chosen``: the final pick.

Pure and deterministic (it runs inside the machine). The agent path uses one
that keeps the second hop of a multi-hop question, which a ranking against the
question alone drops; without one, the final rerank's top ``k`` is used.
"""
_Step = tuple["RunState", list[Command]]


@dataclass(frozen=True, slots=True)
class RunState:
    """Everything the machine knows about one run; replaced, never mutated."""

    phase: Phase = Phase.PENDING
    mode: Literal["agent", "rag"] = "agent"
    question: str = ""
    collections: tuple[str, ...] = ()
    budget: Budget = field(default_factory=Budget)
    started_ts: float = 0.0
    now: float = 0.0
    steps: int = 0
    tool_calls: int = 0
    tokens: int = 0
    round: int = 0
    queue: tuple[ToolCall, ...] = ()
    in_flight: InFlight | None = None
    seen_call_ids: frozenset[str] = frozenset()
    seen_signatures: frozenset[str] = frozenset()
    consecutive_reads: int = 0
    evidence: Mapping[str, EvidenceChunk] = field(default_factory=dict)
    round_returned: frozenset[str] = frozenset()
    round_known_before: frozenset[str] = frozenset()
    saturated_rounds: int = 0
    queries: tuple[QueryStat, ...] = ()
    feedback: tuple[str, ...] = ()
    write_mode: WriteMode = "answer"
    write_attempt: int = 0
    selected: tuple[str, ...] = ()
    exhausted: str | None = None
    fell_back: bool = False
    outcome: Outcome | None = None
    gap_rounds: int = 0
    failed_calls: int = 0
    last_failure: str = ""
    judged: Answerability | None = None
    selector: EvidenceSelector | None = field(default=None, compare=False)
    conflicts: tuple[Conflict, ...] = ()
    judge: AnswerabilityJudge | None = field(default=None, compare=False)
    credibility: Credibility | None = field(default=None, compare=False)

    @property
    def elapsed_s(self) -> float:
        return max(0.0, self.now - self.started_ts) if self.started_ts else 0.0

    @property
    def remaining_s(self) -> float:
        return max(0.0, self.budget.wall_s - self.elapsed_s)


def initial_state(
    question: str = "",
    *,
    mode: Literal["agent", "rag"] = "agent",
    budget: Budget | None = None,
    collections: Sequence[str] = (),
    selector: EvidenceSelector | None = None,
    judge: AnswerabilityJudge | None = None,
    credibility: Credibility | None = None,
) -> RunState:
    """A fresh run waiting for its ``run.started``."""
    return RunState(mode=mode, question=question, budget=budget or Budget(),
                    collections=tuple(collections), selector=selector, judge=judge,
                    credibility=credibility)


# --- helpers -------------------------------------------------------------------------------

_SPACE = re.compile(r"\s+")


def _normalise(value: object) -> object:
    if isinstance(value, str):
        return _SPACE.sub(" ", value).strip().casefold()
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_normalise(v) for v in value]
    return value


def call_signature(call: ToolCall) -> str:
    """Tool plus normalised arguments: two calls with the same signature do the same thing."""
    payload = json.dumps([call.tool, _normalise(dict(call.args))], sort_keys=True, default=str)
    return hashlib.sha1(payload.encode()).hexdigest()[:16]


def chunk_from_hit(hit: Hit) -> EvidenceChunk:
    """The evidence chunk a search hit stands for (local chunks keep their id)."""
    chunk_id = hit.chunk_id or "web:" + hashlib.sha1(hit.url.encode()).hexdigest()[:16]
    return EvidenceChunk(
        id=chunk_id, text=hit.content or hit.snippet, doc_id=hit.doc_id or hit.url,
        url=hit.url, title=hit.title, score=hit.score, source=hit.source,
    )


def _tick(state: RunState) -> BudgetTick:
    b = state.budget
    return BudgetTick(steps=state.steps, tool_calls=state.tool_calls, tokens=state.tokens,
                      elapsed_s=round(state.elapsed_s, 3), max_steps=b.max_steps,
                      max_tool_calls=b.max_tool_calls, max_tokens=b.max_tokens,
                      deadline_s=b.wall_s)


def _done(state: RunState, finish: Finish, out: list[Command]) -> _Step:
    out.append(finish)
    return replace(state, phase=Phase.DONE, outcome=finish.outcome, queue=(),
                   in_flight=None), out


# --- the transition function ---------------------------------------------------------------


def step(state: RunState, event: Event) -> _Step:
    """Apply one event; return the next state and the commands to carry out.

    Events that do not concern the current phase (a late reply to a call that
    timed out, a duplicate) leave the state as it is. Raises
    :class:`IllegalTransition` for events that can never be valid here (a
    second ``run.started``).
    """
    if state.phase is Phase.DONE:
        return state, []  # terminal states never change
    if event.ts:
        state = replace(state, now=max(state.now, event.ts))
    out: list[Command] = []

    if isinstance(event, RunStarted):
        if state.phase is not Phase.PENDING:
            raise IllegalTransition(f"run.started in phase {state.phase.value}: a run starts once")
        mode: Literal["agent", "rag"] = "rag" if event.mode == "rag" else "agent"
        state = replace(state, question=event.question, mode=mode, started_ts=event.ts,
                        now=event.ts, collections=event.collections or state.collections)
        if mode == "rag":
            state = replace(state, queue=(ToolCall(id="rag-1", tool="search",
                                                   args={"query": event.question}),))
            return _run_next(state, out)
        return _request_plan(state, out)

    if state.phase is Phase.PENDING:
        raise IllegalTransition(f"{event.type} before run.started")

    if isinstance(event, BudgetExhausted):
        if event.actor == "controller":
            return state, out  # our own announcement coming back
        return _exhausted(state, event.resource, out, announce=False)

    # Time is checked on every event: a deadline cannot be missed for lack of a timer.
    if state.phase in (Phase.PLANNING, Phase.ACTING) and state.elapsed_s >= state.budget.wall_s:
        return _exhausted(state, "wall_clock", out, announce=True)

    match state.phase:
        case Phase.PLANNING:
            return _on_planning(state, event, out)
        case Phase.ACTING:
            return _on_acting(state, event, out)
        case Phase.SELECTING:
            return _on_selecting(state, event, out)
        case Phase.WRITING:
            return _on_writing(state, event, out)
        case Phase.VERIFYING:
            return _on_verifying(state, event, out)
    return state, out


def fall_back_to_rag(state: RunState, reason: str) -> _Step:
    """Switch an agent run to the one-shot path (once) after an orchestration error."""
    if state.phase is Phase.DONE:
        return state, []
    out: list[Command] = [RunFallback(from_mode=state.mode, to_mode="rag", reason=reason)]
    if state.fell_back or state.mode == "rag":
        if state.evidence:
            return _select(replace(state, queue=(), in_flight=None), "finalize", out)
        return _done(state, Finish("failed", reason=f"orchestration failed twice: {reason}"), out)
    state = replace(state, mode="rag", fell_back=True, queue=(), in_flight=None)
    if state.evidence:
        return _select(state, "answer", out)
    state = replace(state, queue=(ToolCall(id="rag-fallback", tool="search",
                                           args={"query": state.question}),))
    return _run_next(state, out)


# --- planning --------------------------------------------------------------------------------


def _request_plan(state: RunState, out: list[Command]) -> _Step:
    b = state.budget
    if state.steps >= b.max_steps:
        return _exhausted(state, "steps", out, announce=True)
    if state.tokens >= b.max_tokens:
        return _exhausted(state, "tokens", out, announce=True)
    if state.elapsed_s >= b.wall_s:
        return _exhausted(state, "wall_clock", out, announce=True)
    state = replace(state, steps=state.steps + 1, round=state.round + 1, phase=Phase.PLANNING,
                    round_returned=frozenset(), round_known_before=frozenset(state.evidence))
    out.append(PlanRequested(
        round=state.round, feedback=state.feedback, queries=state.queries,
        remaining_steps=b.max_steps - state.steps,
        remaining_tool_calls=b.max_tool_calls - state.tool_calls,
        remaining_s=round(state.remaining_s, 3),
    ))
    out.append(_tick(state))
    return replace(state, feedback=()), out


def _on_planning(state: RunState, event: Event, out: list[Command]) -> _Step:
    if isinstance(event, PlanDecided):
        state = replace(state, tokens=state.tokens + max(0, event.tokens))
        if state.tokens >= state.budget.max_tokens:
            return _exhausted(state, "tokens", out, announce=True)
        calls = event.calls
        if event.action in ("answer", "finalize") or not calls:
            return _select(state, "answer", out)
        state = replace(state, queue=tuple(calls), phase=Phase.ACTING)
        return _run_next(state, out)
    if isinstance(event, ActorFailed) and event.request_type == "plan.requested":
        return fall_back_to_rag(state, f"planner failed: {event.error.kind}: {event.error.message}")
    return state, out


# --- acting ------------------------------------------------------------------------------------


def _refuse(state: RunState, call: ToolCall, reason: str, out: list[Command],
            loop_kind: Literal["duplicate", "read_limit"] | None = None) -> RunState:
    out.append(ToolRejected(call_id=call.id, tool=call.tool, reason=reason))
    if loop_kind is not None:
        out.append(LoopDetected(kind=loop_kind, detail=reason,
                                query=str(call.args.get("query", ""))))
    return replace(state, feedback=(*state.feedback, f"{call.tool} {call.id} refused: {reason}"))


def _run_next(state: RunState, out: list[Command]) -> _Step:
    """Start the next queued call that passes the checks, or end the round."""
    b = state.budget
    while state.queue:
        call, rest = state.queue[0], state.queue[1:]
        state = replace(state, queue=rest)
        if call.tool == "answer":
            return _select(replace(state, queue=()), "answer", out)
        if state.tool_calls >= b.max_tool_calls:
            return _exhausted(state, "tool_calls", out, announce=True)
        if state.elapsed_s >= b.wall_s:
            return _exhausted(state, "wall_clock", out, announce=True)
        if call.id in state.seen_call_ids:
            state = _refuse(state, call, "duplicate call id", out)
            continue
        signature = call_signature(call)
        if signature in state.seen_signatures:
            state = _refuse(state, call, "the same call was already made in this run", out,
                            loop_kind="duplicate")
            continue
        problem = _check_args(state, call)
        if problem is not None:
            state = _refuse(state, call, problem, out)
            continue
        if (call.tool == "read" and state.evidence
                and state.consecutive_reads >= b.max_consecutive_reads):
            state = _refuse(state, call, f"at most {b.max_consecutive_reads} reads in a row; "
                            "search or answer instead", out, loop_kind="read_limit")
            continue
        state = replace(
            state,
            tool_calls=state.tool_calls + 1,
            consecutive_reads=state.consecutive_reads + 1 if call.tool == "read" else 0,
            seen_call_ids=state.seen_call_ids | {call.id},
            seen_signatures=state.seen_signatures | {signature},
            phase=Phase.ACTING,
            in_flight=InFlight(call=call),
        )
        out.append(_request_for(state, call))
        out.append(_tick(state))
        return state, out
    return _end_round(state, out)


def _check_args(state: RunState, call: ToolCall) -> str | None:
    args = call.args
    if call.tool == "search":
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            return "search needs a non-empty string `query`"
        k = args.get("k", 10)
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 50:
            return "search `k` must be an integer from 1 to 50"
    elif call.tool == "read":
        chunk_id = args.get("chunk_id")
        if not isinstance(chunk_id, str) or not chunk_id:
            return "read needs a string `chunk_id`"
        if chunk_id not in state.evidence:
            return f"unknown chunk id {chunk_id!r}: read only ids of registered evidence"
        direction = args.get("direction", "next")
        if direction not in ("next", "prev", "both"):
            return "read `direction` must be next, prev or both"
    elif call.tool == "scrape":
        url = args.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            return "scrape needs an http(s) `url`"
    return None


def _request_for(state: RunState, call: ToolCall) -> Event:
    args = call.args
    if call.tool == "search":
        k = args.get("k", 10)
        return SearchRequested(call_id=call.id, query=str(args["query"]).strip(),
                               k=k if isinstance(k, int) else 10, collections=state.collections)
    if call.tool == "read":
        direction = args.get("direction", "next")
        return ReadRequested(call_id=call.id, chunk_id=str(args["chunk_id"]),
                             direction=direction if direction in ("prev", "both") else "next")
    return ScrapeRequested(call_id=call.id, url=str(args["url"]))


def _is_reply(state: RunState, call_id: str) -> bool:
    return state.in_flight is not None and state.in_flight.call.id == call_id


def _on_acting(state: RunState, event: Event, out: list[Command]) -> _Step:
    flight = state.in_flight
    if flight is None:  # pragma: no cover - ACTING always has a call in flight
        raise IllegalTransition("acting with no call in flight")
    match event:
        case SearchCompleted() if _is_reply(state, event.call_id) and flight.stage == "tool":
            candidates = _dedup(chunk_from_hit(h) for h in event.hits)
            if not candidates:
                note = (f"search {flight.query!r} returned nothing; rewrite it "
                        "(fewer or different words), do not repeat it")
                out.append(LoopDetected(kind="empty", detail=note, query=flight.query))
                state = _record_query(state, flight.query, 0, 0, note)
                return _run_next(replace(state, in_flight=None), out)
            state = replace(state, in_flight=replace(flight, stage="rerank", hits=len(candidates),
                                                      candidates=candidates))
            out.append(RerankRequested(call_id=flight.call.id, query=flight.query or state.question,
                                       candidates=candidates, k=state.budget.per_search_k))
            return state, out
        case PageScraped() if _is_reply(state, event.call_id) and flight.stage == "tool":
            candidates = _dedup(event.chunks)
            if not candidates:
                state = _note(state, f"page {event.url} had no readable text")
                return _run_next(replace(state, in_flight=None), out)
            state = replace(state, in_flight=replace(flight, stage="rerank", hits=len(candidates),
                                                      candidates=candidates))
            out.append(RerankRequested(call_id=flight.call.id, query=state.question,
                                       candidates=candidates, k=state.budget.per_search_k))
            return state, out
        case ReadCompleted() if _is_reply(state, event.call_id) and flight.stage == "tool":
            state = _register(state, _dedup(event.chunks), out)
            if not event.chunks:
                state = _note(state, f"nothing more to read around {event.chunk_id}")
            return _run_next(replace(state, in_flight=None), out)
        case RerankCompleted() if _is_reply(state, event.call_id) and flight.stage == "rerank":
            before = len(state.evidence)
            state = _register(state, event.chunks, out)
            new = len(state.evidence) - before
            state = replace(state, round_returned=state.round_returned
                            | {c.id for c in event.chunks})
            empty_note: str | None = None
            if not event.chunks:
                empty_note = (f"nothing relevant for {flight.query or 'the page'!r} "
                        f"({event.below_floor} results under the relevance floor)")
            if flight.call.tool == "search":
                state = _record_query(state, flight.query, flight.hits, new, empty_note)
            elif empty_note:
                state = _note(state, empty_note)
            return _run_next(replace(state, in_flight=None), out)
        case RerankFailed() if _is_reply(state, event.call_id) and flight.stage == "rerank":
            # Degrade, do not lose the results: keep the best candidates by their own score.
            best = sorted(flight.candidates, key=lambda c: -(c.score or 0.0))
            before = len(state.evidence)
            state = _register(state, tuple(best[: state.budget.per_search_k]), out)
            state = _note(state, f"reranker failed ({event.error.kind}); kept results unranked")
            if flight.call.tool == "search":
                state = _record_query(state, flight.query, flight.hits,
                                      len(state.evidence) - before, None)
            return _run_next(replace(state, in_flight=None), out)
        case SearchFailed() | ReadFailed() | ScrapeFailed() if _is_reply(state, event.call_id):
            failure = f"{flight.call.tool} {flight.call.id} failed: " \
                      f"{event.error.kind}: {event.error.message}"
            state = replace(_note(state, failure), failed_calls=state.failed_calls + 1,
                            last_failure=failure)
            if isinstance(event, SearchFailed):
                state = _record_query(state, flight.query, 0, 0, None)
            return _run_next(replace(state, in_flight=None), out)
    return state, out


def _dedup(chunks: Iterable[EvidenceChunk]) -> tuple[EvidenceChunk, ...]:
    seen: dict[str, EvidenceChunk] = {}
    for c in chunks:
        if c.id not in seen and c.text.strip():
            seen[c.id] = c
    return tuple(seen.values())


def _register(state: RunState, chunks: Sequence[EvidenceChunk],
              out: list[Command]) -> RunState:
    new = [c for c in chunks if c.id not in state.evidence]
    if not new:
        return state
    evidence = dict(state.evidence)
    for c in new:
        evidence[c.id] = c
    out.append(EvidenceRegistered(chunks=tuple(new)))
    return replace(state, evidence=evidence)


def _note(state: RunState, text: str) -> RunState:
    return replace(state, feedback=(*state.feedback, text))


def _record_query(state: RunState, query: str, hits: int, new: int,
                  note: str | None) -> RunState:
    state = replace(state, queries=(*state.queries, QueryStat(query=query, hits=hits,
                                                               new_evidence=new)))
    return _note(state, note) if note else state


def _end_round(state: RunState, out: list[Command]) -> _Step:
    state = replace(state, in_flight=None)
    if state.mode == "rag":
        return _select(state, "answer", out)
    returned = state.round_returned
    known = returned & state.round_known_before
    overlap = len(known) / len(returned) if returned else 1.0
    saturated = state.saturated_rounds + 1 if overlap >= state.budget.saturation_overlap else 0
    state = replace(state, saturated_rounds=saturated)
    if saturated >= state.budget.saturation_rounds and state.evidence:
        out.append(LoopDetected(kind="saturation", detail=(
            f"{saturated} rounds in a row brought mostly evidence already held "
            f"(overlap {overlap:.0%}); answering")))
        return _select(state, "answer", out)
    return _request_plan(state, out)


# --- budget ----------------------------------------------------------------------------------


def _exhausted(state: RunState, resource: Literal["steps", "tool_calls", "tokens", "wall_clock"],
               out: list[Command], *, announce: bool) -> _Step:
    if state.phase in (Phase.SELECTING, Phase.WRITING, Phase.VERIFYING):
        return replace(state, exhausted=state.exhausted or resource), out  # already answering
    b = state.budget
    used, limit = {
        "steps": (state.steps, b.max_steps),
        "tool_calls": (state.tool_calls, b.max_tool_calls),
        "tokens": (state.tokens, b.max_tokens),
        "wall_clock": (state.elapsed_s, b.wall_s),
    }[resource]
    if announce:
        out.append(BudgetExhausted(resource=resource, used=float(used), limit=float(limit)))
    state = replace(state, exhausted=resource, queue=(), in_flight=None)
    return _select(state, "finalize", out)


# --- answering -------------------------------------------------------------------------------


def _select(state: RunState, mode: WriteMode, out: list[Command]) -> _Step:
    """Pick the writer's evidence with a final rerank against the question."""
    if not state.evidence:
        if state.tool_calls and state.failed_calls >= state.tool_calls:
            # Nothing was found because nothing could be searched: not a fact about the corpus.
            return _done(state, Finish("failed", reason=(
                f"every tool call failed ({state.failed_calls}); last: {state.last_failure}")), out)
        why = (f"the {state.exhausted.replace('_', ' ')} budget ran out before anything relevant "
               "was found") if state.exhausted else "nothing relevant was found"
        return _done(state, Finish("no_evidence", reason=why), out)
    if state.exhausted and mode == "answer":
        mode = "finalize"
    state = replace(state, phase=Phase.SELECTING, write_mode=mode, queue=(), in_flight=None)
    k = state.budget.final_evidence
    if _selects(state):
        k *= 4  # a wider shortlist for the selector to pick the final set from
    out.append(RerankRequested(call_id=FINAL_RERANK_ID, query=state.question,
                               candidates=tuple(state.evidence.values()), k=k))
    return state, out


def _selects(state: RunState) -> bool:
    return state.selector is not None and state.mode == "agent"


def _on_selecting(state: RunState, event: Event,
                  out: list[Command]) -> _Step:
    if isinstance(event, RerankCompleted) and event.call_id == FINAL_RERANK_ID:
        ranked = [state.evidence[c.id] for c in event.chunks if c.id in state.evidence]
        if not ranked:
            return _done(state, Finish("no_evidence", reason=(
                "nothing relevant was found: every result scored under the relevance floor")), out)
        k = state.budget.final_evidence
        if state.selector is not None and _selects(state):
            chosen = state.selector(state.question, ranked, [q.query for q in state.queries], k)
            ranked = [c for c in chosen if c.id in state.evidence] or ranked
        return _judge(state, tuple(c.id for c in ranked[:k]), out)
    if isinstance(event, RerankFailed) and event.call_id == FINAL_RERANK_ID:
        best = sorted(state.evidence.values(), key=lambda c: -(c.score or 0.0))
        return _judge(state, tuple(c.id for c in best[: state.budget.final_evidence]), out)
    return state, out


def _judge(state: RunState, ids: tuple[str, ...], out: list[Command]) -> _Step:
    """Ask the answerability judge about the chosen evidence, then act on its verdict."""
    if state.judge is None:
        return _write(state, ids, out)
    chosen = [state.evidence[i] for i in ids]
    judged = state.judge(state.question, chosen, tuple(state.evidence.values()))
    extra = tuple(i for i in judged.extra_ids if i in state.evidence and i not in ids)
    ids = ids + extra[: max(0, state.budget.final_evidence + 2 - len(ids))]
    searches = _gap_searches(state, judged) if judged.verdict != "answerable" else ()
    out.append(AnswerabilityJudged(
        verdict=judged.verdict, answer_type=judged.answer_type, covered=judged.covered,
        missing=judged.missing, reason=judged.reason, searches=searches))
    state = replace(state, judged=judged)
    if searches:
        calls = tuple(ToolCall(id=f"gap{state.gap_rounds + 1}-{i}", tool="search",
                               args={"query": q}) for i, q in enumerate(searches, 1))
        state = replace(state, gap_rounds=state.gap_rounds + 1, queue=calls, phase=Phase.ACTING,
                        round_returned=frozenset(), round_known_before=frozenset(state.evidence))
        return _run_next(state, out)
    if judged.verdict == "unanswerable":
        ran_out = (f"; the {state.exhausted.replace('_', ' ')} budget ran out"
                   if state.exhausted else "")
        why = judged.reason or "the evidence found does not answer the question"
        return _done(state, Finish("no_evidence", reason=f"{why}{ran_out}"), out)
    return _write(state, ids, out)


def _gap_searches(state: RunState, judged: Answerability) -> tuple[str, ...]:
    """The judge's searches for the missing parts, if this run may still make them."""
    b = state.budget
    if (state.mode != "agent" or state.write_mode != "answer" or state.exhausted
            or state.gap_rounds >= b.gap_rounds or state.steps >= b.max_steps
            or state.elapsed_s >= b.wall_s):
        return ()
    room = b.max_tool_calls - state.tool_calls
    fresh = [q for q in dict.fromkeys(s.strip() for s in judged.searches if s.strip())
             if call_signature(ToolCall(id="gap", tool="search", args={"query": q}))
             not in state.seen_signatures]
    return tuple(fresh[: max(0, room)])


def _write(state: RunState, ids: tuple[str, ...], out: list[Command],
           errors: tuple[ClaimError, ...] = ()) -> _Step:
    attempt = state.write_attempt + 1
    mode: Literal["answer", "finalize", "repair"] = "repair" if errors else state.write_mode
    conflicts = state.conflicts
    if not errors:  # disagreements among the writer's evidence are announced once
        events, conflicts = conflicts_for_answer(state.question, state.evidence, ids,
                                                 state.credibility)
        out.extend(events)
    out.append(AnswerRequested(mode=mode, attempt=attempt, evidence_ids=ids, errors=errors,
                               conflicts=conflicts))
    return replace(state, phase=Phase.WRITING, write_attempt=attempt, selected=ids,
                   conflicts=conflicts), out


def _on_writing(state: RunState, event: Event, out: list[Command]) -> _Step:
    if isinstance(event, AnswerDrafted) and event.attempt == state.write_attempt:
        state = replace(state, tokens=state.tokens + max(0, event.tokens), phase=Phase.VERIFYING)
        return state, out
    if isinstance(event, ActorFailed) and event.request_type == "answer.requested":
        return _after_bad_draft(state, (ClaimError(index=-1, source_id="", reason=(
            f"writer failed: {event.error.kind}: {event.error.message}")),), out)
    return state, out


def _on_verifying(state: RunState, event: Event,
                  out: list[Command]) -> _Step:
    if isinstance(event, AnswerVerified) and event.attempt == state.write_attempt:
        return _done(state, _answered(state, event), out)
    if isinstance(event, VerifyFailed) and event.attempt == state.write_attempt:
        return _after_bad_draft(state, event.errors, out)
    if isinstance(event, ActorFailed) and event.request_type == "answer.drafted":
        return _after_bad_draft(state, (ClaimError(index=-1, source_id="", reason=(
            f"verifier failed: {event.error.kind}: {event.error.message}")),), out)
    return state, out


def _answered(state: RunState, verified: AnswerVerified) -> Finish:
    """The terminal claim for a verified draft; limits and gaps are said in the text too."""
    finalized = state.write_mode == "finalize"
    notes: list[str] = []
    outcome: Outcome = "answered_from_evidence" if finalized else "answered"
    reason = ""
    if state.judged is not None and state.judged.verdict == "partial":
        outcome = "partial"
        notes.append(partial_note(state.judged))
        reason = "partial answer: " + (state.judged.reason or "part of the question is not covered")
    if finalized:
        notes.append(limits_note(state.exhausted))
        if state.exhausted:
            limit = (f"the {state.exhausted.replace('_', ' ')} budget ran out; answered from the "
                     "evidence gathered")
            reason = f"{reason}; {limit}" if reason else limit
    answer = "\n\n".join([verified.text, *notes]) if notes else verified.text
    return Finish(outcome, reason=reason, answer=answer, claims=verified.claims)


def _after_bad_draft(state: RunState, errors: tuple[ClaimError, ...],
                     out: list[Command]) -> _Step:
    if state.write_attempt < 2:
        return _write(state, state.selected, out, errors=errors)
    reasons = "; ".join(e.reason for e in errors[:3])
    return _done(state, Finish("degraded", reason=(
        f"evidence was found but no answer passed verification twice ({reasons})")), out)

