"""Errors of the session knowledge base.

Hierarchy::

    WebKbError
    └── WebKbClosed (RuntimeError)   the session ended (or expired); its state is gone
"""

from __future__ import annotations

__all__ = ["WebKbClosed", "WebKbError"]


class WebKbError(Exception):
    """Root of every session knowledge base error."""


class WebKbClosed(WebKbError, RuntimeError):
    """The session was ended or expired; open a new one."""
