"""What planner and writer policies see and return (offline or chat-model backed).

A policy is the *brain* behind the planner or writer actor; the actors own the
stream plumbing. Policies never touch the stream: they get a view, return a
decision or a draft, and the run's state machine checks everything they say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from streams import (
    Claim,
    ClaimError,
    Event,
    EvidenceChunk,
    Feedback,
    KeyPoint,
    QueryStat,
    ToolCall,
    WriteMode,
)

__all__ = [
    "Decision",
    "Draft",
    "ModelBacked",
    "PlannerBase",
    "PlannerHooks",
    "PlannerPolicy",
    "PlannerView",
    "WriterBase",
    "WriterHooks",
    "WriterPolicy",
    "planner_context_tokens",
]

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

    With context compression (budget ``compress_context``, ``compressed``
    True) the bulk text comes as ``points``: every key point of the run so far
    (at most 5 per round, ~50 words each, naming the chunks they came from);
    ``evidence`` then shows in full only the chunks in ``expanded`` (recalled
    with a ``recall`` call, ``args={"point": id}``, or cited again), the
    others compact: ids, titles, URLs and neighbour ids kept, text empty (a
    web result's snippet cut to its first words). Near the end of the budget
    (``can_extend``) the run's answerability judge says which parts of the
    question the evidence ``covered``, which the last round ``newly_covered``
    and which are ``missing``; a decision with ``extend=True`` asks for the
    run's one budget extension. ``web`` says whether the run searches the web
    (only then can pages be opened and searches filtered by date or site);
    ``remaining_tokens`` is the run's model-token budget left.
    """

    question: str
    round: int
    evidence: Sequence[EvidenceChunk]
    queries: Sequence[QueryStat]
    feedback: Sequence[Feedback] = ()
    reads: Sequence[str] = ()
    remaining_steps: int | None = None
    remaining_tool_calls: int | None = None
    remaining_s: float | None = None
    collections: Sequence[str] = ()
    pages: Sequence[str] = ()
    remaining_pages: int | None = None
    today: str = ""
    points: Sequence[KeyPoint] = ()
    compressed: bool = False
    expanded: Sequence[str] = ()
    can_extend: bool = False
    covered: Sequence[str] = ()
    newly_covered: Sequence[str] = ()
    missing: Sequence[str] = ()
    web: bool = False
    """The run searches the web: web results, ``open_page`` and search filters apply."""
    remaining_tokens: int | None = None
    """Model tokens the run has left (``None``: no token budget)."""


def _words(text: str) -> int:
    return len(text.split())


def planner_context_tokens(view: PlannerView) -> int:
    """Whitespace tokens of everything ``view`` shows a planner.

    The question, the key points, the evidence texts, the queries made and
    the feedback; a stand-in for a model's token count that needs no tokenizer.
    """
    return (_words(view.question) + sum(_words(p.text) for p in view.points)
            + sum(_words(c.text) for c in view.evidence)
            + sum(_words(q.query) for q in view.queries)
            + sum(_words(f.detail) for f in view.feedback))


@dataclass(frozen=True, slots=True)
class Rejection:
    """A model tool call refused in code (for ``tool.rejected`` events): never executed."""

    call_id: str
    tool: str
    reason: str


@dataclass(frozen=True, slots=True)
class Decision:
    """A planner turn: tool calls to run in order, or ``answer`` (no calls).

    ``extend``: ask for the run's one budget extension (one more round), near
    the end of the budget; the run grants or refuses it (``budget.extended`` /
    ``budget.extension_refused``). ``rejected``: the calls the policy refused in
    code this turn (a chat model's bad calls), published as ``tool.rejected``.
    """

    action: Literal["search", "read", "scrape", "answer", "recall"]
    calls: Sequence[ToolCall] = ()
    reason: str = ""
    tokens: int = 0
    extend: bool = False
    # the model call(s) behind the decision (``ChatPlanner``); offline: "" and 0
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    rejected: Sequence[Rejection] = ()


@dataclass(frozen=True, slots=True)
class Draft:
    """A writer's answer: claims each quoting the evidence chunk it cites."""

    text: str
    claims: Sequence[Claim]
    tokens: int = 0
    notes: Sequence[str] = field(default_factory=tuple)
    lead: str = ""  # a direct answer inferred from the claims (checked by the verifier)
    answer_index: int | None = None
    """The claim that states the answer (the writer marks it; ``None``: the first claim)."""
    # the model call behind the draft (``ChatWriter``); offline: "" and 0
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0


class PlannerPolicy(Protocol):
    """Decides the next move of an agent run.

    A policy that keeps per-run state also implements :class:`PlannerHooks`
    (inherit :class:`PlannerBase` for no-op defaults), so a run resumed after a
    crash rebuilds it; one that does not starts the resumed run afresh.
    """

    name: str

    async def decide(self, view: PlannerView) -> Decision:
        """Return the next decision for ``view``; raise on an unrecoverable error."""
        ...


@runtime_checkable
class PlannerHooks(Protocol):
    """A planner policy's crash-resume hooks, called by its host actor's ``on_restore``.

    Before a resumed run goes on, for each plan request the log shows answered
    (in ``seq`` order) the host asks :meth:`replay`; then :meth:`restore` gets
    the whole stored log. A policy has both or neither (the host checks the
    protocol once per resume): :class:`PlannerBase` gives both as no-ops.
    """

    def replay(self, view: PlannerView) -> Decision | None:
        """Make a stored turn's move again, rebuilding this policy's state; no I/O.

        A deterministic policy returns the decision it made for ``view`` (the
        host vets its queries again, so the loop guard learns the round); ``None``
        means it cannot, and the host re-checks the queries the log shows.
        """
        ...

    def restore(self, events: Sequence[Event]) -> None:
        """Rebuild whatever else this policy keeps from the run's stored events."""
        ...


@runtime_checkable
class ModelBacked(Protocol):
    """A policy a chat model stands behind: its failures name that model."""

    @property
    def model_name(self) -> str:
        """The model's name as sent to its server."""
        ...


class PlannerBase:
    """Base of a planner policy: :class:`PlannerHooks` with no-op defaults.

    A subclass sets ``name`` and implements ``decide`` (:class:`PlannerPolicy`);
    it overrides a hook only if it keeps per-run state.
    """

    def replay(self, view: PlannerView) -> Decision | None:
        """Cannot replay a stored turn (the host re-checks the logged queries)."""
        return None

    def restore(self, events: Sequence[Event]) -> None:
        """Keeps nothing to rebuild."""


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
    ) -> Draft:
        """Return a draft whose claims cite ``evidence`` ids with exact quotes.

        Nothing is streamed while writing: a draft is not verified yet (the verifier
        publishes the text of the claims it keeps). ``mode="repair"`` gets the verifier's
        ``errors`` for the previous draft; ``mode="finalize"`` is the budget-exhausted path
        (evidence only).
        """
        ...


@runtime_checkable
class WriterHooks(Protocol):
    """A writer policy's crash-resume hook, called by its host actor's ``on_restore``."""

    def restore_draft(self, question: str, claims: Sequence[Claim]) -> None:
        """Remember the policy's own claims of a draft written before the crash.

        Called for each draft of the stored log, in order (the last one counts),
        so a repair after the resume knows which claims the verifier's errors name.
        """
        ...


class WriterBase:
    """Base of a writer policy: :class:`WriterHooks` with a no-op default.

    A subclass sets ``name`` and implements ``write`` (:class:`WriterPolicy`).
    """

    def restore_draft(self, question: str, claims: Sequence[Claim]) -> None:
        """Keeps no draft."""
