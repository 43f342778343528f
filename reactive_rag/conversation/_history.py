"""Rolling history: the last turns verbatim, older ones folded into a bounded summary.

Every turn is kept for listing (question, standalone, outcome, answer, run id);
what a run is given as history is the last ``VERBATIM`` turns in full plus a
summary of the older ones. The summary is folded every ``FOLD_EVERY`` turns
(offline: extractive, the first sentence of each answer) and cut to
``SUMMARY_TOKENS`` whitespace tokens, oldest first out; each line names the run
it came from. With a model rewriter configured (:class:`ModelRewriter`) the model
writes the summary instead (:func:`afold`); when it fails, the rule fold stands
and the summary says why (``fallback``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from actors.text import split_sentences

from ..judgement import ModelRewriter, Turn
from ..judgement.model import RewriteError

__all__ = ["FOLD_EVERY", "SUMMARY_TOKENS", "VERBATIM", "HistorySummary", "ModelRewriter",
           "Turn", "afold", "fold", "history_text"]

VERBATIM = 2
FOLD_EVERY = 3
SUMMARY_TOKENS = 200


@dataclass(frozen=True, slots=True)
class HistorySummary:
    """Older turns folded into a few lines, with the runs they came from."""

    text: str = ""
    run_ids: tuple[str, ...] = ()
    folded: int = 0
    """How many of the oldest turns the summary covers."""
    by: Literal["rules", "model"] = "rules"
    """Who wrote ``text``: the extractive rule fold or the model."""
    fallback: str = ""
    """Why the rules wrote the last fold although a model is configured ("" if they did not)."""


def fold(summary: HistorySummary, turns: Sequence[Turn]) -> HistorySummary:
    """Fold older turns once ``FOLD_EVERY`` of them wait beyond the verbatim ones."""
    unfolded = len(turns) - VERBATIM - summary.folded
    if unfolded < FOLD_EVERY:
        return summary
    upto = len(turns) - VERBATIM
    lines = [summary.text] if summary.text else []
    lines += [_line(turn) for turn in turns[summary.folded:upto]]
    run_ids = (*summary.run_ids, *(t.run_id for t in turns[summary.folded:upto]))
    return HistorySummary(_bounded(lines), run_ids, upto)


async def afold(summary: HistorySummary, turns: Sequence[Turn],
                model: ModelRewriter | None) -> HistorySummary:
    """:func:`fold`, the model writing the summary when one is given and a fold is due.

    A model failure keeps the rule fold, with ``fallback`` saying why.
    """
    folded = fold(summary, turns)
    if model is None or folded.folded == summary.folded:
        return folded
    try:
        text = await model.summarise(turns[summary.folded:folded.folded],
                                     previous=summary.text, first=summary.folded + 1)
    except RewriteError as exc:
        return replace(folded, by="rules", fallback=f"{exc}; the older turns were folded "
                                                    "by the offline rules")
    return replace(folded, text=" ".join(text.split()[:SUMMARY_TOKENS]), by="model",
                   fallback="")


def history_text(summary: HistorySummary, turns: Sequence[Turn]) -> str:
    """What a run of the conversation is told about it: summary, then recent turns."""
    parts = [f"Earlier: {summary.text}"] if summary.text else []
    for turn in turns[max(summary.folded, len(turns) - VERBATIM):]:
        parts.append(f"Q: {turn.standalone}\nA: {turn.answer or '(' + turn.outcome + ')'} "
                     f"[run {turn.run_id}]")
    return "\n".join(parts)


def _line(turn: Turn) -> str:
    spans = split_sentences(turn.answer) if turn.answer else []
    first = turn.answer[spans[0][0]:spans[0][1]] if spans else ""
    return f"{turn.standalone} -> {first or turn.outcome} [run {turn.run_id}]"


def _bounded(lines: list[str]) -> str:
    """The lines joined, oldest dropped first, within ``SUMMARY_TOKENS`` tokens."""
    kept: list[str] = []
    budget = SUMMARY_TOKENS
    for line in reversed(" | ".join(lines).split(" | ")):
        words = line.split()
        if len(words) > budget:
            if not kept:  # the newest line alone is over the bound: keep its start
                kept.append(" ".join(words[:budget]))
            break
        kept.append(line)
        budget -= len(words)
    return " | ".join(reversed(kept))
