"""Errors of the session knowledge base.

Hierarchy::

    SessionError
    └── SessionClosed (RuntimeError)   the session ended (or expired); its state is gone
"""

from __future__ import annotations

__all__ = ["SessionClosed", "SessionError"]


class SessionError(Exception):
    """Root of every session knowledge base error."""


class SessionClosed(SessionError, RuntimeError):
    """The session was ended or expired; open a new one."""
