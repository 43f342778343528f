"""Run budgets: what a run may spend, with defaults that finish in about a minute."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

__all__ = ["Budget"]


@dataclass(frozen=True, slots=True)
class Budget:
    """Hard limits of one run; every field can be overridden per run.

    The wall clock is a deadline for the search phase; ``finalize_s`` more is
    granted to the finalizer so a run that runs out of time still answers from
    its evidence. A call never gets more time than the run has left.
    """

    max_steps: int = 12  # model turns (planner decisions)
    max_tool_calls: int = 12  # searches, reads and page opens actually run
    max_parallel_calls: int = 4  # tool calls of one plan step in flight at once
    max_pages: int = 6  # web pages a run may open
    wall_s: float = 90.0  # deadline of the search phase
    model_call_s: float = 30.0  # cap on one model call
    tool_call_s: float = 20.0  # cap on one tool call
    max_tokens: int = 60_000  # tokens reported by model servers
    max_read_tokens: int = 200_000  # passage text the run's models were shown (estimated)
    max_consecutive_reads: int = 2  # reads in a row once evidence is held
    final_evidence: int = 5  # chunks given to the writer
    shortlist: int = 20  # chunks the final rerank keeps for the selector to choose from
    per_search_k: int = 10  # chunks kept from one search after reranking
    finalize_s: float = 15.0  # extra time for the finalizer after the deadline
    saturation_overlap: float = 0.8  # share of a round's evidence already known
    saturation_rounds: int = 2  # consecutive saturated rounds that end searching
    gap_rounds: int = 1  # searches for the parts of the question the evidence misses
    context_window_tokens: int = 8192  # the planner model's window (a budget extension needs
    # the planner's latest context under 70% of it)
    compress_context: bool = False  # the planner sees key points of each round, not raw chunks

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool):
                continue  # a switch, not a limit
            if value <= 0:
                raise ValueError(f"budget {f.name} must be positive, got {value!r}")
        if not 0 < self.saturation_overlap <= 1:
            raise ValueError("budget saturation_overlap must be in (0, 1]")

    def with_overrides(self, overrides: dict[str, Any] | None) -> Budget:
        """A copy with some limits replaced; unknown names are an error, not ignored."""
        if not overrides:
            return self
        known = {f.name for f in fields(self)}
        unknown = set(overrides) - known
        if unknown:
            raise ValueError(f"unknown budget field(s): {sorted(unknown)}; known: {sorted(known)}")
        return replace(self, **overrides)
