"""The contract of the hand-off decision: does a question need one whole document read?

"Summarise the deployment guide" is not answered by the few passages a search
returns: it needs every chunk of one document, which the background summary task
(:mod:`reactive_rag.tasks`) reads. Before a run plans, the hand-off actor lists the
documents of the run's collections and asks a :class:`WholeDocumentCheck` (offline
rules, pure) or a :class:`WholeDocumentJudge` (a chat model, the rules as its hint and
fallback) which document, if any, the question asks for whole. The answer is typed
data (:class:`WholeDocumentRequest`), never prose read back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = ["DocumentRef", "WholeDocumentCheck", "WholeDocumentJudge", "WholeDocumentRequest"]


@dataclass(frozen=True, slots=True)
class DocumentRef:
    """One document a run may read: where it is, its id and its title."""

    collection: str
    doc_id: str
    title: str = ""


@dataclass(frozen=True, slots=True)
class WholeDocumentRequest:
    """The question asks for ``document`` as a whole (a summary or an overview of it).

    Attributes:
        document: one of the documents the judge was shown.
        reason: one plain sentence saying why (for the stream and the user).
        by: who decided.
    """

    document: DocumentRef
    reason: str = ""
    by: Literal["model", "offline"] = "offline"


class WholeDocumentCheck(Protocol):
    """``(question, documents) -> request or None``; pure and deterministic (offline rules)."""

    def __call__(self, question: str,
                 documents: Sequence[DocumentRef]) -> WholeDocumentRequest | None: ...


class WholeDocumentJudge(Protocol):
    """A chat model that decides the hand-off (one call per run at most)."""

    name: str

    async def judge(self, question: str, documents: Sequence[DocumentRef],
                    hint: WholeDocumentRequest | None) -> WholeDocumentRequest | None:
        """The document the question asks for whole, or ``None``; ``hint`` is the rules'.

        Raises:
            JudgeError: no usable judgement (the rules then stand in, said so).
        """
        ...
