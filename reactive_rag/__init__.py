"""reactive_rag: retrieval-augmented search agents whose whole run is one event stream.

The public API: :func:`ask` for one question, an :class:`Engine` to start many
runs and watch their streams, :class:`Budget` for a run's limits.
"""

from actors.rerank import Credibility

from ._engine import Citation, Engine, RunHandle, RunResult, ask
from .run import Budget, RunConfigError

__all__ = [
    "Budget",
    "Citation",
    "Credibility",
    "Engine",
    "RunConfigError",
    "RunHandle",
    "RunResult",
    "ask",
]
