"""The contracts of the model-backed judges: statement support and sufficiency.

A judge is asked once per draft (support) or once before the writer
(sufficiency) and answers with typed values the run acts on. A judge that
could not judge raises :class:`JudgeError`, carrying what the caller needs
to say why (HTTP status, Retry-After, the timeout) and to fall back to the
offline check: a judge outage must never pass as a verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from streams import Conflict, ErrorInfo, EvidenceChunk

from ._seam import Rewrite, Turn
from ._verdicts import Answerability

__all__ = [
    "JudgeError",
    "ModelAnswerability",
    "ModelRewriter",
    "SufficiencyJudge",
    "SupportItem",
    "SupportJudge",
    "SupportLabel",
    "SupportVerdict",
]


@dataclass(frozen=True, slots=True)
class SupportItem:
    """One claim to judge, with what it cites.

    ``index`` is the claim's index in the draft (verdicts name it back);
    ``passage`` is the cited chunk's text, ``title`` its title.
    """

    index: int
    statement: str
    quote: str
    source_id: str
    title: str
    passage: str


SupportLabel = Literal["supported", "unsupported", "contradicted", "off_question"]


@dataclass(frozen=True, slots=True)
class SupportVerdict:
    """The judge's label for the claim ``index`` and, when it gave one, why."""

    index: int
    label: SupportLabel
    reason: str = ""


class SupportJudge(Protocol):
    """Judges every claim of a draft in one go (one model call at most)."""

    name: str  # the model's name, for events

    async def judge(self, question: str, items: Sequence[SupportItem]) -> Sequence[SupportVerdict]:
        """One verdict per item, in ``items`` order; raise :class:`JudgeError` if it cannot."""
        ...


class JudgeError(RuntimeError):
    """The judge gave no usable verdict (model call failed, reply malformed or incomplete).

    Attributes:
        status: the HTTP status of the failed call, when there was one.
        retry_after: seconds the server asked to wait (a 429 or 503), when it said.
        timeout_s: the call's timeout, when the call timed out.
        model: the judge model's name.
        role: which judge (``"support"`` or ``"sufficiency"``).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        timeout_s: float | None = None,
        model: str = "",
        role: str = "",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.timeout_s = timeout_s
        self.model = model
        self.role = role

    def info(self, kind: str = "JudgeError") -> ErrorInfo:
        """The failure as event data (what a fallback says it stood in for)."""
        return ErrorInfo(kind=kind, message=str(self), status=self.status,
                         retry_after_s=self.retry_after, timeout_s=self.timeout_s,
                         model=self.model, role=self.role)


@dataclass(frozen=True, slots=True)
class ModelAnswerability:
    """A model's sufficiency judgement and the disagreements it found.

    The conflicts' sides cite only passages the judge was given; their
    ``credibility`` is left at 1.0 and ``preferred`` at ``None``: the caller,
    which knows the sources, fills them.
    """

    judged: Answerability
    conflicts: tuple[Conflict, ...] = ()


class SufficiencyJudge(Protocol):
    """Decides whether the selected passages answer the question (the model decides)."""

    name: str

    async def judge(
        self, question: str, passages: Sequence[EvidenceChunk], hint: Answerability | None,
        others: Sequence[EvidenceChunk] = (),
    ) -> ModelAnswerability:
        """The judgement; ``hint`` is the offline verdict, shown as a hint, never a veto.

        ``others`` are passages the run holds that were not chosen for the writer: the
        model may add those the answer needs (``judged.extra_ids``) and judges with them.

        Raises:
            JudgeError: no usable judgement.
        """
        ...


class ModelRewriter(Protocol):
    """A model that reads a conversation's follow-ups and folds its older turns (e.g.
    :class:`~reactive_rag.judgement.model.ChatRewriter`); both calls raise when the model
    gives nothing usable, and the conversation's offline rules stand in, said so."""

    async def rewrite(self, question: str, history: Sequence[Turn]) -> Rewrite:
        """``question`` read as a standalone one against ``history``."""
        ...

    async def summarise(self, turns: Sequence[Turn], *, previous: str = "",
                        first: int = 1) -> str:
        """``turns`` (numbered from ``first``) folded into ``previous``, as one summary."""
        ...
