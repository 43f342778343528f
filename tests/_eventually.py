"""Waiting in a test for what happens elsewhere (another task, a process, a Ray node)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable


async def eventually(check: Callable[[], bool | Awaitable[bool]], what: str = "the condition",
                     *, timeout_s: float = 60.0, interval_s: float = 0.01) -> None:
    """Return once ``check()`` (sync or async) is true.

    Raises:
        AssertionError: naming ``what``, if it is still false after ``timeout_s``.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if loop.time() >= deadline:
            raise AssertionError(f"waited {timeout_s:g} s for {what}")
        await asyncio.sleep(interval_s)
