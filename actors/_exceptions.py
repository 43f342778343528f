"""Errors of the actor runtime.

Hierarchy::

    ActorError
    ├── MailboxFull (RuntimeError)     a request met a full mailbox; answered with a failure
    ├── ActorStartError (RuntimeError) an actor's on_start raised; the run ends as failed
    ├── RayNotInstalled (ImportError)  a remote placement without the `ray` extra
    ├── RayUnreachable (ConnectionError) no Ray cluster answers at the address given
    └── RemoteActorError (RuntimeError) a remote actor call failed outside its handler
        ├── RemoteActorDied            the Ray worker died mid-call (restarting or gone)
        └── RemoteCallFailed           the call reached no handler (cancelled, bad reply)
"""

from __future__ import annotations

__all__ = [
    "ActorError",
    "ActorStartError",
    "MailboxFull",
    "RayNotInstalled",
    "RayUnreachable",
    "RemoteActorDied",
    "RemoteActorError",
    "RemoteCallFailed",
]


class ActorError(Exception):
    """Root of every error raised by ``actors``."""


class MailboxFull(ActorError, RuntimeError):
    """The actor's bounded mailbox had no room; the request was refused, not queued."""

    retryable = True


class ActorStartError(ActorError, RuntimeError):
    """An actor's ``on_start`` hook raised."""


class RayNotInstalled(ActorError, ImportError):
    """A remote placement was asked for, but Ray is not installed (the ``ray`` extra)."""


class RayUnreachable(ActorError, ConnectionError):
    """Nothing answers at the Ray address given (``ray.init`` would retry for minutes)."""


class RemoteActorError(ActorError, RuntimeError):
    """A remote actor call failed outside the handler (the handler's own errors are answered
    by its ``on_failure`` on the worker)."""


class RemoteActorDied(RemoteActorError):
    """The Ray actor process died (or was restarting) while this request was in it."""

    retryable = True


class RemoteCallFailed(RemoteActorError):
    """The remote call ended without a handler's answer (cancelled remotely, garbled reply)."""
