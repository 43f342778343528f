"""Offline rules: does a question ask for one whole document (a summary, an overview)?

Provenance: hand-written, no fitted parameters. A question is handed to the
background summary task only when both hold:

1. it asks for a whole-document operation: a request form of *summarise*, *overview*,
   *outline*, *recap*, *gist*, *TL;DR*, *main/key points* (English), 总结, 概述, 概括,
   摘要, 要点, 大意 (Chinese): the verbs of the task itself, not of any corpus;
2. it names exactly one document of the run's collections: every content word of that
   document's title, or of its id's file name, occurs in the question (stemmed; CJK
   words as segmented), the longest such name wins, a tie is ambiguous (no hand-off),
   and at most :data:`MAX_FOCUS_TERMS` other content words remain (a question about a
   *part* of a document, "summarise what the guide says about TLS certificates", is
   answered by search, not by a summary of the whole).

A document that is not in the collections is never matched, so "summarise the X guide"
over a corpus without it is answered (or abstained from) as before. Switch the family
off with ``[judgement] off = ["whole_document"]`` (engine option ``judgement_off``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from actors.text import content_terms

from .._whole_document import DocumentRef, WholeDocumentRequest

__all__ = ["MAX_FOCUS_TERMS", "WHOLE_DOCUMENT_CUES", "whole_document_request"]

WHOLE_DOCUMENT_CUES = re.compile(
    r"\b(?:summari[sz]e|summari[sz]ing|summary|summarization|summarisation|overview|outline"
    r"|recap|gist|tl;?dr|sum\s+up|(?:main|key)\s+points)\b"
    r"|总结|概述|概括|摘要|要点|大意",
    re.IGNORECASE,
)
"""Request forms of a whole-document operation (English and Chinese)."""

MAX_FOCUS_TERMS = 2
"""Content words a question may hold beyond the cue and the document's name."""

_CUE_TERMS = frozenset(content_terms(
    "summarise summarize summary summarising summarizing summarisation summarization "
    "overview outline recap gist tldr tl dr sum up main key points "
    "总结 概述 概括 摘要 要点 大意"))
# Words that say "the whole thing" or name a kind of document, not a focus inside it.
_GENERIC_TERMS = frozenset(content_terms(
    "whole entire full complete document doc file page article chapter text brief briefly "
    "short quick please give write provide make 一下 全文 文档 文件 整个 请"))
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,5}$")


def _name_terms(text: str) -> frozenset[str]:
    return frozenset(content_terms(text)) - _CUE_TERMS


def _id_name(doc_id: str) -> str:
    base = doc_id.replace("\\", "/").rsplit("/", 1)[-1]
    return _EXTENSION.sub("", base).replace("_", " ").replace("-", " ")


def whole_document_request(question: str,
                           documents: Sequence[DocumentRef]) -> WholeDocumentRequest | None:
    """The document ``question`` asks for as a whole, or ``None`` (see the module's rules)."""
    if WHOLE_DOCUMENT_CUES.search(question) is None:
        return None
    asked = _name_terms(question)
    best: list[tuple[DocumentRef, frozenset[str]]] = []
    best_size = 0
    for doc in documents:
        names = [n for n in (_name_terms(doc.title), _name_terms(_id_name(doc.doc_id))) if n]
        matched = [n for n in names if n <= asked]
        if not matched:
            continue
        name = max(matched, key=len)
        if len(name) > best_size:
            best, best_size = [(doc, name)], len(name)
        elif len(name) == best_size and all(d.doc_id != doc.doc_id or d.collection != doc.collection
                                            for d, _ in best):
            best.append((doc, name))
    if len(best) != 1:
        return None  # no document named, or several equally: search instead
    doc, name = best[0]
    focus = asked - name - _GENERIC_TERMS
    if len(focus) > MAX_FOCUS_TERMS:
        return None
    title = doc.title or doc.doc_id
    return WholeDocumentRequest(
        document=doc, by="offline",
        reason=f"the question asks for the whole of {title!r} (in {doc.collection!r}), "
               "which a summary of every chunk answers, not a few passages")
