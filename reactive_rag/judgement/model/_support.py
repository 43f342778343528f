"""A chat model as the support judge: every claim of a draft in one call.

The judge sees what a careful reader would: the question, and for each claim
its statement, its quote, and the title and text of the passage it cites. It
labels each claim ``supported``, ``unsupported``, ``contradicted`` or
``off_question``. Paraphrase is fine; numbers, names, dates and negations
must match. Verdicts are cached by (question, statement, quote, source id),
so a repaired draft only sends its new claims and a draft whose claims were
all judged before makes no call.

A judge that could not judge raises :class:`~.._judges.JudgeError` (with the
HTTP status, Retry-After or timeout of the failed call): the caller falls
back to the offline check and says so. It never lets a claim through, nor
drops one, on a failure.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Literal

from actors.models import ChatError, ChatModel, ChatRequest, ChatResult, ChatTimeout

from .._judges import JudgeError, SupportItem, SupportLabel, SupportVerdict
from ._passages import clip_text

__all__ = [
    "DEFAULT_SUPPORT_PROMPT",
    "SUPPORT_SCHEMA",
    "ChatSupportJudge",
    "ResponseFormat",
    "json_object",
    "judge_error",
    "response_format",
]

ResponseFormat = Literal["json_schema", "json_object", "none"]

DEFAULT_SUPPORT_PROMPT = """\
You check the claims of an answer against the passages they cite. For each claim \
you get the question, the claim's statement, the quote it gives, and the title and \
text of the cited passage. Label each claim:
- "supported": the passage (not only the quote) says what the statement says. \
Paraphrase, abbreviations (US for United States, TV for television), synonyms and \
reordered clauses are fine; numbers, names, dates and negations must match.
- "contradicted": the passage says otherwise.
- "unsupported": the passage does not say it.
- "off_question": the statement may be true but does not bear on the question.
Reply with JSON only: {"verdicts": [{"claim": <claim number>, "reason": "<a few words>", \
"label": "supported" | "unsupported" | "contradicted" | "off_question"}]}, one verdict \
per claim."""

SUPPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "claim": {"type": "integer"},
                    "reason": {"type": "string"},
                    "label": {"type": "string", "enum": [
                        "supported", "unsupported", "contradicted", "off_question"]},
                },
                "required": ["claim", "reason", "label"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["verdicts"],
    "additionalProperties": False,
}
"""The reply's JSON schema, valid under OpenAI's strict mode (every property required)."""

_LABELS: dict[str, SupportLabel] = {
    "supported": "supported", "supports": "supported", "support": "supported",
    "entailed": "supported", "entailment": "supported",
    "unsupported": "unsupported", "not_supported": "unsupported", "neutral": "unsupported",
    "not_enough_info": "unsupported",
    "contradicted": "contradicted", "contradicts": "contradicted",
    "contradiction": "contradicted", "refuted": "contradicted",
    "off_question": "off_question", "off_topic": "off_question", "irrelevant": "off_question",
}
_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)

_Key = tuple[str, str, str, str]


def response_format(
    kind: ResponseFormat, name: str, schema: dict[str, Any]
) -> dict[str, Any] | None:
    """The ``response_format`` body for ``kind`` (a strict json_schema named ``name``)."""
    if kind == "json_schema":
        return {"type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": True}}
    if kind == "json_object":
        return {"type": "json_object"}
    return None


def judge_error(role: str, model: str, exc: ChatError, timeout_s: float) -> JudgeError:
    """A :class:`JudgeError` saying which judge failed how, from the chat error behind it."""
    who = f"{role} judge {model!r}"
    if isinstance(exc, ChatTimeout):
        return JudgeError(f"{who} timed out after {timeout_s:g} s", timeout_s=timeout_s,
                          status=exc.status, model=model, role=role)
    status = f" (HTTP {exc.status})" if exc.status is not None else ""
    wait = f", retry after {exc.retry_after:g} s" if exc.retry_after is not None else ""
    return JudgeError(f"{who} failed{status}{wait}: {exc}", status=exc.status,
                      retry_after=exc.retry_after, model=model, role=role)


def json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a reply (code fences and prose around it are ignored)."""
    cleaned = _FENCE.sub(" ", text)
    decoder = json.JSONDecoder()
    for start in [i for i, ch in enumerate(cleaned) if ch == "{"][:16]:
        try:
            value, _ = decoder.raw_decode(cleaned, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


class ChatSupportJudge:
    """:class:`~.._judges.SupportJudge` backed by a chat model: one call per draft.

    Args:
        model: the chat model (e.g. :class:`actors.models.OpenAIChatClient`); the
            caller owns it and closes it.
        timeout_s: per call.
        max_tokens: completion cap; ``None``: 64 plus 48 per claim sent.
        max_passage_chars: passage text shown per claim (a window around the quote
            when the passage is longer).
        response_format: ``"json_schema"`` (strict, constrained output),
            ``"json_object"`` (JSON mode) or ``"none"`` (prompt only).
        cache_size: verdicts remembered by (question, statement, quote, source id).
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        timeout_s: float = 20.0,
        max_tokens: int | None = None,
        max_passage_chars: int = 1500,
        response_format: ResponseFormat = "json_schema",
        system_prompt: str = DEFAULT_SUPPORT_PROMPT,
        cache_size: int = 512,
        temperature: float | None = 0.0,
    ) -> None:
        if timeout_s <= 0 or cache_size < 0 or max_passage_chars < 40:
            raise ValueError("timeout_s > 0, cache_size >= 0 and max_passage_chars >= 40")
        if max_tokens is not None and max_tokens < 16:
            raise ValueError("max_tokens >= 16")
        self.model = model
        self.name = model.model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.max_passage_chars = max_passage_chars
        self.response_format = response_format
        self.system_prompt = system_prompt
        self.cache_size = cache_size
        self.temperature = temperature
        self.calls = 0  # model calls made (a cached draft makes none)
        self._cache: OrderedDict[_Key, SupportVerdict] = OrderedDict()

    async def judge(self, question: str, items: Sequence[SupportItem]) -> list[SupportVerdict]:
        """One verdict per item, in order; at most one model call.

        Raises:
            JudgeError: the call failed, or its reply lacks a verdict for a claim sent.
        """
        keys = [_key(question, item) for item in items]
        found: dict[_Key, SupportVerdict] = {}
        for key in keys:
            if key in self._cache:
                self._cache.move_to_end(key)
                found[key] = self._cache[key]
        ask: dict[_Key, SupportItem] = {}
        for key, item in zip(keys, items, strict=True):
            if key not in found and key not in ask:
                ask[key] = item
        if ask:
            judged = await self._ask(question, list(ask.values()))
            for key, item in ask.items():
                found[key] = judged[item.index]
                self._remember(key, judged[item.index])
        return [_as(found[key], item.index) for key, item in zip(keys, items, strict=True)]

    def _remember(self, key: _Key, verdict: SupportVerdict) -> None:
        if self.cache_size:
            self._cache[key] = verdict
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    async def _ask(self, question: str, items: list[SupportItem]) -> dict[int, SupportVerdict]:
        messages = [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self._prompt(question, items)},
        ]
        max_tokens = self.max_tokens if self.max_tokens is not None else 64 + 48 * len(items)
        self.calls += 1
        try:
            result: ChatResult = await self.model.complete(ChatRequest(
                messages, timeout_s=self.timeout_s, temperature=self.temperature,
                max_tokens=max_tokens,
                response_format=response_format(self.response_format, "support", SUPPORT_SCHEMA),
            ))
        except ChatError as exc:
            raise judge_error("support", self.name, exc, self.timeout_s) from exc
        return self._parse(_cut_note(result, max_tokens), items)

    def _prompt(self, question: str, items: Sequence[SupportItem]) -> str:
        lines = [f"Question: {question}"]
        for item in items:
            title = f" {item.title}" if item.title else ""
            lines += [
                "",
                f"Claim {item.index}: {item.statement}",
                f"Cites: [{item.source_id}]{title}",
                f"Quote: {item.quote}",
                f"Passage: {_window(item.passage, item.quote, self.max_passage_chars)}",
            ]
        lines += ["", f"Reply with one verdict for each of the {len(items)} claim(s)."]
        return "\n".join(lines)

    def _parse(self, text: str, items: Sequence[SupportItem]) -> dict[int, SupportVerdict]:
        data = json_object(text)
        rows = data.get("verdicts") if data is not None else None
        if not isinstance(rows, list):
            raise JudgeError(
                f"support judge {self.name!r} replied with no JSON verdicts: {text[:160]!r}",
                model=self.name, role="support")
        wanted = {item.index for item in items}
        verdicts: dict[int, SupportVerdict] = {}
        for row in rows:
            if not isinstance(row, dict):
                continue
            index, label = row.get("claim"), _LABELS.get(_label_key(row.get("label")))
            if isinstance(index, str) and index.strip().isdigit():
                index = int(index)
            if isinstance(index, bool) or not isinstance(index, int) or label is None:
                continue
            if index in wanted and index not in verdicts:
                reason = row.get("reason")
                verdicts[index] = SupportVerdict(
                    index, label, reason.strip() if isinstance(reason, str) else "")
        missing = sorted(wanted - verdicts.keys())
        if missing:
            raise JudgeError(
                f"support judge {self.name!r} gave no usable verdict for claim(s) "
                f"{', '.join(map(str, missing))}: {text[:160]!r}",
                model=self.name, role="support")
        return verdicts


def _cut_note(result: ChatResult, max_tokens: int) -> str:
    """The reply, with a word on why it may be broken when it was cut at ``max_tokens``."""
    if result.finish_reason == "length":
        return f"(cut off at max_tokens {max_tokens}) {result.content}"
    return result.content


def _key(question: str, item: SupportItem) -> _Key:
    return (question, item.statement, item.quote, item.source_id)


def _as(verdict: SupportVerdict, index: int) -> SupportVerdict:
    if verdict.index == index:
        return verdict
    return SupportVerdict(index, verdict.label, verdict.reason)


def _label_key(label: Any) -> str:
    if not isinstance(label, str):
        return ""
    return re.sub(r"[\s-]+", "_", label.strip().lower())


def _window(passage: str, quote: str, max_chars: int) -> str:
    """``passage`` cut to ``max_chars`` around where ``quote`` occurs (its start otherwise)."""
    flat = " ".join(passage.split())
    if len(flat) <= max_chars:
        return flat
    at = flat.casefold().find(" ".join(quote.split()).casefold()) if quote.strip() else -1
    if at < 0:
        return clip_text(flat, max_chars)
    start = max(0, min(at - max_chars // 3, len(flat) - max_chars))
    piece = flat[start : start + max_chars]
    if start > 0:
        piece = "... " + piece.split(" ", 1)[-1]
    if start + max_chars < len(flat):
        piece = piece.rsplit(" ", 1)[0] + " ..."
    return piece
