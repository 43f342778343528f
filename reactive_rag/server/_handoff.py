"""The server's runs hand whole-document questions to its background summary tasks.

:func:`wire_handoff` is called once the task manager exists (``mount_tasks``'s
start-up): every engine of the run manager (the shared one and each tenant's) gets a
starter over that task manager whose tasks belong to the run's tenant, so the tenant
that asked follows the task at ``GET /v1/tasks/{task_id}`` (the link the run ends
with). Runs on engine replicas (a dispatcher) are not handed off: their engines have no
task manager here.
"""

from __future__ import annotations

from aiohttp import web

from reactive_rag.tasks import TaskManager, summary_starter

from ._requests import MANAGER_KEY

__all__ = ["wire_handoff"]


def wire_handoff(app: web.Application, tasks: TaskManager | None) -> None:
    """Let the runs started from now on hand off to ``tasks`` (``None``: stop)."""
    runs = app.get(MANAGER_KEY)
    if runs is None:
        return

    def tenant(run_id: str) -> str:
        active = runs.active.get(run_id)
        return active.tenant if active is not None else "local"

    starter = None if tasks is None else summary_starter(tasks, tenant=tenant)
    engines = {id(e): e for e in (runs.engine, *runs.engines.values())}
    for engine in engines.values():
        engine.hand_off_to(starter)
