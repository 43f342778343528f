"""The OpenAI-compatible face's bodies: the request it reads, the objects it answers with.

Kept apart from the handlers (``_openai_face``) so the request model, the
answer shapes and the OpenAPI description of both sit side by side and cannot
drift apart. The run's own options (question, mode, collections, budget) are
checked by :class:`~._models.RunRequest`, the body of ``POST /v1/runs``; this
module only reads the chat around them.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, StrictBool

from reactive_rag.engine import Citation, Mode, RunResult, usage_of
from streams import Event, Outcome

from ._openapi import openapi_document

__all__ = [
    "EXTENSION",
    "FINISH_REASONS",
    "MODELS",
    "ChatMessage",
    "ChatRequest",
    "OtherMessage",
    "TextPart",
    "UserMessage",
    "chunk_body",
    "completion_body",
    "completion_text",
    "error_body",
    "error_type",
    "extension_body",
    "models_body",
    "openai_openapi_paths",
    "usage_body",
]

MODELS: dict[str, Mode] = {"reactive-rag": "agent", "reactive-rag-rag": "rag"}
"""Model name -> run mode: the agent over the tenant's collections, or one-shot retrieval."""

MODELS_CREATED = 1_767_225_600
"""The ``created`` of both models (2026-01-01): fixed, they are modes, not checkpoints."""

EXTENSION = "reactive_rag"
"""The key of the extension object on a completion and on a stream's final chunk."""

FINISH_REASONS: dict[Outcome, str] = {
    "answered": "stop",
    "answered_from_evidence": "length",  # a budget ran out: answered from what was found
    "partial": "stop",
    "no_evidence": "stop",
    "degraded": "stop",
    "cancelled": "stop",
    "failed": "stop",
    "interrupted": "stop",
    "handed_off": "stop",  # the answer names the background task (extension: ``task``)
}
"""The ``finish_reason`` of each run outcome."""

QUESTION_MAX = 4000
"""A question's length limit (``RunRequest.question``)."""
PART_MAX = 999
PARTS_MAX = 4
"""A question sent as text parts: at most 4 of 999 characters, so joined by newlines it
stays within :data:`QUESTION_MAX`."""


def _said(value: str) -> str:
    """The rule of ``RunRequest.question``: not blank, no NUL character."""
    if not value.strip():
        raise ValueError("the text is blank")
    if "\x00" in value:
        raise ValueError("the text contains a NUL character")
    return value


class TextPart(BaseModel):
    """One text part of a user message's ``content`` array."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    type: Literal["text"]
    text: Annotated[str, Field(max_length=PART_MAX), AfterValidator(_said)]


class UserMessage(BaseModel):
    """A user's message: a question (the last one is what the run is asked)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    role: Literal["user"]
    content: (Annotated[str, Field(max_length=QUESTION_MAX), AfterValidator(_said)]
              | Annotated[list[TextPart], Field(min_length=1, max_length=PARTS_MAX)])

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content)


class OtherMessage(BaseModel):
    """Any other message; an assistant's text is an earlier answer, the rest is not read."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    role: Literal["system", "developer", "assistant", "tool", "function"]
    content: JsonValue = None

    @property
    def text(self) -> str:
        """The message's text: a string, or its text parts joined ("" for anything else)."""
        if isinstance(self.content, str):
            return self.content
        if isinstance(self.content, list):
            texts = [p.get("text") for p in self.content
                     if isinstance(p, dict) and p.get("type") == "text"]
            return "\n".join(t for t in texts if isinstance(t, str))
        return ""


ChatMessage = Annotated[UserMessage | OtherMessage, Field(discriminator="role")]


class StreamOptions(BaseModel):
    """``stream_options``: only ``include_usage`` is read."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    include_usage: StrictBool | None = None


class ChatRequest(BaseModel):
    """Body of ``POST /v1/chat/completions`` (OpenAI fields not listed here are ignored).

    ``collections`` and ``budget`` are passed on, as sent, to
    :class:`~._models.RunRequest`, which checks them as for ``POST /v1/runs``.
    """

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    model: str
    messages: Annotated[list[ChatMessage], Field(min_length=1)]  # the body cap bounds them
    stream: StrictBool | None = None
    stream_options: StreamOptions | None = None
    conversation_id: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    collections: JsonValue = None
    budget: JsonValue = None

    def run_fields(self) -> dict[str, JsonValue]:
        """The run options the client sent (absent ones get ``RunRequest``'s defaults)."""
        sent: dict[str, JsonValue] = {}
        if "collections" in self.model_fields_set:
            sent["collections"] = self.collections
        if "budget" in self.model_fields_set:
            sent["budget"] = self.budget
        return sent


# --- answers --------------------------------------------------------------------------------


def completion_text(result: RunResult) -> str:
    """A completion's content: the verified answer and its numbered sources, or why none."""
    if not result.answer:
        return result.reason or f"the run ended {result.outcome} without an answer"
    if not result.citations:
        return result.answer
    return f"{result.answer}\n\nSources:\n" + "\n".join(_source(c) for c in result.citations)


def _source(citation: Citation) -> str:
    chunk = citation.chunk
    name = (chunk.title if chunk is not None and chunk.title else None) or citation.claim.source_id
    url = chunk.url if chunk is not None and chunk.url else ""
    return f"[{citation.number}] {name}" + (f" - {url}" if url else "")


def usage_body(events: Sequence[Event]) -> dict[str, int]:
    """Token counts the run's model calls reported (zeros where no model was called)."""
    models = usage_of(events).models
    prompt = sum(m.input_tokens for m in models)
    completion = sum(m.output_tokens for m in models)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def extension_body(result: RunResult, *, question: str,
                   session_id: str | None) -> dict[str, Any]:
    """What a client of this server gets beyond OpenAI's fields: the run and its citations."""
    run_id = result.run_id
    return {"run_id": run_id, "outcome": result.outcome, "reason": result.reason,
            "question": question, "session_id": session_id,
            "citations": [c.to_json() for c in result.citations],
            "links": {"run": f"/v1/runs/{run_id}", "events": f"/v1/runs/{run_id}/events"},
            "task": result.task.model_dump() if result.task is not None else None}


def completion_body(result: RunResult, *, model: str, created: int, question: str,
                    session_id: str | None) -> dict[str, Any]:
    """A ``chat.completion`` for a finished run."""
    return {
        "id": f"chatcmpl-{result.run_id}", "object": "chat.completion", "created": created,
        "model": model, "system_fingerprint": None,
        "choices": [{"index": 0, "logprobs": None,
                     "finish_reason": FINISH_REASONS[result.outcome],
                     "message": {"role": "assistant", "content": completion_text(result),
                                 "refusal": None}}],
        "usage": usage_body(result.events),
        EXTENSION: extension_body(result, question=question, session_id=session_id),
    }


def chunk_body(run_id: str, *, model: str, created: int, delta: dict[str, str] | None,
               finish_reason: str | None = None, usage: dict[str, int] | None = None,
               extension: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``chat.completion.chunk``; ``delta`` None: the usage chunk (no choices)."""
    body: dict[str, Any] = {
        "id": f"chatcmpl-{run_id}", "object": "chat.completion.chunk", "created": created,
        "model": model, "system_fingerprint": None,
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None,
                                               "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = usage
    if extension is not None:
        body[EXTENSION] = extension
    return body


def models_body() -> dict[str, Any]:
    """``GET /v1/models``."""
    return {"object": "list", "data": [
        {"id": name, "object": "model", "created": MODELS_CREATED, "owned_by": "reactive-rag"}
        for name in MODELS]}


_ERROR_TYPES = {401: "invalid_request_error", 403: "permission_error",
                429: "rate_limit_error"}


def error_type(status: int) -> str:
    """OpenAI's error ``type`` for an HTTP status."""
    return _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


def error_body(status: int, code: str, message: str, param: str | None) -> dict[str, Any]:
    """An OpenAI error body."""
    return {"error": {"message": message, "type": error_type(status), "param": param,
                      "code": code}}


# --- OpenAPI --------------------------------------------------------------------------------


def _error(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description, "content": {
        "application/json": {"schema": _ERROR_SCHEMA}}}
    if headers:
        response["headers"] = headers
    return response


def _header(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "required": True, "schema": schema}


_ERROR_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["error"],
    "properties": {"error": {
        "type": "object", "required": ["message", "type", "param", "code"],
        "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                       "param": {"type": ["string", "null"]},
                       "code": {"type": ["string", "null"]}}}}}
_RETRY_AFTER = {"Retry-After": _header("seconds to wait before trying again",
                                       {"type": "string", "pattern": "^[0-9]+$"})}
_RUN_HEADERS = {
    "X-Run-Id": _header("the run answering this request", {"type": "string",
                                                            "pattern": "^[A-Za-z0-9]{1,64}$"}),
    "X-Run-Events": _header("the run's full event stream (`GET`, resumable)",
                            {"type": "string", "pattern": "^/v1/runs/[A-Za-z0-9]+/events$"}),
    "Link": _header("the run and its event stream", {"type": "string"}),
    "X-Session-Id": {"description": "with a `conversation_id`: its session "
                                    "(`GET /v1/sessions/{id}`)", "required": False,
                     "schema": {"type": "string", "pattern": "^chat-[0-9a-f]{40}$"}},
}
_USAGE = {"type": "object", "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
          "properties": {k: {"type": "integer", "minimum": 0}
                         for k in ("prompt_tokens", "completion_tokens", "total_tokens")}}


def _extension_schema() -> dict[str, Any]:
    run_detail = openapi_document()["components"]["schemas"]["RunDetail"]["allOf"][1]
    return {"type": "object",
            "required": ["run_id", "outcome", "reason", "question", "session_id", "citations",
                         "links"],
            "properties": {
                "run_id": {"type": "string"},
                "outcome": {"enum": list(FINISH_REASONS)},
                "reason": {"type": "string"},
                "question": {"type": "string", "description": "what the run was asked (a "
                                                             "follow-up read standalone)"},
                "session_id": {"type": ["string", "null"]},
                "citations": copy.deepcopy(run_detail["properties"]["citations"]),
                "links": {"type": "object", "required": ["run", "events"],
                          "properties": {"run": {"type": "string"},
                                         "events": {"type": "string"}}},
                "task": {"type": ["object", "null"], "description": (
                    "a handed_off run's background task: {task_id, kind, link, "
                    "collection, doc_id}")}}}


def _request_schema() -> dict[str, Any]:
    """``ChatRequest`` as JSON Schema, with what its validators check written out."""
    run = openapi_document()["components"]["schemas"]["RunRequest"]["properties"]
    said = run["question"]["pattern"]
    text_part = {"type": "object", "required": ["type", "text"],
                 "properties": {"type": {"const": "text"},
                                "text": {"type": "string", "maxLength": PART_MAX,
                                         "pattern": said}}}
    user = {"type": "object", "required": ["role", "content"],
            "properties": {
                "role": {"const": "user"},
                "content": {"anyOf": [
                    {"type": "string", "maxLength": QUESTION_MAX, "pattern": said},
                    {"type": "array", "minItems": 1, "maxItems": PARTS_MAX,
                     "items": text_part}]}}}
    other = {"type": "object", "required": ["role"],
             "properties": {"role": {"enum": ["system", "developer", "assistant", "tool",
                                              "function"]},
                            "content": {"description": "any JSON; an assistant's text (a "
                                                       "string or text parts) is an earlier "
                                                       "answer"}}}
    return {
        "type": "object", "required": ["model", "messages"],
        "description": "OpenAI's chat request; other OpenAI fields are accepted and ignored",
        "properties": {
            "model": {"enum": list(MODELS)},
            "messages": {"type": "array", "minItems": 1,
                         "items": {"oneOf": [user, other]},
                         "contains": {"type": "object", "required": ["role"],
                                      "properties": {"role": {"const": "user"}}},
                         "description": "the last user message is the question; earlier "
                                        "ones, with the assistant answers after them, are "
                                        "the conversation"},
            "stream": {"type": ["boolean", "null"]},
            "stream_options": {"anyOf": [
                {"type": "object",
                 "properties": {"include_usage": {"type": ["boolean", "null"]}}},
                {"type": "null"}]},
            "conversation_id": {"anyOf": [{"type": "string", "minLength": 1, "maxLength": 200},
                                          {"type": "null"}],
                                "description": "keeps this conversation's turns on the "
                                               "server (a session per conversation)"},
            "collections": copy.deepcopy(run["collections"]),
            "budget": copy.deepcopy(run["budget"]),
        },
    }


@functools.cache
def _paths() -> dict[str, Any]:
    message = {"type": "object", "required": ["role", "content"],
               "properties": {"role": {"const": "assistant"}, "content": {"type": "string"}}}
    completion = {
        "type": "object",
        "required": ["id", "object", "created", "model", "choices", "usage", EXTENSION],
        "properties": {
            "id": {"type": "string"}, "object": {"const": "chat.completion"},
            "created": {"type": "integer"}, "model": {"enum": list(MODELS)},
            "choices": {"type": "array", "minItems": 1, "maxItems": 1, "items": {
                "type": "object", "required": ["index", "message", "finish_reason"],
                "properties": {"index": {"const": 0}, "message": message,
                               "finish_reason": {"enum": sorted(set(FINISH_REASONS.values()))}}}},
            "usage": _USAGE, EXTENSION: _extension_schema()}}
    chunk = {
        "type": "object", "required": ["id", "object", "created", "model", "choices"],
        "properties": {
            "id": {"type": "string"}, "object": {"const": "chat.completion.chunk"},
            "created": {"type": "integer"}, "model": {"enum": list(MODELS)},
            "choices": {"type": "array", "maxItems": 1, "items": {
                "type": "object", "required": ["index", "delta", "finish_reason"],
                "properties": {
                    "index": {"const": 0},
                    "delta": {"type": "object", "properties": {
                        "role": {"const": "assistant"}, "content": {"type": "string"}}},
                    "finish_reason": {"enum": [*sorted(set(FINISH_REASONS.values())), None]}}}},
            "usage": _USAGE, EXTENSION: _extension_schema()}}
    sse = {"type": "object", "required": ["data"], "properties": {"data": {"anyOf": [
        {"const": "[DONE]"},
        {"type": "string", "contentMediaType": "application/json",
         "contentSchema": {"anyOf": [chunk, _ERROR_SCHEMA]}}]}}}
    models = {"type": "object", "required": ["object", "data"], "properties": {
        "object": {"const": "list"},
        "data": {"type": "array", "items": {
            "type": "object", "required": ["id", "object", "created", "owned_by"],
            "properties": {"id": {"enum": list(MODELS)}, "object": {"const": "model"},
                           "created": {"type": "integer"}, "owned_by": {"type": "string"}}}}}}
    body_errors = {
        "400": _error("the body is not JSON or not an object, `model` or `messages` is "
                      "missing or empty, or no message is the user's"),
        "401": _error("missing or wrong bearer token (`invalid_api_key`)",
                      {"WWW-Authenticate": _header("the scheme to authenticate with",
                                                   {"type": "string"})}),
    }
    return {
        "/v1/models": {"get": {
            "operationId": "openaiListModels", "tags": ["openai"],
            "summary": "OpenAI-compatible: the models (`reactive-rag`: the agent; "
                       "`reactive-rag-rag`: one-shot retrieval)",
            "responses": {"200": {"description": "OpenAI's model list",
                                  "content": {"application/json": {"schema": models}}},
                          "401": body_errors["401"]}}},
        "/v1/chat/completions": {"post": {
            "operationId": "openaiChatCompletion", "tags": ["openai"],
            "summary": "OpenAI-compatible: ask the last user message as a run, the earlier "
                       "messages (or the `conversation_id`'s session) being the conversation",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": _request_schema()}}},
            "responses": {
                "200": {"description": "the verified answer with numbered sources: a "
                                       "`chat.completion`, or with `stream` a stream of "
                                       "`chat.completion.chunk`s ending `data: [DONE]`",
                        "headers": _RUN_HEADERS,
                        "content": {"application/json": {"schema": completion},
                                    "text/event-stream": {"schema": sse}}},
                **body_errors,
                "403": _error("a collection the tenant may not search "
                              "(`collection_forbidden`)"),
                "404": _error("no such model (`model_not_found`)"),
                "409": _error("the conversation's previous run is still going "
                              "(`session_busy`)"),
                "413": _error("the body is too large (`body_too_large`)"),
                "415": _error("the body is not application/json"),
                "422": _error("invalid fields or run options (`validation_failed`, "
                              "`run_config`, `budget_over_cap`)"),
                "429": _error("a quota of the tenant is used up", _RETRY_AFTER),
                "503": _error("the run store is unavailable or the default corpus is still "
                              "being indexed", _RETRY_AFTER),
            }}},
    }


def openai_openapi_paths() -> dict[str, Any]:
    """OpenAPI 3.1 path items of the OpenAI-compatible routes, for the server's document."""
    return copy.deepcopy(_paths())
