"""Cancel on any replica: a cancel this server cannot act on is recorded for the run's owner.

Behind a load balancer a cancel reaches any replica. :func:`cancel_anywhere`
cancels the run here when it goes on here; otherwise it records the cancel in
the shared store (:meth:`~reactive_rag.store.CancelRequests.request_cancel`),
and the owner's :class:`CancelRelay` takes it within ``[cancels] poll_s`` and
cancels the run. The run then ends ``cancelled``, or with the ending that won
the race; a cancel is never silently dropped while the run is going.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Self

from aiohttp import web

from reactive_rag.store import StoreError

from ._periodic import repeat
from ._requests import MANAGER_KEY, request_tenant
from ._runs import RunManager

__all__ = ["CancelAnswer", "CancelRelay", "cancel_anywhere", "ws_cancel"]

log = logging.getLogger("reactive_rag.server")

CLIENT_REASON = "cancelled by the client"


@dataclass(frozen=True, slots=True)
class CancelAnswer:
    """What a cancel did.

    ``cancelled``: this server cancelled the run now. ``accepted``: the cancel
    will be acted on: done here, or recorded for the replica running the run
    (False: the run had already ended).
    """

    cancelled: bool
    accepted: bool


async def cancel_anywhere(manager: RunManager, run_id: str, tenant: str,
                          reason: str = CLIENT_REASON) -> CancelAnswer:
    """Cancel ``run_id`` here, or record the cancel for the replica that runs it.

    Raises:
        RunNotFound: missing, or another tenant's.
        StoreError: the store could not record the cancel.
    """
    if manager.cancel(run_id, reason):
        return CancelAnswer(cancelled=True, accepted=True)
    if run_id in manager.active or (manager.remote is not None and run_id in manager.remote):
        return CancelAnswer(cancelled=False, accepted=False)  # ours, and it has ended
    record = await manager.store.get_run(run_id, tenant)
    if record.status != "running":
        return CancelAnswer(cancelled=False, accepted=False)
    accepted = await manager.store.request_cancel(run_id, tenant, reason)
    return CancelAnswer(cancelled=False, accepted=accepted)


def ws_cancel(request: web.Request, run_id: str) -> Callable[[], Awaitable[bool]]:
    """A WebSocket client's cancel of ``run_id``: True once cancelled or recorded for its
    owner, False if the run had already ended (or the store could not record it)."""
    async def cancel() -> bool:
        try:
            answer = await cancel_anywhere(request.app[MANAGER_KEY], run_id,
                                           request_tenant(request).name)
        except StoreError as exc:
            log.warning("run %s: a WebSocket cancel could not be recorded: %s", run_id, exc)
            return False
        return answer.accepted

    return cancel


class CancelRelay:
    """Takes the cancels other replicas recorded for this server's runs, and cancels them.

    Looks every ``poll_s`` while runs go on here (with a dispatcher, always);
    never raises from its task: a store that fails is asked again next time.
    """

    def __init__(self, manager: RunManager, *, poll_s: float) -> None:
        if not poll_s > 0:
            raise ValueError("poll_s must be > 0")
        self.manager = manager
        self.poll_s = poll_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> Self:
        """Start looking in the background."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                repeat(self.tick, interval_s=self.poll_s, what="looking for recorded cancels",
                       store_error_level=logging.DEBUG,
                       idle=lambda: not self.manager.active and self.manager.remote is None),
                name="cancel-relay")
        return self

    async def aclose(self) -> None:
        """Stop looking; idempotent."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def tick(self) -> list[str]:
        """Take this owner's recorded cancels once and act on them; the ids cancelled here."""
        cancelled: list[str] = []
        for request in await self.manager.store.take_cancel_requests():
            if self.manager.cancel(request.run_id, request.reason):
                log.info("run %s cancelled as another replica asked", request.run_id)
                cancelled.append(request.run_id)
        return cancelled
