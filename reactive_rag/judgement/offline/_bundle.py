"""Today's offline rules as one :class:`~reactive_rag.judgement.Judgement`, family by family."""

from __future__ import annotations

import dataclasses

from .. import AnswerabilityJudge, Judgement
from ._conflicts import conflicts_for_answer
from ._points import compress_round
from ._rewrite import rewrite_followup
from ._soft_failures import spam_flags, stale_flag
from ._sufficiency import judge_answerability
from ._whole_document import whole_document_request

__all__ = ["OFFLINE_FAMILIES", "offline_judgement"]

OFFLINE_FAMILIES = tuple(f.name for f in dataclasses.fields(Judgement))
"""The switchable rule families: the fields of :class:`Judgement`."""


def offline_judgement(*, sufficiency: AnswerabilityJudge | None = judge_answerability,
                      off: frozenset[str] | set[str] = frozenset()) -> Judgement:
    """The offline rules for every family except those named in ``off``.

    ``sufficiency`` replaces the offline answerability judge (``None``: the writer is
    always asked). An unknown family name in ``off`` is a :class:`ValueError`.
    """
    unknown = set(off) - set(OFFLINE_FAMILIES)
    if unknown:
        raise ValueError(f"unknown judgement famil{'y' if len(unknown) == 1 else 'ies'} "
                         f"{sorted(unknown)}; known: {list(OFFLINE_FAMILIES)}")
    return Judgement(
        sufficiency=None if "sufficiency" in off else sufficiency,
        conflicts=None if "conflicts" in off else conflicts_for_answer,
        spam=None if "spam" in off else spam_flags,
        stale=None if "stale" in off else stale_flag,
        points=None if "points" in off else compress_round,
        followups=None if "followups" in off else rewrite_followup,
        whole_document=None if "whole_document" in off else whole_document_request,
    )
