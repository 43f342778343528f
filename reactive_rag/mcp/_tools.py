"""The MCP tools — ``research``, ``search``, ``read`` — over an :class:`~reactive_rag.Engine`
(and the collection tools of :mod:`._collection_tools`).

Each call first resolves its :class:`ToolScope` (who is calling, what they may search,
how their runs start): stdio has one local scope, the HTTP endpoint one per tenant.
Scope, budgets and collections go through the HTTP API's own checks
(:func:`~reactive_rag.server.resolve_collections` and
:class:`~reactive_rag.server.RunRequest`); a refusal is an MCP tool error
(``is_error``) with the API's message, never a crash of the server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field, ValidationError

from actors.providers import ProviderError
from reactive_rag.engine import Engine, Mode, PriceTable, RunHandle, RunResult, usage_json
from reactive_rag.index import (
    Chunk,
    ChunkNotFound,
    CollectionNotFound,
    CorpusError,
    LocalCorpusProvider,
)
from reactive_rag.run import RunConfigError
from reactive_rag.server import (
    CollectionWriter,
    Problem,
    RunRequest,
    Tenant,
    resolve_collections,
)
from reactive_rag.tasks import TaskManager
from streams import AsyncSubscriber, Event, OverflowPolicy, RunStarted

from ._collection_tools import add_collection_tools
from ._progress import progress_message
from ._summarize import add_summarize_tool

__all__ = ["CitationOut", "ReadResult", "ResearchAnswer", "SearchHitOut", "SearchResult",
           "StartRun", "ToolScope", "build_mcp_server"]

StartRun = Callable[[str, Mode, tuple[str, ...], Mapping[str, Any]], Awaitable[RunHandle]]
"""Starts one run: ``(question, mode, collections, budget) -> handle`` (may raise Problem)."""


@dataclass(frozen=True, slots=True)
class ToolScope:
    """What one caller may do.

    Attributes:
        tenant: whose collections (``tenant.allows``) and limits apply.
        engine: searches and reads go to its index.
        defaults: collections searched when a call names none.
        start: how this caller's runs start (the engine itself, or the server's run manager).
        building: the default corpus being indexed, if it is (calls then answer "not ready").
        mode: the mode of a research call that names none.
        prices: the price table a run's cost is estimated with (the server's ``[usage]``).
        writer: collection writes (the server's rules and tasks); None: read-only tools.
        local_files: ``add_documents`` may read file paths (stdio: the caller's own files).
        tasks: background tasks (the ``summarize`` tool); None: that tool says so.
    """

    tenant: Tenant
    engine: Engine
    defaults: tuple[str, ...]
    start: StartRun
    building: asyncio.Task[bool] | None = None
    mode: Mode = "agent"
    prices: PriceTable = field(default_factory=PriceTable)
    writer: CollectionWriter | None = None
    local_files: bool = False
    tasks: TaskManager | None = None

    def collections(self, requested: Sequence[str] | None) -> tuple[str, ...]:
        """The collections a call may use (the HTTP API's rules); ToolError otherwise."""
        try:
            return resolve_collections(self.tenant, requested, defaults=self.defaults,
                                       index=self.engine.index, building=self.building)
        except Problem as exc:
            raise ToolError(exc.detail) from None
        except ValueError as exc:  # a name the index refuses outright
            raise ToolError(f"collections: {exc}") from None

    def readable(self) -> tuple[str, ...]:
        """Every indexed collection this caller may read from."""
        return tuple(c for c in self.engine.index.collections() if self.tenant.allows(c))


ScopeOf = Callable[[Context], ToolScope]


class CitationOut(BaseModel):
    """One verified claim and the passage its quote was found in."""

    number: int
    statement: str
    quote: str
    chunk_id: str = Field(description="id to pass to the read tool")
    title: str | None = None
    url: str | None = None
    source: str | None = Field(default=None, description="e.g. local:COLLECTION or web")
    credibility: float | None = None


class ResearchAnswer(BaseModel):
    """How a research run ended: the answer, its citations, and what the run did."""

    run_id: str
    mode: str = Field(description="agent or rag")
    outcome: str = Field(description="answered, answered_from_evidence, partial, no_evidence, "
                                     "degraded, cancelled, failed or handed_off")
    answer: str
    reason: str
    citations: list[CitationOut]
    searches: int
    reads: int
    tool_calls: int = Field(description="searches, reads and page opens the run made")
    evidence: int
    elapsed_s: float
    budget: dict[str, Any] = Field(description="the limits the run ran under")
    usage: dict[str, Any] = Field(default_factory=dict,
                                  description="model calls and tokens by role, provider calls, "
                                              "pages, wall time and the estimated cost")
    task: dict[str, Any] | None = Field(
        default=None, description="a handed_off run's background summary task: {task_id, "
                                  "kind, link, collection, doc_id}")


class SearchHitOut(BaseModel):
    """One passage of the corpus."""

    chunk_id: str
    title: str
    source: str
    url: str
    snippet: str
    score: float | None


class SearchResult(BaseModel):
    """The best passages for a query, best first."""

    query: str
    collections: list[str]
    hits: list[SearchHitOut]


class ChunkOut(BaseModel):
    """A passage with its place in the document."""

    chunk_id: str
    collection: str
    title: str
    url: str
    position: int
    text: str
    prev_id: str | None
    next_id: str | None


class ReadResult(BaseModel):
    """One chunk and its neighbours in reading order."""

    chunk: ChunkOut
    before: list[ChunkOut]
    after: list[ChunkOut]


def build_mcp_server(scope_of: ScopeOf, *, name: str = "reactive-rag") -> MCPServer:
    """An MCP server exposing ``research``, ``search`` and ``read``; ``scope_of`` says who calls."""
    server: MCPServer = MCPServer(name, instructions=(
        "Answers questions from local document collections with verified citations. "
        "`research` runs the agent and returns an answer whose every claim quotes a passage; "
        "`search` finds passages; `read` shows a passage and its neighbours."))

    async def research(
        question: str, ctx: Context,
        collections: list[str] | None = None,
        mode: Literal["agent", "rag"] | None = None,
        budget: dict[str, bool | int | float] | None = None,
    ) -> Annotated[CallToolResult, ResearchAnswer]:
        """Research a question over the collections; the answer cites the passages it quotes.

        Progress notifications follow the run (plan, searches, pages, drafts,
        verification). ``mode``: "agent" (plans searches and reads) or "rag" (one search,
        then the answer); ``budget`` overrides run limits, e.g. {"max_tool_calls": 4,
        "wall_s": 30}.
        """
        scope = scope_of(ctx)
        request = _run_request(question, mode or scope.mode, collections, budget)
        chosen = scope.collections(request.collections)
        try:
            handle = await scope.start(request.question, request.mode, chosen, request.budget)
        except Problem as exc:
            raise ToolError(exc.detail) from None
        except RunConfigError as exc:
            raise ToolError(str(exc)) from None
        result = await _follow(handle, ctx)
        answer = _answer(result).model_copy(
            update={"usage": usage_json(result.usage, scope.prices)})
        return CallToolResult(content=[TextContent(type="text", text=_render(answer))],
                              structured_content=answer.model_dump(mode="json"))

    async def search(query: str, ctx: Context, collections: list[str] | None = None,
                     k: Annotated[int, Field(ge=1, le=50)] = 8) -> SearchResult:
        """Search the collections for passages (hybrid BM25 + vectors), best first."""
        scope = scope_of(ctx)
        if not query.strip():
            raise ToolError("the query is empty")
        chosen = scope.collections(collections)
        provider = LocalCorpusProvider(scope.engine.index, chosen)
        try:
            hits = await provider.search(query, k, None)
        except ProviderError as exc:  # a corrupt index, an embedder that does not match
            raise ToolError(f"search failed: {exc}") from None
        return SearchResult(query=query, collections=list(chosen), hits=[
            SearchHitOut(chunk_id=h.chunk_id or "", title=h.title, source=h.source, url=h.url,
                         snippet=h.snippet, score=h.score) for h in hits])

    async def read(chunk_id: str, ctx: Context,
                   count: Annotated[int, Field(ge=0, le=5)] = 1) -> ReadResult:
        """Read one passage by its chunk id, with ``count`` neighbours on each side."""
        scope = scope_of(ctx)
        found = await asyncio.to_thread(_read, scope, chunk_id, count)
        if found is None:
            raise ToolError(f"no chunk {chunk_id!r} in the collections you may read")
        return found

    server.add_tool(research, structured_output=True)
    server.add_tool(search)
    server.add_tool(read)
    add_collection_tools(server, scope_of)
    add_summarize_tool(server, scope_of)
    return server


def _run_request(question: str, mode: str, collections: list[str] | None,
                 budget: dict[str, bool | int | float] | None) -> RunRequest:
    """The call as a ``POST /v1/runs`` body: the same validation, the same messages."""
    try:
        return RunRequest.model_validate({"question": question, "mode": mode,
                                          "collections": collections, "budget": budget or {}})
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        raise ToolError(f"{where or 'arguments'}: {err['msg']}"[:300]) from None


async def _follow(handle: RunHandle, ctx: Context) -> RunResult:
    """Wait for the run, sending one progress notification per meaningful event.

    A cancelled call (the client hung up, or sent ``notifications/cancelled``) leaves
    the run going, as a closed SSE connection does on the API.
    """
    sent = 0

    async def notify(event: Event) -> None:
        nonlocal sent
        message = progress_message(event)
        if message is not None:
            sent += 1
            await ctx.report_progress(sent, None, message)

    view = AsyncSubscriber(notify, name="mcp-progress", maxsize=1000,
                           policy=OverflowPolicy.DROP_NORMAL).attach(handle.stream, after_seq=0)
    try:
        result = await handle.wait()
        await view.wait()  # every notification goes out before the result
        return result
    finally:
        await view.aclose()


def _answer(result: RunResult) -> ResearchAnswer:
    started = next((e for e in result.events if isinstance(e, RunStarted)), None)
    return ResearchAnswer(
        run_id=result.run_id, mode=started.mode if started is not None else "",
        outcome=result.outcome, answer=result.answer,
        reason=result.reason,
        citations=[CitationOut(
            number=c.number, statement=c.claim.statement, quote=c.claim.quote,
            chunk_id=c.claim.source_id, title=c.chunk.title if c.chunk else None,
            url=c.chunk.url if c.chunk else None, source=c.chunk.source if c.chunk else None,
            credibility=c.credibility) for c in result.citations],
        searches=result.count("search.requested"), reads=result.count("read.requested"),
        tool_calls=sum(result.count(t) for t in ("search.requested", "read.requested",
                                                 "scrape.requested")),
        evidence=len(result.evidence), elapsed_s=round(result.elapsed_s, 3),
        budget=_limits(started),
        task=result.task.model_dump() if result.task is not None else None)


def _limits(started: RunStarted | None) -> dict[str, Any]:
    limits = started.options.get("budget") if started is not None else None
    return dict(limits) if isinstance(limits, dict) else {}


def _render(answer: ResearchAnswer) -> str:
    """The text block: what a client without structured content shows."""
    lines = [f"[{answer.outcome}] {answer.answer}".rstrip()]
    if answer.reason:
        lines.append(answer.reason)
    for c in answer.citations:
        where = c.title or c.chunk_id
        lines.append(f"[{c.number}] {where} ({c.chunk_id}): “{' '.join(c.quote.split())}”")
    return "\n".join(lines)


def _chunk_out(chunk: Chunk) -> ChunkOut:
    return ChunkOut(chunk_id=chunk.id, collection=chunk.collection, title=chunk.title,
                    url=chunk.url, position=chunk.position, text=chunk.text,
                    prev_id=chunk.prev_id, next_id=chunk.next_id)


def _read(scope: ToolScope, chunk_id: str, count: int) -> ReadResult | None:
    """The chunk in the first readable collection that has it (None: in none of them)."""
    index = scope.engine.index
    for collection in scope.readable():
        try:
            chunk = index.chunk(chunk_id, collection=collection)
            before = index.neighbours(chunk_id, "prev", count, collection=collection)
            after = index.neighbours(chunk_id, "next", count, collection=collection)
        except (ChunkNotFound, CollectionNotFound):
            continue
        except CorpusError as exc:
            raise ToolError(f"collection {collection!r} cannot be read: {exc}") from None
        return ReadResult(chunk=_chunk_out(chunk), before=[_chunk_out(c) for c in before],
                          after=[_chunk_out(c) for c in after])
    return None
