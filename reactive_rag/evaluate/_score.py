"""One question's run, scored, and the figures of a mode over all its questions.

- ``answered``: runs ending ``answered`` or ``answered_from_evidence``;
- ``abstained``: runs ending ``no_evidence`` (the engine said it could not answer);
- ``contains_answer``: runs with an answer text (answered, or ``partial``) that holds an
  expected answer (:func:`~reactive_rag.evaluate.contains_gold`), out of ``expected``,
  the questions that expect one;
- ``citations_per_answer``: citations per answered run;
- ``latency_p50_s``/``latency_p95_s``: nearest-rank percentiles of the runs' seconds;
- ``input_tokens``/``output_tokens``: what the models reported, from the run's usage
  (:func:`~reactive_rag.engine.usage_of`; offline policies report none);
- ``cost``: those runs' estimated cost by a :class:`~reactive_rag.engine.PriceTable`
  (``unpriced``: models used that the table has no price for).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reactive_rag.engine import Mode, PriceTable, RunResult, usage_of

from ._cases import QACase
from ._gold import contains_gold

__all__ = ["ANSWERED", "WITH_TEXT", "CaseResult", "ModeFigures", "mode_figures"]

#: Outcomes that say "this is the answer" (what a user reads as answered).
ANSWERED = ("answered", "answered_from_evidence")
#: Outcomes that carry answer text to score (answered, or answered in part).
WITH_TEXT = (*ANSWERED, "partial")


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One question asked on one mode: how its run ended, and what it cost.

    ``contains_answer`` is None when the question expects no answer; ``cost`` is in
    the price table's currency, ``unpriced`` the models it had no price for.
    """

    case: QACase
    mode: Mode
    run_id: str
    outcome: str
    answer: str
    citations: int
    seconds: float
    input_tokens: int
    output_tokens: int
    contains_answer: bool | None
    cost: float = 0.0
    unpriced: tuple[str, ...] = ()

    @classmethod
    def of(cls, case: QACase, mode: Mode, result: RunResult, seconds: float,
           prices: PriceTable | None = None) -> CaseResult:
        """Score a finished run of ``case`` (its cost by ``prices``; none: no cost)."""
        usage = usage_of(result.events)
        cost = (prices or PriceTable()).estimate_cost(usage)
        contains = None if not case.answers else (
            result.outcome in WITH_TEXT and contains_gold(result.answer, case.answers))
        return cls(case=case, mode=mode, run_id=result.run_id, outcome=result.outcome,
                   answer=result.answer, citations=len(result.citations), seconds=seconds,
                   input_tokens=sum(m.input_tokens for m in usage.models),
                   output_tokens=sum(m.output_tokens for m in usage.models),
                   contains_answer=contains, cost=cost.total, unpriced=cost.unpriced)

    def to_json(self) -> dict[str, Any]:
        """The row ``eval --json`` prints for this run."""
        return {"id": self.case.id, "mode": self.mode, "question": self.case.question,
                "expected": list(self.case.answers), "run_id": self.run_id,
                "outcome": self.outcome, "answer": self.answer,
                "contains_answer": self.contains_answer, "citations": self.citations,
                "seconds": round(self.seconds, 3), "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost": self.cost}


@dataclass(frozen=True, slots=True)
class ModeFigures:
    """The figures of one mode over its questions (see the module docstring)."""

    mode: Mode
    questions: int
    answered: int
    abstained: int
    expected: int
    contains_answer: int
    citations_per_answer: float
    latency_p50_s: float
    latency_p95_s: float
    input_tokens: int
    output_tokens: int
    cost: float
    unpriced: tuple[str, ...]
    outcomes: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        """The figures as plain JSON data, with the rates beside the counts."""
        def rate(n: int, d: int) -> float:
            return round(n / d, 4) if d else 0.0

        return {"questions": self.questions, "answered": self.answered,
                "answered_rate": rate(self.answered, self.questions),
                "abstained": self.abstained,
                "abstained_rate": rate(self.abstained, self.questions),
                "expected": self.expected, "contains_answer": self.contains_answer,
                "contains_answer_rate": rate(self.contains_answer, self.expected),
                "citations_per_answer": self.citations_per_answer,
                "latency_p50_s": self.latency_p50_s, "latency_p95_s": self.latency_p95_s,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cost": self.cost, "unpriced": list(self.unpriced),
                "outcomes": dict(self.outcomes)}


def _percentile(values: Sequence[float], share: float) -> float:
    """Nearest rank: the smallest value with at least ``share`` of the values at or below it."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return round(ordered[max(0, math.ceil(share * len(ordered)) - 1)], 3)


def mode_figures(mode: Mode, results: Sequence[CaseResult]) -> ModeFigures:
    """The figures of ``mode`` over its results (the others' are left out)."""
    mine = [r for r in results if r.mode == mode]
    answered = [r for r in mine if r.outcome in ANSWERED]
    seconds = [r.seconds for r in mine]
    return ModeFigures(
        mode=mode, questions=len(mine), answered=len(answered),
        abstained=sum(r.outcome == "no_evidence" for r in mine),
        expected=sum(r.contains_answer is not None for r in mine),
        contains_answer=sum(r.contains_answer is True for r in mine),
        citations_per_answer=round(sum(r.citations for r in answered) / len(answered), 2)
        if answered else 0.0,
        latency_p50_s=_percentile(seconds, 0.5), latency_p95_s=_percentile(seconds, 0.95),
        input_tokens=sum(r.input_tokens for r in mine),
        output_tokens=sum(r.output_tokens for r in mine),
        cost=round(sum(r.cost for r in mine), 6),
        unpriced=tuple(sorted({m for r in mine for m in r.unpriced})),
        outcomes=dict(Counter(r.outcome for r in mine)))
