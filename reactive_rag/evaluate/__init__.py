"""Measure the engine on your own questions: read a question file, ask each, score the answers.

What ``reactive-rag eval`` runs, for use from Python too: :func:`read_cases` reads our
JSONL, HotpotQA or SQuAD files; :func:`ask_cases` asks each question on each mode;
:class:`CaseResult` scores one run and :func:`mode_figures` sums a mode up;
:func:`contains_gold` is the one rule for "the answer contains an expected answer".
"""

from ._cases import QACase, QAFile, QAFileError, QAFormat, read_cases
from ._gold import contains_gold, fold, gold_pattern, holds_gold
from ._run import ask_cases
from ._score import ANSWERED, WITH_TEXT, CaseResult, ModeFigures, mode_figures

__all__ = [
    "ANSWERED",
    "WITH_TEXT",
    "CaseResult",
    "ModeFigures",
    "QACase",
    "QAFile",
    "QAFileError",
    "QAFormat",
    "ask_cases",
    "contains_gold",
    "fold",
    "gold_pattern",
    "holds_gold",
    "mode_figures",
    "read_cases",
]
