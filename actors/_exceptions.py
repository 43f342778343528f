"""Errors of the actor runtime.

Hierarchy::

    ActorError
    ├── MailboxFull (RuntimeError)     a request met a full mailbox; answered with a failure
    └── ActorStartError (RuntimeError) an actor's on_start raised; the run ends as failed
"""

from __future__ import annotations

__all__ = ["ActorError", "ActorStartError", "MailboxFull"]


class ActorError(Exception):
    """Root of every error raised by ``actors``."""


class MailboxFull(ActorError, RuntimeError):
    """The actor's bounded mailbox had no room; the request was refused, not queued."""

    retryable = True


class ActorStartError(ActorError, RuntimeError):
    """An actor's ``on_start`` hook raised."""
