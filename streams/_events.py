"""Every message of a run, as one immutable value class per event type.

Commands and facts are both events. Each class carries a ``type`` literal (the
discriminator the codecs dispatch on), the common envelope (``run_id``, ``seq``,
``ts``, ``actor``, ``cause``, ``v``) and its own payload. The stream stamps
``run_id``/``seq``/``ts`` when an event is published; whoever builds an event
fills only the payload (and ``actor``/``cause`` when it knows them).

A request (a command some actor answers) declares, as class attributes that never
go on the wire, the events that answer it, the actor that answers it and what it
asks for; :func:`reply_table` gathers them, the one request -> reply table that
the timeline, the traces, the metrics and the web page read.

Third parties add event types with :func:`register_event`; the codecs then
decode them like the built-in ones.
"""

from __future__ import annotations

import datetime as _dt
import enum
import functools
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

__all__ = [
    "EVENT_TYPES",
    "ActorFailed",
    "AnswerDelta",
    "AnswerDrafted",
    "AnswerRequested",
    "AnswerVerified",
    "AnswerabilityJudged",
    "AnswerabilityRequested",
    "BudgetExhausted",
    "BudgetExtended",
    "BudgetExtensionRefused",
    "BudgetExtensionRequested",
    "BudgetTick",
    "Claim",
    "ClaimError",
    "ClaimErrorKind",
    "Conflict",
    "ConflictDetected",
    "ConflictSide",
    "ErrorInfo",
    "Event",
    "EvidenceChunk",
    "EvidenceRegistered",
    "EvidenceSelected",
    "ExtensionRefusal",
    "Feedback",
    "FeedbackKind",
    "HandoffDecided",
    "HandoffRequested",
    "Hit",
    "KeyPoint",
    "LoopDetected",
    "ModelUsage",
    "Outcome",
    "PageScraped",
    "PlanDecided",
    "PlanRequested",
    "PointRecalled",
    "Priority",
    "ProviderHealth",
    "QueriesExpanded",
    "QueryRewritten",
    "QueryStat",
    "ReadCompleted",
    "ReadFailed",
    "ReadRequested",
    "RequestInfo",
    "RequestKind",
    "RerankCompleted",
    "RerankFailed",
    "RerankRequested",
    "ResultsFlagged",
    "RunCancelRequested",
    "RunFallback",
    "RunFinished",
    "RunResumed",
    "RunStarted",
    "RunUsage",
    "ScrapeFailed",
    "ScrapeRequested",
    "SearchCompleted",
    "SearchFailed",
    "SearchFilters",
    "SearchRequested",
    "SelectionRequested",
    "SubscriberDetached",
    "TaskLink",
    "ToolCall",
    "ToolRejected",
    "VerifyFailed",
    "WriteMode",
    "register_event",
    "reply_table",
    "request_info",
]


class Priority(enum.IntEnum):
    """How a bounded buffer may treat an event when a subscriber falls behind."""

    PROGRESS = 0  # may be coalesced or dropped (ticks, gauges)
    NORMAL = 1  # delivered in order; a subscriber that cannot keep up is detached
    ESSENTIAL = 2  # terminal, evidence and answer events: never dropped


Outcome = Literal[
    "answered",
    "answered_from_evidence",
    "partial",
    "no_evidence",
    "degraded",
    "cancelled",
    "failed",
    "interrupted",
    "handed_off",
]

RequestKind = Literal["model", "tool", "service", "check"]
"""What a request asks for: a model step (plan, write), a tool call the planner makes
(search, read, scrape), a service the run calls itself (rerank), or a check on the
run's own material (evidence selection, verification)."""

WriteMode = Literal["answer", "finalize", "repair"]
"""What a write is for: a first answer, the budget's last answer, or a repair of a failed one."""

_FROZEN = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class _Value(BaseModel):
    model_config = _FROZEN


class Event(BaseModel):
    """Base of every event: the envelope the stream stamps and routes by."""

    model_config = _FROZEN

    type: str
    v: int = 1
    run_id: str = ""
    seq: int = 0
    ts: float = 0.0
    actor: str = ""
    cause: int | None = None

    priority: ClassVar[Priority] = Priority.NORMAL

    # A request (a command some actor answers) declares who answers it and with what; the
    # timeline, the traces, the metrics and the web page read these (:func:`reply_table`).
    # Class attributes, not fields: nothing of this goes on the wire.
    replies: ClassVar[tuple[str, ...]] = ()
    """The event types that answer this request (their ``cause`` is its ``seq``); a reply
    named ``*.failed`` says it failed, and ``actor.failed`` may answer any request.
    Empty: this event is not a request."""
    handled_by: ClassVar[str] = ""
    """The actor that answers this request (its lane on the timeline)."""
    operation: ClassVar[str] = ""
    """What this request asks for, in a word or two (``"search"``, ``"select evidence"``):
    its span's and metric label's name."""
    request_kind: ClassVar[RequestKind] = "check"
    """Whether this request is a model step, a tool call, a service call or a check."""


# --- payload values ---------------------------------------------------------------


class ErrorInfo(_Value):
    """A failure as data: what kind, what happened, whether retrying can help.

    A model call's failure also says which ``role`` (planner, writer, judge...) and
    ``model`` failed, and what the server said: its HTTP ``status``, the
    ``retry_after_s`` it asked for, or the ``timeout_s`` the call ran out of.
    """

    kind: str
    message: str
    retryable: bool = False
    status: int | None = None
    retry_after_s: float | None = None
    timeout_s: float | None = None
    model: str = ""
    role: str = ""

    def describe(self) -> str:
        """One readable line for a user: never a bare exception name or an empty string."""
        who = " ".join(p for p in (self.role, f"model {self.model!r}" if self.model else "")
                       if p) or "call"
        if self.kind in ("TimeoutError", "ChatTimeout", "CancelledError") or (
                self.timeout_s is not None and self.status is None):
            after = f" after {round(self.timeout_s, 1):g} s" if self.timeout_s is not None else ""
            detail = "" if self.message in ("", self.kind) else f" ({self.message})"
            return f"{who} timed out{after}{detail}"
        parts = [f"{who} failed"]
        if self.status is not None:
            parts.append(f"HTTP {self.status}")
        if self.retry_after_s is not None:
            parts.append(f"the server asked to retry after {round(self.retry_after_s, 1):g} s")
        message = self.message if self.message and self.message != self.kind else ""
        parts.append(f"{self.kind}: {message}" if message else self.kind)
        return ": ".join(parts[:1]) + ": " + "; ".join(parts[1:])


class Hit(_Value):
    """One search result from a provider (web API or local corpus)."""

    url: str
    title: str = ""
    snippet: str = ""
    content: str | None = None
    source: str = ""
    published_at: str | None = None
    score: float | None = None
    doc_id: str | None = None
    chunk_id: str | None = None
    position: int = 0
    prev_id: str | None = None
    next_id: str | None = None


class EvidenceChunk(_Value):
    """A passage a tool returned in this run, citable by ``id``."""

    id: str
    text: str
    doc_id: str = ""
    url: str = ""
    title: str = ""
    position: int = 0
    prev_id: str | None = None
    next_id: str | None = None
    score: float | None = None
    source: str = ""
    snippet: bool = False  # only a search result's snippet: the page itself was not read


def _iso_date(value: str | None) -> str | None:
    if value is None or value == "":
        return None
    try:
        return _dt.date.fromisoformat(value[:10]).isoformat()
    except ValueError as exc:
        raise ValueError(f"not an ISO date (YYYY-MM-DD): {value!r}") from exc


class SearchFilters(_Value):
    """Structured constraints of one search; an empty field constrains nothing.

    The local corpus applies every field inside the search; a web provider maps
    each to its API's parameter where one exists, and the search's completion
    says which it could not apply (``SearchCompleted.unapplied``).
    """

    date_from: str | None = None  # ISO date, inclusive
    date_to: str | None = None  # ISO date, inclusive
    doc_types: tuple[str, ...] = ()
    sites: tuple[str, ...] = ()  # only these hosts (and their subdomains)
    exclude_sites: tuple[str, ...] = ()  # never these hosts
    language: str | None = None  # ISO 639-1 code, e.g. "en"

    @field_validator("date_from", "date_to")
    @classmethod
    def _dates(cls, value: str | None) -> str | None:
        return _iso_date(value)

    @field_validator("sites", "exclude_sites")
    @classmethod
    def _hosts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(h.strip().lower().removeprefix("www.") for h in value
                                   if h.strip()))

    @property
    def is_empty(self) -> bool:
        return not (self.date_from or self.date_to or self.doc_types or self.sites
                    or self.exclude_sites or self.language)

    def names(self) -> tuple[str, ...]:
        """The fields that are set (``date`` for either bound), for messages and mapping."""
        out = []
        if self.date_from or self.date_to:
            out.append("date")
        for name in ("doc_types", "sites", "exclude_sites", "language"):
            if getattr(self, name):
                out.append(name)
        return tuple(out)


FeedbackKind = Literal[
    "note",  # free text (events stored before feedback was typed)
    "rejected",  # a call's arguments or scope were refused
    "duplicate",  # the same call was already made
    "loop",  # the planner's query repeats earlier work (semantic loop guard)
    "read_limit",  # too many reads in a row
    "page_limit",  # the run's page budget is spent
    "empty",  # a search returned nothing
    "below_floor",  # results came back, none relevant enough to keep
    "failed",  # a tool call failed
    "no_text",  # an opened page had no readable text
    "spam",  # results flagged as spam / content farm (see results.flagged)
    "stale",  # every result is older than the period the question asks about
    "unapplied_filter",  # a provider could not apply a filter
]


class Feedback(_Value):
    """One fact the run tells its planner before the next turn (typed; never parsed).

    ``detail`` is for people and models to read; code decides on ``kind`` and the
    structured fields.
    """

    kind: FeedbackKind
    detail: str = ""
    call_id: str = ""
    tool: str = ""
    query: str = ""
    url: str = ""
    hosts: tuple[str, ...] = ()


class Claim(_Value):
    """One statement of an answer with the exact quote that supports it."""

    statement: str
    source_id: str
    quote: str


ClaimErrorKind = Literal[
    "empty", "unknown_source", "quote_too_short", "quote_not_found", "quote_elsewhere",
    "unsupported", "off_question", "judge_failed", "answer_dropped", "writer_failed",
    "verifier_failed", "other",
]
"""Why a claim was dropped, as data (the ``reason`` says it in words)."""


class ClaimError(_Value):
    """Why the verifier rejected one claim (``index`` -1: the draft as a whole)."""

    index: int
    source_id: str
    reason: str
    kind: ClaimErrorKind = "other"


class ConflictSide(_Value):
    """One side of a disagreement: the value a chunk gives and the sentence saying it.

    ``quote`` is an exact slice of the chunk's text; ``credibility`` is the
    chunk's source weight (1.0: neutral).
    """

    chunk_id: str
    value: str
    quote: str
    credibility: float = 1.0
    title: str = ""


class Conflict(_Value):
    """Held evidence disagrees on one attribute of one subject (a year, number or name).

    ``sides`` hold one entry per distinct value, most credible first;
    ``preferred`` is the index of the side to prefer, ``None`` when no side is
    more credible than the others.
    """

    subject: str
    attribute: str
    sides: tuple[ConflictSide, ...]
    preferred: int | None = None


class ModelUsage(_Value):
    """The model calls one role made with one model, and the tokens its server reported."""

    role: str
    model: str
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class RunUsage(_Value):
    """What one run used, counted from its own events; ``run.finished`` carries it.

    ``models`` by role (planner, writer, judge) and model: tokens are what the
    model server reported (a judge reports none: its calls count, its tokens are
    0). ``provider_calls``: search calls by provider; ``pages`` scraped and the
    UTF-8 ``page_bytes`` of their text; ``wall_s``: wall-clock time, the time
    before a crash included. An offline run has no ``models``: zero tokens.
    """

    models: tuple[ModelUsage, ...] = ()
    provider_calls: dict[str, int] = Field(default_factory=dict)
    pages: int = 0
    page_bytes: int = 0
    wall_s: float = 0.0


# --- run lifecycle ---------------------------------------------------------------


class RunStarted(Event):
    """A run began: the question and how it is to be answered."""

    type: Literal["run.started"] = "run.started"
    question: str
    mode: str = "agent"
    collections: tuple[str, ...] = ()
    options: dict[str, JsonValue] = Field(default_factory=dict)


class RunCancelRequested(Event):
    """Someone asked the run to stop."""

    type: Literal["run.cancel_requested"] = "run.cancel_requested"
    reason: str = ""
    priority: ClassVar[Priority] = Priority.ESSENTIAL


class TaskLink(_Value):
    """A background task a run handed its question to: its id and where to follow it."""

    task_id: str
    kind: str = "summary"
    link: str = ""
    """The task's URL path on the server (``/v1/tasks/{task_id}``)."""
    collection: str = ""
    doc_id: str = ""


class RunFinished(Event):
    """The run ended; the last event of a run, exactly once per start: a run
    interrupted by a crash ends ``interrupted`` and, once resumed, ends again.

    ``task`` is set only when the run ended ``handed_off``: the background task
    that goes on with the question (a whole-document summary)."""

    type: Literal["run.finished"] = "run.finished"
    outcome: Outcome
    reason: str = ""
    answer: str = ""
    claims: tuple[Claim, ...] = ()
    task: TaskLink | None = None
    usage: RunUsage | None = None
    """What the run used (``None``: a run stored before usage was counted)."""
    priority: ClassVar[Priority] = Priority.ESSENTIAL


class RunResumed(Event):
    """A run interrupted by a crash goes on from its stored log.

    The first event after the stored ``run.finished(interrupted)``
    (``after_seq``): the run's state was rebuilt by replaying its events, the
    commands still awaiting a reply are issued again, and the run continues to
    one new ``run.finished``. ``elapsed_s`` is the wall-clock time the run had
    used before the crash: it counts against the budget, the downtime does not.
    ``attempt`` counts the resumes of this run (1 for the first).
    """

    type: Literal["run.resumed"] = "run.resumed"
    after_seq: int
    reason: str = ""
    attempt: int = 1
    elapsed_s: float = 0.0
    priority: ClassVar[Priority] = Priority.ESSENTIAL


class QueryRewritten(Event):
    """A follow-up question of a conversation, read as a standalone one before searching.

    ``resolved`` maps each reference the rewrite replaced ("he", "it", "what
    about 2019?") to what it stands for from earlier turns; ``turns`` names the
    runs of the earlier turns it was resolved against (back-references).
    """

    type: Literal["query.rewritten"] = "query.rewritten"
    original: str
    standalone: str
    resolved: dict[str, str] = Field(default_factory=dict)
    turns: tuple[str, ...] = ()
    by: Literal["model", "rules"] = "rules"
    """Who read the follow-up: the chat model, or the offline rules."""
    fallback: ErrorInfo | None = None
    """The model's failure, when a model is configured and the rules stood in."""


class RunFallback(Event):
    """The run switched paths (e.g. agent -> one-shot RAG) and says why.

    ``error`` is the failure behind the switch when one caused it (the planner's
    model call: its model, HTTP status, timeout); ``reason`` says it in words.
    """

    type: Literal["run.fallback"] = "run.fallback"
    from_mode: str
    to_mode: str
    reason: str
    error: ErrorInfo | None = None


class ActorFailed(Event):
    """A handler raised while serving a request; the request is answered with this."""

    type: Literal["actor.failed"] = "actor.failed"
    request_type: str
    error: ErrorInfo


class SubscriberDetached(Event):
    """A subscriber was cut off (it raised, or could not keep up) and why."""

    type: Literal["subscriber.detached"] = "subscriber.detached"
    subscriber: str
    reason: str


# --- planning --------------------------------------------------------------------


class ToolCall(_Value):
    """One tool call decided by a model turn (``id`` unique within the run)."""

    id: str
    tool: Literal["search", "read", "scrape", "answer", "recall"]
    args: dict[str, JsonValue] = Field(default_factory=dict)


class QueryStat(_Value):
    """A search the run made and what it brought (``new_evidence`` 0: nothing new).

    ``chunk_ids`` are the passages it returned (after reranking, in order), those seen
    before included: a well-aimed search that only found known passages still says so.
    """

    query: str
    hits: int = 0
    new_evidence: int = 0
    chunk_ids: tuple[str, ...] = ()


class KeyPoint(_Value):
    """A compressed piece of a round's evidence the planner sees instead of the raw chunks.

    ``text`` is at most ~50 words taken from the chunks (numbers, dates and
    names kept whole); ``chunk_ids`` are the registered chunks it came from,
    which a ``recall`` tool call (``args={"point": id}``) brings back in full.
    """

    id: str
    text: str
    chunk_ids: tuple[str, ...]
    round: int = 0


class PlanRequested(Event):
    """The run asks the planner for its next move (one model step)."""

    type: Literal["plan.requested"] = "plan.requested"
    replies: ClassVar[tuple[str, ...]] = ("plan.decided",)
    handled_by: ClassVar[str] = "planner"
    operation: ClassVar[str] = "plan"
    request_kind: ClassVar[RequestKind] = "model"

    round: int
    feedback: tuple[Feedback, ...] = ()
    queries: tuple[QueryStat, ...] = ()
    remaining_steps: int | None = None
    remaining_tool_calls: int | None = None
    remaining_s: float | None = None
    remaining_pages: int | None = None
    remaining_tokens: int | None = None
    # context compression (budget ``compress_context``): the round's new key points, and
    # the chunks shown in full (recalled, or cited again); the rest is shown compact
    compressed: bool = False
    points: tuple[KeyPoint, ...] = ()
    expanded: tuple[str, ...] = ()
    # near the budget's end: the question's parts the evidence covers (the answerability
    # judge's typed parts), those the last round's evidence newly covered, those missing,
    # and whether the run may still grant its one budget extension
    can_extend: bool = False
    covered: tuple[str, ...] = ()
    newly_covered: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()

    @field_validator("feedback", mode="before")
    @classmethod
    def _old_feedback(cls, value: Any) -> Any:
        """Runs stored before feedback was typed carried plain strings: keep them as notes."""
        if isinstance(value, list | tuple):
            return tuple(Feedback(kind="note", detail=v) if isinstance(v, str) else v
                         for v in value)
        return value


class PlanDecided(Event):
    """The planner chose the next step: tool calls to run in order, or an answer."""

    type: Literal["plan.decided"] = "plan.decided"
    action: Literal["search", "read", "scrape", "answer", "finalize", "recall"]
    reason: str = ""
    calls: tuple[ToolCall, ...] = ()
    tokens: int = 0
    # the model call behind the decision, when a model made it (offline policies: "" and 0)
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    context_tokens: int = 0  # whitespace tokens of what the planner was shown this round
    extend: bool = False  # the planner asks for the run's one budget extension

    @model_validator(mode="before")
    @classmethod
    def _old_args(cls, data: Any) -> Any:
        """Runs stored before ``calls`` carried every argument had an ``args`` map (always
        empty by then): drop it, so those runs still decode."""
        if isinstance(data, dict) and "args" in data:
            return {k: v for k, v in data.items() if k != "args"}
        return data


class ToolRejected(Event):
    """A decided tool call was refused before running (budget, duplicate, invalid, scope)."""

    type: Literal["tool.rejected"] = "tool.rejected"
    call_id: str
    tool: str
    reason: str


class QueriesExpanded(Event):
    """The planner turned one question into several search queries."""

    type: Literal["queries.expanded"] = "queries.expanded"
    original: str
    queries: tuple[str, ...]


class LoopDetected(Event):
    """A query or round repeated earlier work; the planner sees why."""

    type: Literal["loop.detected"] = "loop.detected"
    kind: Literal["semantic", "duplicate", "saturation", "empty", "read_limit"]
    detail: str = ""
    query: str = ""


# --- tools -----------------------------------------------------------------------


class ProviderCall(_Value):
    """How one provider did on one search request, so a timeline can show slow or failing ones.

    ``elapsed_s`` counts from the request reaching the searcher until the
    provider settled; ``error`` is the error kind ("" when it answered).
    """

    provider: str
    elapsed_s: float = 0.0
    error: str = ""


class SearchRequested(Event):
    """Search these providers (or all configured ones) for a query."""

    type: Literal["search.requested"] = "search.requested"
    replies: ClassVar[tuple[str, ...]] = ("search.completed", "search.failed")
    handled_by: ClassVar[str] = "searcher"
    operation: ClassVar[str] = "search"
    request_kind: ClassVar[RequestKind] = "tool"

    call_id: str = ""
    query: str
    k: int = 10
    providers: tuple[str, ...] = ()
    collections: tuple[str, ...] = ()
    filters: SearchFilters = Field(default_factory=SearchFilters)
    cleaned: tuple[str, ...] = ()  # what argument hygiene changed before dispatch


class SearchCompleted(Event):
    """Merged, deduplicated hits for one search request."""

    type: Literal["search.completed"] = "search.completed"
    call_id: str = ""
    query: str
    hits: tuple[Hit, ...] = ()
    providers: tuple[str, ...] = ()
    errors: tuple[ErrorInfo, ...] = ()
    unapplied: tuple[str, ...] = ()  # "provider: filter (why)" for filters a provider ignored
    provider_calls: tuple[ProviderCall, ...] = ()


class SearchFailed(Event):
    """Every provider failed for one search request."""

    type: Literal["search.failed"] = "search.failed"
    call_id: str = ""
    query: str
    error: ErrorInfo
    provider_calls: tuple[ProviderCall, ...] = ()


class ScrapeRequested(Event):
    """Fetch a page and turn it into clean, chunked text."""

    type: Literal["scrape.requested"] = "scrape.requested"
    replies: ClassVar[tuple[str, ...]] = ("page.scraped", "scrape.failed")
    handled_by: ClassVar[str] = "scraper"
    operation: ClassVar[str] = "scrape"
    request_kind: ClassVar[RequestKind] = "tool"

    call_id: str = ""
    url: str
    cleaned: tuple[str, ...] = ()


class PageScraped(Event):
    """A fetched page as chunks with neighbours."""

    type: Literal["page.scraped"] = "page.scraped"
    call_id: str = ""
    url: str
    title: str = ""
    chunks: tuple[EvidenceChunk, ...] = ()


class ScrapeFailed(Event):
    """A page could not (or must not) be fetched."""

    type: Literal["scrape.failed"] = "scrape.failed"
    call_id: str = ""
    url: str
    error: ErrorInfo


class ReadRequested(Event):
    """Read on from a found passage: its neighbours in the source."""

    type: Literal["read.requested"] = "read.requested"
    replies: ClassVar[tuple[str, ...]] = ("read.completed", "read.failed")
    handled_by: ClassVar[str] = "reader"
    operation: ClassVar[str] = "read"
    request_kind: ClassVar[RequestKind] = "tool"

    call_id: str = ""
    chunk_id: str
    direction: Literal["next", "prev", "both"] = "next"
    count: int = 1


class ReadCompleted(Event):
    """The neighbouring passages of a chunk."""

    type: Literal["read.completed"] = "read.completed"
    call_id: str = ""
    chunk_id: str
    chunks: tuple[EvidenceChunk, ...] = ()


class ReadFailed(Event):
    """A read-on request could not be served (unknown or out-of-scope id)."""

    type: Literal["read.failed"] = "read.failed"
    call_id: str = ""
    chunk_id: str
    error: ErrorInfo


class RerankRequested(Event):
    """Order these candidates by relevance to the query and keep the best."""

    type: Literal["rerank.requested"] = "rerank.requested"
    replies: ClassVar[tuple[str, ...]] = ("rerank.completed", "rerank.failed")
    handled_by: ClassVar[str] = "reranker"
    operation: ClassVar[str] = "rerank"
    request_kind: ClassVar[RequestKind] = "service"

    call_id: str = ""
    query: str
    candidates: tuple[EvidenceChunk, ...]
    k: int = 5


class RerankCompleted(Event):
    """Candidates kept after reranking, best first (may be empty: nothing relevant)."""

    type: Literal["rerank.completed"] = "rerank.completed"
    call_id: str = ""
    query: str
    chunks: tuple[EvidenceChunk, ...] = ()
    below_floor: int = 0
    similarity: dict[str, float] = Field(default_factory=dict)
    """Cosine of every candidate scored (kept or not) to ``query``, by chunk id."""
    embedder: str = ""
    """The embedder those cosines come from (cosines of different models differ in scale)."""


class RerankFailed(Event):
    """The reranker could not score the candidates."""

    type: Literal["rerank.failed"] = "rerank.failed"
    call_id: str = ""
    query: str
    error: ErrorInfo


class ResultsFlagged(Event):
    """Search results the run will not use as they came: spam, content farms, stale.

    A soft failure as data: the results are dropped (spam) or kept but flagged
    (stale), and the planner is told (``Feedback`` of the same kind) so it can
    rewrite the search: drop a domain, add a date filter.
    """

    type: Literal["results.flagged"] = "results.flagged"
    call_id: str = ""
    kind: Literal["spam", "stale"]
    urls: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    reason: str = ""


class SelectionRequested(Event):
    """Command: choose the writer's evidence from the final rerank's shortlist.

    ``left_out``: the evidence the final rerank did not shortlist (under its
    floor against the question, or past the shortlist's length); a second hop
    shares few of the question's words, so the selector may still take one
    that a shortlisted passage names.
    """

    type: Literal["selection.requested"] = "selection.requested"
    replies: ClassVar[tuple[str, ...]] = ("evidence.selected",)
    handled_by: ClassVar[str] = "selector"
    operation: ClassVar[str] = "select evidence"
    request_kind: ClassVar[RequestKind] = "check"

    candidate_ids: tuple[str, ...]
    queries: tuple[str, ...] = ()
    k: int = 5
    left_out: tuple[str, ...] = ()


class EvidenceSelected(Event):
    """The chosen evidence ids (a subset of the shortlist), best first."""

    type: Literal["evidence.selected"] = "evidence.selected"
    ids: tuple[str, ...]
    reason: str = ""


class ProviderHealth(Event):
    """A search provider's circuit changed state."""

    type: Literal["provider.health"] = "provider.health"
    provider: str
    state: Literal["up", "degraded", "down", "probing"]
    detail: str = ""


# --- evidence, budget, answer ------------------------------------------------------


class EvidenceRegistered(Event):
    """Chunks entered the run's evidence registry and may now be cited."""

    type: Literal["evidence.registered"] = "evidence.registered"
    chunks: tuple[EvidenceChunk, ...]
    priority: ClassVar[Priority] = Priority.ESSENTIAL


class BudgetTick(Event):
    """How much of each budget the run has used so far."""

    type: Literal["budget.tick"] = "budget.tick"
    steps: int = 0
    tool_calls: int = 0
    tokens: int = 0
    elapsed_s: float = 0.0
    max_steps: int | None = None
    max_tool_calls: int | None = None
    max_tokens: int | None = None
    deadline_s: float | None = None
    read_tokens: int = 0
    max_read_tokens: int | None = None
    priority: ClassVar[Priority] = Priority.PROGRESS


class BudgetExhausted(Event):
    """A budget ran out; the run must finalize."""

    type: Literal["budget.exhausted"] = "budget.exhausted"
    resource: Literal["steps", "tool_calls", "tokens", "read_tokens", "wall_clock"]
    used: float = 0.0
    limit: float = 0.0
    priority: ClassVar[Priority] = Priority.ESSENTIAL


ExtensionRefusal = Literal["already_extended", "context_full", "not_near_end", "no_calls"]


class BudgetExtensionRequested(Event):
    """The planner asked for one more round of budget (``plan.decided`` with ``extend``)."""

    type: Literal["budget.extension_requested"] = "budget.extension_requested"
    steps: int = 0
    tool_calls: int = 0
    max_steps: int = 0
    max_tool_calls: int = 0
    context_tokens: int = 0
    context_window_tokens: int = 0


class BudgetExtended(Event):
    """The run granted its one budget extension: the limits grew by the ``added_*`` amounts.

    Wall time is not extended (``added_s`` 0): the run's deadline stays where it was.
    """

    type: Literal["budget.extended"] = "budget.extended"
    added_steps: int = 0
    added_tool_calls: int = 0
    added_s: float = 0.0
    max_steps: int = 0
    max_tool_calls: int = 0
    deadline_s: float = 0.0
    priority: ClassVar[Priority] = Priority.ESSENTIAL


class BudgetExtensionRefused(Event):
    """The run refused a budget extension, with a typed reason (``detail`` is for people)."""

    type: Literal["budget.extension_refused"] = "budget.extension_refused"
    reason: ExtensionRefusal
    detail: str = ""


class PointRecalled(Event):
    """A ``recall`` call brought a key point's chunks back in full for the planner's next view.

    Answered by the run from its evidence registry: no tool runs.
    """

    type: Literal["point.recalled"] = "point.recalled"
    call_id: str
    point: str
    chunk_ids: tuple[str, ...] = ()


class AnswerDelta(Event):
    """A piece of the answer, sent once its claim is verified (a draft is never streamed)."""

    type: Literal["answer.delta"] = "answer.delta"
    text: str
    claim_index: int | None = None
    priority: ClassVar[Priority] = Priority.ESSENTIAL


class AnswerabilityRequested(Event):
    """The run asks the model judge whether the chosen evidence answers the question.

    Sent only where a chat model judges sufficiency; ``hint_*`` is the offline
    rules' verdict, shown to the model as a hint it may overrule.
    """

    type: Literal["answerability.requested"] = "answerability.requested"
    replies: ClassVar[tuple[str, ...]] = ("answerability.judged",)
    handled_by: ClassVar[str] = "judge"
    operation: ClassVar[str] = "judge"
    request_kind: ClassVar[RequestKind] = "model"

    evidence_ids: tuple[str, ...] = ()
    hint_verdict: Literal["answerable", "partial", "unanswerable", ""] = ""
    hint_missing: tuple[str, ...] = ()
    other_ids: tuple[str, ...] = ()
    """Held passages not chosen for the writer (best first): the model may add them."""


class AnswerabilityJudged(Event):
    """Before writing, the run judged whether the chosen evidence answers the question.

    ``verdict`` is ``answerable`` (every part covered), ``partial`` (some parts
    covered, ``missing`` names the rest) or ``unanswerable``; ``searches`` are
    the follow-up queries the run makes for the missing parts, if any. ``by``
    says who judged: the chat model, or the offline rules (``fallback``: the
    model's failure when the rules stood in for it). A model's verdict also
    lists the disagreements it saw among the passages (``conflicts``).
    """

    type: Literal["answerability.judged"] = "answerability.judged"
    verdict: Literal["answerable", "partial", "unanswerable"]
    answer_type: str = ""
    covered: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    reason: str = ""
    searches: tuple[str, ...] = ()
    by: Literal["model", "offline"] = "offline"
    model: str = ""
    conflicts: tuple[Conflict, ...] = ()
    fallback: ErrorInfo | None = None
    added: tuple[str, ...] = ()
    """Held passages the model added to the writer's evidence (the answer needs them)."""


class HandoffRequested(Event):
    """The run asks whether its question needs a whole document read (a background task).

    Sent first, before any planning, only where the engine can start background tasks;
    the hand-off actor judges against the documents of ``collections`` and, if one
    document is asked for whole, starts its summary task.
    """

    type: Literal["handoff.requested"] = "handoff.requested"
    replies: ClassVar[tuple[str, ...]] = ("handoff.decided",)
    handled_by: ClassVar[str] = "handoff"
    operation: ClassVar[str] = "route"
    request_kind: ClassVar[RequestKind] = "check"

    collections: tuple[str, ...] = ()


class HandoffDecided(Event):
    """Whether the question was handed to a background task, and to which.

    ``task`` set: a task was started for ``task.doc_id`` and the run ends
    ``handed_off``; unset: the run searches and answers as usual. ``by`` says who
    judged (the chat model or the offline rules; ``fallback``: the model's failure
    when the rules stood in for it).
    """

    type: Literal["handoff.decided"] = "handoff.decided"
    task: TaskLink | None = None
    title: str = ""
    reason: str = ""
    by: Literal["model", "offline"] = "offline"
    model: str = ""
    fallback: ErrorInfo | None = None
    priority: ClassVar[Priority] = Priority.ESSENTIAL


class ConflictDetected(Event):
    """The writer's evidence disagrees on what the question asks; the answer shows both sides.

    The payload is a :class:`Conflict`'s (see :meth:`conflict`); essential,
    because it changes what the answer says.
    """

    type: Literal["conflict.detected"] = "conflict.detected"
    subject: str
    attribute: str
    sides: tuple[ConflictSide, ...]
    preferred: int | None = None
    priority: ClassVar[Priority] = Priority.ESSENTIAL

    @classmethod
    def of(cls, conflict: Conflict) -> ConflictDetected:
        """The event announcing ``conflict``."""
        return cls(subject=conflict.subject, attribute=conflict.attribute,
                   sides=conflict.sides, preferred=conflict.preferred)

    def conflict(self) -> Conflict:
        """The payload as a :class:`Conflict` value."""
        return Conflict(subject=self.subject, attribute=self.attribute, sides=self.sides,
                        preferred=self.preferred)


class AnswerRequested(Event):
    """The run asks the writer for an answer from registered evidence only.

    ``conflicts`` are the disagreements found in that evidence (also published
    as ``conflict.detected``); the writer must show both sides of each.
    """

    type: Literal["answer.requested"] = "answer.requested"
    replies: ClassVar[tuple[str, ...]] = ("answer.drafted",)
    handled_by: ClassVar[str] = "writer"
    operation: ClassVar[str] = "write"
    request_kind: ClassVar[RequestKind] = "model"

    mode: WriteMode = "answer"
    attempt: int = 1
    evidence_ids: tuple[str, ...] = ()
    errors: tuple[ClaimError, ...] = ()
    conflicts: tuple[Conflict, ...] = ()


class AnswerDrafted(Event):
    """A complete answer, not yet verified.

    ``lead`` is an optional direct answer the writer inferred from its claims
    ("Yes: both are American."); it is not a quote, so the verifier checks that
    its words come from the claims' quotes and drops it otherwise.
    """

    type: Literal["answer.drafted"] = "answer.drafted"
    replies: ClassVar[tuple[str, ...]] = ("answer.verified", "verify.failed")
    handled_by: ClassVar[str] = "verifier"
    operation: ClassVar[str] = "verify"
    request_kind: ClassVar[RequestKind] = "check"

    text: str
    claims: tuple[Claim, ...]
    lead: str = ""
    attempt: int = 1
    mode: WriteMode = "answer"
    tokens: int = 0
    answer_index: int | None = None
    """The claim that states the answer (the writer marks it; ``None``: the first)."""
    fallback: ErrorInfo | None = None
    """The chat writer's failure, when the offline writer wrote this draft instead."""
    notes: tuple[str, ...] = ()
    """What the writer saw odd in its model's reply (cut at the token limit, bad ids)."""
    # the model call behind the draft, when a model wrote it (offline writers: "" and 0)
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    priority: ClassVar[Priority] = Priority.ESSENTIAL


class VerifyFailed(Event):
    """The verifier rejected a draft (too few valid claims, or the answer claim), with the
    exact reasons; ``judge_fallback``: the judge's failure when the offline check stood in."""

    type: Literal["verify.failed"] = "verify.failed"
    errors: tuple[ClaimError, ...]
    attempt: int = 1
    kept: tuple[Claim, ...] = ()
    judge_fallback: ErrorInfo | None = None
    priority: ClassVar[Priority] = Priority.ESSENTIAL


class AnswerVerified(Event):
    """Every kept claim cites registered evidence and its quote was found there.

    ``errors`` names every dropped claim with its typed reason; ``answer_index`` is
    the kept claim that states the answer; ``judged_by`` says who judged support
    (``judge_fallback``: the judge's failure when the offline check stood in).
    """

    type: Literal["answer.verified"] = "answer.verified"
    text: str
    claims: tuple[Claim, ...]
    lead: str = ""
    dropped: int = 0
    attempt: int = 1
    errors: tuple[ClaimError, ...] = ()
    answer_index: int | None = None
    judged_by: Literal["model", "offline"] = "offline"
    judge_fallback: ErrorInfo | None = None
    priority: ClassVar[Priority] = Priority.ESSENTIAL


_E = TypeVar("_E", bound=type[Event])

EVENT_TYPES: dict[str, type[Event]] = {}
"""Every known event class by its ``type`` string (built-ins and registered)."""


def register_event(cls: _E) -> _E:
    """Make an event class known to the codecs and operators; usable as a decorator.

    Raises:
        ValueError: the class has no ``type`` literal default, or the type string
            is already taken by another class.
    """
    default: Any = cls.model_fields["type"].default  # type: ignore[call-overload,unused-ignore]
    if not isinstance(default, str) or not default:
        raise ValueError(f"{cls.__name__} needs a `type: Literal[...]` with a default")
    existing = EVENT_TYPES.get(default)
    if existing is not None and existing is not cls:
        raise ValueError(f"event type {default!r} is already registered by {existing.__name__}")
    EVENT_TYPES[default] = cls
    return cls


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What a request event type declares: who answers it, and with which events.

    Read from the class attributes (:attr:`Event.replies`, :attr:`Event.handled_by`,
    :attr:`Event.operation`, :attr:`Event.request_kind`); ``failures`` are the
    replies named ``*.failed``.
    """

    type: str
    handled_by: str
    replies: tuple[str, ...]
    failures: tuple[str, ...]
    operation: str
    kind: RequestKind


@functools.cache
def request_info(cls: type[Event]) -> RequestInfo | None:
    """What the event class ``cls`` declares as a request (``None``: it is not one)."""
    if not cls.replies:
        return None
    default: Any = cls.model_fields["type"].default  # type: ignore[call-overload,unused-ignore]
    type_ = str(default)
    return RequestInfo(
        type=type_, handled_by=cls.handled_by or type_.partition(".")[0],
        replies=cls.replies, failures=tuple(r for r in cls.replies if r.endswith(".failed")),
        operation=cls.operation or type_.partition(".")[0], kind=cls.request_kind)


def reply_table() -> dict[str, RequestInfo]:
    """Every registered request type -> what it declares (the one request -> reply table)."""
    return {name: info for name, cls in EVENT_TYPES.items()
            if (info := request_info(cls)) is not None}


for _cls in (
    RunStarted,
    RunCancelRequested,
    RunFinished,
    QueryRewritten,
    RunResumed,
    RunFallback,
    ActorFailed,
    SubscriberDetached,
    PlanRequested,
    PlanDecided,
    ToolRejected,
    QueriesExpanded,
    LoopDetected,
    SearchRequested,
    SearchCompleted,
    SearchFailed,
    ScrapeRequested,
    PageScraped,
    ScrapeFailed,
    ReadRequested,
    ReadCompleted,
    ReadFailed,
    RerankRequested,
    RerankCompleted,
    RerankFailed,
    ResultsFlagged,
    SelectionRequested,
    EvidenceSelected,
    ProviderHealth,
    EvidenceRegistered,
    BudgetTick,
    BudgetExhausted,
    BudgetExtensionRequested,
    BudgetExtended,
    BudgetExtensionRefused,
    PointRecalled,
    AnswerDelta,
    AnswerabilityRequested,
    AnswerabilityJudged,
    HandoffRequested,
    HandoffDecided,
    AnswerRequested,
    AnswerDrafted,
    VerifyFailed,
    AnswerVerified,
    ConflictDetected,
):
    register_event(_cls)
