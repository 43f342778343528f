"""Cancel requests: a cancel sent to any replica, kept in the shared store for the run's owner.

A replica that is asked to cancel a run it does not execute records the request
(:meth:`CancelRequests.request_cancel`) under the run's current owner; the owner
takes its pending requests (:meth:`CancelRequests.take_cancel_requests`) while it
has runs going and cancels them. A request is only ever recorded for a
``running`` run, and taking it removes it: each request is acted on at most once.
The backends implement it in ``_cancels_sqlite``, ``backends/_cancels_redis`` and
``backends/_cancels_postgres``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["CancelRequest", "CancelRequests"]


@dataclass(frozen=True, slots=True)
class CancelRequest:
    """A recorded cancel of a run: what its owner should cancel, and why."""

    run_id: str
    reason: str


@runtime_checkable
class CancelRequests(Protocol):
    """Cancels recorded for whichever owner is running the run."""

    async def request_cancel(self, run_id: str, tenant: str | None, reason: str) -> bool:
        """Record a cancel of ``run_id`` for its owner; False if the run is not ``running``.

        Raises:
            RunNotFound: missing, or another tenant's.
            StoreReadOnly: the store was opened read-only.
        """
        ...

    async def take_cancel_requests(self) -> list[CancelRequest]:
        """Remove and return the cancels recorded for this owner's runs (a read-only
        store: ``[]``)."""
        ...
