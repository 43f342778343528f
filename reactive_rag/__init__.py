"""reactive_rag: retrieval-augmented search agents whose whole run is one event stream.

The public API: :func:`ask` for one question, an :class:`Engine` to start many
runs and watch their streams (``async for event in handle``, or reactivex
operators on ``handle.stream.events``), :class:`Budget` for a run's limits,
:func:`serve` for the HTTP service, the config loaders and the stream operators.
The event types are in :mod:`reactive_rag.events`.
"""

from actors.providers import load_search_config
from actors.rerank import Credibility
from streams import Event, Outcome
from streams.operators import budget_watch, coalesce_progress, for_run, of_type, until_finished

from .cli import serve
from .engine import (
    Citation,
    Engine,
    EngineConfig,
    EngineReplicas,
    ReplicasUnavailable,
    RunHandle,
    RunObserver,
    RunResult,
    ask,
    load_engine_config,
)
from .run import Budget, NoRunningLoop, RunConfigError

__all__ = [
    "Budget",
    "Citation",
    "Credibility",
    "Engine",
    "EngineConfig",
    "EngineReplicas",
    "Event",
    "NoRunningLoop",
    "Outcome",
    "ReplicasUnavailable",
    "RunConfigError",
    "RunHandle",
    "RunObserver",
    "RunResult",
    "ask",
    "budget_watch",
    "coalesce_progress",
    "for_run",
    "load_engine_config",
    "load_search_config",
    "of_type",
    "serve",
    "until_finished",
]
