"""Errors of the run layer.

Hierarchy::

    RunError
    ├── IllegalTransition (RuntimeError)   an event impossible in the current phase
    └── RunConfigError (ValueError)        bad run options (unknown mode, budget...)
"""

from __future__ import annotations

__all__ = ["IllegalTransition", "RunConfigError", "RunError"]


class RunError(Exception):
    """Root of the run layer's errors."""


class IllegalTransition(RunError, RuntimeError):
    """The state machine got an event that is impossible in its phase."""


class RunConfigError(RunError, ValueError):
    """Options for a run that cannot work; nothing was started."""
