"""``POST /a2a``: JSON-RPC 2.0 on aiohttp, for the A2A 1.0 methods and their 0.3 names.

The caller is authenticated first, exactly like the API (a missing or wrong bearer
token is the API's 401 problem, before the body is read). Then, as JSON-RPC over
HTTP has it, every answer is HTTP 200: a body that is not JSON is a parse error
(-32700), one that is not a JSON-RPC 2.0 request (or a batch) an invalid request
(-32600), an unknown method -32601, params that do not parse -32602. The 1.0 names
(``SendMessage``, ``SendStreamingMessage``, ``GetTask``, ``CancelTask``,
``SubscribeToTask``, and the refused ``ListTasks``, push-notification and
extended-card methods) take params in the SDK's protobuf JSON; the 0.3 names
(``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``,
``tasks/resubscribe``, ``tasks/pushNotificationConfig/*``) go through the SDK's 0.3
adapter to the same handler. An ``A2A-Version`` header, when sent, must match the
method set's major version.

The two streaming methods answer Server-Sent Events, one JSON-RPC response per
``data:``, an error as ``event: error``; an error before the first event is an
ordinary JSON-RPC error response. A comment keeps an idle stream open; a client that
cannot take a write within the server's ``write_timeout_s`` is dropped. A client
that leaves stops only its stream: the run goes on and is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

from a2a.compat.v0_3 import types as v03
from a2a.compat.v0_3.request_handler import RequestHandler03
from a2a.server import jsonrpc_models as rpc
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    SendMessageRequest,
    SendMessageResponse,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.constants import VERSION_HEADER
from a2a.utils.errors import (
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    PushNotificationNotSupportedError,
    VersionNotSupportedError,
)
from a2a.utils.proto_utils import to_stream_response
from aiohttp import web
from pydantic import BaseModel, ValidationError

from reactive_rag.server import CONFIG_KEY, KEEP_ALIVE, ClientGone, SseWriter, request_tenant

from ._errors import rpc_error
from ._handler import Caller, RunTaskHandler
from ._proto import from_json, to_json

__all__ = ["A2aEndpoint"]

log = logging.getLogger("reactive_rag.a2a")

Json = dict[str, Any]
RequestId = str | int | None
Error = A2AError | rpc.JSONRPCError


class _Refused(Exception):
    """A request refused before any method ran (its JSON-RPC error, and the id to answer)."""

    def __init__(self, error: Error, request_id: RequestId = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.request_id = request_id


@dataclass(frozen=True, slots=True)
class _Call:
    """One parsed call: ``unary`` answers a result, ``stream`` yields results."""

    unary: Callable[[], Awaitable[Json]] | None = None
    stream: Callable[[], AsyncIterator[Json]] | None = None


# --- A2A 1.0 ------------------------------------------------------------------------------

_V10_PARAMS: Mapping[str, Callable[[], Any]] = {
    "SendMessage": SendMessageRequest,
    "SendStreamingMessage": SendMessageRequest,
    "GetTask": GetTaskRequest,
    "CancelTask": CancelTaskRequest,
    "SubscribeToTask": SubscribeToTaskRequest,
    "ListTasks": ListTasksRequest,
    "CreateTaskPushNotificationConfig": TaskPushNotificationConfig,
    "GetTaskPushNotificationConfig": GetTaskPushNotificationConfigRequest,
    "ListTaskPushNotificationConfigs": ListTaskPushNotificationConfigsRequest,
    "DeleteTaskPushNotificationConfig": DeleteTaskPushNotificationConfigRequest,
    "GetExtendedAgentCard": GetExtendedAgentCardRequest,
}


def _v10_call(handler: RunTaskHandler, method: str, params: Any,
              context: ServerCallContext) -> _Call:
    try:
        request: Any = from_json(params, _V10_PARAMS[method]())
    except Exception as exc:  # ParseError, or a value of the wrong JSON type
        raise _Refused(rpc.InvalidParamsError(data={"parseError": str(exc)[:300]})) from None

    async def stream() -> AsyncIterator[Json]:
        events = (handler.on_message_send_stream(request, context)
                  if method == "SendStreamingMessage"
                  else handler.on_subscribe_to_task(request, context))
        async with contextlib.aclosing(events):
            async for event in events:
                yield to_json(to_stream_response(event))

    async def unary() -> Json:
        match method:
            case "SendMessage":
                task = await handler.on_message_send(request, context)
                return to_json(SendMessageResponse(task=task))
            case "GetTask":
                return to_json(await handler.on_get_task(request, context))
            case "CancelTask":
                return to_json(await handler.on_cancel_task(request, context))
            case "ListTasks":
                return to_json(await handler.on_list_tasks(request, context))
            case "GetExtendedAgentCard":
                return to_json(await handler.on_get_extended_agent_card(request, context))
        raise PushNotificationNotSupportedError()

    if method in ("SendStreamingMessage", "SubscribeToTask"):
        return _Call(stream=stream)
    return _Call(unary=unary)


# --- A2A 0.3 ------------------------------------------------------------------------------

_V03_REQUESTS: Mapping[str, type[BaseModel]] = {
    "message/send": v03.SendMessageRequest,
    "message/stream": v03.SendStreamingMessageRequest,
    "tasks/get": v03.GetTaskRequest,
    "tasks/cancel": v03.CancelTaskRequest,
    "tasks/resubscribe": v03.TaskResubscriptionRequest,
}
_V03_PUSH = frozenset({"tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/get",
                       "tasks/pushNotificationConfig/list",
                       "tasks/pushNotificationConfig/delete"})
_V03_CODES = frozenset(cls.model_fields["code"].default
                       for cls in get_args(v03.A2AError.model_fields["root"].annotation))
"""The error codes a 0.3 client knows (codes added in 1.0 reach it as -32603)."""


def _v03_json(model: BaseModel) -> Json:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _v03_call(handler: RunTaskHandler, method: str, body: Json,
              context: ServerCallContext) -> _Call:
    if method in _V03_PUSH:
        raise _Refused(PushNotificationNotSupportedError(), body.get("id"))
    try:
        request: Any = _V03_REQUESTS[method].model_validate(body)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        raise _Refused(rpc.InvalidParamsError(message=f"{where}: {err['msg']}"[:300]),
                       body.get("id")) from None
    adapter = RequestHandler03(handler)

    async def stream() -> AsyncIterator[Json]:
        events = (adapter.on_message_send_stream(request, context)
                  if method == "message/stream"
                  else adapter.on_subscribe_to_task(request, context))
        async for item in events:
            yield _v03_json(item.result)

    async def unary() -> Json:
        match method:
            case "message/send":
                return _v03_json(await adapter.on_message_send(request, context))
            case "tasks/get":
                return _v03_json(await adapter.on_get_task(request, context))
        return _v03_json(await adapter.on_cancel_task(request, context))

    if method in ("message/stream", "tasks/resubscribe"):
        return _Call(stream=stream)
    return _Call(unary=unary)


def _v03_error(request_id: RequestId, error: Error) -> Json:
    if isinstance(error, rpc.JSONRPCError):
        body = error.model_dump(exclude_none=True)
    else:
        code = JSON_RPC_ERROR_CODE_MAP.get(type(error), -32603)
        body = {"code": code if code in _V03_CODES else -32603, "message": error.message,
                **({"data": error.data} if error.data is not None else {})}
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


# --- the endpoint -------------------------------------------------------------------------


def _request_id(body: Json) -> RequestId:
    """The request's id, if it is one JSON-RPC allows (else the error answers ``null``)."""
    value = body.get("id")
    if isinstance(value, bool) or not isinstance(value, str | int | None):
        return None
    return value


def _version_ok(sent: str | None, major: str) -> bool:
    return sent is None or not sent.strip() or sent.strip().split(".")[0] == major


class A2aEndpoint:
    """The aiohttp handler of ``POST /a2a`` over one :class:`RunTaskHandler`."""

    def __init__(self, handler: RunTaskHandler) -> None:
        self.handler = handler

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Answer one JSON-RPC call (a JSON response, or SSE for the streaming methods)."""
        tenant = request_tenant(request)  # the API's 401 problem, before the body is read
        v10 = True
        request_id: RequestId = None
        try:
            body = await self._body(request)
            request_id = _request_id(body)
            method = body["method"]
            v10 = method not in _V03_REQUESTS and method not in _V03_PUSH
            context = ServerCallContext(user=Caller(tenant, request),
                                        state={"method": method, "request_id": request_id})
            call = self._call(request, method, body, context, v10=v10)
            if call.stream is not None:
                return await self._serve_stream(request, request_id, call.stream(), v10=v10)
            assert call.unary is not None
            result = await call.unary()
        except _Refused as refused:
            rid = refused.request_id if refused.request_id is not None else request_id
            return self._error(rid, refused.error, v10=v10)
        except Exception as exc:
            return self._error(request_id, rpc_error(exc), v10=v10)
        return web.json_response({"jsonrpc": "2.0", "id": request_id, "result": result})

    async def _body(self, request: web.Request) -> Json:
        """The request object (a refusal answers -32700 or -32600)."""
        limit = request.app[CONFIG_KEY].max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            raise _Refused(rpc.InvalidRequestError(message="Payload too large"))
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise _Refused(rpc.InvalidRequestError(message="Payload too large")) from None
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):  # also bytes that are not UTF-8
            raise _Refused(rpc.JSONParseError()) from None
        if isinstance(body, list):
            raise _Refused(rpc.InvalidRequestError(message="Batch requests are not supported"))
        if not isinstance(body, dict):
            raise _Refused(rpc.InvalidRequestError(message="the request must be an object"))
        request_id = _request_id(body)
        if request_id is None and body.get("id") is not None:
            raise _Refused(rpc.InvalidRequestError(
                message="id must be a string, an integer or null"))
        if body.get("jsonrpc") != "2.0":
            raise _Refused(rpc.InvalidRequestError(message="jsonrpc must be exactly '2.0'"),
                           request_id)
        if not isinstance(body.get("method"), str) or not body["method"]:
            raise _Refused(rpc.InvalidRequestError(message="method must be a string"),
                           request_id)
        if not isinstance(body.get("params", {}), dict):
            raise _Refused(rpc.InvalidParamsError(message="params must be an object"),
                           request_id)
        return body

    def _call(self, request: web.Request, method: str, body: Json,
              context: ServerCallContext, *, v10: bool) -> _Call:
        request_id = _request_id(body)
        if v10 and method not in _V10_PARAMS:
            raise _Refused(rpc.MethodNotFoundError(), request_id)
        sent = request.headers.get(VERSION_HEADER)
        if not _version_ok(sent, "1" if v10 else "0"):
            raise _Refused(VersionNotSupportedError(
                message=f"A2A-Version {sent!r} does not serve {method!r}"), request_id)
        if v10:
            return _v10_call(self.handler, method, body.get("params", {}), context)
        return _v03_call(self.handler, method, body, context)

    def _error(self, request_id: RequestId, error: Error, *, v10: bool) -> web.Response:
        return web.json_response(self._error_json(request_id, error, v10=v10))

    @staticmethod
    def _error_json(request_id: RequestId, error: Error, *, v10: bool) -> Json:
        return build_error_response(request_id, error) if v10 else _v03_error(request_id, error)

    async def _serve_stream(self, request: web.Request, request_id: RequestId,
                            results: AsyncIterator[Json], *, v10: bool) -> web.StreamResponse:
        """The stream as SSE; an error before its first result is a plain error response."""
        config = request.app[CONFIG_KEY]
        source = _Results(results)
        try:
            first = await source.next()  # the task, or the refusal (unknown task, bad params)
        except Exception as exc:
            await source.aclose()
            return self._error(request_id, rpc_error(exc), v10=v10)
        writer = SseWriter(request, write_timeout_s=config.write_timeout_s)

        def frame(message: Json, *, error: bool = False) -> bytes:
            kind = "event: error\n" if error else ""
            return f"{kind}data: {json.dumps(message)}\n\n".encode()

        try:
            await writer.prepare()
            result = first
            while result is not None:
                await writer.send(frame({"jsonrpc": "2.0", "id": request_id, "result": result}))
                try:
                    result = await source.next(keepalive_s=config.keepalive_s,
                                               on_idle=lambda: writer.send(KEEP_ALIVE))
                except ClientGone:
                    raise
                except Exception as exc:
                    error = rpc_error(exc)
                    await writer.send(frame(self._error_json(request_id, error, v10=v10),
                                            error=True))
                    break
            await writer.finish()
        except (ClientGone, ConnectionError, RuntimeError):  # the client left or stalled
            log.debug("an A2A stream ended early: the client left or could not keep up")
        finally:
            await source.aclose()
        return writer.response


class _Results:
    """A stream's results, waited for without cancelling the generator on each idle tick."""

    def __init__(self, results: AsyncIterator[Json]) -> None:
        self._results = results
        self._pending: asyncio.Task[Json] | None = None

    async def next(self, *, keepalive_s: float | None = None,
                   on_idle: Callable[[], Awaitable[None]] | None = None) -> Json | None:
        """The next result, ``None`` at the end; ``on_idle`` every ``keepalive_s`` of waiting."""
        if self._pending is None:
            self._pending = asyncio.ensure_future(anext(self._results))
        pending = self._pending
        while True:
            done, _ = await asyncio.wait((pending,), timeout=keepalive_s)
            if done:
                break
            if on_idle is not None:
                await on_idle()
        self._pending = None
        try:
            return pending.result()
        except StopAsyncIteration:
            return None

    async def aclose(self) -> None:
        """Stop waiting and close the generator (its event feed and store subscription)."""
        if self._pending is not None and not self._pending.done():
            self._pending.cancel()
            with contextlib.suppress(BaseException):
                await self._pending
        self._pending = None
        if isinstance(self._results, AsyncGenerator):
            with contextlib.suppress(Exception):
                await self._results.aclose()
