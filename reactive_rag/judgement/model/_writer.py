"""A writer policy backed by a chat model: claims with quotes, as JSON.

The model is asked for ``{"lead", "claims": [{"statement", "source_id", "quote",
"answers"}]}`` over numbered evidence whose ids are shown (most relevant at
both ends of the list, where models read best; passages that only repeat
their title are left out). Nothing is streamed from here: a draft is not yet
verified (the verifier publishes the text of what it keeps). The reply is parsed
robustly (code fences, prose around the JSON, a reply cut off at the token
limit). The parser never drops a claim the model wrote: one citing an id that
was not given, or with an empty field, is passed on as written so the
verifier rejects it with a typed reason and the repair path can fix it. The
quotes are passed on exactly as the model wrote them (this writer never makes
one up). ``answers: true`` marks the claim that states the answer
(:attr:`Draft.answer_index`), so the run can tell a draft that lost its
answer from one that lost a detail.

A reply cut at ``max_tokens`` is retried once with a larger limit (and, when
the prompt is long, fewer passages), never as the same request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from actors.models import ChatError, ChatModel, ChatRequest, ChatResult
from actors.rerank import edges_order
from streams import Claim, ClaimError, EvidenceChunk, WriteMode

from .._policy import Draft, WriterBase
from ._passages import clip_text, is_stub, passage_header

__all__ = [
    "DEFAULT_WRITER_PROMPT",
    "ChatWriter",
    "ParsedClaims",
    "parse_claims",
    "parse_draft",
]

DEFAULT_WRITER_PROMPT = """\
You answer questions using only the evidence given. Reply with JSON only, in this shape:
{"lead": "...",
 "claims": [{"statement": "...", "source_id": "...", "quote": "...", "answers": true}]}
- lead: for a yes/no question, or a choice between options the question names, the \
direct answer in a few words ("Yes", "No", or the option), inferred from the claims; \
otherwise "". The claims then state the facts it rests on, without the verdict.
- statement: one sentence of the answer. Keep it close to the facts of its quote: \
you may paraphrase, but copy numbers, names and dates exactly and add nothing the \
passage does not say.
- source_id: the id of the evidence passage that supports the statement, exactly as \
shown in the second pair of [brackets] of its header.
- quote: a short span copied character for character from that passage which \
supports the statement.
- answers: true for the one claim that states the answer to the question, false \
for the others.
Write the lead and the statements in the language of the question (a question in \
Chinese is answered in Chinese), whatever the language of the evidence; quotes stay \
as the passage writes them.
Write 1 to 4 claims, the answer first. If the evidence does not answer the \
question, reply {"claims": []}."""


class ChatWriter(WriterBase):
    """:class:`WriterPolicy` that asks a chat model for quoted claims.

    Args:
        model: the chat model (e.g. :class:`actors.models.OpenAIChatClient`).
        timeout_s: per model call (the run may give less via ``timeout_for``).
        max_chunk_chars: evidence text shown per chunk (quotes can only come from this).
        max_claims: claims kept, in the model's order (the answer claim always stays).
        max_tokens: completion cap, stated in the prompt.
        max_tokens_cap: the largest cap the one retry of a cut reply may ask for.
        long_prompt_tokens: a prompt above this (as the server counted it) is
            sent with fewer passages when a cut reply is retried.
        json_mode: send ``response_format={"type": "json_object"}`` (most servers support it).
        order: ``"edges"`` puts the most relevant passages at both ends of the list
            (:func:`actors.rerank.edges_order`; ``evidence`` comes best first);
            ``"given"`` keeps the order given.
        timeout_for: called before each model call to get the time the run has left.
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
        max_tokens_cap: int = 2048,
        long_prompt_tokens: int = 3000,
        temperature: float | None = 0.0,
        json_mode: bool = True,
        order: Literal["edges", "given"] = "edges",
        system_prompt: str = DEFAULT_WRITER_PROMPT,
        timeout_for: Callable[[], float | None] | None = None,
    ) -> None:
        if timeout_s <= 0 or max_claims < 1 or max_chunk_chars < 20 or max_tokens < 1:
            raise ValueError(
                "timeout_s > 0, max_claims >= 1, max_chunk_chars >= 20 and max_tokens >= 1"
            )
        self.model = model
        self.timeout_s = timeout_s
        self.max_chunk_chars = max_chunk_chars
        self.max_claims = max_claims
        self.max_tokens = max_tokens
        self.max_tokens_cap = max(max_tokens_cap, max_tokens)
        self.long_prompt_tokens = long_prompt_tokens
        self.temperature = temperature
        self.json_mode = json_mode
        self.order = order
        self.system_prompt = system_prompt
        self.timeout_for = timeout_for
        self._last: tuple[str, tuple[Claim, ...]] | None = None

    @property
    def model_name(self) -> str:
        """The chat model's name (failures name it)."""
        return self.model.model

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
    ) -> Draft:
        """Ask the model for claims over ``evidence`` (best first); pass every claim on."""
        if not evidence:  # nothing could be cited: no model call
            return Draft(text="", claims=(), notes=("no evidence was given",))
        previous = self._last[1] if self._last and self._last[0] == question else ()
        best = [c for c in evidence if not is_stub(c.title, c.text)] or list(evidence)
        ask = _Ask(question, mode, tuple(errors), tuple(previous))
        shown = self._arrange(best)
        result = await self._call(ask, shown, self.max_tokens)
        calls = [result]
        notes: list[str] = []
        if len(best) < len(evidence):
            notes.append(f"left out {len(evidence) - len(best)} passage(s) that only "
                         "repeat their title")
        if result.finish_reason == "length":
            retry = await self._retry_cut(ask, best, shown, result, notes)
            if retry is not None:
                shown, result = retry
                calls.append(result)
        parsed = parse_draft(result.content, shown)
        notes += parsed.notes
        if result.finish_reason == "length":
            notes.append("the model's reply was cut off at the token limit: "
                         f"kept the {len(parsed.claims)} complete claim(s)")
        claims, answer = _keep(parsed.claims, parsed.answer_index, self.max_claims, notes)
        self._last = (question, tuple(claims))
        return Draft(
            text=" ".join(c.statement for c in claims if c.statement),
            claims=tuple(claims),
            tokens=sum(r.usage.total for r in calls),
            notes=tuple(notes),
            answer_index=answer,
            lead=parsed.lead,
            model=self.model.model,
            input_tokens=sum(r.usage.prompt for r in calls),
            output_tokens=sum(r.usage.completion for r in calls),
        )

    async def _retry_cut(
        self,
        ask: _Ask,
        best: list[EvidenceChunk],
        shown: list[EvidenceChunk],
        cut: ChatResult,
        notes: list[str],
    ) -> tuple[list[EvidenceChunk], ChatResult] | None:
        """Ask once more after a reply cut at ``max_tokens``: more tokens, maybe fewer passages.

        Returns ``None`` (the cut reply's complete claims stand) when the retry
        fails; re-raises its error when the cut reply holds no complete claim.
        """
        tokens = min(self.max_tokens * 2, self.max_tokens_cap)
        fewer = best
        kept = parse_draft(cut.content, shown).claims
        long = cut.usage.prompt > self.long_prompt_tokens
        if len(best) > 1 and (tokens == self.max_tokens or long):
            cited = {c.source_id for c in kept}
            keep = {c.id for c in best[: max(1, (len(best) + 1) // 2)]} | cited
            fewer = [c for c in best if c.id in keep]
        retry_shown = self._arrange(fewer) if len(fewer) < len(best) else shown
        what = f"retried with max_tokens {tokens}"
        if len(retry_shown) < len(shown):
            what += f" and {len(retry_shown)} of {len(shown)} passages"
        try:
            result = await self._call(ask, retry_shown, tokens, cut_at=self.max_tokens)
        except ChatError as exc:
            if not kept:
                raise
            notes.append(f"the model's reply was cut off at {self.max_tokens} tokens; "
                         f"the retry failed: {exc}")
            return None
        notes.append(f"the model's reply was cut off at {self.max_tokens} tokens: {what}")
        return retry_shown, result

    def _arrange(self, best: Sequence[EvidenceChunk]) -> list[EvidenceChunk]:
        return edges_order(best) if self.order == "edges" else list(best)

    async def _call(
        self, ask: _Ask, shown: Sequence[EvidenceChunk], max_tokens: int, cut_at: int | None = None
    ) -> ChatResult:
        messages = [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self._prompt(ask, shown, max_tokens, cut_at)},
        ]
        timeout = self.timeout_s
        if self.timeout_for is not None and (left := self.timeout_for()) is not None:
            timeout = min(timeout, left)
        return await self.model.complete(ChatRequest(
            messages,
            timeout_s=timeout,
            temperature=self.temperature,
            max_tokens=max_tokens,
            response_format={"type": "json_object"} if self.json_mode else None,
        ))

    def _prompt(
        self, ask: _Ask, shown: Sequence[EvidenceChunk], max_tokens: int, cut_at: int | None
    ) -> str:
        lines = [f"Question: {ask.question}", "",
                 "Evidence (cite a passage by the id in its second [brackets]):"]
        for number, chunk in enumerate(shown, 1):
            lines.append(f"{passage_header(number, chunk)}\n"
                         f"{clip_text(chunk.text, self.max_chunk_chars)}")
        if ask.mode == "finalize":
            lines += ["", "The search budget is used up: answer from this evidence only."]
        if ask.mode == "repair":
            lines += ["", "Your previous answer was rejected by the citation checker:"]
            if ask.previous:
                lines.append(json.dumps(
                    {"claims": [c.model_dump() for c in ask.previous]}, ensure_ascii=False))
            lines.append("Errors:")
            lines += [f"- claim {e.index} (source {e.source_id or '(none)'}): {e.reason}"
                      for e in ask.errors]
            lines.append(
                "Write the whole answer again. Fix or drop each failed claim: every quote "
                "must be copied exactly from the passage whose id it cites, and the claim "
                "that states the answer must be kept (fixed) if the evidence supports it."
            )
        if cut_at is not None:
            lines += ["", f"Your previous reply was cut off at the limit of {cut_at} tokens: "
                          "write fewer, shorter claims."]
        lines += ["", f"Your reply may use at most {max_tokens} tokens. "
                      "Reply with the JSON object only."]
        return "\n".join(lines)


@dataclass
class _Ask:
    """What one ``write`` asks, shared by its first call and its retry."""

    question: str
    mode: WriteMode
    errors: tuple[ClaimError, ...]
    previous: tuple[Claim, ...]


def _keep(
    claims: list[Claim], answer: int | None, limit: int, notes: list[str]
) -> tuple[list[Claim], int | None]:
    """The first ``limit`` claims, the answer claim always among them."""
    if len(claims) <= limit:
        return claims, answer
    notes.append(f"kept the first {limit} of {len(claims)} claims")
    if answer is None or answer < limit:
        return claims[:limit], answer
    notes.append(f"kept the answer claim {answer} in place of claim {limit - 1}")
    return [*claims[: limit - 1], claims[answer]], limit - 1


_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)
_CLAIMS_KEY = re.compile(r'"claims"\s*:\s*\[')
_TRUE = {"true", "yes", "1"}


@dataclass(frozen=True, slots=True)
class ParsedClaims:
    """What a writer reply holds: every claim as written, the answer claim, notes on oddities."""

    claims: list[Claim]
    answer_index: int | None = None
    notes: list[str] = field(default_factory=list)
    lead: str = ""


def parse_claims(
    text: str, evidence: Sequence[EvidenceChunk]
) -> tuple[list[Claim], list[str]]:
    """Claims from a model reply and notes on what was odd (see :func:`parse_draft`)."""
    parsed = parse_draft(text, evidence)
    return parsed.claims, parsed.notes


def parse_draft(text: str, evidence: Sequence[EvidenceChunk]) -> ParsedClaims:
    """Every claim of a model reply, which one states the answer, and notes on what was odd.

    Accepts the JSON object anywhere in the text (code fences, prose before or
    after), a bare list of claims, or a reply cut off mid-way (complete claims
    are kept). A ``source_id`` is matched against ``evidence``'s ids (brackets
    and spaces are ignored); a bare number ``n`` is read as the ``n``-th
    passage of ``evidence``, as shown numbered. A claim citing an id that was
    not given, or with an empty field, is kept as written (an empty field as
    ``""``): the verifier rejects it with a typed reason. Only exact
    duplicates are merged.
    """
    notes: list[str] = []
    items = _find_claims(text)
    if items is None:
        notes.append("no JSON claims found in the model's reply")
        return ParsedClaims([], None, notes)
    ids = [c.id for c in evidence]
    claims: list[Claim] = []
    answer: int | None = None
    seen: dict[tuple[str, str, str], int] = {}
    for index, item in enumerate(items):
        if isinstance(item, str) and item.strip():
            item = {"statement": item}
        if not isinstance(item, dict):
            notes.append(f"claim {index}: not an object, skipped: {item!r:.60}")
            continue
        statement, raw_id, quote = (_text(item.get(k)) for k in ("statement", "source_id", "quote"))
        empty = [k for k, v in (("statement", statement), ("source_id", raw_id),
                                ("quote", quote)) if not v]
        if empty:
            notes.append(f"claim {index}: empty {', '.join(empty)} (passed on to the verifier)")
        source_id = _resolve(raw_id, ids, index, notes)
        key = (statement, source_id, quote)
        at = seen.get(key)
        if at is None:
            at = seen[key] = len(claims)
            claims.append(Claim(statement=statement, source_id=source_id, quote=quote))
        else:
            notes.append(f"claim {index}: a duplicate of an earlier claim, merged")
        if _marked(item.get("answers")):
            if answer is None:
                answer = at
            elif answer != at:
                notes.append(f"claim {index}: also marked as the answer; the first one counts")
    return ParsedClaims(claims, answer, notes, _lead_of(text))


_LEAD = re.compile(r'"lead"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _lead_of(text: str) -> str:
    """The reply's ``lead`` (a direct answer the claims back), "" when it gave none."""
    found = _LEAD.search(text)
    if found is None:
        return ""
    try:
        lead = json.loads(f'"{found.group(1)}"')
    except ValueError:
        return ""
    return " ".join(str(lead).split())


def _text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, str | int | float):
        return str(value).strip()
    return ""


def _marked(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in _TRUE)


def _resolve(raw: str, ids: Sequence[str], index: int, notes: list[str]) -> str:
    """The evidence id ``raw`` names (a number names the n-th passage); else ``raw`` as written."""
    source_id = raw.strip("[]() ")
    if not source_id or source_id in ids:
        return source_id
    if source_id.isdigit() and 1 <= int(source_id) <= len(ids):
        found = ids[int(source_id) - 1]
        notes.append(f"claim {index}: read source {raw!r} as passage {found!r}")
        return found
    named = [i for i in ids if f"[{i}]" in raw]
    if len(named) == 1:
        notes.append(f"claim {index}: read source {raw!r} as passage {named[0]!r}")
        return named[0]
    notes.append(f"claim {index}: cites {raw!r}, which was not given "
                 "(passed on to the verifier)")
    return source_id


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
    return _complete_items(cleaned)


def _complete_items(cleaned: str) -> list[Any] | None:
    """The complete items of a claims list cut off mid-way (``None``: no claims list)."""
    match = _CLAIMS_KEY.search(cleaned)
    if match is not None:
        pos = match.end()
    else:
        stripped = cleaned.lstrip()
        if not stripped.startswith("[{"):
            return None
        pos = len(cleaned) - len(stripped) + 1
    decoder = json.JSONDecoder()
    items: list[Any] = []
    while True:
        while pos < len(cleaned) and cleaned[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(cleaned) or cleaned[pos] == "]":
            return items
        try:
            value, pos = decoder.raw_decode(cleaned, pos)
        except ValueError:
            return items
        items.append(value)


def _claims_of(value: Any) -> list[Any] | None:
    if isinstance(value, dict) and isinstance(value.get("claims"), list):
        return list(value["claims"])
    dicts = isinstance(value, list) and value and all(isinstance(v, dict) for v in value)
    if dicts and any("statement" in v for v in value):
        return list(value)
    return None
