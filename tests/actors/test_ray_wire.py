"""The bytes between a run and a remote actor host: events survive, garbage is refused."""

from __future__ import annotations

import msgpack
import pytest

from actors._ray_wire import (
    Emit,
    Finish,
    Progress,
    RemoteReply,
    decode_frame,
    decode_reply,
    encode_frame,
    encode_reply,
    pack_effect,
)
from streams import (
    AnswerDelta,
    Claim,
    DecodeError,
    EncodeError,
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


def test_progress_frames_carry_effects_and_are_told_from_the_reply() -> None:
    packed = [pack_effect(Emit(AnswerDelta(text="scoring", cause=4))),
              pack_effect(Finish("answered", reason="done"))]
    progress = decode_frame(encode_frame(packed))
    assert progress == Progress((Emit(AnswerDelta(text="scoring", cause=4)),
                                 Finish("answered", reason="done")))
    reply = decode_frame(encode_frame(packed[:1], RemoteReply(out=())))
    assert reply == RemoteReply(effects=(Emit(AnswerDelta(text="scoring", cause=4)),), out=())
    with pytest.raises(ValueError, match="progress frame"):
        decode_reply(encode_frame(packed))


def test_an_effect_that_cannot_cross_is_refused_when_packed() -> None:
    with pytest.raises(EncodeError, match=r"cannot encode 'rerank\.completed'"):
        pack_effect(Emit(RerankCompleted(call_id="x", query="q", below_floor=2**70)))
    with pytest.raises(TypeError, match="takes an Event, got dict"):
        pack_effect(Emit({"type": "answer.delta"}))  # type: ignore[arg-type]
