"""Runs hand whole-document questions to summary tasks through this adapter.

:func:`summary_starter` turns a :class:`~reactive_rag.tasks.TaskManager` into the
starter an :class:`~reactive_rag.engine.Engine` takes (``tasks=`` or
``engine.hand_off_to``): the hand-off actor calls it with the document and the run's
id, and the run ends ``handed_off`` with the :class:`~streams.TaskLink` it returns. The
task records the run that started it (``run_id``) and belongs to the run's tenant.
"""

from __future__ import annotations

from collections.abc import Callable

from streams import TaskLink

from ._manager import SUMMARY_KIND, TaskManager

__all__ = ["TASK_LINK", "SummaryStarter", "summary_starter", "task_link"]

TASK_LINK = "/v1/tasks/{task_id}"
"""Where the server serves a task (``GET``; ``/events`` follows it)."""


def task_link(task_id: str) -> str:
    """The task's path on the server."""
    return TASK_LINK.format(task_id=task_id)


class SummaryStarter:
    """Starts a document's summary task for a run (the engine's ``TaskStarter``)."""

    def __init__(self, manager: TaskManager, tenant: Callable[[str], str]) -> None:
        self.manager = manager
        self.tenant = tenant

    async def __call__(self, collection: str, doc_id: str, run_id: str) -> TaskLink:
        task = await self.manager.submit_summary(collection, doc_id,
                                                 tenant=self.tenant(run_id), run_id=run_id)
        return TaskLink(task_id=task.task_id, kind=SUMMARY_KIND, link=task_link(task.task_id),
                        collection=collection, doc_id=doc_id)


def summary_starter(manager: TaskManager, *,
                    tenant: Callable[[str], str] = lambda run_id: "local") -> SummaryStarter:
    """A starter for :class:`~reactive_rag.engine.Engine` over ``manager``.

    ``tenant(run_id)`` names the tenant the run (and so its task) belongs to: the
    server maps a run to its tenant; a library or CLI user's tasks are ``"local"``.
    The starter raises :class:`~reactive_rag.tasks.DocumentNotFound` (a LookupError)
    for a document that is gone.
    """
    return SummaryStarter(manager, tenant)
