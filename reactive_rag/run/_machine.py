"""The run's rules as a pure state machine: ``step(state, event) -> (state, commands)``.

No I/O and no clock: time comes in through events (``ts``); a ``run.resumed``
(a run carried on after a crash) moves the run's start so that the time used
before the crash counts and the downtime does not. Side effects are
commands (events to publish, or a :class:`Finish`); their results come back as
events. Any situation can be built directly as a :class:`RunState` in a test.

Tool calls decided in one model turn are queued and dispatched up to
``max_parallel_calls`` at a time; before each, the machine cleans its
arguments and re-checks the budget (counted at dispatch), duplicates (same
call id; else same tool and normalised arguments), the read-on and page
limits and the arguments themselves. Results are applied in dispatch order,
whatever order they arrive in, so a run's decisions do not depend on which
provider answered first.

Before the writer is asked, the injected sufficiency judge says whether the
chosen evidence covers every part of the question; the machine then writes,
searches once more for the missing part, writes a *partial* answer that says
what is missing, or ends with ``no_evidence``.
"""

from __future__ import annotations

import datetime as _dt
import enum
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Literal

from pydantic import ValidationError

from actors.rerank import Credibility
from actors.text import CJK, text_language, url_host, url_key
from streams import (
    ActorFailed,
    AnswerabilityJudged,
    AnswerabilityRequested,
    AnswerDrafted,
    AnswerRequested,
    AnswerVerified,
    BudgetExhausted,
    BudgetExtended,
    BudgetExtensionRefused,
    BudgetExtensionRequested,
    BudgetTick,
    Claim,
    ClaimError,
    Conflict,
    ConflictDetected,
    ConflictSide,
    ErrorInfo,
    Event,
    EvidenceChunk,
    EvidenceRegistered,
    EvidenceSelected,
    ExtensionRefusal,
    Feedback,
    FeedbackKind,
    HandoffDecided,
    HandoffRequested,
    Hit,
    KeyPoint,
    LoopDetected,
    Outcome,
    PageScraped,
    PlanDecided,
    PlanRequested,
    PointRecalled,
    QueryStat,
    ReadCompleted,
    ReadFailed,
    ReadRequested,
    RerankCompleted,
    RerankFailed,
    RerankRequested,
    ResultsFlagged,
    RunFallback,
    RunResumed,
    RunStarted,
    ScrapeFailed,
    ScrapeRequested,
    SearchCompleted,
    SearchFailed,
    SearchFilters,
    SearchRequested,
    SelectionRequested,
    TaskLink,
    ToolCall,
    ToolRejected,
    VerifyFailed,
    WriteMode,
)

from ..judgement import (
    Answerability,
    Judgement,
    QuestionSimilarity,
    limits_note,
    partial_note,
)
from ._budget import Budget
from ._exceptions import IllegalTransition
from ._hygiene import clean_call

__all__ = [
    "CallResult",
    "Command",
    "Finish",
    "InFlight",
    "Phase",
    "RunState",
    "call_signature",
    "chunk_from_hit",
    "fall_back_to_rag",
    "initial_state",
    "round_overlap",
    "saturated",
    "step",
]

FINAL_RERANK_ID = "final"


class Phase(enum.Enum):
    """Where a run is; ``DONE`` never changes."""

    PENDING = "pending"  # created; run.started not seen yet
    ROUTING = "routing"  # handoff.requested is out: does the question need a whole document?
    PLANNING = "planning"  # a plan.requested is out; waiting for plan.decided
    ACTING = "acting"  # tool calls (or their reranks) are in flight
    SELECTING = "selecting"  # the final rerank shortlists the evidence against the question
    CHOOSING = "choosing"  # the selector picks the writer's evidence from the shortlist
    JUDGING = "judging"  # answerability.requested is out: the model judges the evidence
    WRITING = "writing"  # answer.requested is out; waiting for answer.drafted
    VERIFYING = "verifying"  # a draft is out; waiting for answer.verified / verify.failed
    DONE = "done"  # terminal: a Finish command was issued


@dataclass(frozen=True, slots=True)
class CallResult:
    """What a finished tool call adds to the run, applied in dispatch order."""

    chunks: tuple[EvidenceChunk, ...] = ()
    feedback: tuple[Feedback, ...] = ()
    events: tuple[Event, ...] = ()  # facts to publish when applied (loop, flagged results)
    hits: int = 0
    failure: str = ""  # the tool failed (counts towards "every call failed")
    urls: frozenset[str] = frozenset()  # result URLs seen (normalised): pages it may open
    spam_urls: frozenset[str] = frozenset()  # results judged spam (normalised URLs)
    spam_hosts: frozenset[str] = frozenset()  # hosts that served only spam


@dataclass(frozen=True, slots=True)
class InFlight:
    """A dispatched tool call, at which stage, and its result once it has one.

    ``found`` gathers what the tool's reply showed (flagged results, feedback,
    seen URLs) while its rerank is out; the result is ``found`` plus the chunks.
    """

    call: ToolCall
    stage: Literal["tool", "rerank", "done"] = "tool"
    candidates: tuple[EvidenceChunk, ...] = ()
    found: CallResult = CallResult()
    result: CallResult | None = None

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
    task: TaskLink | None = None  # a ``handed_off`` run's background task


Command = Event | Finish

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
    read_tokens: int = 0  # passage text given to the models (estimated: 4 characters a token)
    round: int = 0
    queue: tuple[ToolCall, ...] = ()
    in_flight: tuple[InFlight, ...] = ()  # dispatch order
    after_calls: Literal["answer", "tool_calls"] | None = None  # once in-flight calls are done
    seen_call_ids: frozenset[str] = frozenset()
    seen_signatures: frozenset[str] = frozenset()
    consecutive_reads: int = 0
    evidence: Mapping[str, EvidenceChunk] = field(default_factory=dict)
    round_returned: frozenset[str] = frozenset()
    round_known_before: frozenset[str] = frozenset()
    saturated_rounds: int = 0
    queries: tuple[QueryStat, ...] = ()
    feedback: tuple[Feedback, ...] = ()
    seen_urls: frozenset[str] = frozenset()
    pages: tuple[str, ...] = ()  # normalised URLs of the pages opened
    spam_urls: frozenset[str] = frozenset()  # never opened, never given to the writer
    spam_hosts: frozenset[str] = frozenset()
    shortlist: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()  # evidence the final rerank did not shortlist (selectable)
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
    model_judges: bool = False  # a chat model judges sufficiency (answerability.requested)
    hint: Answerability | None = None  # the offline verdict shown to the model judge
    # cosines of the held evidence to the question, from the final rerank (the judge's input)
    similarity: QuestionSimilarity | None = None
    model_conflicts: tuple[Conflict, ...] | None = None  # what the model judge saw disagree
    fallback_reason: str = ""  # why the run switched to one-shot RAG (said in the outcome)
    notes: tuple[str, ...] = ()  # what stood in for a failed model (said in the outcome)
    selects: bool = False  # a selector actor picks the writer's evidence (agent runs)
    conflicts: tuple[Conflict, ...] = ()
    points: tuple[KeyPoint, ...] = ()  # key points shown to the planner (compress_context)
    pointed: frozenset[str] = frozenset()  # evidence ids already turned into points
    expanded: frozenset[str] = frozenset()  # chunks shown in full (recalled or cited again)
    round_recalls: int = 0  # recall calls answered in this round
    context_tokens: int = 0  # what the planner was shown in its latest turn (plan.decided)
    extended: bool = False  # the run's one budget extension was granted
    hands_off: bool = False  # asks first whether a background task should take the question
    judgement: Judgement = field(default_factory=Judgement, compare=False)
    credibility: Credibility | None = field(default=None, compare=False)

    @property
    def elapsed_s(self) -> float:
        return max(0.0, self.now - self.started_ts) if self.started_ts else 0.0

    @property
    def remaining_s(self) -> float:
        return max(0.0, self.budget.wall_s - self.elapsed_s)

    @property
    def today(self) -> str:
        """The run's date by its event clock (UTC), for periods like "last year"."""
        return _dt.datetime.fromtimestamp(self.now or 0.0, _dt.UTC).date().isoformat()


def initial_state(
    question: str = "",
    *,
    mode: Literal["agent", "rag"] = "agent",
    budget: Budget | None = None,
    collections: Sequence[str] = (),
    selects: bool = False,
    judgement: Judgement | None = None,
    credibility: Credibility | None = None,
    model_judges: bool = False,
    hands_off: bool = False,
) -> RunState:
    """A fresh run waiting for its ``run.started``.

    ``hands_off``: before anything else the run asks (``handoff.requested``) whether
    its question needs a whole document read; if a background task took it, the run
    ends ``handed_off`` with that task, otherwise it goes on as usual.

    ``judgement``: the decisions about text the machine delegates (default: none,
    every family off); the engine passes the offline or model-backed ones.

    ``selects``: an agent run asks a selector (``selection.requested``) to pick
    the writer's evidence from the final rerank's shortlist; otherwise the
    rerank's top ``final_evidence`` are used.

    ``model_judges``: a chat model decides sufficiency (and lists conflicts) through
    ``answerability.requested``; the offline verdict is only its hint, and stands in
    when the model fails.
    """
    return RunState(mode=mode, question=question, budget=budget or Budget(),
                    collections=tuple(collections), selects=selects,
                    judgement=judgement or Judgement(),
                    credibility=credibility, model_judges=model_judges,
                    hands_off=hands_off)


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
    """The evidence chunk a search hit stands for (local chunks keep their id and neighbours).

    A web result without content is only its snippet (``snippet=True``): the
    planner may open its page to read the whole text.
    """
    chunk_id = hit.chunk_id or "web:" + hashlib.sha1(hit.url.encode()).hexdigest()[:16]
    return EvidenceChunk(
        id=chunk_id, text=hit.content or hit.snippet, doc_id=hit.doc_id or hit.url,
        url=hit.url, title=hit.title, score=hit.score, source=hit.source,
        position=hit.position, prev_id=hit.prev_id, next_id=hit.next_id,
        snippet=hit.content is None,
    )


def _tick(state: RunState) -> BudgetTick:
    b = state.budget
    return BudgetTick(steps=state.steps, tool_calls=state.tool_calls, tokens=state.tokens,
                      elapsed_s=round(state.elapsed_s, 3), max_steps=b.max_steps,
                      max_tool_calls=b.max_tool_calls, max_tokens=b.max_tokens,
                      deadline_s=b.wall_s, read_tokens=state.read_tokens,
                      max_read_tokens=b.max_read_tokens)


def _done(state: RunState, finish: Finish, out: list[Command]) -> _Step:
    out.append(finish)
    return replace(state, phase=Phase.DONE, outcome=finish.outcome, queue=(),
                   in_flight=()), out


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
        if state.hands_off:
            out.append(HandoffRequested(collections=state.collections))
            return replace(state, phase=Phase.ROUTING), out
        return _begin(state, out)

    if state.phase is Phase.PENDING:
        raise IllegalTransition(f"{event.type} before run.started")

    if state.phase is Phase.ROUTING and not isinstance(event, RunResumed):
        return _on_routing(state, event, out)

    if isinstance(event, RunResumed):
        # Resumed after a crash: the time used before it counts, the downtime does not.
        if event.ts:
            state = replace(state, started_ts=event.ts - max(0.0, event.elapsed_s))
        return state, out

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
        case Phase.CHOOSING:
            return _on_choosing(state, event, out)
        case Phase.JUDGING:
            return _on_judging(state, event, out)
        case Phase.WRITING:
            return _on_writing(state, event, out)
        case Phase.VERIFYING:
            return _on_verifying(state, event, out)
    return state, out


def _begin(state: RunState, out: list[Command]) -> _Step:
    """Start answering: one-shot retrieval (rag) or the agent's first plan."""
    if state.mode == "rag":
        state = replace(state, queue=(ToolCall(id="rag-1", tool="search",
                                               args={"query": state.question}),))
        return _dispatch(state, out)
    return _request_plan(state, out)


def _on_routing(state: RunState, event: Event, out: list[Command]) -> _Step:
    """A background task took the question (the run ends ``handed_off``), or nothing did."""
    if isinstance(event, HandoffDecided):
        if event.task is not None:
            title = event.title or event.task.doc_id
            where = f" ({event.task.link})" if event.task.link else ""
            answer = (f"正在后台总结整篇“{title}”：任务 {event.task.task_id}{where}。"
                      if text_language(state.question) == "zh" else
                      f"The whole of {title!r} is being summarised in the background: "
                      f"task {event.task.task_id}{where}.")
            return _done(state, Finish(
                "handed_off", reason=event.reason or "the question needs the whole document",
                answer=answer, task=event.task), out)
        return _begin(state, out)
    if isinstance(event, ActorFailed) and event.request_type == "handoff.requested":
        return _begin(state, out)
    if isinstance(event, BudgetExhausted) and event.actor != "controller":
        return _exhausted(state, event.resource, out, announce=False)
    return state, out


def fall_back_to_rag(state: RunState, reason: str, error: ErrorInfo | None = None) -> _Step:
    """Switch an agent run to the one-shot path (once) after an orchestration error or a
    planner failure (``error``: the model call's failure, typed); the outcome says why."""
    if state.phase is Phase.DONE:
        return state, []
    reason = reason.strip() or "the agent loop failed for an unknown reason"
    out: list[Command] = [RunFallback(
        from_mode=state.mode, to_mode="rag", error=error,
        reason=f"{reason}; answering by one-shot retrieval (search the question, rerank, "
               "write) instead")]
    if state.fell_back or state.mode == "rag":
        if state.evidence:
            return _select(replace(state, queue=(), in_flight=()), "finalize", out)
        return _done(state, Finish("failed", reason=f"orchestration failed twice: {reason}"), out)
    state = replace(state, mode="rag", fell_back=True, queue=(), in_flight=(), after_calls=None,
                    fallback_reason=reason)
    if state.evidence:
        return _select(state, "answer", out)
    state = replace(state, queue=(ToolCall(id="rag-fallback", tool="search",
                                           args={"query": state.question}),))
    return _dispatch(state, out)


# --- planning --------------------------------------------------------------------------------


def _request_plan(state: RunState, out: list[Command]) -> _Step:
    b = state.budget
    if state.steps >= b.max_steps:
        return _exhausted(state, "steps", out, announce=True)
    if state.tokens >= b.max_tokens:
        return _exhausted(state, "tokens", out, announce=True)
    if state.read_tokens >= b.max_read_tokens:
        return _exhausted(state, "read_tokens", out, announce=True)
    if state.elapsed_s >= b.wall_s:
        return _exhausted(state, "wall_clock", out, announce=True)
    new_points: tuple[KeyPoint, ...] = ()
    if b.compress_context:
        fresh = [c for i, c in state.evidence.items() if i not in state.pointed]
        compress = state.judgement.points
        new_points = compress(state.question, fresh, state.round) if compress else ()
        state = replace(state, points=(*state.points, *new_points),
                        pointed=state.pointed | {c.id for c in fresh})
    before = state.round_known_before
    state = replace(state, steps=state.steps + 1, round=state.round + 1, phase=Phase.PLANNING,
                    round_returned=frozenset(), round_known_before=frozenset(state.evidence),
                    after_calls=None, round_recalls=0)
    can_extend = _near_end(state) and not state.extended and state.mode == "agent"
    covered, newly, missing = _coverage(state, before) if can_extend else ((), (), ())
    out.append(PlanRequested(
        round=state.round, feedback=state.feedback, queries=state.queries,
        remaining_steps=b.max_steps - state.steps,
        remaining_tool_calls=b.max_tool_calls - state.tool_calls,
        remaining_s=round(state.remaining_s, 3),
        remaining_pages=b.max_pages - len(state.pages),
        remaining_tokens=max(0, b.max_tokens - state.tokens),
        compressed=b.compress_context, points=new_points,
        expanded=tuple(i for i in state.evidence if i in state.expanded),
        can_extend=can_extend, covered=covered, newly_covered=newly, missing=missing,
    ))
    out.append(_tick(state))
    return replace(state, feedback=()), out


def _near_end(state: RunState) -> bool:
    """The last model step, or no more than one round of tool calls left."""
    b = state.budget
    return (b.max_steps - state.steps <= 1
            or b.max_tool_calls - state.tool_calls <= b.max_parallel_calls)


def _coverage(state: RunState, before: frozenset[str]
              ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The question's parts the held evidence covers, those the last round newly covered,
    and those still missing, by the run's answerability judge (typed parts, no prose)."""
    judge = state.judgement.sufficiency
    if judge is None or not state.evidence:
        return (), (), ()
    held = tuple(state.evidence.values())
    now = judge(state.question, held, ())
    earlier = tuple(c for c in held if c.id in before)
    was = judge(state.question, earlier, ()).covered if earlier else ()
    newly = tuple(p for p in now.covered if p not in was)
    return now.covered, newly, now.missing


def _on_planning(state: RunState, event: Event, out: list[Command]) -> _Step:
    if isinstance(event, PlanDecided):
        state = replace(state, tokens=state.tokens + max(0, event.tokens),
                        context_tokens=max(0, event.context_tokens))
        if state.tokens >= state.budget.max_tokens:
            return _exhausted(state, "tokens", out, announce=True)
        calls = event.calls
        if event.extend:
            state = _extend(state, event, out)
        if event.action in ("answer", "finalize") or not calls:
            return _select(state, "answer", out)
        state = replace(state, queue=tuple(calls), phase=Phase.ACTING)
        return _dispatch(state, out)
    if isinstance(event, ActorFailed) and event.request_type == "plan.requested":
        return fall_back_to_rag(state, event.error.describe(), event.error)
    return state, out


EXTENSION_CONTEXT_SHARE = 0.7  # an extension needs the planner's context under this share


def _extend(state: RunState, decided: PlanDecided, out: list[Command]) -> RunState:
    """The planner asked for one more round: grant it once, or refuse with a typed reason.

    Granted: one more model step and one more round of tool calls
    (``max_parallel_calls``). Wall time is not extended: the run's deadline is
    the runtime's timer, which does not move.
    """
    b = state.budget
    out.append(BudgetExtensionRequested(
        steps=state.steps, tool_calls=state.tool_calls, max_steps=b.max_steps,
        max_tool_calls=b.max_tool_calls, context_tokens=state.context_tokens,
        context_window_tokens=b.context_window_tokens))
    limit = EXTENSION_CONTEXT_SHARE * b.context_window_tokens
    refusal: tuple[ExtensionRefusal, str] | None = None
    if state.extended:
        refusal = ("already_extended", "a run is extended at most once")
    elif decided.action in ("answer", "finalize") or not decided.calls:
        refusal = ("no_calls", "the plan makes no tool call to extend the budget for")
    elif state.context_tokens >= limit:
        refusal = ("context_full", f"the planner's context ({state.context_tokens} tokens) is at "
                   f"or over {EXTENSION_CONTEXT_SHARE:.0%} of its window "
                   f"({b.context_window_tokens})")
    elif not _near_end(state):
        refusal = ("not_near_end", "more than one round of budget is left")
    if refusal is not None:
        out.append(BudgetExtensionRefused(reason=refusal[0], detail=refusal[1]))
        return state
    grown = replace(b, max_steps=b.max_steps + 1,
                    max_tool_calls=b.max_tool_calls + b.max_parallel_calls)
    out.append(BudgetExtended(added_steps=1, added_tool_calls=b.max_parallel_calls, added_s=0.0,
                              max_steps=grown.max_steps, max_tool_calls=grown.max_tool_calls,
                              deadline_s=grown.wall_s))
    state = replace(state, budget=grown, extended=True)
    out.append(_tick(state))
    return state


# --- acting ------------------------------------------------------------------------------------


def _refuse(state: RunState, call: ToolCall, reason: str, out: list[Command],
            kind: FeedbackKind = "rejected") -> RunState:
    out.append(ToolRejected(call_id=call.id, tool=call.tool, reason=reason))
    query = str(call.args.get("query", ""))
    if kind in ("duplicate", "read_limit"):
        out.append(LoopDetected(kind="duplicate" if kind == "duplicate" else "read_limit",
                                detail=reason, query=query))
    return _note(state, Feedback(kind=kind, detail=f"{call.tool} {call.id} refused: {reason}",
                                 call_id=call.id, tool=call.tool, query=query,
                                 url=str(call.args.get("url", ""))))


def _dispatch(state: RunState, out: list[Command]) -> _Step:
    """Start queued calls that pass the checks, up to ``max_parallel_calls`` in flight.

    When nothing is in flight and nothing is queued, the round ends (or the run
    answers, if the plan said so, or finalizes, if the tool budget ran out).
    """
    b = state.budget
    while state.queue and len(state.in_flight) < b.max_parallel_calls:
        call, rest = state.queue[0], state.queue[1:]
        state = replace(state, queue=rest)
        if call.tool == "answer":
            state = replace(state, queue=(), after_calls="answer")
            break
        if call.tool == "recall":  # answered from the registry: no I/O, no tool-call budget
            state = _recall(state, call, out)
            continue
        if state.tool_calls >= b.max_tool_calls:
            state = replace(state, queue=(), after_calls="tool_calls")
            break
        if state.elapsed_s >= b.wall_s:
            return _exhausted(state, "wall_clock", out, announce=True)
        if call.id in state.seen_call_ids:
            state = _refuse(state, call, "duplicate call id", out)
            continue
        call, cleaned = clean_call(call)
        problem = _check_args(state, call)
        if problem is not None:
            state = _refuse(state, call, problem, out)
            continue
        call = _resolved(state, call)
        signature = call_signature(call)
        if signature in state.seen_signatures or (
                call.tool == "scrape" and url_key(str(call.args["url"])) in state.pages):
            state = _refuse(state, call, "the same call was already made in this run", out,
                            kind="duplicate")
            continue
        if (call.tool == "read" and state.evidence
                and state.consecutive_reads >= b.max_consecutive_reads):
            state = _refuse(state, call, f"at most {b.max_consecutive_reads} reads in a row; "
                            "search or answer instead", out, kind="read_limit")
            continue
        if call.tool == "scrape" and len(state.pages) >= b.max_pages:
            state = _refuse(state, call, f"this run may open at most {b.max_pages} pages", out,
                            kind="page_limit")
            continue
        state = replace(
            state,
            tool_calls=state.tool_calls + 1,
            consecutive_reads=state.consecutive_reads + 1 if call.tool == "read" else 0,
            seen_call_ids=state.seen_call_ids | {call.id},
            seen_signatures=state.seen_signatures | {signature},
            pages=((*state.pages, url_key(str(call.args["url"]))) if call.tool == "scrape"
                   else state.pages),
            phase=Phase.ACTING,
            in_flight=(*state.in_flight, InFlight(call=call)),
        )
        out.append(_request_for(state, call, cleaned))
        out.append(_tick(state))
    if state.in_flight:
        return replace(state, phase=Phase.ACTING), out
    if state.after_calls == "answer":
        return _select(state, "answer", out)
    if state.after_calls == "tool_calls":
        return _exhausted(state, "tool_calls", out, announce=True)
    return _end_round(state, out)


def _recall(state: RunState, call: ToolCall, out: list[Command]) -> RunState:
    """A key point's chunks back in full for the planner's next view, or a typed refusal."""
    if call.id in state.seen_call_ids:
        return _refuse(state, call, "duplicate call id", out)
    point_id = call.args.get("point")
    point = next((p for p in state.points if p.id == point_id), None)
    if point is None:
        return _refuse(state, call, f"unknown point {point_id!r}: recall only the id of a key "
                       "point shown in this run", out)
    chunk_ids = tuple(i for i in point.chunk_ids if i in state.evidence)
    out.append(PointRecalled(call_id=call.id, point=point.id, chunk_ids=chunk_ids))
    return replace(state, expanded=state.expanded | set(chunk_ids),
                   seen_call_ids=state.seen_call_ids | {call.id},
                   round_recalls=state.round_recalls + 1)


def _check_args(state: RunState, call: ToolCall) -> str | None:
    args = call.args
    if call.tool == "search":
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            return "search needs a non-empty string `query`"
        k = args.get("k", 10)
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 50:
            return "search `k` must be an integer from 1 to 50"
        filters = args.get("filters")
        if filters is not None:
            if not isinstance(filters, dict):
                return "search `filters` must be an object"
            try:
                SearchFilters.model_validate(filters)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first.get("loc", ()))
                return f"search `filters` {where}: {first.get('msg', 'invalid')}"
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
        result_id, url = args.get("result_id"), args.get("url")
        if result_id is not None:
            chunk = state.evidence.get(result_id) if isinstance(result_id, str) else None
            if chunk is None or not chunk.url.startswith(("http://", "https://")):
                return (f"unknown result id {result_id!r}: open only web results this run "
                        "has seen")
        elif not isinstance(url, str) or not url.startswith(("http://", "https://")):
            return "scrape needs an http(s) `url` or a `result_id`"
        elif url_key(url) not in state.seen_urls and url not in state.question:
            return (f"{url} is not a result this run has seen: open only URLs of search "
                    "results (or named in the question)")
        target = url if isinstance(url, str) and result_id is None else (
            state.evidence[str(result_id)].url)
        if _is_spam(state, target):
            return f"{target} was judged spam in this run: open another result"
    return None


def _resolved(state: RunState, call: ToolCall) -> ToolCall:
    """A checked call in its canonical form: an opened result by its URL."""
    result_id = call.args.get("result_id")
    if call.tool == "scrape" and isinstance(result_id, str):
        return call.model_copy(update={"args": {"url": state.evidence[result_id].url}})
    return call


def _request_for(state: RunState, call: ToolCall, cleaned: tuple[str, ...] = ()) -> Event:
    args = call.args
    if call.tool == "search":
        k = args.get("k", 10)
        filters = args.get("filters")
        return SearchRequested(call_id=call.id, query=str(args["query"]).strip(),
                               k=k if isinstance(k, int) else 10, collections=state.collections,
                               filters=(SearchFilters.model_validate(filters)
                                        if isinstance(filters, dict) else SearchFilters()),
                               cleaned=cleaned)
    if call.tool == "read":
        direction = args.get("direction", "next")
        return ReadRequested(call_id=call.id, chunk_id=str(args["chunk_id"]),
                             direction=direction if direction in ("prev", "both") else "next")
    return ScrapeRequested(call_id=call.id, url=str(args["url"]), cleaned=cleaned)


def _flight(state: RunState, call_id: str) -> int | None:
    """Where the call with this id sits among the calls in flight (``None``: not ours)."""
    for i, flight in enumerate(state.in_flight):
        if flight.call.id == call_id:
            return i
    return None


def _with_flight(state: RunState, i: int, flight: InFlight) -> RunState:
    return replace(state, in_flight=(*state.in_flight[:i], flight, *state.in_flight[i + 1:]))


def _on_acting(state: RunState, event: Event, out: list[Command]) -> _Step:
    call_id = getattr(event, "call_id", None)
    i = _flight(state, call_id) if isinstance(call_id, str) else None
    if i is None:
        return state, out  # a late reply, a duplicate, or not a tool fact
    flight = state.in_flight[i]
    tool, query = flight.call.tool, flight.query
    found = flight.found

    def note(kind: FeedbackKind, detail: str, **fields: str) -> Feedback:
        return Feedback(kind=kind, detail=detail, tool=tool, call_id=flight.call.id, **fields)

    def finish(*, feedback: tuple[Feedback, ...] = (), chunks: tuple[EvidenceChunk, ...] = (),
               events: tuple[Event, ...] | None = None, failure: str = "",
               spam: tuple[frozenset[str], frozenset[str]] | None = None) -> _Step:
        """The call is done: its result is what it found, plus these (feedback appended)."""
        done = replace(found, feedback=(*found.feedback, *feedback), chunks=chunks,
                       events=found.events if events is None else events, failure=failure)
        if spam is not None:
            done = replace(done, spam_urls=spam[0], spam_hosts=spam[1])
        return _settle(_with_flight(state, i, replace(flight, stage="done", result=done)), out)

    def rerank(candidates: tuple[EvidenceChunk, ...], against: str) -> _Step:
        out.append(RerankRequested(call_id=flight.call.id, query=against,
                                   candidates=candidates, k=state.budget.per_search_k))
        return _with_flight(state, i, replace(flight, stage="rerank", candidates=candidates,
                                              found=found)), out

    match event:
        case SearchCompleted() if flight.stage == "tool":
            hits, flags, notes = _soft_failures(state, flight, event.hits)
            spam_urls, spam_hosts = _spam_of(flags)
            candidates = _dedup(chunk_from_hit(h) for h in hits)
            found = replace(found, events=flags, feedback=notes, hits=len(candidates),
                            urls=frozenset(url_key(h.url) for h in hits if h.url),
                            spam_urls=spam_urls, spam_hosts=spam_hosts)
            if not candidates:
                detail = (f"search {query!r} returned nothing; rewrite it "
                          "(fewer or different words), do not repeat it")
                return finish(events=(*flags, LoopDetected(kind="empty", detail=detail,
                                                           query=query)),
                              feedback=(note("empty", detail, query=query),))
            if event.unapplied:
                found = replace(found, feedback=(*notes, note(
                    "unapplied_filter", "filters not applied: " + "; ".join(event.unapplied),
                    query=query)))
            return rerank(candidates, query or state.question)
        case PageScraped() if flight.stage == "tool":
            candidates = _dedup(event.chunks)
            flags, notes = _page_spam(state, flight, event, candidates)
            if flags:  # a content farm behind a plausible snippet: nothing of it is used
                return finish(events=flags, feedback=notes, spam=_spam_of(flags))
            if not candidates:
                return finish(feedback=(note("no_text", f"page {event.url} had no readable text",
                                             url=event.url),))
            found = replace(found, hits=len(candidates))
            return rerank(candidates, state.question)
        case ReadCompleted() if flight.stage == "tool":
            empty = () if event.chunks else (
                note("empty", f"nothing more to read around {event.chunk_id}"),)
            return finish(chunks=_dedup(event.chunks), feedback=empty)
        case RerankCompleted() if flight.stage == "rerank":
            below = () if event.chunks else (note(
                "below_floor", f"nothing relevant for {query or 'the page'!r} "
                f"({event.below_floor} results under the relevance floor)",
                query=query, url=str(flight.call.args.get("url", ""))),)
            return finish(chunks=event.chunks, feedback=below)
        case RerankFailed() if flight.stage == "rerank":
            # Degrade, do not lose the results: keep the best candidates by their own score.
            best = sorted(flight.candidates, key=lambda c: -(c.score or 0.0))
            failed = Feedback(kind="failed", tool="rerank", call_id=flight.call.id, query=query,
                              detail=f"reranker failed ({event.error.kind}); kept results "
                                     "unranked")
            return finish(chunks=tuple(best[: state.budget.per_search_k]), feedback=(failed,))
        case SearchFailed() | ReadFailed() | ScrapeFailed() if flight.stage == "tool":
            failure = f"{tool} {flight.call.id} failed: {event.error.kind}: {event.error.message}"
            return finish(failure=failure, feedback=(note(
                "failed", failure, query=query, url=str(flight.call.args.get("url", ""))),))
    return state, out


def _soft_failures(state: RunState, flight: InFlight, hits: Sequence[Hit]
                   ) -> tuple[list[Hit], tuple[Event, ...], tuple[Feedback, ...]]:
    """Web results the run will not use as they came, as facts and planner feedback.

    Spam and content farms (and copies of one text on many hosts) are dropped;
    results all older than the period a time-sensitive question asks about
    are kept but flagged, so the planner can search again with a date filter.
    The local corpus is the user's own: only web results are judged as spam.
    """
    call_id, query = flight.call.id, flight.query
    web = [h for h in hits if not h.source.startswith("local:")]
    flags: list[Event] = []
    notes: list[Feedback] = []
    kept = list(hits)
    spam_check, stale_check = state.judgement.spam, state.judgement.stale
    if web and spam_check is not None:
        weigh = state.credibility.for_url if state.credibility is not None else None
        verdict = spam_check(state.question, web, credibility=weigh)
        if verdict.flagged:
            kept = [h for h in hits if h.url not in verdict.dropped]
            reason = verdict.reason or (f"{len(verdict.mirrors)} copies of other results on "
                                        "other hosts")
            flags.append(ResultsFlagged(call_id=call_id, kind="spam", hosts=verdict.hosts,
                                        urls=(*verdict.urls, *verdict.mirror_urls),
                                        reason=reason))
            if verdict.spam:
                notes.append(Feedback(kind="spam", detail=reason, tool="search",
                                      call_id=call_id, query=query, hosts=verdict.hosts))
    stale = (stale_check(state.question, kept, _dt.date.fromisoformat(state.today))
             if stale_check is not None else None)
    if stale is not None:
        flags.append(ResultsFlagged(call_id=call_id, kind="stale", urls=stale.urls,
                                    reason=stale.reason))
        notes.append(Feedback(kind="stale", detail=stale.reason, tool="search",
                              call_id=call_id, query=query))
    return kept, tuple(flags), tuple(notes)


def _page_spam(state: RunState, flight: InFlight, page: PageScraped,
               chunks: Sequence[EvidenceChunk]) -> tuple[tuple[Event, ...], tuple[Feedback, ...]]:
    """An opened page judged whole: a snippet is too short to show most spam."""
    spam_check = state.judgement.spam
    if not chunks or spam_check is None:
        return (), ()
    text = " ".join(c.text for c in sorted(chunks, key=lambda c: c.position))
    as_hit = Hit(url=page.url, title=page.title, content=text, source="scraper")
    verdict = spam_check(state.question, [as_hit])
    if not verdict.spam:
        return (), ()
    host = verdict.spam[0].host
    event = ResultsFlagged(call_id=flight.call.id, kind="spam", urls=(page.url,),
                           hosts=(host,) if host else (), reason=verdict.reason)
    note = Feedback(kind="spam", detail=verdict.reason, tool="scrape", call_id=flight.call.id,
                    url=page.url, hosts=event.hosts)
    return (event,), (note,)


def _spam_of(flags: Sequence[Event]) -> tuple[frozenset[str], frozenset[str]]:
    """The spam URLs and hosts among flagged results (stale results are kept)."""
    spam = [f for f in flags if isinstance(f, ResultsFlagged) and f.kind == "spam"]
    return (frozenset(url_key(u) for f in spam for u in f.urls),
            frozenset(h for f in spam for h in f.hosts))


def _settle(state: RunState, out: list[Command]) -> _Step:
    """Apply finished calls from the front of the dispatch order, then dispatch more."""
    while state.in_flight and (result := state.in_flight[0].result) is not None:
        flight, rest = state.in_flight[0], state.in_flight[1:]
        state = _apply(replace(state, in_flight=rest), flight, result, out)
    return _dispatch(state, out)


def _apply(state: RunState, flight: InFlight, result: CallResult,
           out: list[Command]) -> RunState:
    out.extend(result.events)
    before = len(state.evidence)
    state = _register(state, result.chunks, out)
    state = replace(state, round_returned=state.round_returned | {c.id for c in result.chunks},
                    seen_urls=state.seen_urls | result.urls,
                    spam_urls=state.spam_urls | result.spam_urls,
                    spam_hosts=state.spam_hosts | result.spam_hosts,
                    feedback=(*state.feedback, *result.feedback))
    if result.failure:
        state = replace(state, failed_calls=state.failed_calls + 1, last_failure=result.failure)
    if flight.call.tool == "search":
        state = replace(state, queries=(*state.queries, QueryStat(
            query=flight.query, hits=result.hits, new_evidence=len(state.evidence) - before,
            chunk_ids=tuple(c.id for c in result.chunks))))
    return state


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
    read = sum(read_tokens(c) for c in new)  # every registered chunk is shown to the planner
    return replace(state, evidence=evidence, read_tokens=state.read_tokens + read)


def read_tokens(chunk: EvidenceChunk) -> int:
    """What showing ``chunk`` to a model costs, estimated: a CJK character a token, else
    4 characters a token."""
    text = chunk.title + chunk.text
    cjk = len(CJK.findall(text))
    return cjk + (len(text) - cjk + 3) // 4


def _note(state: RunState, feedback: Feedback) -> RunState:
    return replace(state, feedback=(*state.feedback, feedback))


def round_overlap(returned: AbstractSet[str], known_before: AbstractSet[str]) -> float:
    """The share of a round's evidence the run already held; a round that returned nothing: 1.0."""
    return len(returned & known_before) / len(returned) if returned else 1.0


def saturated(rounds: Sequence[AbstractSet[str]], threshold: float = 0.8, *,
              consecutive: int = 1) -> bool:
    """The run's saturation rule over a log of rounds (``rounds[i]``: the ids round ``i`` returned).

    A round is saturated when :func:`round_overlap` with everything earlier rounds
    returned is at least ``threshold`` (the budget's ``saturation_overlap``); the
    search is saturated once the last ``consecutive`` rounds (``saturation_rounds``)
    all were, and some evidence is held. The machine applies the same rule round
    by round in ``_end_round`` (there, a round of recalls only leaves the count as it was).
    """
    if consecutive < 1:
        raise ValueError("consecutive must be >= 1")
    count = 0
    held: set[str] = set()
    for ids in rounds:
        count = count + 1 if round_overlap(ids, held) >= threshold else 0
        held |= ids
    return count >= consecutive and bool(held)


def _end_round(state: RunState, out: list[Command]) -> _Step:
    state = replace(state, in_flight=(), after_calls=None)
    if state.mode == "rag":
        return _select(state, "answer", out)
    returned = state.round_returned
    overlap = round_overlap(returned, state.round_known_before)
    count = state.saturated_rounds + 1 if overlap >= state.budget.saturation_overlap else 0
    if not returned and state.round_recalls:
        count = state.saturated_rounds  # a round of recalls only searched nothing
    state = replace(state, saturated_rounds=count)
    if count >= state.budget.saturation_rounds and state.evidence:
        out.append(LoopDetected(kind="saturation", detail=(
            f"{count} rounds in a row brought mostly evidence already held "
            f"(overlap {overlap:.0%}); answering")))
        return _select(state, "answer", out)
    return _request_plan(state, out)


# --- budget ----------------------------------------------------------------------------------


def _exhausted(state: RunState,
               resource: Literal["steps", "tool_calls", "tokens", "read_tokens", "wall_clock"],
               out: list[Command], *, announce: bool) -> _Step:
    if state.phase in (Phase.SELECTING, Phase.CHOOSING, Phase.JUDGING, Phase.WRITING,
                       Phase.VERIFYING):
        return replace(state, exhausted=state.exhausted or resource), out  # already answering
    b = state.budget
    used, limit = {
        "steps": (state.steps, b.max_steps),
        "tool_calls": (state.tool_calls, b.max_tool_calls),
        "tokens": (state.tokens, b.max_tokens),
        "read_tokens": (state.read_tokens, b.max_read_tokens),
        "wall_clock": (state.elapsed_s, b.wall_s),
    }[resource]
    if announce:
        out.append(BudgetExhausted(resource=resource, used=float(used), limit=float(limit)))
    state = replace(state, exhausted=resource, queue=(), in_flight=(), after_calls=None)
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
               "was found") if state.exhausted else (
            "没有找到相关内容" if text_language(state.question) == "zh" else
            "nothing relevant was found")
        return _done(state, Finish("no_evidence", reason=_with_notes(state, why)), out)
    if state.exhausted and mode == "answer":
        mode = "finalize"
    state = replace(state, phase=Phase.SELECTING, write_mode=mode, queue=(), in_flight=(),
                    after_calls=None)
    k = state.budget.shortlist if _selects(state) else state.budget.final_evidence
    out.append(RerankRequested(call_id=FINAL_RERANK_ID, query=state.question,
                               candidates=_candidates(state), k=k))
    return state, out


def _selects(state: RunState) -> bool:
    return state.selects and state.mode == "agent"


def _candidates(state: RunState) -> tuple[EvidenceChunk, ...]:
    """The evidence the final rerank weighs.

    Left out: a snippet whose page was opened (the page's text stands for it),
    and anything judged spam, or from a host that served only spam.
    """
    opened = {url_key(c.url) for c in state.evidence.values() if c.url and not c.snippet}
    opened &= set(state.pages)
    return tuple(c for c in state.evidence.values()
                 if not (c.snippet and url_key(c.url) in opened) and not _is_spam(state, c.url))


def _is_spam(state: RunState, url: str) -> bool:
    if not url or not (state.spam_urls or state.spam_hosts):
        return False
    return url_key(url) in state.spam_urls or url_host(url) in state.spam_hosts


def _on_selecting(state: RunState, event: Event,
                  out: list[Command]) -> _Step:
    k = state.budget.final_evidence
    if isinstance(event, RerankCompleted) and event.call_id == FINAL_RERANK_ID:
        ranked = tuple(c.id for c in event.chunks if c.id in state.evidence)
        if event.similarity:
            state = replace(state, similarity=QuestionSimilarity(event.embedder,
                                                                 dict(event.similarity)))
        if not ranked and state.model_judges:
            # The floor is an offline rule (lexical and embedding scores, weak across
            # languages): where a model judges sufficiency it decides, not the floor.
            best = sorted(_candidates(state), key=lambda c: -(c.score or 0.0))
            return _judge(state, tuple(c.id for c in best[:k]), out)
        if not ranked:
            return _done(state, Finish("no_evidence", reason=(
                "nothing relevant was found: every result scored under the relevance floor")), out)
        if _selects(state):
            # The floor is the question's: a second hop that shares few of its words
            # falls under it, though its own search kept it; the selector may take it.
            kept = set(ranked)
            left_out = tuple(c.id for c in _candidates(state) if c.id not in kept)
            out.append(SelectionRequested(candidate_ids=ranked, k=k, left_out=left_out,
                                          queries=tuple(q.query for q in state.queries)))
            return replace(state, phase=Phase.CHOOSING, shortlist=ranked,
                           left_out=left_out), out
        return _judge(state, ranked[:k], out)
    if isinstance(event, RerankFailed) and event.call_id == FINAL_RERANK_ID:
        best = sorted(_candidates(state), key=lambda c: -(c.score or 0.0))
        return _judge(state, tuple(c.id for c in best[:k]), out)
    return state, out


def _on_choosing(state: RunState, event: Event, out: list[Command]) -> _Step:
    k = state.budget.final_evidence
    if isinstance(event, EvidenceSelected):
        allowed = {*state.shortlist, *state.left_out}
        chosen = tuple(dict.fromkeys(i for i in event.ids if i in allowed))[:k]
        return _judge(state, chosen or state.shortlist[:k], out)
    if isinstance(event, ActorFailed) and event.request_type == "selection.requested":
        return _judge(state, state.shortlist[:k], out)  # degrade to the rerank's order
    return state, out


def _judge(state: RunState, ids: tuple[str, ...], out: list[Command]) -> _Step:
    """Judge whether the chosen evidence answers the question, then act on the verdict.

    With a model judge the offline verdict is only its hint: the request goes out and
    the model's ``answerability.judged`` decides (:func:`_on_judging`).
    """
    judge = state.judgement.sufficiency
    hint = None
    if judge is not None:
        chosen, held = [state.evidence[i] for i in ids], tuple(state.evidence.values())
        # ``similarity`` only when the final rerank measured it (the protocol's keyword)
        hint = (judge(state.question, chosen, held) if state.similarity is None else
                judge(state.question, chosen, held, similarity=state.similarity))
    if state.model_judges:
        out.append(AnswerabilityRequested(
            evidence_ids=ids, hint_verdict=hint.verdict if hint is not None else "",
            hint_missing=hint.missing if hint is not None else (),
            other_ids=_others(state, ids)))
        return replace(state, phase=Phase.JUDGING, selected=ids, hint=hint), out
    if hint is None:
        return _write(state, ids, out)
    return _on_verdict(state, ids, hint, out, announce=True)


def _on_judging(state: RunState, event: Event, out: list[Command]) -> _Step:
    ids = state.selected
    if isinstance(event, AnswerabilityJudged) and event.by == "model":
        judged = Answerability(verdict=event.verdict, answer_type=event.answer_type,
                               covered=event.covered, missing=event.missing,
                               reason=event.reason, searches=event.searches,
                               extra_ids=event.added)
        conflicts = tuple(_weighed(state, c) for c in event.conflicts)
        return _on_verdict(replace(state, model_conflicts=conflicts), ids, judged, out,
                           announce=False)
    if isinstance(event, ActorFailed) and event.request_type == "answerability.requested":
        # The model could not judge: the offline rules stand in, and the stream says so.
        why = event.error.describe()
        hint = state.hint
        if hint is None:
            out.append(AnswerabilityJudged(
                verdict="answerable", by="offline", fallback=event.error,
                reason=f"not judged ({why}); the writer decides from the evidence"))
            return _write(replace(state, notes=(*state.notes, f"sufficiency not judged: {why}")),
                          ids, out)
        state = replace(state, notes=(*state.notes, f"sufficiency judged offline: {why}"))
        return _on_verdict(state, ids, hint, out, announce=True, fallback=event.error)
    return state, out


OTHERS_SHOWN = 8  # held passages outside the writer's pick a model judge may add from


def _others(state: RunState, ids: tuple[str, ...]) -> tuple[str, ...]:
    """Held passages outside the writer's pick, best first: the rerank's shortlist, then
    what it left out, then the rest by score (spam never)."""
    chosen = set(ids)
    ranked = [*state.shortlist, *state.left_out,
              *(c.id for c in sorted(_candidates(state), key=lambda c: -(c.score or 0.0)))]
    allowed = {c.id for c in _candidates(state)}
    out = [i for i in dict.fromkeys(ranked) if i not in chosen and i in allowed]
    return tuple(out[:OTHERS_SHOWN])


def _weighed(state: RunState, conflict: Conflict) -> Conflict:
    """A model's conflict with each side's credibility, the most credible side preferred."""
    cred = state.credibility
    sides: list[ConflictSide] = []
    for side in conflict.sides:
        chunk = state.evidence.get(side.chunk_id)
        if chunk is None:
            continue
        weight = cred.weight(chunk) if cred is not None else side.credibility
        sides.append(side.model_copy(update={"credibility": weight, "title": chunk.title}))
    best = max(range(len(sides)), key=lambda n: sides[n].credibility) if sides else None
    tied = best is not None and sum(s.credibility == sides[best].credibility for s in sides) > 1
    return Conflict(subject=conflict.subject, attribute=conflict.attribute, sides=tuple(sides),
                    preferred=None if tied else best)


def _on_verdict(state: RunState, ids: tuple[str, ...], judged: Answerability,
                out: list[Command], *, announce: bool, fallback: ErrorInfo | None = None
                ) -> _Step:
    """Act on a sufficiency verdict: search for the missing part, write, or abstain."""
    extra = tuple(i for i in judged.extra_ids if i in state.evidence and i not in ids)
    ids = ids + extra[: max(0, state.budget.final_evidence + 2 - len(ids))]
    searches = _gap_searches(state, judged) if judged.verdict != "answerable" else ()
    if announce:
        out.append(AnswerabilityJudged(
            verdict=judged.verdict, answer_type=judged.answer_type, covered=judged.covered,
            missing=judged.missing, reason=judged.reason, searches=searches,
            fallback=fallback))
    state = replace(state, judged=judged)
    if searches:
        calls = tuple(ToolCall(id=f"gap{state.gap_rounds + 1}-{i}", tool="search",
                               args={"query": q}) for i, q in enumerate(searches, 1))
        state = replace(state, gap_rounds=state.gap_rounds + 1, queue=calls, phase=Phase.ACTING,
                        round_returned=frozenset(), round_known_before=frozenset(state.evidence),
                        # the points behind the chosen evidence come back in full
                        expanded=state.expanded | _point_chunks(state.points, ids))
        return _dispatch(state, out)
    if judged.verdict == "unanswerable":
        ran_out = (f"; the {state.exhausted.replace('_', ' ')} budget ran out"
                   if state.exhausted else "")
        why = judged.reason or "the evidence found does not answer the question"
        return _done(state, Finish("no_evidence", reason=_with_notes(state, f"{why}{ran_out}")),
                     out)
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
    mode: WriteMode = "repair" if errors else state.write_mode
    conflicts = state.conflicts
    check = state.judgement.conflicts
    if not errors and state.model_conflicts is not None:  # the model judge listed them
        conflicts = tuple(c for c in state.model_conflicts if len(c.sides) >= 2)
        out.extend(ConflictDetected.of(c) for c in conflicts)
    elif not errors and check is not None:  # disagreements among the writer's evidence, once
        events, conflicts = check(state.question, state.evidence, ids, state.credibility)
        out.extend(events)
    out.append(AnswerRequested(mode=mode, attempt=attempt, evidence_ids=ids, errors=errors,
                               conflicts=conflicts))
    return replace(state, phase=Phase.WRITING, write_attempt=attempt, selected=ids,
                   conflicts=conflicts), out


def _on_writing(state: RunState, event: Event, out: list[Command]) -> _Step:
    if isinstance(event, AnswerDrafted) and event.attempt == state.write_attempt:
        state = replace(state, tokens=state.tokens + max(0, event.tokens), phase=Phase.VERIFYING)
        if event.fallback is not None:
            state = _noted(state, "written by the offline extractive writer: "
                           + event.fallback.describe())
        return state, out
    if isinstance(event, ActorFailed) and event.request_type == "answer.requested":
        return _after_bad_draft(state, (ClaimError(index=-1, source_id="", kind="writer_failed",
                                                   reason=event.error.describe()),), out)
    return state, out


def _noted(state: RunState, note: str) -> RunState:
    """Remember once what stood in for a failed model (the outcome's reason says it)."""
    return state if note in state.notes else replace(state, notes=(*state.notes, note))


def _on_verifying(state: RunState, event: Event,
                  out: list[Command]) -> _Step:
    if isinstance(event, AnswerVerified | VerifyFailed) and event.judge_fallback is not None:
        state = _noted(state, "claims checked by the offline support rules: "
                       + event.judge_fallback.describe())
    if isinstance(event, AnswerVerified) and event.attempt == state.write_attempt:
        return _done(state, _answered(state, event), out)
    if isinstance(event, VerifyFailed) and event.attempt == state.write_attempt:
        return _after_bad_draft(state, event.errors, out, kept=event.kept)
    if isinstance(event, ActorFailed) and event.request_type == "answer.drafted":
        return _after_bad_draft(state, (ClaimError(index=-1, source_id="", kind="verifier_failed",
                                                   reason=event.error.describe()),), out)
    return state, out


def _answered(state: RunState, verified: AnswerVerified) -> Finish:
    """The terminal claim for a verified draft; limits and gaps are said in the text too."""
    # A deadline that passed while the answer was being chosen or written also
    # cut the search short: the answer is from the evidence gathered, and says so.
    finalized = state.write_mode == "finalize" or state.exhausted is not None
    notes: list[str] = []
    outcome: Outcome = "answered_from_evidence" if finalized else "answered"
    reason = ""
    if state.judged is not None and state.judged.verdict == "partial":
        outcome = "partial"
        notes.append(partial_note(state.judged, text_language(state.question)))
        reason = "partial answer: " + (state.judged.reason or "part of the question is not covered")
    if finalized:
        notes.append(limits_note(state.exhausted, text_language(state.question)))
        if state.exhausted:
            limit = (f"the {state.exhausted.replace('_', ' ')} budget ran out; answered from the "
                     "evidence gathered")
            reason = f"{reason}; {limit}" if reason else limit
    answer = "\n\n".join([verified.text, *notes]) if notes else verified.text
    return Finish(outcome, reason=_with_notes(state, reason), answer=answer,
                  claims=verified.claims)


def _with_notes(state: RunState, reason: str) -> str:
    """The outcome's reason plus what stood in for a failed model on the way."""
    said = [reason] if reason else []
    if state.fallback_reason:
        said.append(f"the agent loop fell back to one-shot retrieval: {state.fallback_reason}")
    return "; ".join([*said, *state.notes])


def _after_bad_draft(state: RunState, errors: tuple[ClaimError, ...],
                     out: list[Command], kept: tuple[Claim, ...] = ()) -> _Step:
    if state.write_attempt < 2:
        return _write(state, state.selected, out, errors=errors)
    reasons = "; ".join(e.reason for e in errors[:3])
    lost = next((e for e in errors if e.kind == "answer_dropped"), None)
    if lost is not None and kept:
        # The claim stating the answer failed twice: what was verified is shown, as partial.
        text = " ".join(f"{c.statement.strip()} [{n}]" for n, c in enumerate(kept, 1))
        note = ("部分回答：回答问题的那句陈述未能与其来源核对一致，此处只列出已核实的陈述。"
                if text_language(state.question) == "zh" else
                "Partial answer: the statement that answered the question could not be "
                "verified against its source; only the verified statements are shown.")
        return _done(state, Finish("partial", reason=_with_notes(state, (
            f"partial answer: the answer claim failed verification twice ({lost.reason})")),
            answer=f"{text}\n\n{note}", claims=kept), out)
    return _done(state, Finish("degraded", reason=_with_notes(state, (
        f"evidence was found but no answer passed verification twice ({reasons})"))), out)


def _point_chunks(points: Iterable[KeyPoint], chunk_ids: Iterable[str]) -> frozenset[str]:
    """Every chunk of the points that cite any of ``chunk_ids`` (what a citation reloads)."""
    wanted = set(chunk_ids)
    return frozenset(c for p in points if wanted.intersection(p.chunk_ids) for c in p.chunk_ids)
