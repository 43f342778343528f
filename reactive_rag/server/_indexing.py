"""Collections written over the API: one writer for the HTTP routes and the MCP tools.

The rules (who may write what, the storage quota) are checked here, once, when a
request comes in; the work runs as a background task of the server's
:class:`~reactive_rag.tasks.TaskManager` (kind ``"index"``): stored, followed on
``/v1/tasks/{id}/events`` like a summary, resumed after a restart. The documents
of a task wait in ``ROOT/.uploads/`` until it is done (a restart finds them
there). Builds are :meth:`CorpusIndex.index_documents` in ``add`` mode, the
CLI's: unchanged documents are not re-embedded and the new generation replaces
the old one atomically, so searches during a build see the old one.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reactive_rag.index import (
    EMBEDDER_CHOICES,
    CollectionInfo,
    CollectionNotFound,
    CorpusError,
    CorpusIndex,
    Document,
    IndexReport,
    SkippedFile,
    document_chunks,
    validate_name,
)
from reactive_rag.store import BackgroundTask
from reactive_rag.tasks import TaskManager, TaskReport

from ._auth import Tenant
from ._owners import Ownership, claim, read_owner, release
from ._problems import make_problem

__all__ = ["INDEX_KIND", "CollectionWriter"]

INDEX_KIND = "index"
"""The background task kind of a collection build."""

_STAGES = {"load": (0.0, 0.05), "chunk": (0.05, 0.15), "embed": (0.15, 0.9),
           "bm25": (0.9, 0.95), "hnsw": (0.95, 0.98), "write": (0.98, 1.0)}
_SCALE = 1000


class CollectionWriter:
    """Creates and deletes collections and queues their builds, under the tenant rules.

    Every refusal is a :class:`~reactive_rag.server.Problem`: 422 a bad name,
    403 ``collection_forbidden`` a collection the tenant may not see (the same
    whether it exists or not, as for searches), 403 ``collection_read_only`` one it
    may search but not write, 404 ``collection_not_found``, 409 ``collection_exists``,
    413 ``storage_quota``.
    """

    def __init__(self, index: CorpusIndex, tasks: TaskManager) -> None:
        self.index = index
        self.tasks = tasks
        self._staging = index.root / ".uploads"
        self._locks: dict[str, asyncio.Lock] = {}
        self._pending: dict[str, int] = {}  # tenant -> chunks its queued builds will add
        tasks.register(INDEX_KIND, self._work)

    def owner_of(self, name: str) -> str | None:
        """The tenant that created ``name`` over the API (None: an operator's collection)."""
        owner = read_owner(self.index.root, name)
        return owner.tenant if owner is not None else None

    # --- the rules ------------------------------------------------------------------

    def writable(self, tenant: Tenant, name: str) -> Ownership | None:
        """The collection's ownership if ``tenant`` may write it (None: listed in config)."""
        _check_name(name)
        if not tenant.allows(name):  # same answer whether it exists or not
            raise make_problem(403, "collection_forbidden",
                               f"you may not write collection {name!r}")
        owner = read_owner(self.index.root, name)
        if owner is not None:
            if owner.tenant == tenant.name:
                return owner
            raise make_problem(403, "collection_read_only",
                               f"collection {name!r} is shared with you read-only")
        if not self.index.exists(name):
            raise make_problem(404, "collection_not_found", f"no collection {name!r}")
        if not tenant.config.collection_writes.lists(name):
            raise make_problem(403, "collection_read_only",
                               f"collection {name!r} is read-only for you")
        return None

    def view(self, name: str) -> dict[str, Any]:
        """A collection as ``GET /v1/collections`` shows it (generation 0: no document yet)."""
        try:
            return self.index.collection_info(name).to_json()
        except CollectionNotFound:
            owner = read_owner(self.index.root, name)
            return CollectionInfo(name, 0, 0, 0, owner.created if owner else 0.0,
                                  owner.embedder if owner else "").to_json()

    def owned_empty(self, tenant: Tenant) -> list[str]:
        """The tenant's collections that hold no document yet (listed, never searchable)."""
        root = self.index.root
        if not root.is_dir():
            return []
        names = sorted(p.name for p in root.iterdir()
                       if p.is_dir() and not (p / "CURRENT").is_file())
        return [n for n in names if self.owner_of(n) == tenant.name]

    # --- requests -------------------------------------------------------------------

    async def create(self, tenant: Tenant, name: str, embedder: str = "auto") -> dict[str, Any]:
        """Create an empty collection owned by ``tenant`` (its first documents build it)."""
        _check_name(name)
        if not tenant.config.collection_writes.create:
            raise make_problem(403, "collection_forbidden", "you may not create collections")
        if embedder not in EMBEDDER_CHOICES:
            raise make_problem(422, "validation_failed", f"embedder: one of "
                               f"{', '.join(EMBEDDER_CHOICES)}", field="embedder")
        root = self.index.root
        taken = await asyncio.to_thread(
            lambda: self.index.exists(name) or read_owner(root, name) is not None
            or claim(root, name, tenant.name, embedder) is None)
        if taken:  # names are one namespace: this says only that the name is taken
            raise make_problem(409, "collection_exists", f"the name {name!r} is taken")
        return self.view(name)

    async def add(self, tenant: Tenant, name: str, documents: Sequence[Document],
                  skipped: Sequence[SkippedFile]) -> BackgroundTask:
        """Queue a build adding or replacing ``documents`` (by id); the others stay."""
        owner = self.writable(tenant, name)
        if not documents:
            raise make_problem(422, "nothing_to_index", _nothing_why(skipped))
        growth = await asyncio.to_thread(self._check_quota, tenant, name, documents)
        staged = await asyncio.to_thread(self._stage, documents)
        self._pending[tenant.name] = self._pending.get(tenant.name, 0) + growth
        try:
            return await self._submit(tenant, name, owner, staged=staged, remove=[],
                                      skipped=skipped, growth=growth)
        except BaseException:
            self._release(tenant.name, growth)
            raise

    async def delete_documents(self, tenant: Tenant, name: str,
                               ids: Sequence[str]) -> BackgroundTask:
        """Queue a build without the documents ``ids`` (404 if one is not there)."""
        owner = self.writable(tenant, name)
        present = await asyncio.to_thread(self._document_ids, name)
        missing = [i for i in ids if i not in present]
        if missing:
            raise make_problem(404, "document_not_found",
                               f"no document {missing[0]!r} in collection {name!r}")
        return await self._submit(tenant, name, owner, staged=None, remove=list(ids),
                                  skipped=(), growth=0)

    async def drop(self, tenant: Tenant, name: str) -> None:
        """Delete the collection (after any build of it queued here); its name is free."""
        self.writable(tenant, name)
        async with self._lock(name):
            if self.index.exists(name):
                await asyncio.to_thread(self.index.drop, name)
            release(self.index.root, name)

    async def _submit(self, tenant: Tenant, name: str, owner: Ownership | None, *,
                      staged: str | None, remove: list[str],
                      skipped: Sequence[SkippedFile], growth: int) -> BackgroundTask:
        params: dict[str, Any] = {
            "collection": name, "staged": staged, "remove": remove, "growth": growth,
            "owned": owner is not None, "skipped": [s.to_json() for s in skipped]}
        return await self.tasks.submit(INDEX_KIND, params, tenant=tenant.name)

    # --- quota ----------------------------------------------------------------------

    def usage(self, tenant: Tenant) -> int:
        """Chunks in every collection ``tenant`` may write (what the quota counts)."""
        listed = tenant.config.collection_writes
        total = 0
        for name in self.index.collections():
            owner = read_owner(self.index.root, name)
            if (owner.tenant == tenant.name) if owner is not None else listed.lists(name):
                try:
                    total += self.index.collection_info(name).chunks
                except CorpusError:
                    continue
        return total

    def _check_quota(self, tenant: Tenant, name: str, documents: Sequence[Document]) -> int:
        """How many chunks the build adds (413 if that takes the tenant over its quota).

        Builds queued but not done yet count as if done: parallel uploads cannot
        each fit under the quota and together go over it.
        """
        quota = tenant.config.collection_writes.max_chunks
        new = sum(len(document_chunks(d, self.index.chunking)) for d in documents)
        freed = 0
        replaced = {d.id for d in documents}
        if self.index.exists(name):
            coll = self.index.open(name)
            try:
                ids = set(coll.document_ids())
                freed = sum(coll.document_span(i)[1] for i in replaced & ids)
            finally:
                coll.close()
        projected = self.usage(tenant) + self._pending.get(tenant.name, 0) - freed + new
        if projected > quota:
            raise make_problem(413, "storage_quota", (
                f"this upload would bring your collections to {projected} chunks, over your "
                f"storage quota of {quota} chunks (collection_writes.max_chunks)"))
        return max(new - freed, 0)

    def _release(self, tenant: str, growth: int) -> None:
        left = self._pending.get(tenant, 0) - growth
        if left > 0:
            self._pending[tenant] = left
        else:
            self._pending.pop(tenant, None)

    # --- the task -------------------------------------------------------------------

    def _lock(self, name: str) -> asyncio.Lock:
        return self._locks.setdefault(name, asyncio.Lock())

    def _document_ids(self, name: str) -> set[str]:
        if not self.index.exists(name):
            return set()
        coll = self.index.open(name)
        try:
            return set(coll.document_ids())
        finally:
            coll.close()

    def _stage(self, documents: Sequence[Document]) -> str:
        self._staging.mkdir(parents=True, exist_ok=True)
        staged = f"{uuid.uuid4().hex}.json"
        tmp = self._staging / f".{staged}.tmp"
        tmp.write_text(json.dumps([_doc_json(d) for d in documents]), encoding="utf-8")
        tmp.replace(self._staging / staged)
        return staged

    def _unstage(self, staged: str | None) -> list[Document]:
        if staged is None:
            return []
        data = json.loads((self._staging / Path(staged).name).read_text(encoding="utf-8"))
        return [Document(id=d["id"], text=d["text"], title=d["title"], url=d["url"],
                         doc_type=d["doc_type"], date=d["date"], tags=tuple(d["tags"]),
                         metadata=d["metadata"]) for d in data]

    async def _work(self, task: BackgroundTask, report: TaskReport) -> dict[str, Any]:
        params = task.params
        name = str(params["collection"])
        staged = params.get("staged")
        staged = staged if isinstance(staged, str) else None
        remove = [str(r) for r in params.get("remove") or []]  # type: ignore[union-attr]
        try:
            documents = await asyncio.to_thread(self._unstage, staged)
            async with self._lock(name):
                if params.get("owned") and read_owner(self.index.root, name) is None:
                    raise CollectionNotFound(f"collection {name!r} was deleted meanwhile")
                result = await self._build(name, documents, remove, report)
        except asyncio.CancelledError:
            raise  # shutdown: the staged documents wait for the restart
        except BaseException:
            self._discard(staged)
            raise
        finally:
            growth = params.get("growth")
            self._release(task.tenant, growth if isinstance(growth, int) else 0)
        self._discard(staged)
        result["skipped"] = params.get("skipped") or []
        return result

    def _discard(self, staged: str | None) -> None:
        if staged is not None:
            (self._staging / Path(staged).name).unlink(missing_ok=True)

    async def _build(self, name: str, documents: list[Document], remove: list[str],
                     report: TaskReport) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[int, int, str]] = asyncio.Queue()

        def progress(done: int, total: int, stage: str) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (done, total, stage))

        job = asyncio.ensure_future(asyncio.to_thread(
            self._build_sync, name, documents, remove, progress))
        shown = 0
        while True:
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({job, getter}, return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():
                getter.cancel()
                break
            done, total, stage = getter.result()
            low, high = _STAGES.get(stage, (0.0, 0.0))
            now = int(_SCALE * (low + (high - low) * (done / total if total else 1.0)))
            if now > shown:
                shown = now
                await report(min(now, _SCALE - 1), _SCALE)
        return job.result()

    def _build_sync(self, name: str, documents: list[Document], remove: list[str],
                    progress: Any) -> dict[str, Any]:
        exists = self.index.exists(name)
        if not documents and exists and not self._document_ids(name) - set(remove):
            self.index.drop(name)  # nothing left: back to an empty collection
            return {"collection": name, "generation": 0, "documents": 0, "chunks": 0,
                    "added": 0, "updated": 0, "unchanged": 0, "removed": len(remove)}
        owner = read_owner(self.index.root, name)
        choice = owner.embedder if owner is not None and not exists else None
        built = self.index.index_documents(name, documents, mode="add", progress=progress,
                                           embedder=choice, remove=remove)  # type: ignore[arg-type]
        return _report_json(built)


def _check_name(name: str) -> None:
    try:
        validate_name(name)
    except ValueError as exc:
        raise make_problem(422, "validation_failed", str(exc), field="name") from None


def _nothing_why(skipped: Sequence[SkippedFile]) -> str:
    if not skipped:
        return "no documents were sent"
    reasons = sorted({s.reason for s in skipped})
    return f"{len(skipped)} file(s) sent, none indexable ({', '.join(reasons)})"


def _doc_json(doc: Document) -> dict[str, Any]:
    return {"id": doc.id, "text": doc.text, "title": doc.title, "url": doc.url,
            "doc_type": doc.doc_type, "date": doc.date, "tags": list(doc.tags),
            "metadata": dict(doc.metadata)}


def _report_json(report: IndexReport) -> dict[str, Any]:
    return {"collection": report.collection, "generation": report.generation,
            "documents": report.documents, "chunks": report.chunks, "added": report.added,
            "updated": report.updated, "unchanged": report.unchanged,
            "removed": report.removed, "embedder": report.embedder}
