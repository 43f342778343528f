"""What a run of a conversation brings from earlier turns (plain data, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass

from streams import EvidenceChunk, QueryRewritten

__all__ = ["RunContext"]


@dataclass(frozen=True, slots=True)
class RunContext:
    """A follow-up run's inheritance from its conversation.

    ``rewritten`` is published on the run's stream right after ``run.started``
    (the run's question is its ``standalone``); ``prior_evidence`` is searchable
    in the run as the ``session`` provider, so a chunk an earlier turn found can
    be found again without a new search of the corpus or the web, and it is
    registered (citable) in this run only when this run's search returns it:
    the evidence registry stays per run. ``history`` is the rolling history
    (last turns verbatim, older ones folded) for policies that read it.
    """

    rewritten: QueryRewritten | None = None
    prior_evidence: tuple[EvidenceChunk, ...] = ()
    history: str = ""
