"""Answerability: the verdict the machine acts on before it asks the writer.

A run may hold real, correctly quoted text that does not answer the question
(a page about another country, a function with a similar name). Calling that
"answered" is as wrong as inventing a quote, so the machine asks a judge
whether the chosen evidence covers every part of the question, and acts on
the typed verdict: write, search for the missing part, write a partial
answer that says what is missing, or end with ``no_evidence``.

The judge is injected (like the evidence selector): it must be pure and
deterministic, because it runs inside the state machine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from streams import EvidenceChunk

__all__ = ["Answerability", "AnswerabilityJudge", "Verdict", "limits_note", "partial_note"]

Verdict = Literal["answerable", "partial", "unanswerable"]


@dataclass(frozen=True, slots=True)
class Answerability:
    """Whether the chosen evidence answers the question, part by part.

    Attributes:
        verdict: ``answerable`` only when every part is covered.
        answer_type: what the question asks for (``who``, ``when``, ``how_to``...).
        covered: the parts of the question the evidence covers (entities, terms, the answer).
        missing: the parts it does not cover, in words a user can read.
        reason: one plain sentence saying why.
        searches: queries that could find the missing parts (the agent runs them once).
        extra_ids: held chunks outside the writer's pick that cover a missing part;
            the machine adds them to the writer's evidence.
    """

    verdict: Verdict
    answer_type: str = ""
    covered: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    reason: str = ""
    searches: tuple[str, ...] = ()
    extra_ids: tuple[str, ...] = ()


AnswerabilityJudge = Callable[[str, Sequence[EvidenceChunk], Sequence[EvidenceChunk]],
                              Answerability]
"""``(question, chosen evidence, all held evidence) -> Answerability``; pure."""


def _listing(parts: Sequence[str]) -> str:
    quoted = [f"'{p}'" for p in parts]
    if len(quoted) <= 1:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + " and " + quoted[-1]


def partial_note(judged: Answerability) -> str:
    """The plain note under a partial answer: what was found, what is missing."""
    missing = _listing(judged.missing) or "part of the question"
    found = f" It covers {_listing(judged.covered)}." if judged.covered else ""
    return (f"Partial answer: the sources found do not cover {missing}.{found} "
            "The rest of the question is not answered here.")


def limits_note(resource: str | None) -> str:
    """The plain note under an answer the finalizer built when a budget ran out."""
    what = {"wall_clock": "time", "tool_calls": "tool-call", "steps": "step",
            "tokens": "token"}.get(resource or "", "")
    budget = f"the {what} budget" if what else "the budget"
    return (f"Note: based on what was found before {budget} ran out; "
            "it may be incomplete.")
