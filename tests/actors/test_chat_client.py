"""OpenAIChatClient against a local server that speaks the streaming protocol."""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from actors.models._chat import (
    ChatRequest,
    ChatResult,
    OpenAIChatClient,
    chat_url,
    function_tool,
)
from actors.models._chat_exceptions import (
    ChatAuthError,
    ChatBadResponse,
    ChatConnectionError,
    ChatError,
    ChatRateLimited,
    ChatRequestError,
    ChatServerError,
    ChatTimeout,
)
from tests.actors._openai_fixtures import (
    FakeOpenAI,
    Hang,
    JsonBody,
    Status,
    Stream,
    chunk,
    content_chunks,
    fake_openai,
    stream_reply,
    tool_call_chunks,
    usage_chunk,
)

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    async with fake_openai() as srv:
        yield srv


class SleepRecorder:
    """Stands in for asyncio.sleep so retry waits are observed, not slept."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
async def client(server: FakeOpenAI, sleeps: SleepRecorder) -> AsyncIterator[OpenAIChatClient]:
    async with OpenAIChatClient(
        server.base_url, model="gemma", api_key="sk-test", max_retries=2, sleep=sleeps
    ) as c:
        yield c


# --- happy paths ---------------------------------------------------------------------


async def test_streams_content_deltas_in_order_and_reports_usage(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(stream_reply("Paris is the capital of France.", usage=(31, 7), piece=5))
    seen: list[str] = []

    result = await client.complete(ChatRequest(MESSAGES, on_delta=seen.append))

    assert result.content == "Paris is the capital of France."
    assert "".join(seen) == result.content and len(seen) > 3
    assert result.finish_reason == "stop"
    assert (result.usage.prompt, result.usage.completion, result.usage.total) == (31, 7, 38)
    assert result.usage.estimated is False
    assert result.tool_calls == ()


async def test_request_asks_for_a_stream_with_usage_and_sends_tools_and_key(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(stream_reply("ok"))
    tool = function_tool("search", "Search the corpus", {"type": "object", "properties": {}})

    await client.complete(ChatRequest(MESSAGES, tools=[tool], tool_choice="auto", temperature=0.0))

    body = server.requests[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["model"] == "gemma"
    assert body["messages"] == MESSAGES
    assert body["tools"][0]["function"]["name"] == "search"
    assert body["tool_choice"] == "auto" and body["temperature"] == 0.0
    assert server.headers[0]["Authorization"] == "Bearer sk-test"


async def test_tool_calls_split_across_many_chunks_are_reassembled(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    args_a = json.dumps({"query": "Eiffel tower height", "k": 5})
    args_b = json.dumps({"chunk_id": "doc-1#3", "direction": "next"})
    events = [chunk({"role": "assistant", "content": None})]
    events += tool_call_chunks(
        [("call_a", "search", args_a), ("call_b", "read", args_b)], piece=1, interleave=True
    )
    events += [chunk({}, finish="tool_calls"), usage_chunk(50, 20)]
    server.script(Stream(events))

    result = await client.complete(ChatRequest(MESSAGES))

    assert [(c.id, c.name) for c in result.tool_calls] == [("call_a", "search"), ("call_b", "read")]
    first_args = json.loads(result.tool_calls[0].arguments_json)
    assert first_args == {"query": "Eiffel tower height", "k": 5}
    assert json.loads(result.tool_calls[1].arguments_json)["chunk_id"] == "doc-1#3"
    assert result.finish_reason == "tool_calls"
    assert result.content == ""


async def test_tool_call_without_id_or_index_still_assembles(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    events = [
        chunk({"tool_calls": [{"function": {"name": "answer", "arguments": "{"}}]}),
        chunk({"tool_calls": [{"function": {"arguments": "}"}}]}),
        chunk({}, finish="tool_calls"),
    ]
    server.script(Stream(events))

    result = await client.complete(ChatRequest(MESSAGES))

    assert len(result.tool_calls) == 1
    assert result.tool_calls[0].name == "answer"
    assert result.tool_calls[0].arguments_json == "{}"
    assert result.tool_calls[0].id  # a stable id is made up when the server sends none


async def test_missing_usage_is_estimated_from_characters(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(stream_reply("x" * 40, usage=None))

    result = await client.complete(ChatRequest(MESSAGES))

    assert result.usage.estimated is True
    assert result.usage.completion == 10  # 40 chars / 4
    assert result.usage.prompt > 0
    assert result.usage.total == result.usage.prompt + result.usage.completion


async def test_non_streaming_json_answer_is_accepted(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(
        JsonBody(
            {
                "id": "x",
                "model": "fake",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": "Let me search.",
                            "tool_calls": [
                                {
                                    "id": "c1",
                                    "type": "function",
                                    "function": {"name": "search", "arguments": {"query": "q"}},
                                }
                            ],
                        },
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
            }
        )
    )
    seen: list[str] = []

    result = await client.complete(ChatRequest(MESSAGES, on_delta=seen.append))

    assert result.content == "Let me search." and seen == ["Let me search."]
    assert result.tool_calls[0].name == "search"
    assert json.loads(result.tool_calls[0].arguments_json) == {"query": "q"}
    assert result.usage.total == 8 and not result.usage.estimated


def test_chat_url_accepts_host_or_v1_or_custom_path() -> None:
    assert chat_url("http://h:1") == "http://h:1/v1/chat/completions"
    assert chat_url("http://h:1/v1/") == "http://h:1/v1/chat/completions"
    assert chat_url("https://x/v1beta/openai") == "https://x/v1beta/openai/chat/completions"


# --- retries -------------------------------------------------------------------------


async def test_429_with_retry_after_is_honoured_then_succeeds(
    server: FakeOpenAI, client: OpenAIChatClient, sleeps: SleepRecorder
) -> None:
    server.script(Status(429, '{"error": {"message": "slow down"}}', headers={"Retry-After": "3"}))
    server.script(stream_reply("fine"))

    result = await client.complete(ChatRequest(MESSAGES, timeout_s=30))

    assert result.content == "fine"
    assert len(server.requests) == 2
    assert sleeps.waits == [3.0]


async def test_503_with_retry_after_is_honoured_like_a_429(
    server: FakeOpenAI, client: OpenAIChatClient, sleeps: SleepRecorder
) -> None:
    """A server in maintenance says when to come back; the client waits that long."""
    server.script(Status(503, '{"error": {"message": "maintenance"}}',
                         headers={"Retry-After": "4"}))
    server.script(stream_reply("back"))

    result = await client.complete(ChatRequest(MESSAGES, timeout_s=30))

    assert result.content == "back"
    assert sleeps.waits == [4.0]


async def test_429_that_persists_raises_rate_limited_with_retry_after(
    server: FakeOpenAI, client: OpenAIChatClient, sleeps: SleepRecorder
) -> None:
    server.script(*[Status(429, "{}", headers={"Retry-After": "1"}) for _ in range(3)])

    with pytest.raises(ChatRateLimited) as info:
        await client.complete(ChatRequest(MESSAGES))

    assert info.value.retry_after == 1.0
    assert info.value.status == 429
    assert len(server.requests) == 3  # first try + max_retries


async def test_retry_after_longer_than_the_deadline_fails_fast(
    server: FakeOpenAI, client: OpenAIChatClient, sleeps: SleepRecorder
) -> None:
    server.script(Status(429, "{}", headers={"Retry-After": "120"}), stream_reply("late"))

    with pytest.raises(ChatRateLimited):
        await client.complete(ChatRequest(MESSAGES, timeout_s=5))

    assert len(server.requests) == 1 and sleeps.waits == []


async def test_retry_after_as_an_http_date_is_understood(
    server: FakeOpenAI, client: OpenAIChatClient, sleeps: SleepRecorder
) -> None:
    when = email.utils.formatdate(time.time() + 3600, usegmt=True)  # an hour away
    server.script(Status(429, "{}", headers={"Retry-After": when}), stream_reply("late"))

    with pytest.raises(ChatRateLimited) as info:
        await client.complete(ChatRequest(MESSAGES, timeout_s=5))

    assert info.value.retry_after is not None and info.value.retry_after > 3000
    assert len(server.requests) == 1 and sleeps.waits == []  # it does not fit the deadline


async def test_500_then_success_is_retried(
    server: FakeOpenAI, client: OpenAIChatClient, sleeps: SleepRecorder
) -> None:
    server.script(Status(500, '{"error": {"message": "boom"}}'), stream_reply("recovered"))

    result = await client.complete(ChatRequest(MESSAGES))

    assert result.content == "recovered"
    assert len(server.requests) == 2 and len(sleeps.waits) == 1


async def test_persistent_5xx_html_page_raises_server_error_with_its_text(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    page = "<html><body><h1>502 Bad Gateway</h1>nginx</body></html>"
    server.script(*[Status(502, page, content_type="text/html") for _ in range(3)])

    with pytest.raises(ChatServerError) as info:
        await client.complete(ChatRequest(MESSAGES))

    assert info.value.status == 502 and "502 Bad Gateway" in str(info.value)
    assert len(server.requests) == 3


async def test_401_is_an_auth_error_and_not_retried(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(Status(401, '{"error": {"message": "invalid api key"}}'), stream_reply("no"))

    with pytest.raises(ChatAuthError) as info:
        await client.complete(ChatRequest(MESSAGES))

    assert isinstance(info.value, PermissionError)
    assert "invalid api key" in str(info.value)
    assert len(server.requests) == 1


async def test_400_is_a_request_error_and_not_retried(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(Status(400, '{"error": {"message": "tools not supported"}}'))

    with pytest.raises(ChatRequestError, match="tools not supported"):
        await client.complete(ChatRequest(MESSAGES))

    assert len(server.requests) == 1


async def test_unreachable_server_is_a_connection_error() -> None:
    async with aiohttp.ClientSession() as session:
        # find a port nobody listens on: bind, read it, close
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        sleeps = SleepRecorder()
        client = OpenAIChatClient(
            f"http://127.0.0.1:{port}", model="m", session=session, max_retries=1, sleep=sleeps
        )
        with pytest.raises(ChatConnectionError) as info:
            await client.complete(ChatRequest(MESSAGES))
    assert isinstance(info.value, ConnectionError) and info.value.retryable
    assert len(sleeps.waits) == 1


# --- timeouts ------------------------------------------------------------------------


async def test_stream_that_stalls_midway_times_out_keeping_the_partial_text(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    events = content_chunks("The answer is forty", piece=5)
    server.script(Stream(events, stall_after=3), stream_reply("must not be fetched"))
    seen: list[str] = []

    with pytest.raises(ChatTimeout) as info:
        await client.complete(ChatRequest(MESSAGES, timeout_s=1.5, on_delta=seen.append))

    assert isinstance(info.value, TimeoutError)
    assert info.value.partial == "".join(seen) == "The answer"
    assert info.value.retryable is False  # content was shown: never retried
    assert len(server.requests) == 1


async def test_stall_timeout_catches_silence_before_the_call_deadline(
    server: FakeOpenAI, sleeps: SleepRecorder
) -> None:
    server.script(Stream(content_chunks("Hello there"), stall_after=2))
    async with OpenAIChatClient(
        server.base_url, model="m", stall_timeout_s=1.0, sleep=sleeps
    ) as client:
        with pytest.raises(ChatTimeout, match="stalled") as info:
            await client.complete(ChatRequest(MESSAGES, timeout_s=60))
    assert info.value.streamed and len(server.requests) == 1


async def test_timeout_before_the_first_byte_is_retried(
    server: FakeOpenAI, sleeps: SleepRecorder
) -> None:
    server.script(Hang(), stream_reply("second try"))
    async with OpenAIChatClient(
        server.base_url, model="m", stall_timeout_s=1.0, sleep=sleeps
    ) as client:
        result = await client.complete(ChatRequest(MESSAGES, timeout_s=60))
    assert result.content == "second try"
    assert len(server.requests) == 2


async def test_no_time_left_raises_timeout_without_a_request(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    with pytest.raises(ChatTimeout):
        await client.complete(ChatRequest(MESSAGES, timeout_s=0))
    assert server.requests == []


async def test_cancelling_a_call_propagates_cancellation(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(Hang())
    task = asyncio.create_task(client.complete(ChatRequest(MESSAGES, timeout_s=60)))
    await asyncio.wait_for(server.request_seen.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# --- malformed answers -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("events", "message"),
    [
        (["{not json"], "malformed JSON"),
        ([{"id": "x", "object": "chat.completion.chunk"}], "without choices"),
        (['"just a string"'], "not an object"),
    ],
)
async def test_malformed_stream_is_a_bad_response(
    server: FakeOpenAI, client: OpenAIChatClient, events: list[str], message: str
) -> None:
    server.script(Stream(events))

    with pytest.raises(ChatBadResponse, match=message):
        await client.complete(ChatRequest(MESSAGES))


async def test_stream_cut_before_done_is_a_bad_response(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(Stream(content_chunks("half an ans"), done=False))

    with pytest.raises(ChatBadResponse, match="before \\[DONE\\]") as info:
        await client.complete(ChatRequest(MESSAGES))

    assert info.value.partial == "half an ans" and not info.value.retryable


async def test_html_page_with_status_200_is_a_bad_response(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(Status(200, "<html><body>Login required</body></html>", content_type="text/html"))

    with pytest.raises(ChatBadResponse, match="HTML page"):
        await client.complete(ChatRequest(MESSAGES))


async def test_error_object_inside_the_stream_is_a_server_error(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    events = [*content_chunks("partial"), {"error": {"message": "model crashed"}}]
    server.script(Stream(events))

    with pytest.raises(ChatServerError, match="model crashed") as info:
        await client.complete(ChatRequest(MESSAGES))

    assert not info.value.retryable and len(server.requests) == 1


async def test_every_failure_is_a_chat_error(server: FakeOpenAI, client: OpenAIChatClient) -> None:
    server.script(Status(404, "not found", content_type="text/plain"))
    with pytest.raises(ChatError):
        await client.complete(ChatRequest(MESSAGES))


async def test_result_is_immutable_value(server: FakeOpenAI, client: OpenAIChatClient) -> None:
    server.script(stream_reply("a"))
    result = await client.complete(ChatRequest(MESSAGES))
    assert isinstance(result, ChatResult)
    with pytest.raises(AttributeError):
        result.content = "b"  # type: ignore[misc]


async def test_fake_server_refuses_a_history_with_unanswered_tool_calls(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    # the policy tests rely on this check: a planner that broke the protocol would fail them
    broken: list[dict[str, Any]] = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "user", "content": "and?"},
    ]
    with pytest.raises(ChatRequestError, match="not answered"):
        await client.complete(ChatRequest(broken))


async def test_stream_false_asks_for_one_json_body(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(
        JsonBody(
            {
                "choices": [
                    {"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "whole"}}
                ]
            }
        )
    )
    seen: list[str] = []

    result = await client.complete(ChatRequest(MESSAGES, stream=False, on_delta=seen.append))

    assert server.requests[0]["stream"] is False
    assert "stream_options" not in server.requests[0]
    assert result.content == "whole" and seen == ["whole"]
    assert result.usage.estimated  # this body had no usage


def _llama_cpp_python_chunk(name: str, piece: str, *, first: bool) -> dict[str, Any]:
    # llama-cpp-python's streamed tool call: the first piece of the arguments is only
    # in the deprecated function_call, its tool_calls copy carries "" instead
    return chunk(
        {
            "role": None,
            "content": None,
            "function_call": {"name": name, "arguments": piece},
            "tool_calls": [
                {"index": 0, "id": "call__0_search_cmpl-1", "type": "function",
                 "function": {"name": name, "arguments": "" if first else piece}}
            ],
        }
    )


async def test_llama_cpp_python_tool_call_stream_keeps_its_first_piece(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    args = '{"query": "Seine"}'
    pieces = [args[:1], args[1:7], args[7:]]
    events: list[dict[str, Any] | str] = [chunk({"role": "assistant", "content": None})]
    events += [_llama_cpp_python_chunk("search", p, first=i == 0) for i, p in enumerate(pieces)]
    events.append(chunk({}, finish="tool_calls"))
    server.script(Stream(events))

    result = await client.complete(ChatRequest(MESSAGES))

    assert [(c.name, c.arguments_json) for c in result.tool_calls] == [("search", args)]


async def test_deprecated_function_call_alone_becomes_a_tool_call(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    events: list[dict[str, Any] | str] = [
        chunk({"function_call": {"name": "answer", "arguments": "{"}}),
        chunk({"function_call": {"arguments": "}"}}),
        chunk({}, finish="function_call"),
    ]
    server.script(Stream(events))

    result = await client.complete(ChatRequest(MESSAGES))

    assert [(c.name, c.arguments_json) for c in result.tool_calls] == [("answer", "{}")]
