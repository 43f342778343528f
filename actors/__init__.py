"""Actors and their runtime: mailboxes, bounded concurrency, failures as events.

Knows ``streams``; knows nothing of the application above it.
"""

from ._actor import Actor, ActorContext, error_info
from ._exceptions import (
    ActorError,
    ActorStartError,
    MailboxFull,
    RayNotInstalled,
    RayUnreachable,
    RemoteActorDied,
    RemoteActorError,
    RemoteCallFailed,
)
from ._ray import RayOptions, RayPlacement, RemoteActor, init_ray, ray_module
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
    "RayNotInstalled",
    "RayOptions",
    "RayPlacement",
    "RayUnreachable",
    "RemoteActor",
    "RemoteActorDied",
    "RemoteActorError",
    "RemoteCallFailed",
    "enable_wal",
    "error_info",
    "init_ray",
    "ray_module",
]
