"""Per-run temporary knowledge bases of web results (the "compression: rag" mode of web search).

A run's web hits are indexed into a temporary BM25 (or hybrid) index that every search of
the run is answered from; it is dropped when the run ends. (Conversation sessions are
:mod:`reactive_rag.conversation`, stored through :class:`~reactive_rag.store.SessionStore`.)
"""

from ._exceptions import WebKbClosed, WebKbError
from ._hybrid import HybridWebKbIndex
from ._index import Bm25WebKbIndex, WebKbIndex
from ._kb import WebKnowledgeBase, pick_round_robin
from ._prior import PriorEvidenceProvider
from ._provider import CompressingProvider
from ._store import WebKbStore

__all__ = [
    "Bm25WebKbIndex",
    "CompressingProvider",
    "HybridWebKbIndex",
    "PriorEvidenceProvider",
    "WebKbClosed",
    "WebKbError",
    "WebKbIndex",
    "WebKbStore",
    "WebKnowledgeBase",
    "pick_round_robin",
]
