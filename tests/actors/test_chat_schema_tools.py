"""SchemaToolChat: tool calls for models without a tool template, via a JSON schema.

The wrapped model here is a recorder that answers with fixed text: what is under
test is the request the adapter builds and how it reads replies back (the real
server round trip is in tests/reactive_rag/judgement/test_chat_llm_real.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jsonschema
import pytest

from actors.models import (
    ChatMessage,
    ChatRequest,
    ChatResult,
    SchemaToolChat,
    Usage,
    function_tool,
    tool_call_schema,
)

SEARCH = function_tool(
    "search", "Search.",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"],
     "additionalProperties": False},
)
ANSWER = function_tool("answer", "Stop.", {"type": "object", "properties": {}})


class Recorder:
    """A chat model that records each request and replies with the next canned text."""

    model = "recorder"

    def __init__(self, *replies: str, finish_reason: str = "stop") -> None:
        self.replies = list(replies)
        self.finish_reason = finish_reason
        self.requests: list[dict[str, Any]] = []

    async def complete(self, request: ChatRequest) -> ChatResult:
        self.requests.append({"messages": [dict(m) for m in request.messages],
                              "tools": request.tools, "tool_choice": request.tool_choice,
                              "response_format": request.response_format,
                              "stream": request.stream})
        text = self.replies.pop(0)
        if request.on_delta is not None:
            request.on_delta(text)
        return ChatResult(content=text, usage=Usage(10, 5, 15),
                          finish_reason=self.finish_reason, model="m")


def _schema(request: Mapping[str, Any]) -> dict[str, Any]:
    fmt = request["response_format"]
    assert fmt["type"] == "json_schema"
    schema: dict[str, Any] = fmt["json_schema"]["schema"]
    return schema


async def test_tools_become_a_json_schema_and_the_reply_typed_tool_calls() -> None:
    reply = json.dumps({"tool_calls": [{"name": "search", "arguments": {"query": "seine"}},
                                       {"name": "answer", "arguments": {}}]})
    inner = Recorder(reply)
    chat = SchemaToolChat(inner)

    result = await chat.complete(ChatRequest(
        [{"role": "system", "content": "Plan."}, {"role": "user", "content": "Q?"}],
        tools=[SEARCH, ANSWER], tool_choice="auto",
    ))

    sent = inner.requests[0]
    assert sent["tools"] is None and sent["tool_choice"] is None  # the server never sees tools
    jsonschema.validate(json.loads(reply), _schema(sent))
    system = sent["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Plan.")
    assert "- search(query: string): Search." in system["content"]  # tools described
    assert [(c.name, json.loads(c.arguments_json)) for c in result.tool_calls] == [
        ("search", {"query": "seine"}), ("answer", {})]
    assert [c.id for c in result.tool_calls] == ["json-0-0", "json-0-1"]
    assert result.finish_reason == "tool_calls" and result.content == ""
    assert result.usage.total == 15


def test_the_schema_follows_tool_choice() -> None:
    auto = tool_call_schema([SEARCH, ANSWER], tool_choice="auto", max_calls=2)
    required = tool_call_schema([SEARCH, ANSWER], tool_choice="required")
    only = tool_call_schema([SEARCH, ANSWER],
                            tool_choice={"type": "function", "function": {"name": "answer"}})
    text = {"content": "no call"}
    call = {"tool_calls": [{"name": "search", "arguments": {"query": "x"}}]}
    three = {"tool_calls": [{"name": "answer", "arguments": {}}] * 3}

    jsonschema.validate(text, auto)
    jsonschema.validate(call, auto)
    jsonschema.validate(call, required)
    for bad, schema in [(text, required), (call, only), (three, auto),
                        ({"tool_calls": [{"name": "search", "arguments": {}}]}, required),
                        ({"tool_calls": []}, required)]:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_argument_strings_get_a_length_cap_unless_they_have_their_own() -> None:
    own = function_tool("read", "Read.", {
        "type": "object", "additionalProperties": False, "required": ["chunk_id"],
        "properties": {"chunk_id": {"type": "string", "maxLength": 8},
                       "direction": {"type": "string", "enum": ["next", "prev"]},
                       "note": {"type": "string"}}})
    schema = tool_call_schema([own], tool_choice="required", max_string_length=5)

    def call(**args: str) -> dict[str, Any]:
        return {"tool_calls": [{"name": "read", "arguments": args}]}

    jsonschema.validate(call(chunk_id="12345678", direction="next", note="short"), schema)
    for bad in (call(chunk_id="123456789"), call(chunk_id="a", note="runaway")):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    assert own["function"]["parameters"]["properties"]["note"] == {"type": "string"}  # a copy


@pytest.mark.parametrize(
    ("tools", "choice", "message"),
    [([], "auto", "at least one tool"),
     ([SEARCH], {"type": "function", "function": {"name": "read"}}, "'read'"),
     ([SEARCH], "sometimes", "tool_choice 'sometimes'"),
     ([{"type": "function", "function": {"description": "no name"}}], "auto", "not a function")],
)
def test_bad_tools_or_tool_choice_raise_saying_what(
    tools: list[dict[str, Any]], choice: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        tool_call_schema(tools, tool_choice=choice)


async def test_a_text_reply_comes_back_as_content_once() -> None:
    inner = Recorder(json.dumps({"content": "The Seine."}))
    deltas: list[str] = []

    result = await SchemaToolChat(inner).complete(ChatRequest(
        [{"role": "user", "content": "Q?"}], tools=[SEARCH], on_delta=deltas.append
    ))

    assert result.tool_calls == () and result.content == "The Seine."
    assert deltas == ["The Seine."]  # never the raw JSON


async def test_a_reply_cut_off_keeps_its_calls_with_the_arguments_as_written() -> None:
    cut = '{"tool_calls":[{"name":"search","arguments":{"query":"x"}},{"name":"search",' \
          '"arguments":{"query":"runaway str'
    inner = Recorder(cut, finish_reason="length")

    result = await SchemaToolChat(inner).complete(
        ChatRequest([{"role": "user", "content": "Q?"}], tools=[SEARCH]))

    first, second = result.tool_calls
    assert result.finish_reason == "length"  # so the caller can say the reply was cut off
    assert json.loads(first.arguments_json) == {"query": "x"}
    assert second.name == "search" and second.arguments_json == '{"query":"runaway str'
    with pytest.raises(ValueError):
        json.loads(second.arguments_json)  # the caller rejects it as cut off


async def test_a_reply_cut_inside_a_key_never_lends_another_call_its_arguments() -> None:
    cut = '{"tool_calls":[{"name":"read","arguments":{"chunk_id":"a#1"}},' \
          '{"name":"open_page","argum'
    inner = Recorder(cut, finish_reason="length")

    result = await SchemaToolChat(inner).complete(
        ChatRequest([{"role": "user", "content": "Q?"}], tools=[SEARCH]))

    read, open_page = result.tool_calls
    assert json.loads(read.arguments_json) == {"chunk_id": "a#1"}
    assert open_page.name == "open_page"
    with pytest.raises(ValueError):
        json.loads(open_page.arguments_json)


async def test_a_reply_that_is_not_json_is_returned_as_content() -> None:
    inner = Recorder("I would search for it.", finish_reason="stop")

    result = await SchemaToolChat(inner).complete(
        ChatRequest([{"role": "user", "content": "Q?"}], tools=[SEARCH]))

    assert result.tool_calls == () and result.content == "I would search for it."
    assert result.finish_reason == "stop"


async def test_tool_turns_in_the_history_are_sent_as_plain_messages() -> None:
    inner = Recorder(json.dumps({"content": "done"}))
    history: list[ChatMessage] = [
        {"role": "user", "content": "Q?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "json-0-0", "type": "function",
             "function": {"name": "search", "arguments": '{"query": "seine"}'}}]},
        {"role": "tool", "tool_call_id": "json-0-0", "content": "2 new passages"},
        {"role": "user", "content": "Budget left: 3 tool calls."},
    ]

    await SchemaToolChat(inner).complete(ChatRequest(history, tools=[SEARCH]))

    sent = inner.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user", "user"]
    assert json.loads(sent[2]["content"]) == {
        "tool_calls": [{"name": "search", "arguments": {"query": "seine"}}]}
    assert sent[3]["content"] == "Result of search (json-0-0): 2 new passages"
    assert all(m["content"] is not None for m in sent)


async def test_without_tools_the_request_passes_through() -> None:
    inner = Recorder('{"claims": []}')
    fmt = {"type": "json_object"}

    result = await SchemaToolChat(inner).complete(ChatRequest(
        [{"role": "user", "content": "Write."}], response_format=fmt, stream=False
    ))

    assert inner.requests[0]["response_format"] == fmt and inner.requests[0]["stream"] is False
    assert result.content == '{"claims": []}'


async def test_tools_with_a_response_format_are_refused() -> None:
    with pytest.raises(ValueError, match="cannot be combined"):
        await SchemaToolChat(Recorder("{}")).complete(ChatRequest(
            [{"role": "user", "content": "Q?"}], tools=[SEARCH],
            response_format={"type": "json_object"},
        ))
