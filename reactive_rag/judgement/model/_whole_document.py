"""A chat model decides the hand-off: does the question ask for one whole document?

The offline rules read request verbs and title words; a paraphrase ("walk me through
the release notes"), another language or a title given loosely defeats them. Where a
model is configured it decides, in one structured call: it gets the question, the
numbered documents of the run's collections (id, collection, title; at most
``max_documents``) and the rules' verdict as a hint it may overrule. Code keeps only
what it can check: the document must be one it was shown, named by number or id.
A failed call or an unusable reply raises :class:`~.._judges.JudgeError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actors.models import ChatError, ChatModel, ChatRequest

from .._judges import JudgeError
from .._whole_document import DocumentRef, WholeDocumentRequest
from ._support import ResponseFormat, json_object, judge_error, response_format

__all__ = ["DEFAULT_WHOLE_DOCUMENT_PROMPT", "WHOLE_DOCUMENT_SCHEMA", "ChatWholeDocument"]

DEFAULT_WHOLE_DOCUMENT_PROMPT = """\
You route questions. Some questions ask for one document as a whole: a summary, an \
overview, an outline or the main points of a named document. Those are answered by \
reading every part of that document, not by searching a few passages. Other questions \
ask for a fact, or for what a document says about one topic: those are searched.
You get the question and the numbered list of documents the asker may read. Reply with \
JSON only: {"whole_document": true or false, "document": "<the document's number, or \
empty>", "reason": "<one plain sentence>"}. Say true only when the question asks for \
one listed document as a whole; the document must be in the list. An offline hint may \
follow the list: it comes from word-matching rules that can be wrong; you decide."""

WHOLE_DOCUMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "whole_document": {"type": "boolean"},
        "document": {"type": "string"},
        "reason": {"type": "string"},
    },
    "required": ["whole_document", "document", "reason"],
    "additionalProperties": False,
}
"""The reply's JSON schema, valid under OpenAI's strict mode."""


class ChatWholeDocument:
    """:class:`~.._whole_document.WholeDocumentJudge` backed by a chat model.

    Args:
        model: the chat model (e.g. :class:`actors.models.OpenAIChatClient`).
        timeout_s: per call.
        max_documents: documents listed (the first ones of the run's collections).
        max_tokens: completion cap.
        response_format: ``"json_schema"`` (strict), ``"json_object"`` or ``"none"``.
    """

    def __init__(self, model: ChatModel, *, timeout_s: float = 20.0, max_documents: int = 200,
                 max_tokens: int = 200, response_format: ResponseFormat = "json_schema",
                 system_prompt: str = DEFAULT_WHOLE_DOCUMENT_PROMPT,
                 temperature: float | None = 0.0) -> None:
        if timeout_s <= 0 or max_documents < 1 or max_tokens < 16:
            raise ValueError("timeout_s > 0, max_documents >= 1 and max_tokens >= 16")
        self.model = model
        self.name = model.model
        self.timeout_s = timeout_s
        self.max_documents = max_documents
        self.max_tokens = max_tokens
        self.response_format = response_format
        self.system_prompt = system_prompt
        self.temperature = temperature

    async def judge(self, question: str, documents: Sequence[DocumentRef],
                    hint: WholeDocumentRequest | None) -> WholeDocumentRequest | None:
        """The listed document ``question`` asks for whole, or ``None``.

        Raises:
            JudgeError: the call failed, or the reply is unusable or names no listed
                document.
        """
        shown = list(documents[: self.max_documents])
        if not shown:
            return None
        messages = [{"role": "system", "content": self.system_prompt},
                    {"role": "user", "content": self._prompt(question, shown, hint)}]
        try:
            result = await self.model.complete(ChatRequest(
                messages, timeout_s=self.timeout_s, temperature=self.temperature,
                max_tokens=self.max_tokens,
                response_format=response_format(self.response_format, "whole_document",
                                                WHOLE_DOCUMENT_SCHEMA)))
        except ChatError as exc:
            raise judge_error("whole_document", self.name, exc, self.timeout_s) from exc
        return self._parse(result.content, shown)

    def _prompt(self, question: str, shown: Sequence[DocumentRef],
                hint: WholeDocumentRequest | None) -> str:
        lines = [f"Question: {question}", "", "Documents:"]
        lines += [f"[{n}] id={d.doc_id} collection={d.collection} title={d.title or '-'}"
                  for n, d in enumerate(shown, 1)]
        said = (f"the whole of {hint.document.doc_id!r}" if hint is not None
                else "not a whole-document question")
        lines += ["", f"Offline hint: {said}. Word-matching rules said this; you decide."]
        return "\n".join(lines)

    def _parse(self, text: str, shown: Sequence[DocumentRef]) -> WholeDocumentRequest | None:
        data = json_object(text)
        flag = data.get("whole_document") if data is not None else None
        if data is None or not isinstance(flag, bool):
            raise JudgeError(f"whole-document judge {self.name!r} gave no verdict: "
                             f"{text[:160]!r}", model=self.name, role="whole_document")
        if not flag:
            return None
        key = str(data.get("document", "")).strip().strip("[]() ")
        by_number = {str(n): d for n, d in enumerate(shown, 1)}
        doc = by_number.get(key) or next((d for d in shown if d.doc_id == key), None)
        if doc is None:
            raise JudgeError(f"whole-document judge {self.name!r} named no listed document: "
                             f"{key[:80]!r}", model=self.name, role="whole_document")
        reason = data.get("reason")
        return WholeDocumentRequest(
            document=doc, by="model",
            reason=" ".join(reason.split()) if isinstance(reason, str) and reason.strip()
            else f"the model {self.name!r} read the question as asking for the whole document")
