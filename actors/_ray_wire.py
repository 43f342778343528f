"""What crosses between a run and a remote actor host: msgpack bytes of events.

A request is the request event's own msgpack (:func:`streams.encode_msgpack`).
A call answers with a stream of frames, each one msgpack map: zero or more
*progress* frames carrying what the handler did besides returning (emitted
events and end claims, as effects) while it runs, then one *reply* frame with
the effects made since the last progress frame, the events it returned, and,
if it raised, the error and the answer its ``on_failure`` hook gave. The
events keep their existing codec; nothing but events, strings and numbers
crosses, so a remote host may run another build of the same event schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from streams import Claim, ErrorInfo, Event, Outcome, decode_msgpack, encode_msgpack

__all__ = [
    "Effect",
    "Emit",
    "Finish",
    "PackedEffect",
    "Progress",
    "RemoteReply",
    "decode_frame",
    "decode_reply",
    "encode_frame",
    "encode_reply",
    "pack_effect",
]


@dataclass(frozen=True, slots=True)
class Emit:
    """The handler published ``event`` mid-call (``ctx.emit``); ``cause`` is on the event."""

    event: Event


@dataclass(frozen=True, slots=True)
class Finish:
    """The handler claimed the run's end (``ctx.finish``)."""

    outcome: Outcome
    reason: str = ""
    answer: str = ""
    claims: tuple[Claim, ...] = ()


Effect = Emit | Finish


@dataclass(frozen=True, slots=True)
class RemoteReply:
    """One remote call's result, decoded.

    Attributes:
        effects: emitted events and end claims, in the order the handler made them.
        out: the events the handler returned (``None``: it returned nothing).
        error: what the handler raised (``None``: it returned).
        failure: the answer the host's ``on_failure`` gave for ``error``
            (``None`` with an error: the hook chose to publish nothing).
    """

    effects: tuple[Effect, ...] = ()
    out: tuple[Event, ...] | None = None
    error: ErrorInfo | None = None
    failure: Event | None = None


PackedEffect = list[Any]
"""An effect in its wire form (:func:`pack_effect`): packed once, when the handler makes it."""


@dataclass(frozen=True, slots=True)
class Progress:
    """What a remote handler did since the last frame, sent while it still runs."""

    effects: tuple[Effect, ...]


def pack_effect(effect: Effect) -> PackedEffect:
    """An effect's wire form (host side).

    Raises:
        streams.EncodeError: an emitted event holds a value msgpack cannot carry.
        TypeError: what was emitted is not an event.
    """
    if isinstance(effect, Emit):
        if not isinstance(effect.event, Event):
            raise TypeError(f"ctx.emit takes an Event, got {type(effect.event).__name__}")
        return [0, encode_msgpack(effect.event)]
    return [1, effect.outcome, effect.reason, effect.answer,
            [c.model_dump() for c in effect.claims]]


def encode_frame(effects: Sequence[PackedEffect], reply: RemoteReply | None = None) -> bytes:
    """Pack one frame (host side): progress if ``reply`` is ``None``, else the reply.

    A reply frame carries ``effects`` (the packed effects not yet sent) in
    place of ``reply.effects``.
    """
    frame: dict[str, Any] = {"effects": list(effects), "final": reply is not None}
    if reply is not None:
        frame["out"] = None if reply.out is None else [encode_msgpack(e) for e in reply.out]
        frame["error"] = None if reply.error is None else [
            reply.error.kind, reply.error.message, reply.error.retryable]
        frame["failure"] = None if reply.failure is None else encode_msgpack(reply.failure)
    packed: bytes = msgpack.packb(frame, use_bin_type=True)
    return packed


def encode_reply(reply: RemoteReply) -> bytes:
    """Pack a whole reply, its effects included, as one frame (host side)."""
    return encode_frame([pack_effect(e) for e in reply.effects], reply)


def decode_frame(data: bytes) -> Progress | RemoteReply:
    """Unpack one frame (run side).

    Raises:
        streams.DecodeError: an event in it does not decode (a schema mismatch).
        ValueError: the bytes are not a frame at all.
    """
    raw = msgpack.unpackb(data, raw=False)
    if not isinstance(raw, dict):
        raise ValueError(f"a remote reply must be a map, got {type(raw).__name__}")
    effects: list[Effect] = []
    for item in raw.get("effects") or ():
        if item[0] == 0:
            effects.append(Emit(decode_msgpack(item[1])))
        else:
            effects.append(Finish(outcome=item[1], reason=item[2], answer=item[3],
                                  claims=tuple(Claim.model_validate(c) for c in item[4])))
    if raw.get("final", True) is False:
        return Progress(tuple(effects))
    out_raw: Sequence[bytes] | None = raw.get("out")
    err = raw.get("error")
    failure = raw.get("failure")
    return RemoteReply(
        effects=tuple(effects),
        out=None if out_raw is None else tuple(decode_msgpack(b) for b in out_raw),
        error=None if err is None else ErrorInfo(kind=err[0], message=err[1], retryable=err[2]),
        failure=None if failure is None else decode_msgpack(failure),
    )


def decode_reply(data: bytes) -> RemoteReply:
    """Unpack a reply frame (run side).

    Raises:
        streams.DecodeError: an event in it does not decode (a schema mismatch).
        ValueError: the bytes are not a reply (garbage, or a progress frame).
    """
    frame = decode_frame(data)
    if isinstance(frame, Progress):
        raise ValueError("expected a reply frame, got a progress frame")
    return frame
