"""Judgement backed by a chat model: planner, writer, support and sufficiency judges, and
the follow-up rewriter.

Each speaks an OpenAI-compatible chat server through :mod:`actors.models` and
implements the same protocol as its offline counterpart.
"""

from ._planner import (
    DEFAULT_PLANNER_PROMPT,
    PLANNER_TOOLS,
    ChatPlanner,
    ScopeCheck,
    default_scope,
    planner_prompt,
    planner_tools,
)
from ._rewrite import (
    DEFAULT_FOLLOWUP_PROMPT,
    DEFAULT_SUMMARY_PROMPT,
    FOLLOWUP_SCHEMA,
    SUMMARY_SCHEMA,
    ChatRewriter,
    RewriteError,
)
from ._sufficiency import DEFAULT_SUFFICIENCY_PROMPT, ChatSufficiency
from ._support import DEFAULT_SUPPORT_PROMPT, ChatSupportJudge
from ._whole_document import (
    DEFAULT_WHOLE_DOCUMENT_PROMPT,
    WHOLE_DOCUMENT_SCHEMA,
    ChatWholeDocument,
)
from ._writer import DEFAULT_WRITER_PROMPT, ChatWriter, parse_claims

__all__ = [
    "DEFAULT_FOLLOWUP_PROMPT",
    "DEFAULT_PLANNER_PROMPT",
    "DEFAULT_SUFFICIENCY_PROMPT",
    "DEFAULT_SUMMARY_PROMPT",
    "DEFAULT_SUPPORT_PROMPT",
    "DEFAULT_WHOLE_DOCUMENT_PROMPT",
    "DEFAULT_WRITER_PROMPT",
    "FOLLOWUP_SCHEMA",
    "PLANNER_TOOLS",
    "SUMMARY_SCHEMA",
    "WHOLE_DOCUMENT_SCHEMA",
    "ChatPlanner",
    "ChatRewriter",
    "ChatSufficiency",
    "ChatSupportJudge",
    "ChatWholeDocument",
    "ChatWriter",
    "RewriteError",
    "ScopeCheck",
    "default_scope",
    "parse_claims",
    "planner_prompt",
    "planner_tools",
]
