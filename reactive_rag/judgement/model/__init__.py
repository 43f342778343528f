"""Judgement backed by a chat model: the planner, the writer and the entailment judge.

Each speaks an OpenAI-compatible chat server through :mod:`actors.models` and
implements the same protocol as its offline counterpart.
"""

from ._entailment import DEFAULT_ENTAILMENT_PROMPT, ChatEntailment, EntailmentError
from ._planner import DEFAULT_PLANNER_PROMPT, PLANNER_TOOLS, ChatPlanner, ScopeCheck, default_scope
from ._writer import DEFAULT_WRITER_PROMPT, ChatWriter, parse_claims

__all__ = [
    "DEFAULT_ENTAILMENT_PROMPT",
    "DEFAULT_PLANNER_PROMPT",
    "DEFAULT_WRITER_PROMPT",
    "PLANNER_TOOLS",
    "ChatEntailment",
    "ChatPlanner",
    "ChatWriter",
    "EntailmentError",
    "ScopeCheck",
    "default_scope",
    "parse_claims",
]
