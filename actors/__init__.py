"""Actors and their runtime: mailboxes, bounded concurrency, failures as events.

Knows ``streams``; knows nothing of the application above it.
"""

from ._actor import Actor, ActorContext, error_info
from ._exceptions import ActorError, ActorStartError, MailboxFull
from ._runtime import ActorRun, ActorStats, EdgeOperator
from ._sqlite import enable_wal

__all__ = [
    "Actor",
    "ActorContext",
    "ActorError",
    "ActorRun",
    "ActorStartError",
    "ActorStats",
    "EdgeOperator",
    "MailboxFull",
    "enable_wal",
    "error_info",
]
