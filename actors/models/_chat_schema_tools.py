"""Tool calling for chat models whose template has no tool support, via a JSON schema.

A llama.cpp server given ``tools`` for a model whose chat template cannot render
them (SmolLM2, Gemma base) silently drops the tools and answers in prose. What
such a server does support is ``response_format: {"type": "json_schema"}``: it
compiles the schema into a grammar, so the reply is valid JSON of that shape.
:class:`SchemaToolChat` wraps any :class:`ChatModel` and turns a tool-calling
request into such a constrained request, then the constrained JSON back into
typed :class:`RawToolCall` values, so a caller (the chat planner) sees ordinary
tool calls and validates them as it does any model's.

The reply shape the schema allows (``tool_choice`` decides which alternatives)::

    {"tool_calls": [{"name": "search", "arguments": {...}}, ...]}   # 1..max_calls calls
    {"content": "..."}                                            # "auto" only: no call

The history is rewritten for templates that know only plain messages: an
assistant turn with tool calls becomes its JSON reply, and ``tool`` results
become one ``user`` message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pydantic_core

from ._chat_types import ChatMessage, ChatModel, ChatRequest, ChatResult, RawToolCall

__all__ = ["SchemaToolChat", "tool_call_schema"]

_REPLY_SCHEMA_NAME = "tool_calls"


def tool_call_schema(
    tools: Sequence[Mapping[str, Any]],
    *,
    tool_choice: str | Mapping[str, Any] | None = "auto",
    max_calls: int = 4,
    max_string_length: int | None = None,
) -> dict[str, Any]:
    """The JSON schema of a reply that calls ``tools`` (OpenAI ``tools`` shape).

    ``tool_choice``: ``"auto"``/``None`` also allows ``{"content": text}``;
    ``"required"`` allows only calls; ``{"type": "function", "function": {"name": n}}``
    allows only calls of ``n``. ``max_string_length`` caps every argument string that
    has no ``maxLength`` of its own: a weak model's runaway string then ends inside the
    grammar instead of eating the whole token budget.

    Raises:
        ValueError: no tools, ``tool_choice="none"``, a tool without a name, or a
            ``tool_choice`` naming a tool that is not given.
    """
    if max_calls < 1 or (max_string_length is not None and max_string_length < 1):
        raise ValueError("max_calls and max_string_length must be at least 1")
    functions = [_function(t) for t in tools]
    if not functions:
        raise ValueError("tool_call_schema needs at least one tool")
    names = [str(f["name"]) for f in functions]
    allow_text = tool_choice in (None, "auto")
    if isinstance(tool_choice, Mapping):
        wanted = tool_choice.get("function", {}).get("name")
        if wanted not in names:
            raise ValueError(f"tool_choice names {wanted!r}, which is not among {names}")
        functions = [f for f in functions if f["name"] == wanted]
    elif tool_choice not in (None, "auto", "required"):
        raise ValueError(f"tool_choice {tool_choice!r}: use 'auto', 'required' or a function")
    calls = {
        "type": "object",
        "properties": {
            "tool_calls": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_calls,
                "items": {"anyOf": [_call_schema(f, max_string_length) for f in functions]},
            }
        },
        "required": ["tool_calls"],
        "additionalProperties": False,
    }
    if not allow_text:
        return calls
    text = {
        "type": "object",
        "properties": {"content": {"type": "string"}},
        "required": ["content"],
        "additionalProperties": False,
    }
    return {"anyOf": [calls, text]}


class SchemaToolChat:
    """A :class:`ChatModel` that emulates tool calling with a JSON-schema-constrained reply.

    Requests without ``tools`` (or with ``tool_choice="none"``) pass through
    unchanged. With tools, the request carries a system note listing them and a
    ``response_format`` built by :func:`tool_call_schema`; the reply is parsed
    back into :attr:`ChatResult.tool_calls` with ids ``json-<turn>-<index>``
    (deterministic, so a recorded run replays the same). A reply cut off at
    ``max_tokens`` keeps its calls, the last one with its arguments as far as they
    were written (invalid JSON, ``finish_reason="length"``: the caller rejects it as
    cut off); a reply with no call in it comes back as plain content. ``on_delta``
    gets only the text of a ``{"content": ...}`` reply, once, never the raw JSON.

    Args:
        model: the wrapped client (e.g. :class:`OpenAIChatClient` on llama.cpp).
        max_calls: the most calls one reply may hold.
        max_string_length: cap on argument strings without a ``maxLength`` of their
            own (ids and queries are short; ``None``: no cap).
    """

    def __init__(
        self, model: ChatModel, *, max_calls: int = 4, max_string_length: int | None = 200
    ) -> None:
        if max_calls < 1 or (max_string_length is not None and max_string_length < 1):
            raise ValueError("max_calls and max_string_length must be at least 1")
        self.inner = model
        self.model = model.model
        self.max_calls = max_calls
        self.max_string_length = max_string_length

    async def complete(self, request: ChatRequest) -> ChatResult:
        """Run one completion; with tools, a constrained one whose JSON becomes tool calls.

        Raises:
            ValueError: ``tools`` together with ``response_format`` (one schema per reply),
                or a ``tool_choice`` :func:`tool_call_schema` rejects.
            ChatError: whatever the wrapped model raises.
        """
        messages, tools = request.messages, request.tools
        if not tools or request.tool_choice == "none":
            return await self.inner.complete(replace(
                request, messages=_plain_history(messages), tools=None, tool_choice=None))
        if request.response_format is not None:
            raise ValueError("SchemaToolChat: tools and response_format cannot be combined")
        schema = tool_call_schema(tools, tool_choice=request.tool_choice,
                                  max_calls=self.max_calls,
                                  max_string_length=self.max_string_length)
        result = await self.inner.complete(replace(
            request,
            messages=_with_note(_plain_history(messages), _tools_note(tools, schema)),
            tools=None,
            tool_choice=None,
            on_delta=None,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": _REPLY_SCHEMA_NAME, "schema": schema},
            },
        ))
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        calls, content = _parse_reply(result.content, turn)
        if content and request.on_delta is not None:
            request.on_delta(content)
        return ChatResult(
            content=content,
            tool_calls=calls,
            usage=result.usage,
            # "length" stays: the caller says a cut-off call was cut off
            finish_reason="tool_calls" if calls and result.finish_reason != "length"
            else result.finish_reason,
            model=result.model,
        )


def _plain_history(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The conversation with tool turns written as plain ``assistant``/``user`` messages.

    An assistant message's ``tool_calls`` become its content, in the reply shape of
    :func:`tool_call_schema`; consecutive ``tool`` results become one ``user``
    message ``Result of <name> (<id>): ...``.
    """
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    results: list[str] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            call_id = str(message.get("tool_call_id", ""))
            label = f"{names.get(call_id, 'call')} ({call_id})" if call_id else "call"
            results.append(f"Result of {label}: {message.get('content') or ''}")
            continue
        if results:
            out.append({"role": "user", "content": "\n\n".join(results)})
            results = []
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = call.get("function", {})
                names[str(call.get("id", ""))] = str(function.get("name", ""))
                calls.append({"name": function.get("name", ""),
                              "arguments": _arguments(function.get("arguments", "{}"))})
            out.append({"role": "assistant", "content": json.dumps({"tool_calls": calls})})
            continue
        copy = dict(message)
        if copy.get("content") is None:
            copy["content"] = ""
        out.append(copy)
    if results:
        out.append({"role": "user", "content": "\n\n".join(results)})
    return out


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    function = tool.get("function", tool)
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ValueError(f"not a function tool: {tool!r}")
    return function


def _call_schema(function: Mapping[str, Any], max_string_length: int | None) -> dict[str, Any]:
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    if max_string_length is not None:
        parameters = _cap_strings(parameters, max_string_length)
    return {
        "type": "object",
        "properties": {"name": {"const": function["name"]}, "arguments": dict(parameters)},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def _with_note(history: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    """The note joins the first system message (templates allow only one, first)."""
    if history and history[0].get("role") == "system":
        first = {**history[0], "content": f"{history[0]['content']}\n\n{note}"}
        return [first, *history[1:]]
    return [{"role": "system", "content": note}, *history]


def _cap_strings(schema: Any, limit: int) -> Any:
    """A copy of ``schema`` whose string schemas without ``maxLength`` get ``limit``."""
    if isinstance(schema, Mapping):
        out = {k: _cap_strings(v, limit) for k, v in schema.items()}
        if out.get("type") == "string" and "enum" not in out and "maxLength" not in out:
            out["maxLength"] = limit
        return out
    if isinstance(schema, list):
        return [_cap_strings(v, limit) for v in schema]
    return schema


def _tools_note(tools: Sequence[Mapping[str, Any]], schema: Mapping[str, Any]) -> str:
    """What a tool template would have told the model: the tools and the reply shape."""
    lines = ["You can call these tools:"]
    for tool in tools:
        f = _function(tool)
        lines.append(f"- {f['name']}({_signature(f.get('parameters') or {})}): "
                     f"{f.get('description', '')}")
    lines.append(
        'Reply with compact JSON only, on one line: '
        '{"tool_calls":[{"name":"<tool>","arguments":{<its arguments>}}]}'
    )
    if "anyOf" in schema:
        lines.append('To reply without calling a tool: {"content":"<text>"}')
    return "\n".join(lines)


def _signature(parameters: Mapping[str, Any]) -> str:
    """``query: string, k?: integer``: short, as the grammar enforces the details."""
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())
    return ", ".join(
        f"{name}{'' if name in required else '?'}: {spec.get('type', 'any')}"
        if isinstance(spec, Mapping) else name
        for name, spec in properties.items()
    )


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return {}
    return raw


def _parse_reply(text: str, turn: int) -> tuple[tuple[RawToolCall, ...], str]:
    """``(calls, content)`` of a constrained reply; anything else is returned as content.

    A reply cut off at ``max_tokens`` keeps its calls: the complete ones parsed, the
    last one with the argument text as far as the model wrote it (invalid JSON, so
    the caller rejects it as cut off, as it would a native tool call).
    """
    try:
        value: Any = json.loads(text)
        cut = False
    except ValueError:
        try:
            value = pydantic_core.from_json(text, allow_partial=True)
        except ValueError:
            return (), text
        cut = True
    items = value.get("tool_calls") if isinstance(value, dict) else None
    if isinstance(items, list):
        named = [i for i in items if isinstance(i, dict) and isinstance(i.get("name"), str)]
        calls = []
        for index, item in enumerate(named):
            arguments = json.dumps(item.get("arguments", {}))
            if cut and index == len(named) - 1:
                arguments = _raw_arguments(text)
            calls.append(RawToolCall(id=f"json-{turn}-{index}", name=item["name"],
                                     arguments_json=arguments))
        if calls:
            return tuple(calls), ""
    if not cut and isinstance(value, dict) and isinstance(value.get("content"), str):
        return (), value["content"]
    return (), text


def _raw_arguments(text: str) -> str:
    """What the model wrote as the last call's arguments before the cut (after its name)."""
    tail = text[max(text.rfind('"name"'), 0) :]
    at = tail.find('"arguments"')
    if at < 0:  # cut before the arguments began: still invalid JSON, so rejected as cut off
        return tail
    raw = tail[at + len('"arguments"') :].lstrip().removeprefix(":").lstrip()
    try:  # complete after all (the cut came later, in the next call's name)
        value, _ = json.JSONDecoder().raw_decode(raw)
    except ValueError:
        return raw
    return json.dumps(value)
