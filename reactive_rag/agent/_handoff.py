"""The hand-off actor: a question that needs one whole document goes to a background task.

It answers the run's ``handoff.requested`` (sent first, before any planning): it lists
the documents of the run's collections, asks the chat model judge (when one is
configured, the offline rules' verdict as its hint) or the offline rules which document,
if any, the question asks for whole, and starts that document's summary task through a
:class:`TaskStarter`. The run then ends ``handed_off`` with the task
(:class:`~streams.TaskLink`); with no such document it goes on as usual. A model judge
that fails is stood in for by the rules, said so in ``handoff.decided.fallback``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

from actors import Actor, ActorContext
from reactive_rag.judgement import (
    DocumentRef,
    JudgeError,
    WholeDocumentCheck,
    WholeDocumentJudge,
    WholeDocumentRequest,
)
from streams import (
    ActorFailed,
    ErrorInfo,
    Event,
    HandoffDecided,
    HandoffRequested,
    RunStarted,
    TaskLink,
)

from ._failures import model_failure

__all__ = ["Catalogue", "HandoffActor", "TaskStarter", "index_catalogue"]

Catalogue = Callable[[Sequence[str]], list[DocumentRef]]
"""The documents of some collections (blocking: the actor calls it in a thread)."""


class TaskStarter(Protocol):
    """Starts the whole-document summary of one document for a run; returns its task.

    Raises:
        LookupError: no such document (e.g. it was deleted meanwhile): no hand-off.
    """

    async def __call__(self, collection: str, doc_id: str, run_id: str) -> TaskLink: ...


class HandoffActor(Actor):
    """Decides the hand-off and starts the task (see the module's docstring).

    Args:
        catalogue: lists the documents of the run's collections.
        start: starts a summary task.
        rule: the offline rules (``None``: switched off).
        judge: a chat model that decides (the rules are its hint and fallback).
    """

    name = "handoff"
    handles = ("run.started", "handoff.requested")

    def __init__(self, catalogue: Catalogue, start: TaskStarter, *,
                 rule: WholeDocumentCheck | None = None,
                 judge: WholeDocumentJudge | None = None, timeout_s: float = 30.0) -> None:
        self.catalogue = catalogue
        self.start = start
        self.rule = rule
        self.judge = judge
        self.timeout_s = timeout_s
        self.question = ""

    def on_restore(self, events: Sequence[Event]) -> None:
        started = next((e for e in events if isinstance(e, RunStarted)), None)
        if started is not None:
            self.question = started.question

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        if isinstance(msg, RunStarted):
            self.question = msg.question
            return None
        assert isinstance(msg, HandoffRequested)
        documents = await asyncio.to_thread(self.catalogue, msg.collections)
        hint = self.rule(self.question, documents) if self.rule is not None else None
        decided, fallback = hint, None
        if self.judge is not None:
            try:
                decided = await self.judge.judge(self.question, documents, hint)
            except JudgeError as exc:
                fallback = model_failure(exc, role="hand-off judge", model=self.judge.name,
                                         timeout_s=self.timeout_s)
        return [await self._decided(decided, ctx.run_id, fallback)]

    async def _decided(self, decided: WholeDocumentRequest | None, run_id: str,
                       fallback: ErrorInfo | None) -> HandoffDecided:
        by = "model" if self.judge is not None and fallback is None else "offline"
        model = self.judge.name if self.judge is not None else ""
        if decided is None:
            return HandoffDecided(reason="the question does not ask for one whole document "
                                         "of the collections searched",
                                  by=by, model=model, fallback=fallback)
        doc = decided.document
        try:
            task = await self.start(doc.collection, doc.doc_id, run_id)
        except LookupError as exc:
            return HandoffDecided(reason=f"the summary could not start: {exc}", by=by,
                                  model=model, fallback=fallback)
        return HandoffDecided(task=task, title=doc.title, reason=decided.reason, by=by,
                              model=model, fallback=fallback)

    def on_failure(self, msg: Event, exc: BaseException) -> Event | None:
        """A failure (the store, the index) answers the request; the run then searches."""
        return ActorFailed(request_type=msg.type, error=model_failure(
            exc, role="hand-off", model=self.judge.name if self.judge else "",
            timeout_s=self.timeout_s))


def index_catalogue(titles: Callable[[str], dict[str, str]]) -> Catalogue:
    """A :data:`Catalogue` over ``titles(collection) -> {doc_id: title}`` (the index's)."""

    def catalogue(collections: Sequence[str]) -> list[DocumentRef]:
        return [DocumentRef(collection=c, doc_id=d, title=t)
                for c in collections for d, t in titles(c).items()]

    return catalogue
