"""The ``summarize`` MCP tool: a whole document's background summary task, started by a client.

The same task as ``POST /v1/tasks``, ``reactive-rag summarize`` and an agent run's
hand-off: stored before it starts, owned by the caller's tenant, followed at its link.
With ``wait`` (the default) the call sends one progress notification per chunk and
returns the summary; without, it returns the task at once (follow it at
``GET /v1/tasks/{task_id}``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from reactive_rag.engine import Engine
from reactive_rag.server import Tenant
from reactive_rag.store import BackgroundTask
from reactive_rag.tasks import (
    DocumentNotFound,
    TaskFinished,
    TaskManager,
    TaskProgress,
    task_link,
)
from streams import follow

__all__ = ["SummaryOut", "SummarySentence", "add_summarize_tool"]


class _Scope(Protocol):
    """What the tool needs of the caller's ``ToolScope``."""

    @property
    def tenant(self) -> Tenant: ...

    @property
    def engine(self) -> Engine: ...

    @property
    def tasks(self) -> TaskManager | None: ...

    def collections(self, requested: Sequence[str] | None) -> tuple[str, ...]: ...

    def readable(self) -> tuple[str, ...]: ...


class SummarySentence(BaseModel):
    """One sentence of the summary, exactly as it stands in the chunk it names."""

    text: str
    chunk_id: str


class SummaryOut(BaseModel):
    """A summary task: where it stands and, once done, the summary."""

    task_id: str
    status: str = Field(description="pending, running, done, failed or cancelled")
    link: str = Field(description="the task on the HTTP API (GET; /events follows it)")
    collection: str
    doc_id: str
    summary: str = Field(default="", description="the summary's sentences, once done")
    sentences: list[SummarySentence] = Field(default_factory=list)
    error: str = ""


def add_summarize_tool(server: MCPServer, scope_of: Callable[[Context], _Scope]) -> None:
    """Add ``summarize`` to ``server``; ``scope_of(ctx)`` is the caller's ToolScope."""

    async def summarize(doc_id: str, ctx: Context, collection: str | None = None,
                        wait: bool = True) -> SummaryOut:
        """Summarise one whole document in a background task (a summary of every chunk).

        ``collection``: the document's collection (default: the one readable collection
        that has it). ``wait``: follow the task to its end (progress per chunk) and return
        the summary; false: return the started task at once.
        """
        scope = scope_of(ctx)
        if scope.tasks is None:
            raise ToolError("background tasks are not available here")
        chosen = _collection(scope, doc_id, collection)
        try:
            task = await scope.tasks.submit_summary(chosen, doc_id, tenant=scope.tenant.name)
        except DocumentNotFound as exc:
            raise ToolError(str(exc)) from None
        if wait:
            task = await _follow(scope.tasks, task, ctx)
        return _out(task, chosen, doc_id)

    server.add_tool(summarize)


def _collection(scope: _Scope, doc_id: str, collection: str | None) -> str:
    if collection is not None:
        return scope.collections([collection])[0]
    index = scope.engine.index
    found = [c for c in scope.readable() if doc_id in index.document_titles(c)]
    if len(found) != 1:
        where = f"in several collections ({', '.join(found)})" if found else "in none"
        raise ToolError(f"document {doc_id!r} is {where} of the collections you may read: "
                        "pass collection")
    return found[0]


async def _follow(tasks: TaskManager, task: BackgroundTask, ctx: Context) -> BackgroundTask:
    """Report each chunk done until ``task.finished``, then return the stored row."""
    stream = tasks.stream(task.task_id)
    if stream is not None:
        async for event in follow(stream, 0, until=lambda e: isinstance(e, TaskFinished),
                                  buffer=256):
            if isinstance(event, TaskProgress):
                await ctx.report_progress(event.done, event.total,
                                          f"chunk {event.done}/{event.total}")
    return await tasks.wait(task.task_id)


def _out(task: BackgroundTask, collection: str, doc_id: str) -> SummaryOut:
    result = task.result if task.status.value == "done" and isinstance(task.result, dict) else {}
    raw = result.get("sentences")
    sentences = [SummarySentence(text=str(s.get("text", "")), chunk_id=str(s.get("chunk_id", "")))
                 for s in (raw if isinstance(raw, list) else []) if isinstance(s, dict)]
    return SummaryOut(task_id=task.task_id, status=task.status.value,
                      link=task_link(task.task_id), collection=collection, doc_id=doc_id,
                      summary=str(result.get("text", "")), sentences=sentences,
                      error=task.error or "")
