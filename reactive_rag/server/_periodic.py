"""One way to run a server's background chore every interval (sweeps, relays).

A chore that fails is logged and tried again next interval; it never ends the
loop: a store that is down for a while must not stop the session sweeper, the
retention sweeper or the cancel relay for good.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from reactive_rag.store import StoreError

__all__ = ["repeat"]

log = logging.getLogger("reactive_rag.server")


async def repeat(chore: Callable[[], Awaitable[object]], *, interval_s: float, what: str,
                 first_now: bool = False, store_error_level: int = logging.WARNING,
                 idle: Callable[[], bool] | None = None) -> None:
    """Run ``chore`` every ``interval_s`` until cancelled (``first_now``: once at once).

    ``idle()`` true skips a turn (nothing to do here). A :class:`StoreError` is
    logged at ``store_error_level``, anything else with its traceback.
    """
    if not first_now:
        await asyncio.sleep(interval_s)
    while True:
        if idle is None or not idle():
            try:
                await chore()
            except StoreError as exc:
                log.log(store_error_level, "%s failed (tried again in %g s): %s: %s",
                        what, interval_s, type(exc).__name__, exc)
            except Exception:
                log.exception("%s failed", what)
        await asyncio.sleep(interval_s)
