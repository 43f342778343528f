"""An AG-UI consumer for the tests: parses every event with the official ``ag_ui.core``
models and keeps what a client keeps (state, steps, text, tool calls), failing on any
break of the protocol's order rules a client relies on."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import BaseEvent, Event, EventType
from aiohttp import ClientResponse
from pydantic import TypeAdapter

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
"""The official union of every AG-UI event, discriminated by ``type``."""


@dataclass(frozen=True)
class Message:
    """One SSE message of the AG-UI stream: its ``id``, its JSON and the parsed event."""

    id: int | None
    data: dict[str, Any]
    event: Any  # an ag_ui.core event model (the union's member)

    @property
    def type(self) -> EventType:
        return EventType(self.data["type"])


def parse(data: dict[str, Any], ident: int | None) -> Message:
    """Validate one event with the official models; anything outside them fails."""
    event = EVENTS.validate_python(data)
    assert isinstance(event, BaseEvent)
    assert not event.model_extra, f"fields outside the protocol: {event.model_extra}"
    # What was sent is exactly what the model writes: no field lost, none added, no nulls.
    assert event.model_dump(mode="json", by_alias=True) == data, data
    return Message(ident, data, event)


async def read_agui(resp: ClientResponse,
                    until: Callable[[list[Message]], bool] | None = None) -> list[Message]:
    """Every message of an AG-UI SSE body until it ends (or ``until`` holds)."""
    assert resp.status == 200, await resp.text()
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    out: list[Message] = []
    fields: dict[str, str] = {}
    while True:
        raw = await resp.content.readline()
        if not raw:
            return out
        line = raw.decode().rstrip("\n")
        if line.startswith(":"):
            continue
        if line:
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
            continue
        if "data" in fields:
            assert set(fields) <= {"id", "data"}, fields  # no `event:` name: plain messages
            ident = fields.get("id")
            out.append(parse(json.loads(fields["data"]), int(ident) if ident else None))
            if until is not None and until(out):
                return out
        fields = {}


def apply_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 (add, remove, replace, test) on a copy of ``doc``; a path that does not
    resolve fails."""
    doc = copy.deepcopy(doc)
    for op in ops:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        assert tokens, f"a patch of the whole state: {op}"
        parent = doc
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        assert isinstance(parent, dict), f"{op['path']} is not an object member"
        if op["op"] == "add":
            parent[last] = op["value"]
        elif op["op"] == "replace":
            assert last in parent, f"replace of a missing {op['path']}"
            parent[last] = op["value"]
        elif op["op"] == "remove":
            del parent[last]
        elif op["op"] == "test":
            assert parent[last] == op["value"], op
        else:
            raise AssertionError(f"unexpected patch op {op}")
    return doc


@dataclass
class Call:
    name: str
    args: str = ""
    ended: bool = False
    result: str | None = None


@dataclass
class Client:
    """What an AG-UI client holds, checked event by event.

    ``resumed``: this client reconnected (it already saw RUN_STARTED before the cut).
    """

    resumed: bool = False
    state: Any = None
    started: bool = False
    end: Message | None = None
    steps: list[str] = field(default_factory=list)
    step_log: list[str] = field(default_factory=list)
    open_messages: set[str] = field(default_factory=set)
    texts: dict[str, str] = field(default_factory=dict)
    calls: dict[str, Call] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.started = self.resumed

    def apply_all(self, messages: list[Message]) -> Client:
        for message in messages:
            self.apply(message)
        return self

    def apply(self, message: Message) -> None:
        e, kind = message.event, message.type
        assert self.end is None, f"{kind} after the run's end"
        if kind is EventType.RUN_STARTED:
            assert not self.started, "a second RUN_STARTED in one run"
            self.started = True
            return
        assert self.started, f"{kind} before RUN_STARTED"
        if kind is EventType.STATE_SNAPSHOT:
            self.state = copy.deepcopy(e.snapshot)
        elif kind is EventType.STATE_DELTA:
            assert self.state is not None, "STATE_DELTA before any STATE_SNAPSHOT"
            self.state = apply_patch(self.state, message.data["delta"])
        elif kind is EventType.STEP_STARTED:
            assert e.step_name not in self.steps, f"step {e.step_name!r} started twice"
            self.steps.append(e.step_name)
            self.step_log.append(e.step_name)
        elif kind is EventType.STEP_FINISHED:
            assert e.step_name in self.steps, f"step {e.step_name!r} finished, never started"
            self.steps.remove(e.step_name)
        elif kind is EventType.TEXT_MESSAGE_START:
            assert e.message_id not in self.texts, f"message {e.message_id} started twice"
            assert e.role in (None, "assistant")
            self.texts[e.message_id] = ""
            self.open_messages.add(e.message_id)
        elif kind is EventType.TEXT_MESSAGE_CONTENT:
            assert e.message_id in self.open_messages, f"content outside {e.message_id}"
            self.texts[e.message_id] += e.delta
        elif kind is EventType.TEXT_MESSAGE_END:
            assert e.message_id in self.open_messages, f"end of a closed {e.message_id}"
            self.open_messages.remove(e.message_id)
        elif kind is EventType.TOOL_CALL_START:
            assert e.tool_call_id not in self.calls, f"call {e.tool_call_id} started twice"
            self.calls[e.tool_call_id] = Call(e.tool_call_name)
        elif kind is EventType.TOOL_CALL_ARGS:
            call = self.calls[e.tool_call_id]  # KeyError: args of a call never started
            assert not call.ended, f"args after the end of {e.tool_call_id}"
            call.args += e.delta
        elif kind is EventType.TOOL_CALL_END:
            call = self.calls[e.tool_call_id]
            assert not call.ended, f"{e.tool_call_id} ended twice"
            call.ended = True
        elif kind is EventType.TOOL_CALL_RESULT:
            call = self.calls[e.tool_call_id]
            assert call.ended and call.result is None, f"result of {e.tool_call_id} out of turn"
            call.result = e.content
        elif kind in (EventType.RUN_FINISHED, EventType.RUN_ERROR):
            assert not self.open_messages, f"run ended inside {self.open_messages}"
            assert not self.steps, f"run ended inside steps {self.steps}"
            assert all(c.ended for c in self.calls.values()), "run ended inside a call's args"
            self.end = message
        else:
            assert kind is EventType.CUSTOM, f"unexpected {kind}"

    @property
    def text(self) -> str:
        return "".join(self.texts.values())
