"""Errors of the run layer.

Hierarchy::

    RunError
    ├── IllegalTransition (RuntimeError)   an event impossible in the current phase
    ├── NoRunningLoop (RuntimeError)       a run started from code with no running event loop
    └── RunConfigError (ValueError)        bad run options (unknown mode, budget...)
"""

from __future__ import annotations

__all__ = ["IllegalTransition", "NoRunningLoop", "RunConfigError", "RunError"]


class RunError(Exception):
    """Root of the run layer's errors."""


class IllegalTransition(RunError, RuntimeError):
    """The state machine got an event that is impossible in its phase."""


class NoRunningLoop(RunError, RuntimeError):
    """A run is a task on the caller's event loop, and there is none running here.

    Raised by :meth:`~reactive_rag.Engine.start` called from plain (synchronous)
    code; nothing was started.
    """

    def __init__(self, what: str = "Engine.start()") -> None:
        super().__init__(f"{what} needs a running asyncio event loop: call it from async "
                         "code (inside `async def`), e.g. `asyncio.run(main())`, or use "
                         "`asyncio.run(reactive_rag.ask(question))` for one question")


class RunConfigError(RunError, ValueError):
    """Options for a run that cannot work; nothing was started."""
