"""What ``GET /v1/runs/{id}`` answers, as typed values (validated, so a wrong body fails here)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["CitedSource", "RunSummary"]

_READ = ConfigDict(frozen=True, extra="ignore")  # a newer server may add fields


class CitedSource(BaseModel):
    """One citation of a summary: the shape of :meth:`~reactive_rag.engine.Citation.to_json`.

    The full :class:`~reactive_rag.engine.Citation` (with the chunk's text) is in the
    :class:`~reactive_rag.engine.RunResult` that ``RemoteRun.wait()`` rebuilds.
    """

    model_config = _READ

    number: int
    statement: str
    quote: str
    source_id: str
    title: str | None = None
    url: str | None = None
    credibility: float | None = None


class RunSummary(BaseModel):
    """A stored run as the server reports it: status, outcome, answer and citations.

    ``status`` is ``running``, ``finished`` or ``interrupted``; ``outcome`` is ``None``
    while the run goes on; ``last_seq`` is the seq of the last event stored so far;
    ``created``/``updated`` are Unix seconds.
    """

    model_config = _READ

    run_id: str
    status: str
    outcome: str | None = None
    question: str
    mode: str
    created: float
    updated: float
    last_seq: int
    answer: str = ""
    reason: str = ""
    citations: tuple[CitedSource, ...] = ()
    collections: tuple[str, ...] = ()

    @property
    def done(self) -> bool:
        """Whether the run has ended (an interrupted run may still be resumed)."""
        return self.status != "running"
