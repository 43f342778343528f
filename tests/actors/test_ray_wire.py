"""The bytes between a run and a remote actor host: events survive, garbage is refused."""

from __future__ import annotations

import msgpack
import pytest

from actors._ray_wire import Emit, Finish, RemoteReply, decode_reply, encode_reply
from streams import (
    AnswerDelta,
    Claim,
    DecodeError,
    ErrorInfo,
    EvidenceChunk,
    RerankCompleted,
    RerankFailed,
)

CHUNK = EvidenceChunk(id="c1", text="Aspirin lowers fever.", doc_id="d1", score=0.5)


def test_a_reply_keeps_its_effects_in_order_and_its_events_whole() -> None:
    reply = RemoteReply(
        effects=(Emit(AnswerDelta(text="scoring", cause=4)),
                 Finish("answered", reason="done", answer="yes",
                        claims=(Claim(statement="s", source_id="c1", quote="q"),)),
                 Emit(AnswerDelta(text="more"))),
        out=(RerankCompleted(call_id="x", query="q", chunks=(CHUNK,)),),
    )
    assert decode_reply(encode_reply(reply)) == reply


def test_a_failed_call_carries_the_error_and_the_hosts_answer() -> None:
    error = ErrorInfo(kind="ValueError", message="boom", retryable=False)
    failure = RerankFailed(call_id="x", query="q", error=error)
    back = decode_reply(encode_reply(RemoteReply(error=error, failure=failure)))
    assert (back.error, back.failure, back.out) == (error, failure, None)
    silent = decode_reply(encode_reply(RemoteReply(error=error)))  # on_failure chose silence
    assert silent.error == error and silent.failure is None


def test_bytes_that_are_not_a_reply_are_refused() -> None:
    with pytest.raises(ValueError, match="must be a map"):
        decode_reply(msgpack.packb([1, 2]))
    bad_event = msgpack.packb({"effects": [], "out": [b"\x93garbage"], "error": None,
                               "failure": None})
    with pytest.raises(DecodeError):
        decode_reply(bad_event)
