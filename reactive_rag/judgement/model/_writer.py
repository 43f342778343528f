"""A writer policy backed by a chat model: claims with quotes, as JSON, streamed.

The model is asked for ``{"claims": [{"statement", "source_id", "quote"}]}`` over
numbered evidence whose ids are shown. Its statements stream out through
``emit_delta`` while it writes (parsed from the partial JSON), and the final
text is parsed robustly (code fences, prose around the JSON, a reply cut off at
the token limit). Claims citing ids that were not given are dropped here; the
quotes are passed on exactly as the model wrote them (this writer never makes
one up), so the verifier decides whether each quote really occurs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import pydantic_core

from actors.models import ChatModel, ChatRequest
from streams import Claim, ClaimError, EvidenceChunk, WriteMode

from .._policy import Draft, WriterBase

__all__ = ["DEFAULT_WRITER_PROMPT", "ChatWriter", "parse_claims"]

DEFAULT_WRITER_PROMPT = """\
You answer questions using only the evidence given. Reply with JSON only, in this shape:
{"claims": [{"statement": "...", "source_id": "...", "quote": "..."}]}
- statement: one sentence of the answer, in your own words.
- source_id: the id of the evidence passage that supports the statement, exactly as \
shown in [brackets].
- quote: a short span copied character for character from that passage which \
supports the statement.
Write 1 to 4 claims, most important first. If the evidence does not answer the \
question, reply {"claims": []}."""


class ChatWriter(WriterBase):
    """:class:`WriterPolicy` that asks a chat model for quoted claims.

    Args:
        model: the chat model (e.g. :class:`actors.models.OpenAIChatClient`).
        timeout_s: per model call (the run may give less via ``timeout_for``).
        max_chunk_chars: evidence text shown per chunk (quotes can only come from this).
        max_claims: claims kept, in the model's order.
        max_tokens: completion cap.
        json_mode: send ``response_format={"type": "json_object"}`` (most servers support it).
        timeout_for: called before each write to get the time the run has left.
    """

    name = "chat"

    def __init__(
        self,
        model: ChatModel,
        *,
        timeout_s: float = 30.0,
        max_chunk_chars: int = 1200,
        max_claims: int = 6,
        max_tokens: int = 512,
        temperature: float | None = 0.0,
        json_mode: bool = True,
        system_prompt: str = DEFAULT_WRITER_PROMPT,
        timeout_for: Callable[[], float | None] | None = None,
    ) -> None:
        if timeout_s <= 0 or max_claims < 1 or max_chunk_chars < 20:
            raise ValueError("timeout_s > 0, max_claims >= 1 and max_chunk_chars >= 20")
        self.model = model
        self.timeout_s = timeout_s
        self.max_chunk_chars = max_chunk_chars
        self.max_claims = max_claims
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.json_mode = json_mode
        self.system_prompt = system_prompt
        self.timeout_for = timeout_for
        self._last: tuple[str, tuple[Claim, ...]] | None = None

    def restore_draft(self, question: str, claims: Sequence[Claim]) -> None:
        """Remember a draft written before a crash (a resumed run's repair shows it)."""
        self._last = (question, tuple(claims))

    async def write(
        self,
        question: str,
        evidence: Sequence[EvidenceChunk],
        *,
        mode: WriteMode,
        errors: Sequence[ClaimError] = (),
        emit_delta: Callable[[str, int | None], None] | None = None,
    ) -> Draft:
        """Ask the model for claims over ``evidence``; keep those citing given ids."""
        if not evidence:  # nothing could be cited: no model call
            return Draft(text="", claims=(), notes=("no evidence was given",))
        previous = self._last[1] if self._last and self._last[0] == question else ()
        messages = [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self._prompt(question, evidence, mode, errors, previous)},
        ]
        streamer = _StatementStreamer(emit_delta)
        timeout = self.timeout_s
        if self.timeout_for is not None and (left := self.timeout_for()) is not None:
            timeout = min(timeout, left)
        result = await self.model.complete(ChatRequest(
            messages,
            timeout_s=timeout,
            on_delta=streamer.feed if emit_delta is not None else None,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            response_format={"type": "json_object"} if self.json_mode else None,
        ))
        claims, notes = parse_claims(result.content, evidence)
        if len(claims) > self.max_claims:
            notes.append(f"kept the first {self.max_claims} of {len(claims)} claims")
            claims = claims[: self.max_claims]
        if result.finish_reason == "length":
            notes.append("the model's reply was cut off at the token limit")
        self._last = (question, tuple(claims))
        return Draft(
            text=" ".join(c.statement for c in claims),
            claims=tuple(claims),
            tokens=result.usage.total,
            notes=tuple(notes),
            model=self.model.model,
            input_tokens=result.usage.prompt,
            output_tokens=result.usage.completion,
        )

    def _prompt(
        self,
        question: str,
        evidence: Sequence[EvidenceChunk],
        mode: WriteMode,
        errors: Sequence[ClaimError],
        previous: Sequence[Claim],
    ) -> str:
        lines = [f"Question: {question}", "", "Evidence:"]
        for number, chunk in enumerate(evidence, 1):
            text = " ".join(chunk.text.split())
            if len(text) > self.max_chunk_chars:
                text = text[: self.max_chunk_chars].rsplit(" ", 1)[0]
            title = f" {chunk.title}" if chunk.title else ""
            lines.append(f"{number}. [{chunk.id}]{title}\n{text}")
        if mode == "finalize":
            lines += ["", "The search budget is used up: answer from this evidence only."]
        if mode == "repair":
            lines += ["", "Your previous answer was rejected by the citation checker:"]
            if previous:
                lines.append(
                    json.dumps({"claims": [c.model_dump() for c in previous]}, ensure_ascii=False)
                )
            lines.append("Errors:")
            lines += [f"- claim {e.index} (source {e.source_id}): {e.reason}" for e in errors]
            lines.append(
                "Write the whole answer again. Fix or drop each failed claim: every quote "
                "must be copied exactly from the passage whose id it cites."
            )
        lines += ["", "Reply with the JSON object only."]
        return "\n".join(lines)


class _StatementStreamer:
    """Turns the streaming JSON into ``emit_delta(statement piece, claim index)`` calls."""

    def __init__(self, emit: Callable[[str, int | None], None] | None) -> None:
        self.emit = emit
        self.buffer = ""
        self.sent: list[str] = []

    def feed(self, piece: str) -> None:
        if self.emit is None:
            return
        self.buffer += piece
        start = self.buffer.find("{")
        if start < 0:
            return
        try:
            partial: Any = pydantic_core.from_json(
                self.buffer[start:], allow_partial="trailing-strings"
            )
        except ValueError:
            return  # e.g. cut inside an escape sequence: the next piece completes it
        claims = partial.get("claims") if isinstance(partial, dict) else None
        if not isinstance(claims, list):
            return
        for index, claim in enumerate(claims):
            statement = claim.get("statement") if isinstance(claim, dict) else None
            if not isinstance(statement, str):
                continue
            while len(self.sent) <= index:
                self.sent.append("")
            done = self.sent[index]
            if statement.startswith(done) and len(statement) > len(done):
                text = statement[len(done) :]
                self.sent[index] = statement
                self.emit((" " + text) if index and not done else text, index)


_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)


def parse_claims(
    text: str, evidence: Sequence[EvidenceChunk]
) -> tuple[list[Claim], list[str]]:
    """Claims from a model reply, and notes on what was dropped and why.

    Accepts the JSON object anywhere in the text (code fences, prose before or
    after), a bare list of claims, or a reply cut off mid-way (complete claims
    are kept). A ``source_id`` must be one of ``evidence``'s ids (brackets and
    spaces are ignored); a bare number ``n`` is read as the ``n``-th passage, as
    the evidence was shown numbered. Claims with an unknown id or an empty field
    are dropped, never repaired.
    """
    notes: list[str] = []
    items = _find_claims(text)
    if items is None:
        notes.append("no JSON claims found in the model's reply")
        return [], notes
    ids = [c.id for c in evidence]
    known = set(ids)
    claims: list[Claim] = []
    seen: set[tuple[str, str, str]] = set()
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            notes.append(f"claim {index}: not an object")
            continue
        fields = [item.get(k) for k in ("statement", "source_id", "quote")]
        if not all(isinstance(f, str | int) and str(f).strip() for f in fields):
            notes.append(f"claim {index}: needs non-empty statement, source_id and quote")
            continue
        statement, raw_id, quote = (str(f).strip() for f in fields)
        source_id = raw_id.strip("[]() ")
        if source_id not in known:
            if source_id.isdigit() and 1 <= int(source_id) <= len(ids):
                source_id = ids[int(source_id) - 1]
                notes.append(f"claim {index}: read source {raw_id!r} as passage {source_id!r}")
            else:
                notes.append(f"claim {index}: dropped, cites {raw_id!r}, which was not given")
                continue
        key = (statement, source_id, quote)
        if key in seen:
            continue
        seen.add(key)
        claims.append(Claim(statement=statement, source_id=source_id, quote=quote))
    return claims, notes


def _find_claims(text: str) -> list[Any] | None:
    cleaned = _FENCE.sub(" ", text)
    decoder = json.JSONDecoder()
    starts = [i for i, ch in enumerate(cleaned) if ch in "{["][:64]
    for start in starts:
        try:
            value, _ = decoder.raw_decode(cleaned, start)
        except ValueError:
            continue
        found = _claims_of(value)
        if found is not None:
            return found
    for start in starts[:4]:  # a reply cut off mid-way: keep what is complete
        try:
            value = pydantic_core.from_json(cleaned[start:].rstrip(), allow_partial=True)
        except ValueError:
            continue
        found = _claims_of(value)
        if found is not None:
            return [c for c in found if isinstance(c, dict) and "quote" in c]
    return None


def _claims_of(value: Any) -> list[Any] | None:
    if isinstance(value, dict) and isinstance(value.get("claims"), list):
        return list(value["claims"])
    dicts = isinstance(value, list) and value and all(isinstance(v, dict) for v in value)
    if dicts and any("statement" in v for v in value):
        return list(value)
    return None
