"""A chat model as the verifier's entailment judge, over the OpenAI protocol.

The model sees one premise (the cited quote) and one hypothesis (the claim's
statement) and answers with JSON, constrained by a JSON schema when the server
supports ``response_format={"type": "json_schema"}``::

    {"label": "supports" | "contradicts" | "neutral", "probability": 0.0..1.0}

``probability`` (optional) is the model's probability that the premise
supports the hypothesis; without it the label maps to 1.0 / 0.0 / 0.25.
Anything else (a server error, a reply that is not that JSON) raises
:class:`EntailmentError`, which :func:`~._verifier.verify_async` turns into a
dropped claim with the error as reason: a judge that could not judge never
lets a claim through.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from typing import Any, Literal

from actors.models import ChatError, ChatModel, ChatRequest

__all__ = ["DEFAULT_ENTAILMENT_PROMPT", "ChatEntailment", "EntailmentError"]

DEFAULT_ENTAILMENT_PROMPT = """\
You check citations. Given a PREMISE (words quoted from a source) and a HYPOTHESIS \
(a statement that cites it), decide whether the premise alone supports the hypothesis.
- "supports": everything the hypothesis says follows from the premise (names, numbers, \
dates and negations included).
- "contradicts": the premise says otherwise.
- "neutral": the premise does not say.
Reply with JSON only: {"label": "supports" | "contradicts" | "neutral", \
"probability": <probability from 0 to 1 that the premise supports the hypothesis>}"""

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["supports", "contradicts", "neutral"]},
        "probability": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["label"],
    "additionalProperties": False,
}
_LABELS = {
    "supports": 1.0, "support": 1.0, "supported": 1.0, "entailment": 1.0, "entails": 1.0,
    "neutral": 0.25, "unknown": 0.25, "not_enough_info": 0.25,
    "contradicts": 0.0, "contradict": 0.0, "contradiction": 0.0, "refutes": 0.0,
}
_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)


class EntailmentError(RuntimeError):
    """The entailment judge gave no usable verdict (server error or malformed reply)."""


class ChatEntailment:
    """:class:`~._verifier.AsyncEntailmentModel` backed by a chat model acting as judge.

    Args:
        model: the chat model (e.g. :class:`actors.models.OpenAIChatClient`); the
            caller owns it and closes it.
        timeout_s: per judgement.
        response_format: ``"json_schema"`` (constrained output), ``"json_object"``
            (JSON mode) or ``"none"`` (prompt only), for servers that lack them.
        max_tokens: completion cap.
        cache_size: verdicts remembered by (premise, hypothesis): a repaired
            draft re-sends the claims that were fine.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        timeout_s: float = 20.0,
        response_format: Literal["json_schema", "json_object", "none"] = "json_schema",
        max_tokens: int = 64,
        system_prompt: str = DEFAULT_ENTAILMENT_PROMPT,
        cache_size: int = 512,
    ) -> None:
        if timeout_s <= 0 or max_tokens < 8 or cache_size < 0:
            raise ValueError("timeout_s > 0, max_tokens >= 8 and cache_size >= 0")
        self.model = model
        self.timeout_s = timeout_s
        self.response_format = response_format
        self.max_tokens = max_tokens
        self.system_prompt = system_prompt
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str], float] = OrderedDict()

    def _format(self) -> dict[str, Any] | None:
        if self.response_format == "json_schema":
            return {"type": "json_schema",
                    "json_schema": {"name": "entailment", "schema": _SCHEMA, "strict": True}}
        if self.response_format == "json_object":
            return {"type": "json_object"}
        return None

    async def ascore(self, premise: str, hypothesis: str) -> float:
        """Probability-like score (0..1) that ``premise`` supports ``hypothesis``.

        Raises:
            EntailmentError: the model call failed or its reply was not a verdict.
        """
        key = (premise, hypothesis)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        messages = [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": f"PREMISE: {premise}\nHYPOTHESIS: {hypothesis}"},
        ]
        try:
            result = await self.model.complete(ChatRequest(
                messages, timeout_s=self.timeout_s, temperature=0.0,
                max_tokens=self.max_tokens, response_format=self._format(), stream=False,
            ))
        except ChatError as exc:
            raise EntailmentError(f"entailment model call failed: {exc}") from exc
        score = _parse_verdict(result.content)
        if self.cache_size:
            self._cache[key] = score
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return score


def _parse_verdict(text: str) -> float:
    """The support score in a judge's reply (see the module docstring).

    Raises:
        EntailmentError: no JSON object, no known label, or a probability outside 0..1.
    """
    cleaned = _FENCE.sub("", text).strip()
    start, end = cleaned.find("{"), cleaned.rfind("}")
    data: Any = None
    if 0 <= start < end:
        try:
            data = json.loads(cleaned[start : end + 1])
        except ValueError:
            data = None
    if not isinstance(data, dict):
        raise EntailmentError(f"entailment model reply is not a JSON verdict: {text[:120]!r}")
    probability = data.get("probability")
    if probability is not None:
        if isinstance(probability, bool) or not isinstance(probability, int | float) \
                or not 0.0 <= float(probability) <= 1.0:
            raise EntailmentError(f"entailment probability must be in 0..1, got {probability!r}")
        return float(probability)
    label = data.get("label")
    score = _LABELS.get(str(label).strip().lower().replace(" ", "_")) if label else None
    if score is None:
        raise EntailmentError(f"entailment model gave no known label: {label!r}")
    return score
