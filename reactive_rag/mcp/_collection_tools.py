"""The collection tools: ``create_collection``, ``add_documents``, ``delete_documents``,
``delete_collection``, over the server's :class:`~reactive_rag.server.CollectionWriter`.

The same rules as ``/v1/collections`` (the writer checks them): a tenant writes only
the collections it created or that config lists as writable, within its storage
quota. ``add_documents`` takes documents' text everywhere; file paths only on stdio
(``ToolScope.local_files``), where the caller is the user who started the server and
reads their own files: over HTTP a path would name a file on the server's disk.
Files go through the CLI's folder loader (typed skip reasons, the size cap).
A build is a background task: the tool follows it with progress notifications and
returns once the new generation is searchable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from reactive_rag.index import Document, DocumentLoadError, SkippedFile, load_folder
from reactive_rag.server import CollectionWriter, DocumentIn, Problem, Tenant, json_documents
from reactive_rag.store import BackgroundTask
from reactive_rag.tasks import TaskProgress
from streams import AsyncSubscriber, Event, OverflowPolicy


class _WriteScope(Protocol):
    """What the tools need of the caller's ``ToolScope``."""

    @property
    def tenant(self) -> Tenant: ...

    @property
    def writer(self) -> CollectionWriter | None: ...

    @property
    def local_files(self) -> bool: ...

__all__ = ["CollectionOut", "IndexOut", "add_collection_tools"]

T = TypeVar("T")


class CollectionOut(BaseModel):
    """A collection's size (generation 0: no document yet)."""

    name: str
    documents: int
    chunks: int
    generation: int
    updated: float
    embedder: str


class SkippedOut(BaseModel):
    """A file or document left out, and why (a typed reason)."""

    path: str
    reason: str
    detail: str


class IndexOut(BaseModel):
    """How a collection build ended."""

    task_id: str
    collection: str
    status: str = Field(description="done, failed or cancelled")
    result: dict[str, Any] | None = Field(
        default=None, description="generation, documents, chunks, added, updated, removed")
    error: str | None = None
    skipped: list[SkippedOut]


def add_collection_tools(server: MCPServer, scope_of: Callable[[Context], _WriteScope]) -> None:
    """Register the four collection tools on ``server``."""

    async def create_collection(
            name: str, ctx: Context,
            embedder: Literal["auto", "minilm", "multilingual"] = "auto") -> CollectionOut:
        """Create an empty collection you own; add documents to it with add_documents."""
        scope = scope_of(ctx)
        view = await _call(_writer(scope).create(scope.tenant, name, embedder))
        return CollectionOut.model_validate(view)

    async def add_documents(collection: str, ctx: Context,
                            documents: list[DocumentIn] | None = None,
                            paths: list[str] | None = None) -> IndexOut:
        """Add or replace documents (by id) in a collection you may write, and wait until
        they are searchable. ``documents``: [{id, title, text, metadata}]; ``paths``: files
        or folders to read (a local stdio server only). Unreadable files are skipped with
        a reason (binary, undecodable, too_large, unsupported_type...)."""
        scope = scope_of(ctx)
        writer = _writer(scope)
        max_bytes = scope.tenant.config.collection_writes.max_file_bytes
        docs, skipped = json_documents(list(documents or ()), max_bytes)
        if paths:
            if not scope.local_files:
                raise ToolError("paths are read only by a local (stdio) server; "
                                "send the documents' text instead")
            more, more_skipped = await asyncio.to_thread(_load_paths, paths, max_bytes)
            docs += more
            skipped += more_skipped
        task = await _call(writer.add(scope.tenant, collection, docs, skipped))
        return await _finish(writer, task, ctx)

    async def delete_documents(collection: str, ids: list[str], ctx: Context) -> IndexOut:
        """Remove documents by id from a collection you may write; waits for the new
        generation."""
        scope = scope_of(ctx)
        writer = _writer(scope)
        if not ids:
            raise ToolError("ids: name at least one document")
        task = await _call(writer.delete_documents(scope.tenant, collection, ids))
        return await _finish(writer, task, ctx)

    async def delete_collection(collection: str, ctx: Context) -> str:
        """Delete a collection you may write (its name becomes free)."""
        scope = scope_of(ctx)
        await _call(_writer(scope).drop(scope.tenant, collection))
        return f"collection {collection!r} deleted"

    for tool in (create_collection, add_documents, delete_documents, delete_collection):
        server.add_tool(tool)


def _writer(scope: _WriteScope) -> CollectionWriter:
    if scope.writer is None:
        raise ToolError("this server does not write collections")
    return scope.writer


async def _call(call: Awaitable[T]) -> T:
    """The writer's answer; its refusal (a problem) as the tool's error."""
    try:
        return await call
    except Problem as exc:
        raise ToolError(f"{exc.code}: {exc.detail}") from None


def _load_paths(paths: list[str], max_bytes: int) -> tuple[list[Document], list[SkippedFile]]:
    docs: list[Document] = []
    skipped: list[SkippedFile] = []
    for path in paths:
        try:
            docs.extend(load_folder(path, skipped=skipped, max_bytes=max_bytes))
        except DocumentLoadError as exc:  # no such path
            skipped.append(SkippedFile(path, exc.reason, exc.detail))
    return docs, skipped


async def _finish(writer: CollectionWriter, task: BackgroundTask, ctx: Context) -> IndexOut:
    """Follow the build with progress notifications; its final row as the answer."""
    manager = writer.tasks

    async def notify(event: Event) -> None:
        if isinstance(event, TaskProgress):
            await ctx.report_progress(event.done, event.total, "indexing")

    stream = manager.stream(task.task_id)
    view = None if stream is None else AsyncSubscriber(
        notify, name="mcp-index-progress", maxsize=256,
        policy=OverflowPolicy.DROP_NORMAL).attach(stream, after_seq=0)
    try:  # notifications still buffered when the build ends are dropped: the answer says it
        final = await manager.wait(task.task_id)
    finally:
        if view is not None:
            await view.aclose()
    result = final.result if isinstance(final.result, dict) else None
    skipped = task.params.get("skipped")
    return IndexOut(task_id=task.task_id, collection=str(task.params["collection"]),
                    status=final.status.value, result=result if final.status.value == "done"
                    else None, error=final.error,
                    skipped=[SkippedOut.model_validate(s)
                             for s in (skipped if isinstance(skipped, list) else [])])
