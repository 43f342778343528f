"""The cassette file: one JSON header line, then one line per outside interaction.

A line per interaction, appended as each completes, so a run that crashes still
leaves what it got. ``order`` is the order interactions completed in; a replay
serves them in that order. Requests are matched by a canonical ``key`` (the
request without what cannot repeat: deadlines, timeouts, seconds left).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from streams import Event

__all__ = [
    "CASSETTE_FORMAT",
    "CASSETTE_VERSION",
    "VOLATILE_PATTERNS",
    "CassetteHeader",
    "CassetteSetup",
    "ChatSetup",
    "Interaction",
    "InteractionKind",
    "ProviderSetup",
    "RecordedError",
    "RecordedHealth",
    "WebSetup",
    "canonical",
    "comparable",
    "decode_error",
    "describe_key",
    "encode_error",
    "event_lanes",
    "mask_volatile",
]

CASSETTE_FORMAT = "reactive-rag-cassette"
CASSETTE_VERSION = 1

InteractionKind = Literal["search", "page", "chat", "seen"]
"""``seen``: the hits one search found the session had already been shown."""

VOLATILE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # "Budget left: ..., 87 s." -- the time a run has left differs in its replay
    (re.compile(r"\b\d+(?:\.\d+)? s\b"), "<n> s"),
    # today's date (for "last year" questions) differs on another day
    (re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "<date>"),
)
"""Text masked in chat requests before matching: what a faithful replay cannot repeat."""

_STRICT = ConfigDict(extra="forbid", frozen=True)
_SCALARS = (str, int, float, bool, type(None))


class ProviderSetup(BaseModel):
    """A recorded web provider: its name and the filters it declared it applies."""

    model_config = _STRICT

    name: str
    supported_filters: tuple[str, ...] | None = None


class WebSetup(BaseModel):
    """The recorded searcher's shape, so a replay merges hits exactly as the run did."""

    model_config = _STRICT

    providers: tuple[ProviderSetup, ...]
    primary: tuple[str, ...]
    fallback: tuple[str, ...] = ()
    hedge_delay_s: float | None = None
    blacklist: tuple[str, ...] = ()
    max_results: int = 10
    include_date: bool = True
    near_duplicate_bits: int = 3
    provider_timeout_s: float | None = None


class ChatSetup(BaseModel):
    """A recorded chat model: the model name it was asked for, and the server's quirks."""

    model_config = _STRICT

    model: str
    quirks: str = "none"


class CassetteSetup(BaseModel):
    """What the run was built with besides its question: enough to rebuild it offline."""

    model_config = _STRICT

    web: WebSetup | None = None
    compression: Literal["none", "rag"] = "none"
    credibility: dict[str, JsonValue] = Field(default_factory=dict)
    chat: ChatSetup | None = None
    entailment: ChatSetup | None = None


class CassetteHeader(BaseModel):
    """The first line: the run's question and options, so its replay starts the same run."""

    model_config = _STRICT

    format: Literal["reactive-rag-cassette"] = "reactive-rag-cassette"
    version: int = CASSETTE_VERSION
    question: str
    mode: str = "agent"
    run_id: str
    budget: dict[str, JsonValue] = Field(default_factory=dict)
    collections: tuple[str, ...] = ()
    setup: CassetteSetup = Field(default_factory=CassetteSetup)
    recorded_at: str = ""


class RecordedError(BaseModel):
    """A typed failure: class (``module:qualname``), message, retryable, plain attributes."""

    model_config = _STRICT

    type: str
    message: str
    retryable: bool = False
    attrs: dict[str, str | int | float | bool | None] = Field(default_factory=dict)


class RecordedHealth(BaseModel):
    """A circuit-breaker change that happened during a search call."""

    model_config = _STRICT

    provider: str
    state: Literal["up", "down", "probing"]
    breaker: str
    detail: str = ""


class Interaction(BaseModel):
    """One outside request and what came back: a response, a typed error, or a cut."""

    model_config = _STRICT

    order: int
    kind: InteractionKind
    key: dict[str, JsonValue]
    response: dict[str, JsonValue] | None = None
    error: RecordedError | None = None
    cancelled: bool = False
    health: tuple[RecordedHealth, ...] = ()
    deltas: tuple[str, ...] = ()  # chat: the pieces streamed, in order
    elapsed_s: float = 0.0

    @model_validator(mode="after")
    def _one_outcome(self) -> Interaction:
        outcomes = (self.response is not None) + (self.error is not None) + self.cancelled
        if outcomes != 1:
            raise ValueError("an interaction has exactly one of response, error, cancelled")
        return self


# --- keys ---------------------------------------------------------------------------------


def canonical(key: Mapping[str, Any]) -> str:
    """The key as the one string requests are matched by (sorted, compact JSON)."""
    return json.dumps(key, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def mask_volatile(value: Any) -> Any:
    """``value`` (JSON data) with :data:`VOLATILE_PATTERNS` masked in every string."""
    if isinstance(value, str):
        for pattern, replacement in VOLATILE_PATTERNS:
            value = pattern.sub(replacement, value)
        return value
    if isinstance(value, Mapping):
        return {k: mask_volatile(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_volatile(v) for v in value]
    return value


def describe_key(kind: str, key: Mapping[str, Any], limit: int = 240) -> str:
    """A short, readable form of a key for error messages (chat keys are long)."""
    if kind == "chat":
        messages = key.get("messages")
        count = len(messages) if isinstance(messages, list) else 0
        last = messages[-1] if isinstance(messages, list) and messages else {}
        content = last.get("content") if isinstance(last, dict) else ""
        text = " ".join(str(content or "").split())
        short = text[:limit] + ("..." if len(text) > limit else "")
        return (f"{key.get('role')} call to {key.get('model')!r} with {count} messages, "
                f"the last: {short!r}")
    text = canonical(key)
    return text[:limit] + ("..." if len(text) > limit else "")


# --- typed errors ---------------------------------------------------------------------------


def encode_error(exc: BaseException) -> RecordedError:
    """Record ``exc`` so :func:`decode_error` can raise an equal one (type, text, attributes)."""
    cls = type(exc)
    attrs = {name: value for name, value in vars(exc).items()
             if not name.startswith("_") and isinstance(value, _SCALARS)}
    return RecordedError(type=f"{cls.__module__}:{cls.__qualname__}", message=str(exc),
                         retryable=bool(getattr(exc, "retryable", isinstance(exc, TimeoutError))),
                         attrs=attrs)


def decode_error(recorded: RecordedError, root: type[Exception]) -> Exception:
    """The recorded error as a live exception of the same class.

    Only classes already imported are used (a cassette never makes us import
    code); an unknown class becomes a stand-in subclass of ``root`` with the
    same name, so handlers and ``ErrorInfo.kind`` still see what was recorded.
    """
    cls = _error_class(recorded.type) or _stand_in(recorded.type, root)
    exc = cls.__new__(cls)
    if isinstance(exc, root):
        root.__init__(exc, recorded.message)  # the root's attributes, then the recorded ones
    exc.args = (recorded.message,)
    vars(exc).update(recorded.attrs)
    if getattr(exc, "retryable", None) != recorded.retryable:
        exc.retryable = recorded.retryable  # type: ignore[attr-defined]
    return exc


def _subclasses(cls: type[BaseException]) -> Iterator[type[BaseException]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


_CLASSES: dict[str, type[Exception]] = {}


def _error_class(name: str) -> type[Exception] | None:
    found = _CLASSES.get(name)
    if found is None:
        for cls in _subclasses(Exception):
            if f"{cls.__module__}:{cls.__qualname__}" == name and issubclass(cls, Exception):
                found = _CLASSES[name] = cls
                break
    return found


_STAND_INS: dict[tuple[str, type[Exception]], type[Exception]] = {}


def _stand_in(name: str, root: type[Exception]) -> type[Exception]:
    found = _STAND_INS.get((name, root))
    if found is None:
        module, _, qualname = name.rpartition(":")
        short = qualname.rsplit(".", 1)[-1] or "RecordedError"
        found = type(short, (root,), {"__module__": module or __name__,
                                      "__doc__": f"Stands in for the recorded {name}."})
        _STAND_INS[(name, root)] = found
    return found


# --- comparing runs -------------------------------------------------------------------------

_TIMING = {"budget.tick": ("elapsed_s",), "plan.requested": ("remaining_s",)}


def comparable(event: Event) -> dict[str, Any]:
    """An event as JSON data without what depends on the clock.

    Dropped: ``ts``; ``budget.tick`` ``elapsed_s``; ``plan.requested``
    ``remaining_s``; the amounts of a ``wall_clock`` ``budget.exhausted``; each
    search reply's ``provider_calls`` ``elapsed_s`` (who answered and who failed stays).
    """
    data = event.model_dump(mode="json")
    data.pop("ts", None)
    for name in _TIMING.get(event.type, ()):
        data.pop(name, None)
    for call in data.get("provider_calls") or ():
        call.pop("elapsed_s", None)
    if event.type == "budget.exhausted" and data.get("resource") == "wall_clock":
        data.pop("used", None)
        data.pop("limit", None)
    return data


def event_lanes(events: Sequence[Event]) -> dict[str, list[dict[str, Any]]]:
    """A run's events as its lanes, to compare a run and its replay ("the same events").

    The events of one tool call (its ``call_id``) form a lane, those of one
    provider's health another, and the rest (the controller's, the planner's,
    the writer's) the ``run`` lane; each lane keeps its order, each event is
    :func:`comparable`. Parallel calls finish in a thread-timing order even in
    two live runs, so the interleaving of lanes (hence ``seq``) is not part of
    a run; ``cause`` is kept as the identity of the causing event
    (``type#call_id#n``) instead of its ``seq``.
    """
    names: dict[int, str] = {}
    counts: dict[tuple[str, str], int] = {}
    lanes: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        call = str(getattr(event, "call_id", "") or "")
        n = counts.get((event.type, call), 0)
        counts[(event.type, call)] = n + 1
        names[event.seq] = f"{event.type}#{call}#{n}"
        data = comparable(event)
        data.pop("seq", None)
        data["cause"] = names.get(event.cause, "?") if event.cause is not None else None
        if call:
            lane = f"call:{call}"
        elif event.type == "provider.health":
            lane = f"health:{data.get('provider')}"
        else:
            lane = "run"
        lanes.setdefault(lane, []).append(data)
    return lanes
