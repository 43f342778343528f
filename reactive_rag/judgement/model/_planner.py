"""A planner policy backed by a chat model with tool calling (any OpenAI-compatible server).

The model proposes; code disposes. Every tool call the model writes is parsed
and validated here with one strict pydantic model per tool, and every chunk id
is checked against the evidence this run has registered (and its allowed
collections). A call that fails is never returned for execution: its rejection
text goes back to the model as that call's tool result, so the model can correct
itself. A turn with nothing valid is retried once within the same ``decide``;
after that the policy falls back to a safe move (answer if evidence exists,
otherwise search the question) rather than stall the run.

The conversation is kept across turns: each ``decide`` first reports, as
``tool`` messages, what the previous turn's calls brought (the ids and text of
newly registered evidence, or why a call was refused) and then the run's
feedback and remaining budget. Feedback is typed (:class:`streams.Feedback`):
it is rendered from its fields, with a hint per ``kind`` that the model can act
on (hosts to exclude, a date filter to add), and never parsed back from prose.

Web results arrive as snippets; ``open_page(result_id)`` asks the run to open
one (a ``scrape`` call). Several calls of one turn are all returned: the run
executes them concurrently.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from actors.models import (
    ChatError,
    ChatModel,
    ChatRequest,
    ChatResult,
    RawToolCall,
    function_tool,
)
from actors.text import url_host, url_key
from streams import (
    Event,
    EvidenceChunk,
    Feedback,
    FeedbackKind,
    PlanDecided,
    QueryStat,
    SearchFilters,
    ToolCall,
)

from .._policy import Decision, PlannerBase, PlannerView, Rejection

__all__ = [
    "DEFAULT_PLANNER_PROMPT",
    "PLANNER_TOOLS",
    "ChatPlanner",
    "Rejection",
    "ScopeCheck",
    "default_scope",
]

DEFAULT_PLANNER_PROMPT = """\
You are the planner of a research agent. You never answer the question yourself: \
you choose the next tool calls, and a writer answers later from the evidence.

Tools:
- search(query, k, filters): search the allowed collections (and the web, if enabled); \
returns passages, each with an id. Optional filters: date_from and date_to \
(YYYY-MM-DD, inclusive), sites and exclude_sites (host names like "who.int"), \
language (a code like "en").
- read(chunk_id, direction): read the passage just after ("next") or before ("prev") \
a passage you were shown, when it was cut off or promising.
- open_page(result_id): open the web page of a search result you were shown, to read \
its full text. Web results marked "snippet" show only a few words of their page.
- answer(): stop searching because the evidence covers every part of the question.

Rules:
- Use only ids shown to you in tool results, exactly as written. Never invent ids.
- Never repeat a search. If a search found nothing new, rephrase it or search for \
the part of the question that is still missing (e.g. an entity named in a passage).
- When snippets are not enough to answer, open_page the most promising results \
(a few, not all); each page opened uses the page budget.
- Several calls in one turn run at the same time: make independent searches and \
open_page calls together in one turn.
- Use filters when the question asks for a period, a site or a language. Turn "last \
year" or "since 2020" into dates from today's date, given below. If the run reports \
spam hosts, exclude them with exclude_sites; if results are stale, add date_from.
- A call that breaks a rule is rejected and the reason is returned to you: fix it.
- Call answer() alone, as soon as the evidence is enough, or when the budget is low.
- Reply with tool calls only."""

_HOST_LIST = {"type": "array", "items": {"type": "string"}, "maxItems": 10}

PLANNER_TOOLS: tuple[dict[str, Any], ...] = (
    function_tool(
        "search",
        "Search the corpus (and the web, if enabled) for passages about a query.",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "a short keyword query"},
                "k": {"type": "integer", "minimum": 1, "description": "how many passages"},
                "filters": {
                    "type": "object",
                    "description": "optional constraints; leave out what you do not need",
                    "properties": {
                        "date_from": {"type": "string", "description": "YYYY-MM-DD, inclusive"},
                        "date_to": {"type": "string", "description": "YYYY-MM-DD, inclusive"},
                        "sites": {**_HOST_LIST, "description": 'only these hosts: ["who.int"]'},
                        "exclude_sites": {**_HOST_LIST, "description": "never these hosts"},
                        "language": {"type": "string", "description": 'ISO 639-1 code, e.g. "en"'},
                    },
                    "additionalProperties": False,
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    ),
    function_tool(
        "read",
        "Read the passage next to (after or before) a passage already shown, by its id.",
        {
            "type": "object",
            "properties": {
                "chunk_id": {"type": "string", "description": "an id shown in a tool result"},
                "direction": {"type": "string", "enum": ["next", "prev"]},
            },
            "required": ["chunk_id"],
            "additionalProperties": False,
        },
    ),
    function_tool(
        "open_page",
        "Open the web page of a search result you were shown, to read its full text.",
        {
            "type": "object",
            "properties": {
                "result_id": {"type": "string", "description": "the id of a web result shown"},
            },
            "required": ["result_id"],
            "additionalProperties": False,
        },
    ),
    function_tool(
        "answer",
        "Stop searching: the evidence gathered is enough to answer.",
        {"type": "object", "properties": {}, "additionalProperties": False},
    ),
)

ScopeCheck = Callable[[EvidenceChunk, PlannerView], str | None]
"""Returns why a chunk is out of this run's scope, or ``None`` if it may be used."""


def default_scope(chunk: EvidenceChunk, view: PlannerView) -> str | None:
    """Local chunks must come from one of the run's collections (web chunks always may)."""
    if view.collections and chunk.source.startswith("local:"):
        collection = chunk.source.removeprefix("local:")
        if collection not in view.collections:
            return f"chunk {chunk.id!r} is from collection {collection!r}, outside this run"
    return None


# --- strict argument models (one per tool) ------------------------------------------

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_HOST = re.compile(r"[a-z0-9-]+(\.[a-z0-9-]+)+")

_Host = Annotated[str, Field(min_length=1, max_length=253)]


class _FilterArgs(BaseModel):
    """The ``filters`` of a search as the model may write them (checked before the run)."""

    model_config = _STRICT
    date_from: str | None = None
    date_to: str | None = None
    sites: list[_Host] = Field(default_factory=list, max_length=10)
    exclude_sites: list[_Host] = Field(default_factory=list, max_length=10)
    language: str | None = Field(default=None, pattern=r"^[A-Za-z]{2}$")

    @field_validator("date_from", "date_to")
    @classmethod
    def _iso(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            if not _ISO_DATE.fullmatch(value):
                raise ValueError
            return dt.date.fromisoformat(value).isoformat()
        except ValueError:
            raise ValueError(f"not a date as YYYY-MM-DD: {value!r}") from None

    @field_validator("sites", "exclude_sites")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        hosts = [h.strip().lower() for h in value]
        bad = [h for h in hosts if not _HOST.fullmatch(h)]
        if bad:
            raise ValueError(f"not a host name like who.int: {bad[0]!r}")
        return hosts

    @model_validator(mode="after")
    def _consistent(self) -> _FilterArgs:
        if self.date_from and self.date_to and self.date_from > self.date_to:
            raise ValueError(f"date_from {self.date_from} is after date_to {self.date_to}")
        return self


class _SearchArgs(BaseModel):
    model_config = _STRICT
    query: str = Field(min_length=1, max_length=500)
    k: int | None = Field(default=None, ge=1)
    filters: _FilterArgs | None = None


class _ReadArgs(BaseModel):
    model_config = _STRICT
    chunk_id: str = Field(min_length=1)
    direction: Literal["next", "prev"] = "next"


class _OpenPageArgs(BaseModel):
    model_config = _STRICT
    result_id: str = Field(min_length=1)


class _AnswerArgs(BaseModel):
    model_config = _STRICT


_ARG_MODELS: dict[str, type[BaseModel]] = {
    "search": _SearchArgs,
    "read": _ReadArgs,
    "open_page": _OpenPageArgs,
    "answer": _AnswerArgs,
}
_TOOL_NAMES = "search, read, open_page or answer"

_Tool = Literal["search", "read", "scrape", "answer"]

# What the model can do about each kind of feedback, beyond the run's own words.
_HINTS: dict[FeedbackKind, str] = {
    "duplicate": "do not repeat it; search for the part of the question still missing",
    "loop": "do not repeat it; search for the part of the question still missing",
    "read_limit": "search or answer instead of reading on",
    "page_limit": "no more pages can be opened: use the evidence you have",
    "below_floor": "rephrase it, or search another part of the question",
    "no_text": "open another result instead",
    "unapplied_filter": "that provider ignored the filter: judge those results against it yourself",
}


@dataclass(slots=True)
class _Pending:
    """A model call of the last assistant turn, waiting for its ``tool`` message."""

    model_id: str
    name: str
    call: ToolCall | None  # what was returned for execution, None if rejected
    rejection: str = ""


@dataclass(slots=True)
class _Turn:
    """What the calls checked so far in one model turn claim (pages it opens)."""

    pages: set[str] = field(default_factory=set)


class ChatPlanner(PlannerBase):
    """:class:`PlannerPolicy` that asks a chat model which tools to call.

    One instance per run: it keeps that run's conversation. Asking about a
    different question (or an earlier round) starts a new conversation.

    Args:
        model: the chat model (e.g. :class:`actors.models.OpenAIChatClient`).
        timeout_s: cap per model call; the call gets ``min(timeout_s, view.remaining_s)``.
        max_k: the largest ``k`` a search may ask for.
        max_chunk_chars: passage text shown to the model is cut to this length.
        max_context_chars: past this, older tool results are compacted to ids and titles.
        max_tokens: completion cap per model turn.
        scope: extra check that a known chunk may be used in this run.
        system_prompt: replaces :data:`DEFAULT_PLANNER_PROMPT`.
        stream: stream the model's turns (the default). llama-cpp-python's server
            cannot stream tool calls chosen with ``tool_choice="auto"``: pass ``False``.
        results_as_user: send tool results as one ``user`` message instead of
            ``tool`` messages, for chat templates that drop ``tool`` messages
            (llama-cpp-python's ``chatml-function-calling``). OpenAI itself rejects
            this shape, so keep it off elsewhere.

    Each decision's ``rejected`` lists the calls refused in that turn, so the
    host actor can publish them as ``tool.rejected`` events. Every
    valid call of a turn is returned (the run executes them concurrently);
    ``open_page`` calls come back as ``scrape`` calls by ``result_id``.

    Raises from ``decide``: :class:`actors.models.ChatError` when the first
    model call of a turn fails (the run decides what to do: it is unrecoverable
    for this policy); failures of the in-turn retry fall back instead.
    """

    name = "chat"

    def __init__(
        self,
        model: ChatModel,
        *,
        timeout_s: float = 30.0,
        max_k: int = 20,
        max_chunk_chars: int = 600,
        max_context_chars: int = 12_000,
        max_tokens: int = 256,
        temperature: float | None = 0.0,
        scope: ScopeCheck = default_scope,
        system_prompt: str = DEFAULT_PLANNER_PROMPT,
        stream: bool = True,
        results_as_user: bool = False,
    ) -> None:
        if timeout_s <= 0 or max_k < 1 or max_chunk_chars < 20:
            raise ValueError("timeout_s > 0, max_k >= 1 and max_chunk_chars >= 20")
        self.model = model
        self.timeout_s = timeout_s
        self.max_k = max_k
        self.max_chunk_chars = max_chunk_chars
        self.max_context_chars = max_context_chars
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.scope = scope
        self.system_prompt = system_prompt
        self.stream = stream
        self.results_as_user = results_as_user
        self.reset()

    def reset(self) -> None:
        """Forget the conversation (a new run)."""
        self.messages: list[dict[str, Any]] = []
        self._compact: dict[int, str] = {}
        self._question: str | None = None
        self._round = -1
        self._pending: list[_Pending] = []
        self._fallback_note = ""
        self._shown = 0
        self._queries_seen = 0
        self._reads_seen = 0
        self._pages_seen = 0
        self._used_ids: set[str] = set()
        self._rejections: list[Rejection] = []
        self._point_text: dict[str, str] = {}  # compressed context: a compact chunk's points
        self._spent = (0, 0)  # (input, output) tokens of this turn's model calls

    def restore(self, events: Sequence[Event]) -> None:
        """A resumed run (crash): start over from what the stored events hold.

        The conversation with the model is not in the run's events, so the next
        turn opens a new one from the run's view (question, evidence, queries
        and feedback so far); the call ids the run already used stay used.
        """
        self.reset()
        for event in events:
            if isinstance(event, PlanDecided):
                self._used_ids.update(call.id for call in event.calls)

    # --- the policy --------------------------------------------------------------------

    async def decide(self, view: PlannerView) -> Decision:
        """Ask the model for the next tool calls; return only the valid ones.

        The decision names the model and the input/output tokens its calls took
        this turn (what tracing reports as the model call's usage).
        """
        self._spent = (0, 0)
        decision = await self._decide(view)
        return dataclasses.replace(decision, model=self.model.model,
                                   input_tokens=self._spent[0], output_tokens=self._spent[1],
                                   rejected=tuple(self._rejections))

    async def _decide(self, view: PlannerView) -> Decision:
        if view.question != self._question or view.round < self._round:
            self.reset()
            self._question = view.question
        self._round = view.round
        self._rejections = []
        texts: dict[str, list[str]] = {}
        for point in view.points:  # a compressed view: compact chunks read as their key points
            for chunk_id in point.chunk_ids:
                texts.setdefault(chunk_id, []).append(point.text)
        self._point_text = {cid: " ".join(t) for cid, t in texts.items()}
        loop = asyncio.get_running_loop()
        budget = self.timeout_s
        if view.remaining_s is not None:
            budget = min(budget, view.remaining_s)
        deadline = loop.time() + max(budget, 0.0)

        if not self.messages:
            self.messages = [
                {"role": "system", "content": self.system_prompt},
                {"role": "user", "content": self._opening(view)},
            ]
            self._mark_seen(view)
        else:
            self._report(view)
        self._compact_history()

        tokens = 0
        rejections: list[str] = []
        result = await self._ask(deadline - loop.time())
        tokens += result.usage.total
        for attempt in (1, 2):
            calls, pending, errors = self._validate(result, view)
            rejections += errors
            self.messages.append(_assistant_message(result))
            if calls:
                self._pending = pending
                return self._decision(calls, result, rejections, tokens)
            if not result.tool_calls and view.evidence:
                return Decision(
                    action="answer",
                    reason=_join("model answered without a tool call", result.content),
                    tokens=tokens,
                )
            if any(p.call is not None and p.call.tool == "answer" for p in pending):
                self._pending = pending
                return Decision(
                    action="answer", reason=_join(result.content, *rejections), tokens=tokens
                )
            if attempt == 2:
                self._pending = pending
                break
            # nothing valid: show the model why, and let it try once more in this turn
            self._append_tool_results(pending, {})
            if not result.tool_calls:
                self.messages.append(
                    {"role": "user", "content": f"Call one of the tools: {_TOOL_NAMES}."}
                )
            try:
                result = await self._ask(deadline - loop.time())
            except ChatError as exc:
                rejections.append(f"retry failed: {exc}")
                break
            tokens += result.usage.total
        return self._fallback(view, rejections, tokens)

    # --- model turn --------------------------------------------------------------------

    async def _ask(self, timeout_s: float) -> ChatResult:
        result = await self.model.complete(ChatRequest(
            self.messages,
            tools=PLANNER_TOOLS,
            tool_choice="auto",
            timeout_s=timeout_s,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            stream=self.stream,
        ))
        spent_in, spent_out = self._spent
        self._spent = (spent_in + result.usage.prompt, spent_out + result.usage.completion)
        return result

    def _decision(
        self, calls: list[ToolCall], result: ChatResult, rejections: list[str], tokens: int
    ) -> Decision:
        return Decision(
            action=calls[0].tool,
            calls=tuple(calls),
            reason=_join(result.content, *rejections),
            tokens=tokens,
        )

    def _fallback(self, view: PlannerView, rejections: list[str], tokens: int) -> Decision:
        why = _join("no valid tool call from the model", *rejections)
        if view.evidence:
            self._fallback_note = "The planner stopped searching on its own (no valid call)."
            return Decision(action="answer", reason=why, tokens=tokens)
        call = ToolCall(
            id=self._unique_id("", view.round, 0, prefix="fallback"),
            tool="search",
            args={"query": view.question},
        )
        self._fallback_note = f"The planner searched the question itself: {view.question!r}."
        return Decision(action="search", calls=(call,), reason=why, tokens=tokens)

    # --- validation --------------------------------------------------------------------

    def _validate(
        self, result: ChatResult, view: PlannerView
    ) -> tuple[list[ToolCall], list[_Pending], list[str]]:
        """Every valid call of the turn (all are returned: the run runs them concurrently)."""
        calls: list[ToolCall] = []
        pending: list[_Pending] = []
        errors: list[str] = []
        turn = _Turn()
        checks = [self._check(raw, view, result.finish_reason, turn) for raw in result.tool_calls]
        wants_other = any(not isinstance(c, str) and c[0] != "answer" for c in checks)
        for index, (raw, checked) in enumerate(zip(result.tool_calls, checks, strict=True)):
            if isinstance(checked, str):
                text = f"REJECTED {raw.name or '<no name>'}: {checked}"
                pending.append(_Pending(raw.id, raw.name, None, text))
                errors.append(text)
                self._rejections.append(Rejection(raw.id, raw.name, checked))
                continue
            tool, args = checked
            if tool == "answer" and wants_other:
                text = "IGNORED answer: call answer() alone, after the other tools' results"
                pending.append(_Pending(raw.id, raw.name, None, text))
                continue
            call = ToolCall(id=self._unique_id(raw.id, view.round, index), tool=tool, args=args)
            pending.append(_Pending(raw.id, raw.name, call))
            if tool != "answer":
                calls.append(call)
        return calls, pending, errors

    def _check(
        self, raw: RawToolCall, view: PlannerView, finish_reason: str | None, turn: _Turn
    ) -> tuple[_Tool, dict[str, Any]] | str:
        """The validated ``(tool, args)`` of one raw call, or why it is rejected."""
        model = _ARG_MODELS.get(raw.name)
        if model is None:
            return f"unknown tool {raw.name!r}; the tools are {_TOOL_NAMES}"
        try:
            parsed: Any = json.loads(raw.arguments_json) if raw.arguments_json.strip() else {}
        except ValueError:
            cut = " (the reply was cut off)" if finish_reason == "length" else ""
            return f"arguments are not valid JSON{cut}: {raw.arguments_json[:200]!r}"
        if not isinstance(parsed, dict):
            return f"arguments must be a JSON object, got {type(parsed).__name__}"
        try:
            args = model.model_validate(parsed)
        except ValidationError as exc:
            return "invalid arguments: " + "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
        if isinstance(args, _SearchArgs):
            return self._check_search(args, view)
        if isinstance(args, _ReadArgs):
            problem = self._check_read(args, view)
            if problem:
                return problem
            return "read", {"chunk_id": args.chunk_id, "direction": args.direction}
        if isinstance(args, _OpenPageArgs):
            problem = self._check_open(args, view, turn)
            if problem:
                return problem
            return "scrape", {"result_id": args.result_id}
        return "answer", {}

    def _check_search(
        self, args: _SearchArgs, view: PlannerView
    ) -> tuple[_Tool, dict[str, Any]] | str:
        query = " ".join(args.query.split())
        if not query:
            return "the query is empty"
        if args.k is not None and args.k > self.max_k:
            return f"k={args.k} is too large (at most {self.max_k})"
        out: dict[str, Any] = {"query": query}
        if args.k is not None:
            out["k"] = args.k
        if args.filters is not None:
            f = args.filters
            if f.date_from and view.today and f.date_from > view.today:
                return f"filters.date_from {f.date_from} is after today ({view.today})"
            filters = SearchFilters(
                date_from=f.date_from,
                date_to=f.date_to,
                sites=tuple(f.sites),
                exclude_sites=tuple(f.exclude_sites),
                language=f.language.lower() if f.language else None,
            )
            both = sorted(set(filters.sites) & set(filters.exclude_sites))
            if both:
                return f"filters: {both[0]!r} is in both sites and exclude_sites"
            if not filters.is_empty:
                # JSON-shaped (lists, not tuples): the run validates it again as SearchFilters
                out["filters"] = {
                    k: list(v) if isinstance(v, tuple) else v
                    for k, v in filters.model_dump(exclude_defaults=True).items()
                }
        return "search", out

    def _check_read(self, args: _ReadArgs, view: PlannerView) -> str | None:
        known = {c.id: c for c in view.evidence}
        chunk = known.get(args.chunk_id)
        if chunk is None:
            return f"unknown chunk id {args.chunk_id!r}: use only ids shown in tool results"
        out_of_scope = self.scope(chunk, view)
        if out_of_scope:
            return f"out of scope: {out_of_scope}"
        neighbour = chunk.next_id if args.direction == "next" else chunk.prev_id
        if neighbour is None and (chunk.next_id or chunk.prev_id):
            side = "after" if args.direction == "next" else "before"
            return f"chunk {chunk.id!r} has no passage {side} it"
        if neighbour is not None and neighbour in known:
            return f"the passage {args.direction} of {chunk.id!r} is already shown: {neighbour!r}"
        return None

    def _check_open(self, args: _OpenPageArgs, view: PlannerView, turn: _Turn) -> str | None:
        """Only web results shown in this run, each page once, within the page budget."""
        chunk = next((c for c in view.evidence if c.id == args.result_id), None)
        if chunk is None:
            return (
                f"unknown result id {args.result_id!r}: use only ids of web results shown "
                "in tool results"
            )
        if not _is_web(chunk):
            return (
                f"{chunk.id!r} is not a web result: open_page opens only web pages "
                "(use read for the passages around it)"
            )
        out_of_scope = self.scope(chunk, view)
        if out_of_scope:
            return f"out of scope: {out_of_scope}"
        page = url_key(chunk.url)
        if page in {url_key(u) for u in view.pages}:
            return f"the page of {chunk.id!r} is already open: its passages are in the evidence"
        if page in turn.pages:
            return f"the page of {chunk.id!r} is already being opened in this turn"
        if view.remaining_pages is not None and len(turn.pages) >= view.remaining_pages:
            if view.remaining_pages <= 0:
                return "no pages left to open in this run: answer from the evidence, or search"
            return (
                f"only {view.remaining_pages} page(s) left to open in this run, and this turn "
                "already opens them"
            )
        turn.pages.add(page)
        return None

    def _unique_id(self, model_id: str, round_: int, index: int, prefix: str = "chat") -> str:
        candidate = model_id if model_id and model_id not in self._used_ids else ""
        if not candidate:
            candidate = f"{prefix}-{round_}-{index}"
            n = 1
            while candidate in self._used_ids:
                n += 1
                candidate = f"{prefix}-{round_}-{index}-{n}"
        self._used_ids.add(candidate)
        return candidate

    # --- reporting results back to the model ---------------------------------------------

    def _opening(self, view: PlannerView) -> str:
        lines = [f"Question: {view.question}"]
        if view.today:
            lines.append(f"Today's date: {view.today} (for date filters).")
        if view.collections:
            lines.append("Collections: " + ", ".join(view.collections))
        if view.evidence:
            lines.append("Evidence already gathered:")
            lines += [self._render(c) for c in view.evidence]
        lines += _feedback_notes(view.feedback, view.today)
        lines += self._status(view)
        lines.append("Call a tool.")
        return "\n".join(lines)

    def _report(self, view: PlannerView) -> None:
        new = list(view.evidence[self._shown :])
        queries = list(view.queries[self._queries_seen :])
        reads = list(view.reads[self._reads_seen :])
        pages = [url_key(u) for u in view.pages[self._pages_seen :]]
        known = {c.id: c for c in view.evidence}
        self._mark_seen(view)
        by_call: dict[str, list[EvidenceChunk]] = {}
        ran: set[str] = set()
        for p in self._pending:
            if p.call is None:
                continue
            if p.call.tool == "search":
                record = _take_query(queries, str(p.call.args["query"]))
                if record is not None:
                    ran.add(p.call.id)
                    by_call[p.call.id], new = new[: record.new_evidence], new[record.new_evidence :]
            elif p.call.tool == "read":
                target = str(p.call.args["chunk_id"])
                if target in reads:
                    reads.remove(target)
                    ran.add(p.call.id)
                    mine = [c for c in new if target in (c.prev_id, c.next_id)]
                    by_call[p.call.id] = mine
                    new = [c for c in new if c not in mine]
            elif p.call.tool == "scrape":
                result = known.get(str(p.call.args["result_id"]))
                page = url_key(result.url) if result is not None else ""
                if page in pages:
                    pages.remove(page)
                    ran.add(p.call.id)
                    mine = [c for c in new if not c.snippet and url_key(c.url) == page]
                    by_call[p.call.id] = mine
                    new = [c for c in new if c not in mine]
        # feedback about one of our calls goes with that call's result; the rest is a note
        ours = {p.call.id for p in self._pending if p.call is not None}
        per_call: dict[str, list[Feedback]] = {}
        general: list[Feedback] = []
        for f in view.feedback:
            if f.call_id in ours:
                per_call.setdefault(f.call_id, []).append(f)
            else:
                general.append(f)
        self._append_tool_results(self._pending, by_call, ran, per_call, view.today)
        self._pending = []
        notes: list[str] = []
        if self._fallback_note:
            notes.append(self._fallback_note)
            self._fallback_note = ""
        if new:
            notes.append("Other new evidence:")
            notes += [self._render(c) for c in new]
        notes += _feedback_notes(general, view.today)
        notes += self._status(view)
        notes.append("Call the next tools, or answer() if the evidence is enough.")
        self.messages.append({"role": "user", "content": "\n".join(notes)})

    def _append_tool_results(
        self,
        pending: Sequence[_Pending],
        by_call: Mapping[str, list[EvidenceChunk]],
        ran: set[str] | None = None,
        feedback: Mapping[str, Sequence[Feedback]] | None = None,
        today: str = "",
    ) -> None:
        as_user: list[str] = []
        for p in pending:
            said = [
                _feedback_line(f, today)
                for f in (feedback or {}).get(p.call.id if p.call else "", ())
            ]
            if p.call is None:
                content = compact = p.rejection
            elif p.call.tool == "answer":
                content = compact = "noted"
            elif ran is not None and p.call.id not in ran:
                content = compact = "\n".join(
                    ["not run:", *said] if said else ["not run (see the notes from the run)"]
                )
            else:
                chunks = by_call.get(p.call.id, [])
                head = _describe(p.call, len(chunks))
                content = "\n".join([head, *(self._render(c) for c in chunks), *said])
                compact = "\n".join([head, *(_label(c) for c in chunks), *said])
            if self.results_as_user:
                as_user.append(f"Result of {p.name or 'call'} ({p.model_id}): {content}")
                continue
            self._compact[len(self.messages)] = compact
            self.messages.append({"role": "tool", "tool_call_id": p.model_id, "content": content})
        if as_user:
            self.messages.append({"role": "user", "content": "\n\n".join(as_user)})

    def _render(self, chunk: EvidenceChunk) -> str:
        text = " ".join((chunk.text or self._point_text.get(chunk.id, "")).split())
        if len(text) > self.max_chunk_chars:
            text = text[: self.max_chunk_chars].rsplit(" ", 1)[0] + " ..."
        return f"{_label(chunk)}: {text}" if chunk.title else f"{_label(chunk)} {text}"

    def _status(self, view: PlannerView) -> list[str]:
        parts = []
        if view.remaining_steps is not None:
            parts.append(f"{view.remaining_steps} model steps")
        if view.remaining_tool_calls is not None:
            parts.append(f"{view.remaining_tool_calls} tool calls")
        if view.remaining_pages is not None:
            parts.append(f"{view.remaining_pages} pages to open")
        if view.remaining_s is not None:
            parts.append(f"{view.remaining_s:.0f} s")
        return [f"Budget left: {', '.join(parts)}."] if parts else []

    def _mark_seen(self, view: PlannerView) -> None:
        self._shown = len(view.evidence)
        self._queries_seen = len(view.queries)
        self._reads_seen = len(view.reads)
        self._pages_seen = len(view.pages)

    def _compact_history(self) -> None:
        """Shrink the oldest tool results to ids and titles while the context is too long."""
        size = sum(len(json.dumps(m)) for m in self.messages)
        for index in sorted(self._compact):
            if size <= self.max_context_chars:
                break
            message = self.messages[index]
            compact = self._compact.pop(index)
            size -= len(str(message["content"])) - len(compact)
            message["content"] = compact


def _take_query(records: list[QueryStat], query: str) -> QueryStat | None:
    wanted = " ".join(query.split()).casefold()
    for i, record in enumerate(records):
        if " ".join(record.query.split()).casefold() == wanted:
            return records.pop(i)
    return None


def _describe(call: ToolCall, n: int) -> str:
    if call.tool == "search":
        what = f"search({call.args['query']!r}"
        filters = call.args.get("filters")
        if isinstance(filters, dict) and filters:
            what += ", filters " + json.dumps(filters, sort_keys=True)
        what += ")"
    elif call.tool == "scrape":
        what = f"open_page({call.args['result_id']!r})"
    else:
        what = f"read({call.args['chunk_id']!r}, {call.args['direction']!r})"
    return f"{what}: {n} new passage{'s' if n != 1 else ''}" + (":" if n else " (nothing new)")


def _is_web(chunk: EvidenceChunk) -> bool:
    return chunk.url.lower().startswith(("http://", "https://"))


def _label(chunk: EvidenceChunk) -> str:
    """``[id] (snippet, host) title``: the model sees which results are only snippets."""
    tags: list[str] = []
    if _is_web(chunk):
        if chunk.snippet:
            tags.append("snippet")
        host = url_host(chunk.url)
        if host:
            tags.append(host)
    tag = f" ({', '.join(tags)})" if tags else ""
    title = f" {chunk.title}" if chunk.title else ""
    return f"[{chunk.id}]{tag}{title}"


def _feedback_notes(feedback: Sequence[Feedback], today: str) -> list[str]:
    if not feedback:
        return []
    return ["Notes from the run:", *(_feedback_line(f, today) for f in feedback)]


def _feedback_line(f: Feedback, today: str) -> str:
    """One feedback item from its fields, with what the model can do about it."""
    about = f" ({f.tool or 'search'} {f.query!r})" if f.query else f" ({f.url})" if f.url else ""
    line = f"- {f.kind}{about}: {f.detail or f.kind.replace('_', ' ')}"
    if f.hosts:
        line += f" [hosts: {', '.join(f.hosts)}]"
    if f.kind == "spam":
        hint = (
            f"add filters.exclude_sites {json.dumps(list(f.hosts))} to your next searches"
            if f.hosts
            else "exclude the hosts of those results with filters.exclude_sites"
        )
    elif f.kind == "stale":
        when = f"; today is {today}" if today else ""
        hint = f"add filters.date_from (YYYY-MM-DD{when}) to get recent results"
    else:
        hint = _HINTS.get(f.kind, "")
    return f"{line} -> {hint}" if hint else line


def _assistant_message(result: ChatResult) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": result.content or None}
    if result.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                # servers re-parse past arguments: keep the history valid JSON
                "function": {"name": c.name, "arguments": _json_or_empty(c.arguments_json)},
            }
            for c in result.tool_calls
        ]
    return message


def _json_or_empty(text: str) -> str:
    try:
        return text if isinstance(json.loads(text), dict) else "{}"
    except ValueError:
        return "{}"


def _join(*parts: str, limit: int = 2000) -> str:
    text = "; ".join(p.strip() for p in parts if p and p.strip())
    return text if len(text) <= limit else text[: limit - 3] + "..."
