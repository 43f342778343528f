"""OpenAI-compatible face: ``POST /v1/chat/completions`` and ``GET /v1/models`` over runs.

A thin face over the run manager: the tenant, its collections, budgets, rate
limits and the stored run are exactly those of ``POST /v1/runs`` (the same
helpers, the same :class:`~._models.RunRequest` checks, the same
:meth:`RunManager.start <._runs.RunManager.start>`). The model name picks the
mode; the last user message is the question. With a ``conversation_id`` the turn
goes through the server's :class:`~._sessions.SessionManager` (one session per
conversation, kept in the store); without one, the earlier messages are read as
the conversation's turns by the same :mod:`reactive_rag.conversation` functions.

The answer is read from the run's stored events (``store.attach``: stored tail,
then live), so a completion and its stream say exactly what ``/v1/runs/{id}``
says, and a client that goes away leaves the run going and stored. Every error
on these routes is OpenAI-shaped: the server's problems (the same mapping as
everywhere, :func:`~._problems.problem_middleware`) are re-worded here.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from aiohttp import web
from pydantic import ValidationError

from reactive_rag.conversation import SessionState, Turn, aprepare_turn, prepare_turn
from reactive_rag.engine import Mode, RunResult
from reactive_rag.judgement import FollowupRewriter
from reactive_rag.store import ServerStore, SessionExists, SessionNotFound
from streams import AnswerDelta, Event

from ._auth import Tenant
from ._exceptions import Problem
from ._feed import EventFeed
from ._models import RunRequest
from ._openai_shapes import (
    FINISH_REASONS,
    MODELS,
    ChatMessage,
    ChatRequest,
    UserMessage,
    chunk_body,
    completion_body,
    error_body,
    extension_body,
    models_body,
    openai_openapi_paths,
    usage_body,
)
from ._problems import PROBLEM_CONTENT_TYPE, make_problem, problem_middleware
from ._requests import (
    CONFIG_KEY,
    MANAGER_KEY,
    STORE_KEY,
    json_body,
    request_tenant,
    scoped_collections,
)
from ._sessions import SESSIONS_KEY
from ._sse import ClientGone, SseWriter, relay

__all__ = ["conversation_session_id", "openai_openapi_paths", "openai_routes"]

log = logging.getLogger("reactive_rag.server")

openai_routes = web.RouteTableDef()
"""The routes of this module; ``create_app`` adds them."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_TITLES = {
    "missing_required_parameter": "A required parameter is missing",
    "invalid_request": "The request is not a chat request",
    "no_user_message": "No message is the user's",
    "model_not_found": "No such model",
}


def _problem(status: int, code: str, detail: str, field: str | None) -> Problem:
    return Problem(status, code, _TITLES[code], detail, field=field)


# --- errors ---------------------------------------------------------------------------------


def _openai_errors(handler: Handler) -> Handler:
    """Answer the handler's errors as OpenAI error bodies (same statuses and headers).

    The server's own mapping of exceptions to problems runs first, so a store
    that is down or a rate limit answers here as on every other route.
    """

    @functools.wraps(handler)
    async def answer(request: web.Request) -> web.StreamResponse:
        response = await problem_middleware(request, handler)
        if not isinstance(response, web.Response) or response.status < 400 \
                or response.content_type != PROBLEM_CONTENT_TYPE or response.text is None:
            return response
        problem = json.loads(response.text)
        code = "invalid_api_key" if problem["code"] == "unauthorized" else problem["code"]
        headers = {k: v for k, v in response.headers.items()
                   if k.lower() not in ("content-type", "content-length")}
        return web.json_response(
            error_body(response.status, code, problem["detail"], problem.get("field")),
            status=response.status, headers=headers)

    return answer


# --- routes ---------------------------------------------------------------------------------


@openai_routes.get("/v1/models")
@_openai_errors
async def list_models(request: web.Request) -> web.Response:
    request_tenant(request)
    return web.json_response(models_body())


@dataclass(frozen=True, slots=True)
class _Asked:
    """A started run of a chat request."""

    run_id: str
    question: str
    """What the run was asked (a follow-up read standalone)."""
    session_id: str | None


@openai_routes.post("/v1/chat/completions")
@_openai_errors
async def chat_completions(request: web.Request) -> web.StreamResponse:
    tenant = request_tenant(request)
    config = request.app[CONFIG_KEY]
    chat = _chat_request(await json_body(request, config.max_body_bytes))
    mode = MODELS.get(chat.model)
    if mode is None:
        raise _problem(404, "model_not_found", f"the model {chat.model[:100]!r} does not exist; "
                       f"use one of {sorted(MODELS)}", "model")
    earlier, question = _split(chat.messages)
    run = _run_request(question, mode, chat)
    collections = scoped_collections(request, tenant, run.collections)
    if chat.conversation_id is not None:
        asked = await _ask_in_session(request, tenant, chat.conversation_id, run, collections)
    else:
        asked = await _ask_with_history(request, tenant, earlier, run, collections)
    created = int(time.time())
    if chat.stream:
        return await _stream(request, tenant, asked, chat, created)
    result = await _finished(request.app[STORE_KEY], tenant.name, asked.run_id)
    return web.json_response(
        completion_body(result, model=chat.model, created=created, question=asked.question,
                        session_id=asked.session_id),
        headers=_run_headers(asked))


# --- reading the request --------------------------------------------------------------------


def _chat_request(body: Any) -> ChatRequest:
    if not isinstance(body, dict):
        raise _problem(400, "invalid_request", "the body must be a JSON object", None)
    try:
        return ChatRequest.model_validate(body)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        loc = err.get("loc", ())
        where = ".".join(str(p) for p in loc)
        if len(loc) == 1 and loc[0] in ("model", "messages") \
                and err["type"] in ("missing", "too_short"):
            raise _problem(400, "missing_required_parameter",
                           f"{loc[0]} is required" + (" (at least one message)"
                                                      if loc[0] == "messages" else ""),
                           str(loc[0])) from None
        raise make_problem(422, "validation_failed", f"{where or 'body'}: {err['msg']}"[:300],
                           field=where or None) from None


def _split(messages: Sequence[ChatMessage]) -> tuple[Sequence[ChatMessage], str]:
    """The messages before the last user message, and its text (the question)."""
    last = next((i for i in range(len(messages) - 1, -1, -1)
                 if isinstance(messages[i], UserMessage)), None)
    if last is None:
        raise _problem(400, "no_user_message", "no message has the role `user`: the last "
                       "user message is the question", "messages")
    return messages[:last], cast(UserMessage, messages[last]).text


def _run_request(question: str, mode: Mode, chat: ChatRequest) -> RunRequest:
    """The run's options, checked exactly as ``POST /v1/runs`` checks them."""
    try:
        return RunRequest.model_validate({"question": question, "mode": mode,
                                          **chat.run_fields()})
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or None
        raise make_problem(422, "validation_failed", f"{where or 'body'}: {err['msg']}"[:300],
                           field=where) from None


# --- starting the run -----------------------------------------------------------------------


def conversation_session_id(tenant: str, conversation_id: str) -> str:
    """The session of a client's conversation id: the tenant's own (ids never collide or leak
    across tenants), a valid session id whatever the client sent."""
    digest = hashlib.sha256(f"{tenant}\x00{conversation_id}".encode("utf-8", "surrogatepass"))
    return f"chat-{digest.hexdigest()[:40]}"


async def _ask_in_session(request: web.Request, tenant: Tenant, conversation_id: str,
                          run: RunRequest, collections: tuple[str, ...]) -> _Asked:
    """The conversation's next turn, through the server's sessions (created on first use)."""
    store = request.app[STORE_KEY]
    sessions = request.app[SESSIONS_KEY]
    session_id = conversation_session_id(tenant.name, conversation_id)
    try:
        await store.get_session(session_id, tenant.name)  # a use: slides its TTL
    except SessionNotFound:
        with contextlib.suppress(SessionExists):  # another request of it created it meanwhile
            await store.create_session(session_id, tenant.name,
                                       SessionState.new(session_id, tenant.name).to_json(),
                                       ttl_s=request.app[CONFIG_KEY].session_ttl_s)
    await sessions.settle(session_id)
    run_id, prepared = await sessions.start_turn(tenant, session_id, run, collections)
    return _Asked(run_id, prepared.standalone, session_id)


async def _ask_with_history(request: web.Request, tenant: Tenant,
                            earlier: Sequence[ChatMessage], run: RunRequest,
                            collections: tuple[str, ...]) -> _Asked:
    """Read the question against the earlier messages, as a session reads its turns."""
    manager = request.app[MANAGER_KEY]
    engine = manager.engine_for(tenant.name)
    state = _history(tenant.name, earlier, engine.judgement.followups)
    prepared = await aprepare_turn(state, run.question, engine.judgement.followups,
                                   engine.rewriter)
    run_id = await manager.start(tenant, prepared.standalone, mode=run.mode,
                                 collections=collections, budget=run.budget,
                                 context=prepared.context)
    return _Asked(run_id, prepared.standalone, None)


def _history(tenant: str, earlier: Sequence[ChatMessage],
             followups: FollowupRewriter | None) -> SessionState:
    """The earlier messages as a conversation's turns: each user message with the assistant
    answer after it (if any), each read standalone by the offline rules, in order.

    A turn's ``run_id`` names its message (``message-<index>``): the run that answered it,
    if any, is not known here.
    """
    state = SessionState.new("messages", tenant)
    asked: tuple[int, str] | None = None

    def added(state: SessionState, index: int, question: str, answer: str) -> SessionState:
        standalone = prepare_turn(state, question, followups).standalone
        turn = Turn(run_id=f"message-{index}", question=question, standalone=standalone,
                    outcome="answered" if answer.strip() else "unanswered", answer=answer)
        return replace(state, turns=(*state.turns, turn))

    for index, message in enumerate(earlier):
        if isinstance(message, UserMessage):
            if asked is not None:
                state = added(state, *asked, "")
            asked = (index, message.text)
        elif message.role == "assistant" and asked is not None:
            state = added(state, *asked, message.text)
            asked = None
    return added(state, *asked, "") if asked is not None else state


def _run_headers(asked: _Asked) -> dict[str, str]:
    run = f"/v1/runs/{asked.run_id}"
    headers = {"X-Run-Id": asked.run_id, "X-Run-Events": f"{run}/events",
               "Link": f'<{run}>; rel="related", <{run}/events>; rel="alternate"; '
                       'type="text/event-stream"'}
    if asked.session_id is not None:
        headers["X-Session-Id"] = asked.session_id
    return headers


# --- answering ------------------------------------------------------------------------------


async def _finished(store: ServerStore, tenant: str, run_id: str) -> RunResult:
    """Wait for the run to end (its stored tail, then live events); its result."""
    source = cast(AsyncGenerator[Event, None], store.attach(run_id, 0, tenant=tenant))
    async with contextlib.aclosing(source) as events:
        seen = [event async for event in events]
    return RunResult.from_events(seen)


async def _stored(store: ServerStore, tenant: str, run_id: str) -> RunResult:
    """The ended run's result from every stored event (a client's feed may coalesce some)."""
    source = cast(AsyncGenerator[Event, None], store.events(run_id, tenant=tenant))
    async with contextlib.aclosing(source) as events:
        return RunResult.from_events([event async for event in events])


def _frame(body: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n".encode()


def _tail(result: RunResult, streamed: str) -> str:
    """What the stream still owes once the run ended: the answer's notes (a budget that ran
    out, a partial answer), or why there is no answer; never a claim."""
    if result.answer:
        return result.answer[len(streamed):] if result.answer.startswith(streamed) else ""
    if streamed:
        return ""
    return result.reason or f"the run ended {result.outcome} without an answer"


async def _stream(request: web.Request, tenant: Tenant, asked: _Asked, chat: ChatRequest,
                  created: int) -> web.StreamResponse:
    """``chat.completion.chunk``s: the verified answer as it is published, then the ending."""
    config = request.app[CONFIG_KEY]
    store = request.app[STORE_KEY]
    feed = EventFeed(store.attach(asked.run_id, 0, tenant=tenant.name),
                     maxsize=config.sse_buffer)
    writer = SseWriter(request, write_timeout_s=config.write_timeout_s,
                       headers=_run_headers(asked))
    streamed: list[str] = []

    def chunk(delta: dict[str, str] | None, **fields: Any) -> bytes:
        return _frame(chunk_body(asked.run_id, model=chat.model, created=created, delta=delta,
                                 **fields))

    def deltas(events: Sequence[Event]) -> bytes:
        texts = [e.text for e in events if isinstance(e, AnswerDelta) and e.text]
        streamed.extend(texts)
        return b"".join(chunk({"content": text}) for text in texts)

    await writer.prepare()
    try:
        async with feed:
            await writer.send(chunk({"role": "assistant", "content": ""}))
            await relay(feed, writer, deltas, keepalive_s=config.keepalive_s)
        if feed.detached_reason is not None:
            await writer.send_last(_frame(error_body(
                503, "stream_detached", f"{feed.detached_reason}; the run goes on: follow it "
                f"at /v1/runs/{asked.run_id}/events", None)))
        else:
            result = await _stored(store, tenant.name, asked.run_id)
            tail = _tail(result, "".join(streamed))
            ending = [chunk({"content": tail})] if tail else []
            ending.append(chunk({}, finish_reason=FINISH_REASONS[result.outcome],
                                extension=extension_body(result, question=asked.question,
                                                         session_id=asked.session_id)))
            if chat.stream_options is not None and chat.stream_options.include_usage:
                ending.append(chunk(None, usage=usage_body(result.events)))
            await writer.send(b"".join(ending) + b"data: [DONE]\n\n")
        await writer.finish()
    except ClientGone:
        pass  # the client left or stalled: the run goes on, and is stored
    except Exception:  # the status line is sent: say it in the stream, not as a new response
        log.exception("chat stream of run %s failed", asked.run_id)
        await writer.send_last(_frame(error_body(
            500, "internal", "internal server error; the run goes on: follow it at "
            f"/v1/runs/{asked.run_id}", None)))
    return writer.response
