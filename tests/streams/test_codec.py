"""Codec round trips (property-tested) and typed decode errors on bad input."""

from __future__ import annotations

import contextlib
import json
from typing import Any, ClassVar, Literal

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import streams
from streams import (
    EVENT_TYPES,
    BudgetTick,
    Claim,
    ClaimError,
    Conflict,
    ConflictDetected,
    ConflictSide,
    DecodeError,
    EncodeError,
    ErrorInfo,
    Event,
    EvidenceChunk,
    Hit,
    MalformedEvent,
    PlanDecided,
    Priority,
    QueryStat,
    RunFinished,
    SearchCompleted,
    ToolCall,
    UnknownEventType,
    UnsupportedVersion,
    decode_json,
    decode_msgpack,
    encode_json,
    encode_msgpack,
    register_event,
)

finite = st.floats(allow_nan=False, allow_infinity=False)
text = st.text(max_size=40)
json_scalar = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | finite | text
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)


int64 = st.integers(-(2**63), 2**63 - 1)


def _strategy_for(annotation: Any) -> st.SearchStrategy[Any] | None:
    if annotation is float or annotation == (float | None):
        base = finite
        return base if annotation is float else st.none() | base
    if annotation is int or annotation == (int | None):
        return int64 if annotation is int else st.none() | int64
    return None


def _field_overrides(cls: type[BaseModel]) -> dict[str, st.SearchStrategy[Any]]:
    """Wire-safe strategies for fields hypothesis would fill too freely (64-bit ints,
    finite floats, JSON dicts)."""
    overrides: dict[str, st.SearchStrategy[Any]] = {}
    for name, field in cls.model_fields.items():
        if name in ("type", "v"):
            continue
        if name in ("options", "args"):
            overrides[name] = st.dictionaries(text, json_value, max_size=3)
        elif (s := _strategy_for(field.annotation)) is not None:
            overrides[name] = s
    return overrides


def event_strategy(cls: type[Event]) -> st.SearchStrategy[Event]:
    overrides = _field_overrides(cls)
    overrides.update({
        "run_id": text, "seq": st.integers(0, 2**40), "ts": finite, "actor": text,
        "cause": st.none() | st.integers(0, 2**40),
    })
    return st.builds(cls, **overrides)


# Nested values (claims, errors, query stats, tool calls, conflicts) get the same wire-safe
# fields.
for _value in (ClaimError, QueryStat, ToolCall, Claim, ErrorInfo, ConflictSide, Conflict):
    st.register_type_strategy(_value, st.builds(_value, **_field_overrides(_value)))


hits = st.builds(Hit, url=text, title=text, snippet=text, content=st.none() | text,
                 score=st.none() | finite)
chunks = st.builds(EvidenceChunk, id=text, text=st.text(max_size=500), score=st.none() | finite)
st.register_type_strategy(Hit, hits)
st.register_type_strategy(EvidenceChunk, chunks)

any_event = st.sampled_from(sorted(EVENT_TYPES)).flatmap(
    lambda t: event_strategy(EVENT_TYPES[t]))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(any_event)
def test_msgpack_round_trip_is_lossless(event: Event) -> None:
    assert decode_msgpack(encode_msgpack(event)) == event


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(any_event)
def test_json_round_trip_is_lossless(event: Event) -> None:
    assert decode_json(encode_json(event)) == event


@settings(max_examples=500)
@given(st.binary(max_size=200))
def test_garbage_bytes_raise_only_decode_error(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode_msgpack(data)


@settings(max_examples=300)
@given(st.text(max_size=200))
def test_garbage_json_raises_only_decode_error(data: str) -> None:
    with contextlib.suppress(DecodeError):
        decode_json(data)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(EVENT_TYPES)), st.dictionaries(text, json_value, max_size=6))
def test_wrong_payloads_raise_only_decode_error(event_type: str, fields: dict[str, Any]) -> None:
    data = {**fields, "type": event_type}
    with contextlib.suppress(DecodeError):
        decode_msgpack(msgpack.packb(data))


@settings(max_examples=200)
@given(any_event, st.integers(1, 50))
def test_truncated_bytes_are_a_malformed_event(event: Event, cut: int) -> None:
    data = encode_msgpack(event)
    truncated = data[: max(0, len(data) - cut)]
    with pytest.raises(MalformedEvent):
        decode_msgpack(truncated)


def test_unknown_type_is_a_typed_error() -> None:
    with pytest.raises(UnknownEventType, match=r"no\.such"):
        decode_json('{"type": "no.such", "v": 1}')


def test_newer_version_is_a_typed_error_naming_both_versions() -> None:
    data = SearchCompleted(query="q").model_dump()
    data["v"] = 7
    with pytest.raises(UnsupportedVersion, match="v1") as info:
        decode_msgpack(msgpack.packb(data))
    assert info.value.version == 7 and info.value.supported == 1


def test_non_mapping_and_missing_type_are_malformed() -> None:
    with pytest.raises(MalformedEvent):
        decode_msgpack(msgpack.packb([1, 2, 3]))
    with pytest.raises(MalformedEvent):
        decode_json('{"v": 1}')
    with pytest.raises(MalformedEvent):
        decode_json('{"type": "run.finished", "outcome": "maybe"}')
    with pytest.raises(MalformedEvent):
        decode_msgpack("not bytes")  # type: ignore[arg-type]


def test_decoded_events_are_the_right_class_and_immutable() -> None:
    event = RunFinished(outcome="answered", run_id="r", seq=3, answer="yes")
    decoded = decode_msgpack(encode_msgpack(event))
    assert type(decoded) is RunFinished
    with pytest.raises(Exception, match="frozen"):
        decoded.answer = "no"  # type: ignore[misc]


def test_third_party_event_types_decode_like_built_ins() -> None:
    @register_event
    class Thought(Event):
        """A custom event type from a user's actor."""

        type: Literal["test.thought"] = "test.thought"
        text: str
        priority: ClassVar[Priority] = Priority.PROGRESS

    try:
        event = Thought(text="hmm", run_id="r", seq=1)
        assert decode_json(encode_json(event)) == event
        assert decode_msgpack(encode_msgpack(event)) == event
        with pytest.raises(ValueError, match="already registered"):
            @register_event
            class Other(Event):
                type: Literal["test.thought"] = "test.thought"
    finally:
        EVENT_TYPES.pop("test.thought", None)


def test_every_event_class_is_exported_and_registered() -> None:
    built_in = [c for c in EVENT_TYPES.values() if c.__module__ == "streams._events"]
    assert len(built_in) >= 30
    for cls in built_in:
        assert getattr(streams, cls.__name__) is cls


def test_values_msgpack_cannot_carry_are_a_typed_encode_error() -> None:
    event = BudgetTick(steps=2**70)
    with pytest.raises(EncodeError, match=r"budget\.tick"):
        encode_msgpack(event)
    # the encoder is still good for the next event after refusing one
    ok = BudgetTick(steps=3)
    assert decode_msgpack(encode_msgpack(ok)) == ok


def test_encoding_from_many_threads_at_once_never_mixes_events() -> None:
    import threading

    errors: list[str] = []

    def encode_many(worker: int) -> None:
        for i in range(300):
            event = SearchCompleted(query=f"w{worker}-{i}" * (1 + i % 7), seq=i)
            if decode_msgpack(encode_msgpack(event)) != event:
                errors.append(f"worker {worker} event {i}")

    threads = [threading.Thread(target=encode_many, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_conflict_detected_round_trips_and_is_essential() -> None:
    side_a = ConflictSide(chunk_id="a", value="1815", quote="X was born in 1815.",
                          credibility=1.3, title="A")
    side_b = ConflictSide(chunk_id="b", value="1816", quote="X was born in 1816.",
                          credibility=0.5, title="B")
    conflict = Conflict(subject="X", attribute="born", sides=(side_a, side_b), preferred=0)
    event = ConflictDetected.of(conflict).model_copy(update={"run_id": "r", "seq": 4})
    for decoded in (decode_json(encode_json(event)), decode_msgpack(encode_msgpack(event))):
        assert type(decoded) is ConflictDetected and decoded == event
        assert decoded.conflict() == conflict
    assert ConflictDetected.priority is Priority.ESSENTIAL
    assert EVENT_TYPES["conflict.detected"] is ConflictDetected


def test_a_plan_stored_with_the_old_args_map_still_decodes() -> None:
    """``plan.decided`` once carried an ``args`` map beside ``calls``; stored runs keep it."""
    plan = PlanDecided(action="answer", reason="covered", run_id="r", seq=3, ts=1.0)
    stored = json.loads(encode_json(plan))
    stored["args"] = {}
    decoded = decode_json(json.dumps(stored))
    assert decoded == plan
    assert "args" not in json.loads(encode_json(decoded))
