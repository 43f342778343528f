"""What planner and writer policies see and return (offline or chat-model backed).

A policy is the *brain* behind the planner or writer actor; the actors own the
stream plumbing. Policies never touch the stream: they get a view, return a
decision or a draft, and the run's state machine checks everything they say.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from streams import Claim, ClaimError, EvidenceChunk, Feedback, ToolCall

__all__ = [
    "Decision",
    "Draft",
    "PlannerPolicy",
    "PlannerView",
    "QueryRecord",
    "WriteMode",
    "WriterPolicy",
]

WriteMode = Literal["answer", "finalize", "repair"]


@dataclass(frozen=True, slots=True)
class QueryRecord:
    """A search the run made and what it brought: ``new_evidence`` 0 means nothing new."""

    query: str
    hits: int
    new_evidence: int


@dataclass(frozen=True, slots=True)
class PlannerView:
    """Everything a planner policy may base its next move on.

    ``evidence`` holds every registered chunk in registration order (web
    results whose page was not opened have ``snippet=True``); ``feedback``
    carries the run's refusals and warnings since the last turn as typed
    :class:`~streams.Feedback` (loop, duplicate, read limit, empty, below the
    floor, spam, stale...) so a policy decides on ``kind``, never on prose.
    ``pages`` are the URLs this run opened; ``today`` is the run's date (ISO),
    for date filters ("last year").
    """

    question: str
    round: int
    evidence: Sequence[EvidenceChunk]
    queries: Sequence[QueryRecord]
    feedback: Sequence[Feedback] = ()
    reads: Sequence[str] = ()
    remaining_steps: int | None = None
    remaining_tool_calls: int | None = None
    remaining_s: float | None = None
    collections: Sequence[str] = ()
    pages: Sequence[str] = ()
    remaining_pages: int | None = None
    today: str = ""


@dataclass(frozen=True, slots=True)
class Decision:
    """A planner turn: tool calls to run in order, or ``answer`` (no calls)."""

    action: Literal["search", "read", "scrape", "answer"]
    calls: Sequence[ToolCall] = ()
    reason: str = ""
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class Draft:
    """A writer's answer: claims each quoting the evidence chunk it cites."""

    text: str
    claims: Sequence[Claim]
    tokens: int = 0
    notes: Sequence[str] = field(default_factory=tuple)
    lead: str = ""  # a direct answer inferred from the claims (checked by the verifier)


class PlannerPolicy(Protocol):
    """Decides the next move of an agent run."""

    name: str

    async def decide(self, view: PlannerView) -> Decision:
        """Return the next decision for ``view``; raise on an unrecoverable error."""
        ...


class WriterPolicy(Protocol):
    """Writes an answer from registered evidence only."""

    name: str

    async def write(
        self,
        question: str,
        evidence: Sequence[EvidenceChunk],
        *,
        mode: WriteMode,
        errors: Sequence[ClaimError] = (),
        emit_delta: Callable[[str, int | None], None] | None = None,
    ) -> Draft:
        """Return a draft whose claims cite ``evidence`` ids with exact quotes.

        ``emit_delta(text, claim_index)`` streams pieces of the answer as they are
        written. ``mode="repair"`` gets the verifier's ``errors`` for the previous
        draft; ``mode="finalize"`` is the budget-exhausted path (evidence only).
        """
        ...
