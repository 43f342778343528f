"""The client's SSE parser reads what any conforming server may send, however it is chunked."""

from __future__ import annotations

import pytest

from reactive_rag.client import ProtocolError
from reactive_rag.client._sse import SseMessage, SseParser

STREAM = ("\ufeffretry: 1000\n\n"
          ": keep-alive\n\n"
          "id: 1\nevent: run.started\ndata: {\"a\": 1}\n\n"
          "id: 2\r\nevent: budget.tick\r\ndata: line one\r\ndata: line two\r\n\r\n"
          "id: 3\revent: run.finished\rdata:no space\r\r"
          ": detached\nevent: detached\ndata: {\"reason\": \"slow\"}\n\n")
EXPECTED = [
    SseMessage("run.started", '{"a": 1}', "1"),
    SseMessage("budget.tick", "line one\nline two", "2"),
    SseMessage("run.finished", "no space", "3"),
    SseMessage("detached", '{"reason": "slow"}', "3"),  # the id carries over, as in browsers
]


def _parse(chunks: list[bytes]) -> tuple[list[SseMessage], SseParser]:
    parser = SseParser()
    out = [m for chunk in chunks for m in parser.feed(chunk)]
    return out, parser


def test_a_whole_stream_gives_each_message_with_its_type_data_and_id() -> None:
    messages, parser = _parse([STREAM.encode()])
    assert messages == EXPECTED
    assert parser.retry_ms == 1000


def test_any_chunking_gives_the_same_messages_even_split_inside_crlf_or_utf8() -> None:
    data = STREAM.replace("line two", "第二行").encode()
    expected = [EXPECTED[0], SseMessage("budget.tick", "line one\n第二行", "2"), *EXPECTED[2:]]
    for size in (1, 2, 3, 7):
        chunks = [data[i:i + size] for i in range(0, len(data), size)]
        assert _parse(chunks)[0] == expected, size


def test_a_message_cut_off_by_the_end_of_the_stream_is_never_dispatched() -> None:
    messages, _ = _parse([b"id: 1\nevent: a\ndata: x\n\nid: 2\nevent: b\ndata: {\"ty"])
    assert messages == [SseMessage("a", "x", "1")]


def test_an_endless_message_is_refused() -> None:
    parser = SseParser(max_message_bytes=64)
    with pytest.raises(ProtocolError):
        parser.feed(b"data: " + b"x" * 100)
    parser = SseParser(max_message_bytes=64)
    with pytest.raises(ProtocolError):
        for _ in range(10):
            parser.feed(b"data: " + b"x" * 10 + b"\n")
