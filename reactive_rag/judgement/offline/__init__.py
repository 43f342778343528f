"""Offline judgement: rules and small fitted heads that need no model server.

One module per rule family (question analysis, sufficiency, statement support and its
fitted head, conflicts, soft failures, key points, follow-up rewriting, loop detection)
plus the offline planner and extractive writer built on them. :func:`offline_judgement`
bundles the families the run machine consumes; each can be switched off.
"""

from ._bundle import OFFLINE_FAMILIES, offline_judgement
from ._conflicts import conflict_claims, conflicts_for_answer, find_conflicts
from ._evidence_pick import named_hops, select_evidence
from ._extractive_writer import ExtractiveWriter
from ._loop_guard import LoopGuard, LoopVerdict, normalize_query
from ._planner import OfflinePlanner
from ._points import compress_round
from ._question import desubjectivize, extract_entities, question_entities
from ._rewrite import rewrite_followup
from ._soft_failures import spam_flags, stale_flag
from ._sufficiency import (
    QuestionNeeds,
    analyse_question,
    judge_answerability,
    judge_answerability_fixed,
    sufficiency_features,
)
from ._sufficiency_head import (
    DEFAULT_SUFFICIENCY_HEAD_PATH,
    SufficiencyFeatures,
    SufficiencyHead,
    SufficiencyHeadError,
    load_sufficiency_head,
)
from ._support import (
    DEFAULT_SUPPORT_WEIGHTS,
    SupportScore,
    SupportWeights,
    pronoun_resolved,
    support_score,
    without_verdict,
)
from ._support_head import (
    DEFAULT_SUPPORT_HEAD_PATH,
    EmbeddingSupport,
    HeadFeatures,
    SupportHeadError,
    SupportHeadWeights,
    flip_polarity,
    head_features,
    load_support_head,
    polarity_flips,
)
from ._whole_document import MAX_FOCUS_TERMS, WHOLE_DOCUMENT_CUES, whole_document_request
from ._yes_no import LEAD_WORDS

__all__ = [
    "DEFAULT_SUFFICIENCY_HEAD_PATH",
    "DEFAULT_SUPPORT_HEAD_PATH",
    "DEFAULT_SUPPORT_WEIGHTS",
    "LEAD_WORDS",
    "MAX_FOCUS_TERMS",
    "OFFLINE_FAMILIES",
    "WHOLE_DOCUMENT_CUES",
    "EmbeddingSupport",
    "ExtractiveWriter",
    "HeadFeatures",
    "LoopGuard",
    "LoopVerdict",
    "OfflinePlanner",
    "QuestionNeeds",
    "SufficiencyFeatures",
    "SufficiencyHead",
    "SufficiencyHeadError",
    "SupportHeadError",
    "SupportHeadWeights",
    "SupportScore",
    "SupportWeights",
    "analyse_question",
    "compress_round",
    "conflict_claims",
    "conflicts_for_answer",
    "desubjectivize",
    "extract_entities",
    "find_conflicts",
    "flip_polarity",
    "head_features",
    "judge_answerability",
    "judge_answerability_fixed",
    "load_sufficiency_head",
    "load_support_head",
    "named_hops",
    "normalize_query",
    "offline_judgement",
    "polarity_flips",
    "pronoun_resolved",
    "question_entities",
    "rewrite_followup",
    "select_evidence",
    "spam_flags",
    "stale_flag",
    "sufficiency_features",
    "support_score",
    "whole_document_request",
    "without_verdict",
]
