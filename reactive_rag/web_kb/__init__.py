"""Per-session temporary knowledge bases (the "compression: rag" mode of web search)."""

from ._exceptions import (
    SessionClosed,
    SessionError,
)
from ._hybrid import (
    HybridSessionIndex,
)
from ._index import (
    Bm25SessionIndex,
    SessionIndex,
)
from ._kb import (
    SessionKnowledgeBase,
    pick_round_robin,
)
from ._prior import (
    PriorEvidenceProvider,
)
from ._provider import (
    CompressingProvider,
)
from ._store import (
    SessionStore,
)

__all__ = [
    "Bm25SessionIndex",
    "CompressingProvider",
    "HybridSessionIndex",
    "PriorEvidenceProvider",
    "SessionClosed",
    "SessionError",
    "SessionIndex",
    "SessionKnowledgeBase",
    "SessionStore",
    "pick_round_robin",
]
