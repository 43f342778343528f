"""A planner policy backed by a chat model with tool calling (any OpenAI-compatible server).

The model proposes; code disposes. Every tool call the model writes is parsed
and validated here with one strict pydantic model per tool, and every chunk id
is checked against the evidence this run has registered (and its allowed
collections). A call that fails is never returned for execution: its rejection
text goes back to the model as that call's tool result, so the model can correct
itself. A turn with nothing valid is retried once within the same ``decide``;
after that the policy falls back to a safe move (answer if evidence exists,
otherwise search the question) rather than stall the run.

Two turns are never taken at their word. Prose with no tool call ("I will
search for X") searches nothing: the model is told so and asked once more.
``answer()`` before any search, on a run with no evidence, would end the run
with nothing to cite: it is refused back to the model the same way. Only
after the retry does the fallback above apply.

Only the tools the run can use are offered, each turn: ``open_page`` and
search filters only when the run searches the web, ``recall(point_id)`` only
when the view is compressed into key points, ``extend_budget()`` only while the
run may still grant its one extension. ``search.k`` is capped in the schema.

The conversation is kept across turns: each ``decide`` first reports, as
``tool`` messages, what the previous turn's calls brought (newly registered
passages, numbered, with id, title and score, or why a call was refused) and
then the run's feedback and remaining budget (steps, tool calls, seconds and
model tokens). Feedback is typed (:class:`streams.Feedback`): it is rendered
from its fields, with a hint per ``kind`` that the model can act on, and never
parsed back from prose. Passages that only repeat their title are named, not
shown. When the conversation outgrows ``max_context_chars`` the passages least
related to the open question (its words and the parts the run reports missing)
are cut to their first line first, whatever their age.

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
from actors.text import content_terms, url_key
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
from ._passages import clip_text, is_stub, is_web, passage_header

__all__ = [
    "DEFAULT_PLANNER_PROMPT",
    "PLANNER_TOOLS",
    "ChatPlanner",
    "Rejection",
    "ScopeCheck",
    "default_scope",
    "planner_prompt",
    "planner_tools",
]

# --- the system prompt: only the tools the run can use ---------------------------------------

_INTRO = """\
You are the planner of a research agent. You never answer the question yourself: \
you choose the next tool calls, and a writer answers later from the evidence.

Tools:"""

_SEARCH_LOCAL = """\
- search(query, k): search the run's collections; k is how many passages (optional). \
Passages come numbered, as "[n] [id] title (score 0.83)" with their text below; the \
score (0 to 1) says how well the passage matches the search."""

_SEARCH_WEB = """\
- search(query, k, filters): search the run's collections and the web; k is how many \
passages (optional). Passages come numbered, as "[n] [id] title (score 0.83)" with \
their text below; the score (0 to 1) says how well the passage matches the search. \
Optional filters: date_from and date_to (YYYY-MM-DD, inclusive), sites and \
exclude_sites (host names like "who.int"), language (a code like "en")."""

_READ = """\
- read(chunk_id, direction): read the passage just after ("next") or before ("prev") \
a passage you were shown, when it was cut off or promising."""

_OPEN_PAGE = """\
- open_page(result_id): open the web page of a search result you were shown, to read \
its full text. Web results marked "snippet" show only a few words of their page."""

_ANSWER = """\
- answer(): stop searching because the evidence covers every part of the question.
- recall(point_id) and extend_budget() are offered only in the turns that can use \
them; the turn that offers one says what it does."""

_RULES_HEAD = """
Rules:
- Use only ids shown to you, exactly as written inside the square brackets. Never \
invent ids.
- Search before you answer: the writer can use only passages your searches found.
- Never repeat a search. If a search found nothing new, rephrase it or search for \
the part of the question that is still missing (e.g. an entity named in a passage)."""

_RULES_WEB = """\
- When snippets are not enough to answer, open_page the most promising results \
(a few, not all); each page opened uses the page budget.
- Several calls in one turn run at the same time: make independent searches and \
open_page calls together in one turn.
- Use filters when the question asks for a period, a site or a language. Turn "last \
year" or "since 2020" into dates from today's date, given below. If the run reports \
spam hosts, exclude them with exclude_sites; if results are stale, add date_from."""

_RULES_LOCAL = """\
- Several calls in one turn run at the same time: make independent searches \
together in one turn."""

_RULES_TAIL = """\
- A call that breaks a rule is rejected and the reason is returned to you: fix it.
- Call answer() alone, as soon as the evidence is enough, or when the budget is low.
- Reply with tool calls only. Text without a tool call does nothing: writing that you \
will search is not a search."""


def planner_prompt(*, web: bool) -> str:
    """The planner's system prompt for a run with (``web``) or without web search.

    It names only the tools the run offers: a local-only run hears nothing of
    pages to open or of date and site filters.
    """
    search, rules = (_SEARCH_WEB, _RULES_WEB) if web else (_SEARCH_LOCAL, _RULES_LOCAL)
    tools = [search, _READ, *([_OPEN_PAGE] if web else []), _ANSWER]
    return "\n".join([_INTRO, *tools, _RULES_HEAD, rules, _RULES_TAIL])


DEFAULT_PLANNER_PROMPT = planner_prompt(web=False)
"""The system prompt of a local-only run (a web run gets ``planner_prompt(web=True)``)."""

# --- tool schemas ------------------------------------------------------------------------------

_HOST_LIST = {"type": "array", "items": {"type": "string"}, "maxItems": 10}

_FILTERS_SCHEMA: dict[str, Any] = {
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
}

_NO_ARGS: dict[str, Any] = {
    "type": "object", "properties": {}, "required": [], "additionalProperties": False,
}


def planner_tools(
    *, max_k: int = 20, web: bool = True, recall: bool = False, extend: bool = False
) -> tuple[dict[str, Any], ...]:
    """The tool definitions a turn offers (OpenAI ``tools`` shape).

    ``search.k`` has ``max_k`` as its maximum; ``filters`` and ``open_page``
    exist only with ``web``; ``recall`` and ``extend_budget`` only when asked.
    The schemas are not marked ``strict`` (optional arguments stay optional);
    every object still forbids additional properties.
    """
    search_props: dict[str, Any] = {
        "query": {"type": "string", "description": "a short keyword query"},
        "k": {"type": "integer", "minimum": 1, "maximum": max_k,
              "description": f"how many passages (1 to {max_k})"},
    }
    if web:
        search_props["filters"] = _FILTERS_SCHEMA
    tools = [
        function_tool(
            "search",
            "Search the corpus and the web for passages about a query." if web
            else "Search the run's collections for passages about a query.",
            {"type": "object", "properties": search_props, "required": ["query"],
             "additionalProperties": False},
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
    ]
    if web:
        tools.append(function_tool(
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
        ))
    tools.append(function_tool(
        "answer", "Stop searching: the evidence gathered is enough to answer.", _NO_ARGS))
    if recall:
        tools.append(function_tool(
            "recall",
            "Show in full the passages a key point was taken from (no tool-call budget used).",
            {
                "type": "object",
                "properties": {
                    "point_id": {"type": "string", "description": "the id of a key point shown"},
                },
                "required": ["point_id"],
                "additionalProperties": False,
            },
        ))
    if extend:
        tools.append(function_tool(
            "extend_budget",
            "Ask once for one more round of budget; call it together with the tool calls "
            "that round is for.",
            _NO_ARGS,
        ))
    return tuple(tools)


PLANNER_TOOLS: tuple[dict[str, Any], ...] = planner_tools()
"""The tools of a web run with the default ``max_k`` (search, read, open_page, answer)."""

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


class _RecallArgs(BaseModel):
    model_config = _STRICT
    point_id: str = Field(min_length=1)


class _NoArgs(BaseModel):
    model_config = _STRICT


_ARG_MODELS: dict[str, type[BaseModel]] = {
    "search": _SearchArgs,
    "read": _ReadArgs,
    "open_page": _OpenPageArgs,
    "answer": _NoArgs,
    "recall": _RecallArgs,
    "extend_budget": _NoArgs,
}

# why a known tool is not offered in a turn (the model called it anyway)
_NOT_OFFERED = {
    "open_page": "this run does not search the web, so there are no pages to open",
    "recall": "there are no key points to recall in this run",
    "extend_budget": "the budget can be extended only once, near its end",
}

_Tool = Literal["search", "read", "scrape", "answer", "recall", "extend"]

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

# Turns the planner does not take at their word: told to the model, then retried once.
_Nudge = Literal["no_tool_call", "answer_before_search"]

_NUDGES: dict[_Nudge, str] = {
    "no_tool_call": (
        "You wrote text but called no tool: nothing was searched. Call search(...) for "
        "what is still missing, or answer() if the evidence shown covers the question."
    ),
    "answer_before_search": (
        "answer() before any search: this run has no evidence yet, and the writer can use "
        "only passages your searches find. Call search(...) first."
    ),
}


@dataclass(slots=True)
class _Pending:
    """A model call of the last assistant turn, waiting for its ``tool`` message.

    ``text`` is the whole result for a call that is not run (a rejection, an
    ignored call, an extension noted).
    """

    model_id: str
    name: str
    call: ToolCall | None  # what was returned for execution, None if not run
    text: str = ""
    nudge: _Nudge | None = None  # refused as a turn not taken at its word


@dataclass(slots=True)
class _Turn:
    """What the calls checked so far in one model turn claim (pages it opens)."""

    pages: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Part:
    """A line or a passage of a message; a passage can be cut to its first line."""

    full: str
    chunk_id: str = ""  # set for a passage: compaction may cut it
    head: str = ""  # the passage's first line ([n] [id] title (score)), kept when cut
    terms: frozenset[str] = frozenset()  # content terms of its title and text
    cut: str = ""  # the text once compacted

    @property
    def text(self) -> str:
        return self.cut or self.full


class ChatPlanner(PlannerBase):
    """:class:`PlannerPolicy` that asks a chat model which tools to call.

    One instance per run: it keeps that run's conversation. Asking about a
    different question (or an earlier round) starts a new conversation.

    Args:
        model: the chat model (e.g. :class:`actors.models.OpenAIChatClient`).
        timeout_s: cap per model call; the call gets ``min(timeout_s, view.remaining_s)``.
        max_k: the largest ``k`` a search may ask for (the schema's maximum).
        max_chunk_chars: passage text shown to the model is cut to this length.
        max_context_chars: past this, the passages least related to the open
            question are cut to their first line (id, title, score).
        max_tokens: completion cap per model turn.
        scope: extra check that a known chunk may be used in this run.
        system_prompt: replaces :func:`planner_prompt` (``None``: the prompt for
            the run, with or without web search).
        stream: stream the model's turns (the default). llama-cpp-python's server
            cannot stream tool calls chosen with ``tool_choice="auto"``: pass ``False``.
        results_as_user: send tool results as one ``user`` message instead of
            ``tool`` messages, for chat templates that drop ``tool`` messages
            (llama-cpp-python's ``chatml-function-calling``). OpenAI itself rejects
            this shape, so keep it off elsewhere.

    Each decision's ``rejected`` lists the calls refused in that turn, so the
    host actor can publish them as ``tool.rejected`` events. Every
    valid call of a turn is returned (the run executes them concurrently);
    ``open_page`` calls come back as ``scrape`` calls by ``result_id``,
    ``recall`` calls as ``recall`` calls by ``point``, and ``extend_budget``
    as the decision's ``extend``.

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
        system_prompt: str | None = None,
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

    @property
    def model_name(self) -> str:
        """The chat model's name (failures name it)."""
        return self.model.model

    def reset(self) -> None:
        """Forget the conversation (a new run)."""
        self.messages: list[dict[str, Any]] = []
        self._parts: dict[int, list[_Part]] = {}  # message index -> its lines and passages
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
        self._numbers: dict[str, int] = {}  # chunk id -> its passage number in this run
        self._tools: tuple[dict[str, Any], ...] = ()  # what this turn offers
        self._offered: frozenset[str] = frozenset()
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
        self._offer(view)
        loop = asyncio.get_running_loop()
        budget = self.timeout_s
        if view.remaining_s is not None:
            budget = min(budget, view.remaining_s)
        deadline = loop.time() + max(budget, 0.0)

        if not self.messages:
            system = self.system_prompt or planner_prompt(web=view.web)
            self.messages = [{"role": "system", "content": system}]
            self._add("user", self._opening(view))
            self._mark_seen(view)
        else:
            self._report(view)
        self._compact_history(view)

        tokens = 0
        rejections: list[str] = []
        nudges: list[tuple[_Nudge, str]] = []
        result = await self._ask(deadline - loop.time())  # a ChatError here propagates
        tokens += result.usage.total
        for attempt in (1, 2):
            calls, pending, errors, extend = self._validate(result, view)
            rejections += errors
            self.messages.append(_assistant_message(result))
            if calls:
                self._pending = pending
                return self._decision(calls, result, rejections, tokens, extend, nudges)
            if any(p.call is not None and p.call.tool == "answer" for p in pending):
                self._pending = pending
                return Decision(
                    action="answer",
                    reason=_join("the model called answer()", _after(nudges), result.content,
                                 *rejections),
                    tokens=tokens,
                )
            nudge = _nudge_of(result, pending)
            if nudge is not None:
                nudges.append((nudge, result.content))
            if attempt == 2:
                self._pending = pending
                break
            # nothing valid: show the model why, and let it try once more in this turn
            self._append_tool_results(pending, {}, view=view)
            if not result.tool_calls:
                self.messages.append({"role": "user", "content": _NUDGES["no_tool_call"]})
            try:
                result = await self._ask(deadline - loop.time())
            except ChatError as exc:
                rejections.append(f"retry failed: {exc}")
                break
            tokens += result.usage.total
        return self._fallback(view, rejections, nudges, tokens)

    def _offer(self, view: PlannerView) -> None:
        """The tools this turn offers: only those the run can use now."""
        recall = view.compressed and bool(view.points)
        self._tools = planner_tools(max_k=self.max_k, web=view.web, recall=recall,
                                    extend=view.can_extend)
        self._offered = frozenset(t["function"]["name"] for t in self._tools)

    # --- model turn --------------------------------------------------------------------

    async def _ask(self, timeout_s: float) -> ChatResult:
        result = await self.model.complete(ChatRequest(
            self.messages,
            tools=self._tools,
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
        self, calls: list[ToolCall], result: ChatResult, rejections: list[str], tokens: int,
        extend: bool, nudges: Sequence[tuple[_Nudge, str]],
    ) -> Decision:
        said = "the model called " + ", ".join(_call_text(c) for c in calls)
        if extend:
            said += " and asked for the budget extension"
        return Decision(
            action=calls[0].tool,
            calls=tuple(calls),
            reason=_join(said, _after(nudges), result.content, *rejections),
            tokens=tokens,
            extend=extend,
        )

    def _fallback(
        self, view: PlannerView, rejections: list[str], nudges: Sequence[tuple[_Nudge, str]],
        tokens: int,
    ) -> Decision:
        kinds = [kind for kind, _ in nudges]
        if "no_tool_call" in kinds:
            wrote = next(text for kind, text in reversed(nudges) if kind == "no_tool_call")
            head = "no_tool_call: the model wrote text but called no tool"
            if len(nudges) > 1:
                head += ", again after being told to call one"
            if wrote.strip():
                head += f" (it wrote {_clip(wrote, 160)!r})"
        elif "answer_before_search" in kinds:
            head = "answer_before_search: the model called answer() before any search"
            if len(nudges) > 1:
                head += ", again after being told to search first"
        else:
            head = "no valid tool call from the model"
        why = _join(head, *rejections)
        if view.evidence:
            self._fallback_note = "The planner stopped searching on its own (no valid call)."
            return Decision(action="answer", reason=_join(
                why, "fallback: answer from the evidence gathered"), tokens=tokens)
        call = ToolCall(
            id=self._unique_id("", view.round, 0, prefix="fallback"),
            tool="search",
            args={"query": view.question},
        )
        self._fallback_note = f"The planner searched the question itself: {view.question!r}."
        return Decision(action="search", calls=(call,), reason=_join(
            why, f"fallback: search the question {view.question!r}"), tokens=tokens)

    # --- validation --------------------------------------------------------------------

    def _validate(
        self, result: ChatResult, view: PlannerView
    ) -> tuple[list[ToolCall], list[_Pending], list[str], bool]:
        """Every valid call of the turn (all are returned: the run runs them concurrently),
        and whether the turn asks for the budget extension."""
        calls: list[ToolCall] = []
        pending: list[_Pending] = []
        errors: list[str] = []
        extend = False
        turn = _Turn()
        checks = [self._check(raw, view, result.finish_reason, turn) for raw in result.tool_calls]
        wants_other = any(
            not isinstance(c, str) and c[0] not in ("answer", "extend") for c in checks
        )
        no_evidence = not view.evidence and not view.queries
        for index, (raw, checked) in enumerate(zip(result.tool_calls, checks, strict=True)):
            early = not isinstance(checked, str) and checked[0] == "answer" and no_evidence
            if isinstance(checked, str) or (early and not wants_other):
                nudge: _Nudge | None = None if isinstance(checked, str) else "answer_before_search"
                reason = _NUDGES[nudge] if nudge else str(checked)
                text = f"REJECTED {raw.name or '<no name>'}: {reason}"
                pending.append(_Pending(raw.id, raw.name, None, text, nudge))
                errors.append(text)
                self._rejections.append(Rejection(raw.id, raw.name, reason))
                continue
            tool, args = checked
            if tool == "answer" and wants_other:
                text = "IGNORED answer: call answer() alone, after the other tools' results"
                pending.append(_Pending(raw.id, raw.name, None, text))
                continue
            if tool == "extend":
                if wants_other and not extend:
                    extend = True
                    text = ("asked for the run's one budget extension: the budget left, "
                            "in the next notes, says whether it was granted")
                else:
                    text = ("IGNORED extend_budget: call it once, together with the tool "
                            "calls the extra round is for")
                pending.append(_Pending(raw.id, raw.name, None, text))
                continue
            call = ToolCall(id=self._unique_id(raw.id, view.round, index), tool=tool, args=args)
            pending.append(_Pending(raw.id, raw.name, call))
            if tool != "answer":
                calls.append(call)
        return calls, pending, errors, extend

    def _check(
        self, raw: RawToolCall, view: PlannerView, finish_reason: str | None, turn: _Turn
    ) -> tuple[_Tool, dict[str, Any]] | str:
        """The validated ``(tool, args)`` of one raw call, or why it is rejected."""
        model = _ARG_MODELS.get(raw.name)
        offered = ", ".join(t["function"]["name"] for t in self._tools)
        if model is None:
            return f"unknown tool {raw.name!r}; the tools are {offered}"
        if raw.name not in self._offered:
            return f"{raw.name} is not available: {_NOT_OFFERED[raw.name]}; the tools are {offered}"
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
            return self._check_read(args, view)
        if isinstance(args, _OpenPageArgs):
            return self._check_open(args, view, turn)
        if isinstance(args, _RecallArgs):
            return self._check_recall(args, view)
        return ("answer", {}) if raw.name == "answer" else ("extend", {})

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
            filters = SearchFilters(
                date_from=f.date_from,
                date_to=f.date_to,
                sites=tuple(f.sites),
                exclude_sites=tuple(f.exclude_sites),
                language=f.language.lower() if f.language else None,
            )
            if not filters.is_empty and not view.web:
                return "filters are not available: this run does not search the web"
            if f.date_from and view.today and f.date_from > view.today:
                return f"filters.date_from {f.date_from} is after today ({view.today})"
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

    def _known_id(self, written: str, known: Mapping[str, EvidenceChunk]) -> str:
        """The chunk id the model meant: as written, without the brackets it is shown in,
        or a passage number (``3`` or ``[3]``) of this run."""
        if written in known:
            return written
        bare = written.strip()
        if bare.startswith("[") and bare.endswith("]"):
            bare = bare[1:-1].strip()
        if bare in known:
            return bare
        if bare.isdigit():
            by_number = {n: cid for cid, n in self._numbers.items() if cid in known}
            return by_number.get(int(bare), written)
        return written

    def _check_read(
        self, args: _ReadArgs, view: PlannerView
    ) -> tuple[_Tool, dict[str, Any]] | str:
        known = {c.id: c for c in view.evidence}
        chunk = known.get(self._known_id(args.chunk_id, known))
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
        return "read", {"chunk_id": chunk.id, "direction": args.direction}

    def _check_open(
        self, args: _OpenPageArgs, view: PlannerView, turn: _Turn
    ) -> tuple[_Tool, dict[str, Any]] | str:
        """Only web results shown in this run, each page once, within the page budget."""
        known = {c.id: c for c in view.evidence}
        chunk = known.get(self._known_id(args.result_id, known))
        if chunk is None:
            return (
                f"unknown result id {args.result_id!r}: use only ids of web results shown "
                "in tool results"
            )
        if not is_web(chunk):
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
        return "scrape", {"result_id": chunk.id}

    def _check_recall(
        self, args: _RecallArgs, view: PlannerView
    ) -> tuple[_Tool, dict[str, Any]] | str:
        wanted = args.point_id.strip().removeprefix("[").removesuffix("]").strip()
        point = next((p for p in view.points if p.id == wanted), None)
        if point is None:
            return f"unknown point {args.point_id!r}: recall only the id of a key point shown"
        if point.chunk_ids and set(point.chunk_ids) <= set(view.expanded):
            return f"the passages of point {point.id!r} are already shown in full"
        return "recall", {"point": point.id}

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

    def _opening(self, view: PlannerView) -> list[_Part]:
        lines = [f"Question: {view.question}"]
        if view.today:
            lines.append(f"Today's date: {view.today}" + (" (for date filters)." if view.web
                                                          else "."))
        if view.collections:
            lines.append("Collections: " + ", ".join(view.collections))
        parts = [_Part(line) for line in lines]
        if view.evidence:
            parts.append(_Part("Evidence already gathered:"))
            parts += self._passages(view.evidence, view)
        parts += [_Part(line) for line in _feedback_notes(view.feedback, view.today)]
        parts += [_Part(line) for line in self._status(view)]
        parts.append(_Part("Call a tool."))
        return parts

    def _report(self, view: PlannerView) -> None:
        new = list(view.evidence[self._shown :])
        queries = list(view.queries[self._queries_seen :])
        reads = list(view.reads[self._reads_seen :])
        pages = [url_key(u) for u in view.pages[self._pages_seen :]]
        known = {c.id: c for c in view.evidence}
        points = {p.id: p for p in view.points}
        expanded = set(view.expanded)
        self._mark_seen(view)
        by_call: dict[str, list[EvidenceChunk]] = {}
        stats: dict[str, QueryStat] = {}
        ran: set[str] = set()
        for p in self._pending:
            if p.call is None:
                continue
            if p.call.tool == "search":
                record = _take_query(queries, str(p.call.args["query"]))
                if record is not None:
                    ran.add(p.call.id)
                    stats[p.call.id] = record
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
            elif p.call.tool == "recall":
                point = points.get(str(p.call.args["point"]))
                back = [known[i] for i in (point.chunk_ids if point else ())
                        if i in expanded and i in known]
                if back:
                    ran.add(p.call.id)
                    by_call[p.call.id] = back
        # feedback about one of our calls goes with that call's result; the rest is a note
        ours = {p.call.id for p in self._pending if p.call is not None}
        per_call: dict[str, list[Feedback]] = {}
        general: list[Feedback] = []
        for f in view.feedback:
            if f.call_id in ours:
                per_call.setdefault(f.call_id, []).append(f)
            else:
                general.append(f)
        self._append_tool_results(self._pending, by_call, ran, per_call, view=view, stats=stats)
        self._pending = []
        notes: list[_Part] = []
        if self._fallback_note:
            notes.append(_Part(self._fallback_note))
            self._fallback_note = ""
        if new:
            notes.append(_Part("Other new evidence:"))
            notes += self._passages(new, view)
        notes += [_Part(line) for line in _feedback_notes(general, view.today)]
        notes += [_Part(line) for line in self._status(view)]
        notes.append(_Part("Call the next tools, or answer() if the evidence is enough."))
        self._add("user", notes)

    def _append_tool_results(
        self,
        pending: Sequence[_Pending],
        by_call: Mapping[str, list[EvidenceChunk]],
        ran: set[str] | None = None,
        feedback: Mapping[str, Sequence[Feedback]] | None = None,
        *,
        view: PlannerView,
        stats: Mapping[str, QueryStat] | None = None,
    ) -> None:
        as_user: list[_Part] = []
        for p in pending:
            said = [
                _Part(_feedback_line(f, view.today))
                for f in (feedback or {}).get(p.call.id if p.call else "", ())
            ]
            if p.call is None:
                parts = [_Part(p.text)]
            elif p.call.tool == "answer":
                parts = [_Part("noted")]
            elif ran is not None and p.call.id not in ran:
                parts = [_Part("not run:"), *said] if said else [
                    _Part("not run (see the notes from the run)")]
            else:
                fresh = by_call.get(p.call.id, [])
                passages = self._passages(fresh, view)
                shown = sum(1 for part in passages if part.chunk_id)
                record = (stats or {}).get(p.call.id)
                parts = [_Part(_describe(p.call, shown, record)), *passages,
                         *self._seen_before(record, fresh, view), *said]
            if self.results_as_user:
                first = f"Result of {p.name or 'call'} ({p.model_id}): {parts[0].full}"
                as_user += [*([_Part("")] if as_user else []), _Part(first), *parts[1:]]
                continue
            self._add("tool", parts, tool_call_id=p.model_id)
        if as_user:
            self._add("user", as_user)

    def _add(self, role: str, parts: list[_Part], **extra: str) -> None:
        """Append a message built from ``parts``; one with passages can be compacted later."""
        if any(p.chunk_id for p in parts):
            self._parts[len(self.messages)] = parts
        self.messages.append({"role": role, **extra, "content": _text(parts)})

    def _passages(self, chunks: Sequence[EvidenceChunk], view: PlannerView) -> list[_Part]:
        """Numbered passages; those whose text only repeats their title are named, not shown."""
        parts: list[_Part] = []
        stubs: list[EvidenceChunk] = []
        for chunk in chunks:
            part = self._passage(chunk, view)
            if part is None:
                stubs.append(chunk)
            else:
                parts.append(part)
        if stubs:
            names = ", ".join(f"[{c.id}]" + (f" {c.title}" if c.title else "") for c in stubs)
            parts.append(_Part(f"Not shown (no text beyond the title): {names}"))
        return parts

    def _seen_before(self, record: QueryStat | None, fresh: Sequence[EvidenceChunk],
                     view: PlannerView) -> list[_Part]:
        """What a search returned that was shown earlier: listed by reference, not again."""
        if record is None:
            return []
        known = {c.id: c for c in view.evidence}
        new = {c.id for c in fresh}
        again = [known[i] for i in record.chunk_ids if i in known and i not in new]
        if not again:
            return []
        refs = "; ".join(f"[{self._numbers[c.id]}] [{c.id}]" if c.id in self._numbers
                         else f"[{c.id}]" for c in again)
        return [_Part(f"Also returned, shown before: {refs}")]

    def _passage(self, chunk: EvidenceChunk, view: PlannerView) -> _Part | None:
        """``[n] [id] title (score 0.83)`` then the text; ``None`` for a title-only stub.

        A compact chunk of a compressed view shows the key points it is part of.
        """
        text = self._cut(chunk.text)
        lines: list[str] = []
        if view.compressed and chunk.id not in view.expanded:
            if text:
                lines.append(text)
            lines += [f"key point {p.id}: {' '.join(p.text.split())}"
                      for p in view.points if chunk.id in p.chunk_ids]
            if not lines:
                lines.append("(text compacted; not among the key points)")
        elif is_stub(chunk.title, text):
            return None
        else:
            lines.append(text)
        number = self._numbers.setdefault(chunk.id, len(self._numbers) + 1)
        head = passage_header(number, chunk)
        terms = frozenset(content_terms(" ".join([chunk.title, *lines])))
        return _Part("\n".join([head, *lines]), chunk_id=chunk.id, head=head, terms=terms)

    def _cut(self, text: str) -> str:
        return clip_text(text, self.max_chunk_chars, " ...")

    def _status(self, view: PlannerView) -> list[str]:
        parts = []
        if view.remaining_steps is not None:
            parts.append(f"{view.remaining_steps} model steps")
        if view.remaining_tool_calls is not None:
            parts.append(f"{view.remaining_tool_calls} tool calls")
        if view.web and view.remaining_pages is not None:
            parts.append(f"{view.remaining_pages} pages to open")
        if view.remaining_s is not None:
            parts.append(f"{view.remaining_s:.0f} s")
        if view.remaining_tokens is not None:
            parts.append(f"{max(0, view.remaining_tokens)} model tokens")
        lines = [f"Budget left: {', '.join(parts)}."] if parts else []
        if view.covered:
            lines.append("Covered by the evidence: " + "; ".join(view.covered) + ".")
        if view.missing:
            lines.append("Still missing: " + "; ".join(view.missing) + ".")
        if "recall" in self._offered:
            lines.append("Passages are shown compact, as key points: recall(point_id) shows "
                         "the passages of a key point in full (no tool-call budget used).")
        if "extend_budget" in self._offered:
            lines.append("The budget is nearly spent: extend_budget() asks, once, for one more "
                         "round; call it together with the tool calls of that round.")
        return lines

    def _mark_seen(self, view: PlannerView) -> None:
        self._shown = len(view.evidence)
        self._queries_seen = len(view.queries)
        self._reads_seen = len(view.reads)
        self._pages_seen = len(view.pages)

    def _compact_history(self, view: PlannerView) -> None:
        """While the context is too long, cut the passages least related to the open question.

        Relevance is the share of the question's content terms a passage (title and
        text) holds, plus the share of the terms of the parts the run reports
        missing; the least relevant are cut first (the older first among equals),
        so the passages that look like the answer keep their text longest. A cut
        passage keeps its first line ([n] [id] title (score)); in a compressed
        view it says which key point ``recall`` brings it back with.
        """
        sizes = {i: len(json.dumps(m)) for i, m in enumerate(self.messages)}
        total = sum(sizes.values())
        if total <= self.max_context_chars:
            return
        question = frozenset(content_terms(view.question))
        missing = frozenset(content_terms(" ".join(view.missing)))

        def relevance(terms: frozenset[str]) -> float:
            score = len(terms & question) / len(question) if question else 0.0
            return score + (len(terms & missing) / len(missing) if missing else 0.0)

        order = sorted(
            (relevance(part.terms), index, k)
            for index, parts in self._parts.items()
            for k, part in enumerate(parts)
            if part.chunk_id and not part.cut
        )
        recall_of = ({c: p.id for p in view.points for c in p.chunk_ids}
                     if "recall" in self._offered else {})
        for _, index, k in order:
            if total <= self.max_context_chars:
                break
            part = self._parts[index][k]
            point = recall_of.get(part.chunk_id)
            again = f"; recall({point!r}) shows it again" if point else ""
            part.cut = f"{part.head} [text left out: less related to the question{again}]"
            message = self.messages[index]
            message["content"] = _text(self._parts[index])
            size = len(json.dumps(message))
            total += size - sizes[index]
            sizes[index] = size


def _text(parts: Sequence[_Part]) -> str:
    return "\n".join(p.text for p in parts)


def _nudge_of(result: ChatResult, pending: Sequence[_Pending]) -> _Nudge | None:
    """The kind of turn the planner did not take at its word, if this was one."""
    if not result.tool_calls:
        return "no_tool_call"
    return next((p.nudge for p in pending if p.nudge is not None), None)


def _after(nudges: Sequence[tuple[_Nudge, str]]) -> str:
    """``after feedback (no_tool_call)``: the retry that made this turn, and why."""
    return f"after feedback ({', '.join(kind for kind, _ in nudges)})" if nudges else ""


def _take_query(records: list[QueryStat], query: str) -> QueryStat | None:
    wanted = " ".join(query.split()).casefold()
    for i, record in enumerate(records):
        if " ".join(record.query.split()).casefold() == wanted:
            return records.pop(i)
    return None


def _call_text(call: ToolCall) -> str:
    """How a call reads to the model and in reasons: ``search('q')``, ``open_page('id')``."""
    if call.tool == "search":
        what = f"search({call.args['query']!r}"
        filters = call.args.get("filters")
        if isinstance(filters, dict) and filters:
            what += ", filters " + json.dumps(filters, sort_keys=True)
        return what + ")"
    if call.tool == "scrape":
        return f"open_page({call.args['result_id']!r})"
    if call.tool == "recall":
        return f"recall({call.args['point']!r})"
    if call.tool == "read":
        return f"read({call.args['chunk_id']!r}, {call.args['direction']!r})"
    return f"{call.tool}()"


def _describe(call: ToolCall, n: int, record: QueryStat | None = None) -> str:
    what = _call_text(call)
    s = "s" if n != 1 else ""
    if call.tool == "recall":
        return f"{what}: {n} passage{s} in full:"
    if n == 0 and record is not None and record.chunk_ids:
        return f"{what}: no new passages; it returned passages shown before:"
    if n == 0 and record is not None and record.hits:
        return (f"{what}: no new passages: its {record.hits} result"
                f"{'s' if record.hits != 1 else ''} had all been shown before or fell under "
                "the relevance floor (search what is still missing instead)")
    return f"{what}: {n} new passage{s}" + (":" if n else " (nothing new)")


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
    content = result.content or (None if result.tool_calls else "")
    message: dict[str, Any] = {"role": "assistant", "content": content}
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


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _join(*parts: str, limit: int = 2000) -> str:
    text = "; ".join(p.strip() for p in parts if p and p.strip())
    return text if len(text) <= limit else text[: limit - 3] + "..."
