"""A chat model reads a conversation's follow-ups and folds its older turns (role ``followups``).

The offline rules (:func:`~reactive_rag.judgement.offline.rewrite_followup`) read
a pronoun from the grammar of the last question only, so "How do I clear it?"
after a turn about a printer's paper jam can come out as "How do I clear
False?". A model reads the turns themselves. One structured call per follow-up
(``response_format`` json_schema ``followup_rewrite``, strict mode); the user
message starts ``Follow-up: <question>`` and then shows the recent turns as
``Turn k question: ...`` / ``Turn k answer: ...``; the reply is
``{"standalone": str, "references": [{"reference": str, "meaning": str}]}``.
History summaries are one call each (json_schema ``history_summary``, reply
``{"summary": str}``).

Anything but a usable reply (a server error, a stall, JSON of another shape, a
reply cut at ``max_tokens`` twice) raises :class:`RewriteError`, typed, so the
conversation can fall back to the rules and say why; nothing here guesses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

from actors.models import ChatError, ChatModel, ChatRequest, ChatResult, ChatTimeout
from streams import ErrorInfo

from .._judges import JudgeError
from .._seam import Rewrite, Turn

__all__ = [
    "DEFAULT_FOLLOWUP_PROMPT",
    "DEFAULT_SUMMARY_PROMPT",
    "FOLLOWUP_SCHEMA",
    "SUMMARY_SCHEMA",
    "ChatRewriter",
    "RewriteError",
]

ROLE = "followups"

DEFAULT_FOLLOWUP_PROMPT = """\
You rewrite the follow-up question of a conversation so that it can be understood \
without the conversation. Replace every reference to earlier turns (pronouns such as \
it, they, he, she, that, this; "the same", "what about X?") with what it stands for, \
named exactly as the turns name it. Keep everything else as asked. A question that \
already stands alone is returned unchanged, with no references.
Reply with JSON only: {"standalone": "<the question, standalone>", "references": \
[{"reference": "<the words as asked>", "meaning": "<what they stand for>"}]}"""

DEFAULT_SUMMARY_PROMPT = """\
You summarise the earlier turns of a conversation for whoever answers its next \
questions: keep the names, numbers and answers a follow-up may refer back to, drop \
the rest. Start from the summary so far (if any) and add the turns shown. Use at most \
{words} words.
Reply with JSON only: {{"summary": "<the summary>"}}"""

FOLLOWUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "standalone": {"type": "string"},
        "references": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"reference": {"type": "string"}, "meaning": {"type": "string"}},
                "required": ["reference", "meaning"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["standalone", "references"],
    "additionalProperties": False,
}
SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string"}},
    "required": ["summary"],
    "additionalProperties": False,
}
_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)


class RewriteError(JudgeError):
    """The model gave no usable rewrite or summary (the caller falls back to the rules).

    Attributes:
        kind: ``"model_failed"`` (the call raised: HTTP status, timeout, connection)
            or ``"malformed_reply"`` (a reply, but not of the asked shape).
        status, retry_after_s, timeout_s: what the server said, when known.
        model, role: which model, in which role.
    """

    def __init__(self, message: str, *, kind: Literal["model_failed", "malformed_reply"],
                 model: str = "", status: int | None = None,
                 retry_after_s: float | None = None, timeout_s: float | None = None) -> None:
        super().__init__(message, status=status, retry_after=retry_after_s,
                         timeout_s=timeout_s, model=model, role=ROLE)
        self.kind = kind

    def info(self, kind: str = "") -> ErrorInfo:
        """The failure as event data."""
        return super().info(kind or self.kind).model_copy(
            update={"retryable": self.kind == "model_failed"})


class ChatRewriter:
    """Follow-up rewriting and history summaries by a chat model.

    Args:
        model: the chat model (e.g. :class:`actors.models.OpenAIChatClient`); the
            caller owns it and closes it.
        timeout_s: per call.
        max_tokens: completion cap; a reply cut there is asked again once with twice
            the cap (never the identical request), then is an error.
        turns: how many recent turns the rewriter is shown.
        answer_chars: each shown answer is cut to this many characters.
        summary_words: the most words a history summary may have.
    """

    def __init__(self, model: ChatModel, *, timeout_s: float = 15.0, max_tokens: int = 256,
                 turns: int = 4, answer_chars: int = 600, summary_words: int = 150,
                 followup_prompt: str = DEFAULT_FOLLOWUP_PROMPT,
                 summary_prompt: str = DEFAULT_SUMMARY_PROMPT) -> None:
        if timeout_s <= 0 or max_tokens < 16 or turns < 1 or answer_chars < 1 \
                or summary_words < 1:
            raise ValueError("timeout_s > 0, max_tokens >= 16, turns, answer_chars and "
                             "summary_words >= 1")
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.turns = turns
        self.answer_chars = answer_chars
        self.summary_words = summary_words
        self.followup_prompt = followup_prompt
        self.summary_prompt = summary_prompt

    async def rewrite(self, question: str, history: Sequence[Turn]) -> Rewrite:
        """``question`` read as a standalone one against the recent turns of ``history``.

        Raises:
            RewriteError: the call failed or the reply was not a rewrite.
        """
        question = " ".join(question.split())
        if not history:
            return Rewrite(question, question)
        first = len(history) - min(self.turns, len(history))
        shown = history[first:]
        lines = [f"Follow-up: {question}", *self._turn_lines(shown, first + 1)]
        data = await self._ask(self.followup_prompt, "\n".join(lines), "followup_rewrite",
                               FOLLOWUP_SCHEMA)
        try:
            standalone, resolved = _parse_rewrite(data)
        except ValueError as exc:
            raise self._malformed(str(exc), data) from None
        standalone = " ".join(standalone.split())
        if standalone == question and not resolved:
            return Rewrite(question, question)
        return Rewrite(question, standalone, resolved, _sources(shown, resolved))

    async def summarise(self, turns: Sequence[Turn], *, previous: str = "",
                        first: int = 1) -> str:
        """The summary so far (``previous``) extended with ``turns`` (numbered from ``first``).

        Raises:
            RewriteError: the call failed or the reply was not a summary.
        """
        lines = [f"Summary so far: {previous or '(none)'}", *self._turn_lines(turns, first)]
        data = await self._ask(self.summary_prompt.format(words=self.summary_words),
                               "\n".join(lines), "history_summary", SUMMARY_SCHEMA)
        summary = data.get("summary")
        if not isinstance(summary, str) or not summary.strip():
            raise self._malformed("a history summary needs a non-empty \"summary\" string",
                                  data)
        words = summary.split()
        return " ".join(words[:self.summary_words])

    def _turn_lines(self, turns: Sequence[Turn], first: int) -> list[str]:
        lines: list[str] = []
        for k, turn in enumerate(turns, first):
            answer = " ".join(turn.answer.split()) or f"(no answer: {turn.outcome})"
            if len(answer) > self.answer_chars:
                answer = answer[:self.answer_chars].rsplit(" ", 1)[0] + " …"
            lines += [f"Turn {k} question: {turn.standalone or turn.question}",
                      f"Turn {k} answer: {answer}"]
        return lines

    async def _ask(self, system: str, user: str, name: str,
                   schema: dict[str, Any]) -> dict[str, Any]:
        request = ChatRequest(
            [{"role": "system", "content": system}, {"role": "user", "content": user}],
            timeout_s=self.timeout_s, temperature=0.0, max_tokens=self.max_tokens,
            response_format={"type": "json_schema",
                             "json_schema": {"name": name, "schema": schema, "strict": True}},
            stream=False)
        result = await self._complete(request)
        if result.finish_reason == "length":  # cut: once more with room, never identical
            result = await self._complete(replace(request, max_tokens=2 * self.max_tokens))
            if result.finish_reason == "length":
                raise RewriteError(f"the {name} reply was cut at {2 * self.max_tokens} tokens "
                                   "twice", kind="malformed_reply", model=self.model.model)
        return self._object(result.content)

    async def _complete(self, request: ChatRequest) -> ChatResult:
        try:
            return await self.model.complete(request)
        except ChatError as exc:
            timeout = self.timeout_s if isinstance(exc, ChatTimeout) else None
            what = f"timed out after {timeout:g} s" if timeout is not None else \
                f"failed: {type(exc).__name__}" + (f" (HTTP {exc.status})" if exc.status else "")
            raise RewriteError(f"the {ROLE} model {self.model.model!r} {what}: {exc}",
                               kind="model_failed", model=self.model.model, status=exc.status,
                               retry_after_s=exc.retry_after, timeout_s=timeout) from exc

    def _object(self, text: str) -> dict[str, Any]:
        cleaned = _FENCE.sub("", text).strip()
        start, end = cleaned.find("{"), cleaned.rfind("}")
        data: Any = None
        if 0 <= start < end:
            try:
                data = json.loads(cleaned[start:end + 1])
            except ValueError:
                data = None
        if not isinstance(data, dict):
            raise self._malformed("the reply is not a JSON object", text)
        return data

    def _malformed(self, why: str, reply: Any) -> RewriteError:
        shown = reply if isinstance(reply, str) else json.dumps(reply)
        return RewriteError(f"the {ROLE} model {self.model.model!r} replied malformed: {why}: "
                            f"{shown[:120]!r}", kind="malformed_reply", model=self.model.model)


def _parse_rewrite(data: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The standalone question and the references of a ``followup_rewrite`` reply.

    Raises:
        ValueError: saying which part is not of the asked shape.
    """
    standalone, references = data.get("standalone"), data.get("references")
    if not isinstance(standalone, str) or not standalone.strip():
        raise ValueError("\"standalone\" must be a non-empty string")
    if not isinstance(references, list):
        raise ValueError("\"references\" must be a list")
    resolved: dict[str, str] = {}
    for item in references:
        if not isinstance(item, dict) or not isinstance(item.get("reference"), str) \
                or not isinstance(item.get("meaning"), str):
            raise ValueError("each reference needs \"reference\" and \"meaning\" strings")
        reference, meaning = item["reference"].strip(), " ".join(item["meaning"].split())
        if reference and meaning and meaning.lower() != reference.lower():
            resolved[reference] = meaning
    return standalone, resolved


def _sources(shown: Sequence[Turn], resolved: dict[str, str]) -> tuple[str, ...]:
    """The run ids of the shown turns that name what a reference was read as (else the last)."""
    meanings = [m.lower() for m in resolved.values()]
    found = tuple(t.run_id for t in shown
                  if any(m in f"{t.standalone} {t.question} {t.answer}".lower() for m in meanings))
    return found or (shown[-1].run_id,)
