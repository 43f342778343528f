"""Stopping a store's background tasks (lease keeper, LISTEN loop) the one way."""

from __future__ import annotations

import asyncio

__all__ = ["stop_task"]


async def stop_task(task: asyncio.Task[None]) -> None:
    """Cancel a store's background task and wait for it to end.

    Its own cancellation is swallowed; the caller's is not: if the task that
    stops it is being cancelled as well, that goes on up.
    """
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # our caller is being cancelled too
