"""A chat model as the sufficiency judge: do the selected passages answer the question?

Offline answerability rules match words (a typo in the question, a question in
Chinese, a paraphrase in the passage defeat them), so where a model is
configured the model decides. It gets the question, the selected passages
numbered with their ids, titles and scores, and the offline verdict as an
explicit hint it may overrule; it answers in one structured call with a
verdict, what is covered and missing, searches that could find the missing
part, and the disagreements between passages on what the question asks.

Code keeps only what it can check: a conflict side must cite a passage the
judge was given, ``searches`` are bounded, the labels are the known ones.
Nothing here vetoes the model's verdict. A failed call or an unusable reply
raises :class:`~.._judges.JudgeError`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from actors.models import ChatError, ChatModel, ChatRequest
from streams import Conflict, ConflictSide, EvidenceChunk

from .._judges import JudgeError, ModelAnswerability
from .._verdicts import Answerability, Verdict
from ._passages import clip_text, is_stub, passage_header
from ._support import ResponseFormat, json_object, judge_error, response_format

__all__ = ["ANSWERABILITY_SCHEMA", "DEFAULT_SUFFICIENCY_PROMPT", "ChatSufficiency"]

DEFAULT_SUFFICIENCY_PROMPT = """\
You decide whether the passages found so far are enough to answer a question. \
Read the question and the numbered passages (each with its id in brackets, its title \
and a relevance score), then reply with JSON only:
- verdict: "answerable" when the passages hold everything the answer needs (for a \
question with several parts or hops, every part); "partial" when they hold some of it; \
"unanswerable" when they hold none of it.
- answer_type: what the question asks for (a person, a date, a number, a place, \
yes/no, a how-to...).
- covered: the parts of the question the passages answer, in a few words each.
- missing: the parts they do not answer, in a few words each (empty when answerable).
- searches: up to 3 search queries that could find what is missing (empty when answerable).
- reason: one plain sentence saying why.
- add: ids of "other passages the run holds" (listed after the passages, if any) that the \
answer needs; judge the verdict on the passages plus those you add. Empty if none.
- conflicts: passages that disagree on what the question asks (a different year, \
number or name for the same thing), whatever their titles: for each, the subject, \
the attribute, and one side per passage with its id, the value it gives and a short \
quote copied from it. Empty when they agree.
Reply in this shape: {"verdict": "...", "answer_type": "...", "covered": ["..."], \
"missing": ["..."], "searches": ["..."], "reason": "...", "add": ["..."], \
"conflicts": [{"subject": "...", \
"attribute": "...", "sides": [{"source_id": "...", "value": "...", "quote": "..."}]}]}
Judge meaning, not wording: paraphrases, abbreviations, other languages and typos in \
the question are fine. An offline hint may follow the passages: it comes from word-\
matching rules that can be wrong; you decide."""

_SIDE = {
    "type": "object",
    "properties": {
        "source_id": {"type": "string"},
        "value": {"type": "string"},
        "quote": {"type": "string"},
    },
    "required": ["source_id", "value", "quote"],
    "additionalProperties": False,
}
_CONFLICT = {
    "type": "object",
    "properties": {
        "subject": {"type": "string"},
        "attribute": {"type": "string"},
        "sides": {"type": "array", "items": _SIDE},
    },
    "required": ["subject", "attribute", "sides"],
    "additionalProperties": False,
}
_STRINGS = {"type": "array", "items": {"type": "string"}}
ANSWERABILITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["answerable", "partial", "unanswerable"]},
        "answer_type": {"type": "string"},
        "covered": _STRINGS,
        "missing": _STRINGS,
        "searches": _STRINGS,
        "reason": {"type": "string"},
        "add": _STRINGS,
        "conflicts": {"type": "array", "items": _CONFLICT},
    },
    "required": ["verdict", "answer_type", "covered", "missing", "searches", "reason",
                 "add", "conflicts"],
    "additionalProperties": False,
}
"""The reply's JSON schema, valid under OpenAI's strict mode (every property required)."""

_VERDICTS: dict[str, Verdict] = {
    "answerable": "answerable", "answered": "answerable", "sufficient": "answerable",
    "yes": "answerable",
    "partial": "partial", "partially_answerable": "partial", "partly": "partial",
    "unanswerable": "unanswerable", "not_answerable": "unanswerable",
    "insufficient": "unanswerable", "no": "unanswerable",
}


class ChatSufficiency:
    """:class:`~.._judges.SufficiencyJudge` backed by a chat model: one call per judgement.

    Args:
        model: the chat model (e.g. :class:`actors.models.OpenAIChatClient`).
        timeout_s: per call.
        max_chunk_chars: passage text shown per passage.
        max_tokens: completion cap.
        response_format: ``"json_schema"`` (strict), ``"json_object"`` or ``"none"``.
        max_searches: searches kept from the reply.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        timeout_s: float = 20.0,
        max_chunk_chars: int = 1200,
        max_tokens: int = 600,
        response_format: ResponseFormat = "json_schema",
        system_prompt: str = DEFAULT_SUFFICIENCY_PROMPT,
        max_searches: int = 3,
        temperature: float | None = 0.0,
    ) -> None:
        if timeout_s <= 0 or max_chunk_chars < 20 or max_tokens < 16 or max_searches < 0:
            raise ValueError("timeout_s > 0, max_chunk_chars >= 20, max_tokens >= 16 "
                             "and max_searches >= 0")
        self.model = model
        self.name = model.model
        self.timeout_s = timeout_s
        self.max_chunk_chars = max_chunk_chars
        self.max_tokens = max_tokens
        self.response_format = response_format
        self.system_prompt = system_prompt
        self.max_searches = max_searches
        self.temperature = temperature
        self.calls = 0

    async def judge(
        self, question: str, passages: Sequence[EvidenceChunk], hint: Answerability | None,
        others: Sequence[EvidenceChunk] = (),
    ) -> ModelAnswerability:
        """The model's judgement of ``passages`` for ``question``; ``hint`` is shown, not obeyed.

        ``others`` (held, not chosen) are listed briefly after the passages; the model may
        add those the answer needs.

        Raises:
            JudgeError: the call failed or the reply holds no known verdict.
        """
        shown = [c for c in passages if not is_stub(c.title, c.text)] or list(passages)
        messages = [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self._prompt(question, shown, hint, others)},
        ]
        self.calls += 1
        try:
            result = await self.model.complete(ChatRequest(
                messages, timeout_s=self.timeout_s, temperature=self.temperature,
                max_tokens=self.max_tokens,
                response_format=response_format(
                    self.response_format, "answerability", ANSWERABILITY_SCHEMA),
            ))
        except ChatError as exc:
            raise judge_error("sufficiency", self.name, exc, self.timeout_s) from exc
        content = result.content
        if result.finish_reason == "length":
            content = f"(cut off at max_tokens {self.max_tokens}) {content}"
        return self._parse(content, shown, others)

    def _prompt(
        self, question: str, shown: Sequence[EvidenceChunk], hint: Answerability | None,
        others: Sequence[EvidenceChunk] = (),
    ) -> str:
        lines = [f"Question: {question}", "", "Passages:"]
        if not shown:
            lines.append("(none)")
        for number, chunk in enumerate(shown, 1):
            lines.append(f"{passage_header(number, chunk)}\n"
                         f"{clip_text(chunk.text, self.max_chunk_chars)}")
        if others:
            lines += ["", OTHERS_HEADER]
            for number, chunk in enumerate(others, len(shown) + 1):
                lines.append(f"{passage_header(number, chunk)}\n"
                             f"{clip_text(chunk.text, OTHER_CHARS)}")
        if hint is not None:
            lines += ["", _hint_line(hint)]
        return "\n".join(lines)

    def _parse(self, text: str, shown: Sequence[EvidenceChunk],
               others: Sequence[EvidenceChunk] = ()) -> ModelAnswerability:
        data = json_object(text)
        raw = data.get("verdict") if data is not None else None
        verdict = _VERDICTS.get(_key(raw)) if isinstance(raw, str) else None
        if data is None or verdict is None:
            raise JudgeError(
                f"sufficiency judge {self.name!r} gave no known verdict: {text[:160]!r}",
                model=self.name, role="sufficiency")
        searches = _strings(data.get("searches"))[: self.max_searches]
        reason = _string(data.get("reason")) or f"the model {self.name!r} judged the passages " \
            f"{verdict.replace('_', ' ')}"
        judged = Answerability(
            verdict=verdict,
            answer_type=_string(data.get("answer_type")),
            covered=_strings(data.get("covered")),
            missing=_strings(data.get("missing")),
            reason=reason,
            searches=searches,
            extra_ids=_added(data.get("add"), shown, others),
        )
        return ModelAnswerability(judged, _conflicts(data.get("conflicts"), shown))


OTHERS_HEADER = ("Other passages the run holds (not chosen for the writer; "
                 "add any the answer needs):")
OTHER_CHARS = 300
"""Text shown of each other passage: enough to tell what it is about."""


def _added(raw: Any, shown: Sequence[EvidenceChunk],
           others: Sequence[EvidenceChunk]) -> tuple[str, ...]:
    """The other passages the model added, by id or by number (only those listed)."""
    numbered = {str(n): c.id for n, c in enumerate(others, len(shown) + 1)}
    ids = {c.id for c in others}
    out: list[str] = []
    for item in _strings(raw):
        key = item.strip().strip("[]() ")
        found = key if key in ids else numbered.get(key)
        if found is not None and found not in out:
            out.append(found)
    return tuple(out)


def _hint_line(hint: Answerability) -> str:
    parts: list[str] = [hint.verdict]
    if hint.missing:
        parts.append("missing " + ", ".join(repr(m) for m in hint.missing))
    if hint.covered:
        parts.append("covered " + ", ".join(repr(c) for c in hint.covered))
    said = "; ".join(parts)
    why = f" ({hint.reason.rstrip('.')})" if hint.reason else ""
    return (f"Offline hint: {said}{why}. An offline rule check said this; it matches "
            "words, not meaning, and can be wrong: you decide.")


def _key(value: str) -> str:
    return "_".join(value.strip().lower().replace("-", " ").split())


def _string(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return ()
    out = (_string(v) for v in value)
    return tuple(dict.fromkeys(v for v in out if v))


def _conflicts(value: Any, shown: Sequence[EvidenceChunk]) -> tuple[Conflict, ...]:
    """The reply's conflicts whose sides cite given passages, each with two values or more."""
    if not isinstance(value, list):
        return ()
    by_id = {c.id: c for c in shown}
    out: list[Conflict] = []
    for row in value:
        if not isinstance(row, dict) or not isinstance(row.get("sides"), list):
            continue
        sides: list[ConflictSide] = []
        values: set[str] = set()
        for side in row["sides"]:
            chunk = _cited(side.get("source_id"), shown, by_id) if isinstance(side, dict) else None
            value_text = _string(side.get("value")) if chunk is not None else ""
            if chunk is None or not value_text or value_text.casefold() in values:
                continue
            values.add(value_text.casefold())
            sides.append(ConflictSide(chunk_id=chunk.id, value=value_text,
                                      quote=_exact(_string(side.get("quote")), chunk.text),
                                      title=chunk.title))
        if len(sides) >= 2:
            out.append(Conflict(subject=_string(row.get("subject")),
                                attribute=_string(row.get("attribute")), sides=tuple(sides)))
    return tuple(out)


def _cited(raw: Any, shown: Sequence[EvidenceChunk],
           by_id: dict[str, EvidenceChunk]) -> EvidenceChunk | None:
    """The passage ``raw`` names: its id (brackets ignored) or its number as shown."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str):
        return None
    name = raw.strip().strip("[]() ")
    if name in by_id:
        return by_id[name]
    if name.isdigit() and 1 <= int(name) <= len(shown):
        return shown[int(name) - 1]
    return None


def _exact(quote: str, text: str) -> str:
    """The slice of ``text`` that ``quote`` copies (case and spacing aside); else ``quote``."""
    words = quote.split()
    if not words:
        return quote
    pattern = r"\s+".join(re.escape(w) for w in words)
    found = re.search(pattern, text, re.IGNORECASE)
    return found.group(0) if found else quote
