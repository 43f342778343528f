"""Persisted background tasks: whole-document summaries that outlive their clients.

A task is a row in the run store (:class:`~reactive_rag.store.BackgroundTask`)
before any work starts, and its progress is written after every chunk, so:

* no client connection owns it: the manager runs it as its own asyncio task;
* a restart finds it with ``list_unfinished_tasks`` and goes on from the last
  persisted chunk (:meth:`TaskManager.start`), not from zero;
* anyone may watch it on its stream (``task.started``, ``task.progress``,
  ``task.finished``) or read its row.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from reactive_rag.index import ChunkNotFound, CollectionNotFound, CorpusIndex, chunk_id
from reactive_rag.store import (
    BackgroundTask,
    TaskAlreadyFinished,
    TaskNotFound,
    TaskStatus,
    TaskStore,
    TaskUpdate,
)
from streams import Event, RunStream

from ._events import TaskFinished, TaskProgress, TaskStarted
from ._exceptions import DocumentNotFound, UnknownTask
from ._summary import SummaryState

__all__ = ["SUMMARY_KIND", "TaskManager", "TaskReport", "TaskWork"]

SUMMARY_KIND = "summary"
log = logging.getLogger("reactive_rag.tasks")

TaskReport = Callable[[int, int], Awaitable[None]]
"""``report(done, total)``: persist a registered task's progress and publish ``task.progress``."""
TaskWork = Callable[[BackgroundTask, TaskReport], Awaitable[Any]]
"""The work of a registered task kind: returns the JSON result stored when it is done.

It must be safe to run again from its ``params`` (a restart runs it again)."""


class TaskManager:
    """Starts, resumes, watches and cancels background tasks.

    Args:
        store: where tasks and their progress are persisted (an open store).
        index: the corpus the documents are read from.
        sentences: sentences per summary.
        pace_s: pause between chunks, so a long summary leaves room to the runs
            sharing the event loop (and a test room to stop it mid-way).
        embedder: sentence vectors (default: the index's embedder).
    """

    def __init__(self, store: TaskStore, index: CorpusIndex, *, sentences: int = 5,
                 pace_s: float = 0.0, embedder: Any = None) -> None:
        if sentences < 1:
            raise ValueError("sentences must be >= 1")
        self.store = store
        self.index = index
        self.sentences = sentences
        self.pace_s = pace_s
        self._embedder = embedder
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._streams: dict[str, RunStream] = {}
        self._attempts: dict[str, int] = {}
        self._kinds: dict[str, TaskWork] = {}
        self._closed = False

    @property
    def embedder(self) -> Any:
        return self._embedder if self._embedder is not None else self.index.embedder

    # --- lifecycle --------------------------------------------------------------------

    async def start(self) -> list[str]:
        """Resume every unfinished task in the store; return their ids."""
        resumed = []
        for task in await self.store.list_unfinished_tasks():
            known = task.kind == SUMMARY_KIND or task.kind in self._kinds
            if known and task.task_id not in self._workers:
                self._spawn(task)
                resumed.append(task.task_id)
        return resumed

    async def aclose(self) -> None:
        """Stop the workers; their tasks stay unfinished in the store, to be resumed."""
        self._closed = True
        workers = list(self._workers.values())
        for worker in workers:
            worker.cancel()
        for worker in workers:
            with contextlib.suppress(asyncio.CancelledError):
                await worker

    def register(self, kind: str, work: TaskWork) -> None:
        """Run tasks of ``kind`` with ``work``: stored, watched and resumed like summaries."""
        if kind == SUMMARY_KIND:
            raise ValueError(f"{kind!r} is built in")
        self._kinds[kind] = work

    # --- requests ---------------------------------------------------------------------

    async def submit(self, kind: str, params: dict[str, Any], *, tenant: str,
                     doc_id: str | None = None) -> BackgroundTask:
        """Persist a task of a registered ``kind`` and start it in the background."""
        if self._closed:
            raise RuntimeError("the task manager is closed")
        if kind not in self._kinds:
            raise ValueError(f"no task kind {kind!r} is registered")
        task = await self.store.create_task(BackgroundTask(
            task_id=uuid.uuid4().hex[:16], tenant=tenant, kind=kind, doc_id=doc_id,
            params=params))
        self._spawn(task)
        return task

    async def submit_summary(self, collection: str, doc_id: str, *, tenant: str = "local",
                             run_id: str | None = None) -> BackgroundTask:
        """Persist a summary task for one document and start it in the background.

        Raises:
            DocumentNotFound: no such collection or document (nothing is stored).
        """
        if self._closed:
            raise RuntimeError("the task manager is closed")
        await asyncio.to_thread(self._chunk_texts, collection, doc_id)  # check it exists
        task = await self.store.create_task(BackgroundTask(
            task_id=uuid.uuid4().hex[:16], tenant=tenant, kind=SUMMARY_KIND, run_id=run_id,
            doc_id=doc_id, params={"collection": collection, "doc_id": doc_id,
                                   "sentences": self.sentences}))
        self._spawn(task)
        return task

    async def get(self, task_id: str, tenant: str | None = None) -> BackgroundTask:
        """The stored task (raises UnknownTask, also for another tenant's)."""
        try:
            return await self.store.get_task(task_id, tenant)
        except TaskNotFound as exc:
            raise UnknownTask(f"no task {task_id!r}") from exc

    def stream(self, task_id: str) -> RunStream | None:
        """The live stream of a task run by this manager (None if not running here)."""
        return self._streams.get(task_id)

    def attempt(self, task_id: str) -> int:
        """Which run of the task its live stream belongs to (1, then +1 per resume)."""
        return self._attempts.get(task_id, 1)

    async def wait(self, task_id: str) -> BackgroundTask:
        """Wait for a task this manager runs to end, and return its final row."""
        worker = self._workers.get(task_id)
        if worker is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(worker)
        return await self.store.get_task(task_id)

    async def cancel(self, task_id: str, tenant: str | None = None) -> bool:
        """Give up on a task; False if it had already ended."""
        await self.get(task_id, tenant)
        worker = self._workers.get(task_id)
        if worker is not None:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        try:
            await self.store.update_task(task_id, TaskUpdate(status=TaskStatus.CANCELLED))
        except TaskAlreadyFinished:
            return False
        stream = self._streams.get(task_id)
        if stream is not None:
            stream.try_publish(TaskFinished(task_id=task_id, status="cancelled"),
                               actor="tasks")
        return True

    # --- the work ---------------------------------------------------------------------

    def _spawn(self, task: BackgroundTask) -> None:
        stream = RunStream(task.task_id)
        self._streams[task.task_id] = stream
        previous = task.result.get("attempt") if isinstance(task.result, dict) else None
        attempt = previous + 1 if isinstance(previous, int) else 1
        self._attempts[task.task_id] = attempt
        worker = asyncio.get_running_loop().create_task(
            self._run(task, stream, attempt), name=f"task:{task.task_id}")
        self._workers[task.task_id] = worker
        task_id = task.task_id

        def forget(_done: asyncio.Task[None]) -> None:
            if self._workers.get(task_id) is worker:
                del self._workers[task_id]

        worker.add_done_callback(forget)

    def _chunk_texts(self, collection: str, doc_id: str) -> list[tuple[str, str]]:
        first = chunk_id(doc_id, 0)
        try:
            head = self.index.chunk(first, collection=collection)
            rest = self.index.neighbours(first, "next", 1_000_000, collection=collection)
        except (ChunkNotFound, CollectionNotFound) as exc:
            raise DocumentNotFound(
                f"no document {doc_id!r} in collection {collection!r}") from exc
        return [(c.id, c.text) for c in (head, *rest)]

    async def _run(self, task: BackgroundTask, stream: RunStream, attempt: int) -> None:
        def publish(event: Event) -> None:
            stream.try_publish(event, actor="tasks")

        try:
            if task.kind == SUMMARY_KIND:
                await self._summarise(task, attempt, publish)
            else:
                await self._work(task, attempt, publish)
        except asyncio.CancelledError:
            raise  # shutdown or cancel(): the row stays as persisted
        except Exception as exc:
            log.warning("task %s failed: %s", task.task_id, exc)
            message = f"{type(exc).__name__}: {exc}"
            with contextlib.suppress(TaskAlreadyFinished):
                await self.store.update_task(
                    task.task_id, TaskUpdate(status=TaskStatus.FAILED, error=message))
            publish(TaskFinished(task_id=task.task_id, status="failed", error=message))

    async def _work(self, task: BackgroundTask, attempt: int,
                    publish: Callable[[Event], None]) -> None:
        await self.store.update_task(task.task_id, TaskUpdate(
            status=TaskStatus.RUNNING, result={"attempt": attempt}))
        publish(TaskStarted(task_id=task.task_id, kind=task.kind, doc_id=task.doc_id or "",
                            attempt=attempt))

        async def report(done: int, total: int) -> None:
            progress = done / total if total > 0 else 0.0
            await self.store.update_task(task.task_id, TaskUpdate(progress=min(progress, 0.999)))
            publish(TaskProgress(task_id=task.task_id, done=done, total=total,
                                 progress=progress))

        result = await self._kinds[task.kind](task, report)
        await self.store.update_task(task.task_id, TaskUpdate(
            status=TaskStatus.DONE, progress=1.0, result=result))
        publish(TaskFinished(task_id=task.task_id, status="done", result=result))

    async def _summarise(self, task: BackgroundTask, attempt: int,
                         publish: Callable[[Event], None]) -> None:
        collection = str(task.params["collection"])
        doc_id = str(task.params["doc_id"])
        sentences = int(task.params.get("sentences") or self.sentences)  # type: ignore[arg-type]
        chunks = await asyncio.to_thread(self._chunk_texts, collection, doc_id)
        partial = task.result.get("partial") if isinstance(task.result, dict) else None
        state = SummaryState(len(chunks), sentences)
        if partial is not None:
            try:
                state = SummaryState.from_json(partial)
            except ValueError:
                state = SummaryState(len(chunks), sentences)  # unreadable: start over
            if state.total != len(chunks):  # the document was re-indexed meanwhile
                state = SummaryState(len(chunks), sentences)
        embedder = self.embedder
        await self.store.update_task(task.task_id, TaskUpdate(
            status=TaskStatus.RUNNING, result={"partial": state.to_json(), "attempt": attempt}))
        publish(TaskStarted(task_id=task.task_id, kind=task.kind, doc_id=doc_id,
                            total=state.total, resumed_from=state.done, attempt=attempt))
        await asyncio.to_thread(state.start, [text for _, text in chunks], embedder)
        while not state.complete:
            cid, text = chunks[state.done]
            await asyncio.to_thread(state.add_chunk, cid, text, embedder)
            progress = state.done / state.total
            await self.store.update_task(task.task_id, TaskUpdate(
                progress=min(progress, 0.999),
                result={"partial": state.to_json(), "attempt": attempt}))
            publish(TaskProgress(task_id=task.task_id, done=state.done, total=state.total,
                                 progress=progress))
            if self.pace_s:
                await asyncio.sleep(self.pace_s)
        summary = state.result()
        result: dict[str, Any] = {
            "collection": collection, "doc_id": doc_id, "chunks": state.total,
            "sentences": summary, "text": " ".join(s["text"] for s in summary),
        }
        await self.store.update_task(task.task_id, TaskUpdate(
            status=TaskStatus.DONE, progress=1.0, result=result))
        publish(TaskFinished(task_id=task.task_id, status="done", result=result))
