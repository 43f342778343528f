"""What crosses between a run and a remote actor host: msgpack bytes of events.

A request is the request event's own msgpack (:func:`streams.encode_msgpack`).
A reply is one msgpack map holding, in order, what the handler did besides
returning (emitted events and end claims, as effects), the events it returned,
and, if it raised, the error and the answer its ``on_failure`` hook gave. The
events keep their existing codec; nothing but events, strings and numbers
crosses, so a remote host may run another build of the same event schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from streams import Claim, ErrorInfo, Event, Outcome, decode_msgpack, encode_msgpack

__all__ = ["Effect", "Emit", "Finish", "RemoteReply", "decode_reply", "encode_reply"]


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


def encode_reply(reply: RemoteReply) -> bytes:
    """Pack a reply (host side)."""
    effects: list[list[Any]] = []
    for effect in reply.effects:
        if isinstance(effect, Emit):
            effects.append([0, encode_msgpack(effect.event)])
        else:
            effects.append([1, effect.outcome, effect.reason, effect.answer,
                            [c.model_dump() for c in effect.claims]])
    packed: bytes = msgpack.packb({
        "effects": effects,
        "out": None if reply.out is None else [encode_msgpack(e) for e in reply.out],
        "error": None if reply.error is None else [
            reply.error.kind, reply.error.message, reply.error.retryable],
        "failure": None if reply.failure is None else encode_msgpack(reply.failure),
    }, use_bin_type=True)
    return packed


def decode_reply(data: bytes) -> RemoteReply:
    """Unpack a reply (run side).

    Raises:
        streams.DecodeError: an event in it does not decode (a schema mismatch).
        ValueError: the bytes are not a reply at all.
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
    out_raw: Sequence[bytes] | None = raw.get("out")
    err = raw.get("error")
    failure = raw.get("failure")
    return RemoteReply(
        effects=tuple(effects),
        out=None if out_raw is None else tuple(decode_msgpack(b) for b in out_raw),
        error=None if err is None else ErrorInfo(kind=err[0], message=err[1], retryable=err[2]),
        failure=None if failure is None else decode_msgpack(failure),
    )
