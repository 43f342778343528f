"""The A2A methods over the run manager: a task is a run, read back from the run store.

This is the SDK's :class:`~a2a.server.request_handlers.RequestHandler` interface
implemented over our runs, not the SDK's default handler: that one keeps task state
of its own (a task store, an in-memory registry of running tasks), which would be a
second copy of what the run store holds. Here every answer is folded from the run's
stored events (:class:`~._tasks.TaskFold`); runs start, are scoped, budgeted,
rate-limited, resumed and cancelled by the server's
:class:`~reactive_rag.server.RunManager` exactly as ``/v1/runs`` does it.

A message starts a run of its text. ``skill``, ``collections`` and ``budget`` come
from the request's ``metadata`` or the message's (the request's win), validated as
the body of ``POST /v1/runs``. A message naming a ``taskId`` continues that task:
only an interrupted one (``input-required``) can be continued, and it is resumed
from its stored events. A task is its own context (context id = task id): a
``contextId`` that is not the task's is refused, since the run store keeps no
conversation between tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, cast

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler, validate_request_params
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import apply_history_length, validate_history_length
from aiohttp import web
from pydantic import ValidationError

from reactive_rag.events import Event
from reactive_rag.server import (
    CONFIG_KEY,
    CORPUS_TASK_KEY,
    ENGINE_KEY,
    MANAGER_KEY,
    STORE_KEY,
    EventFeed,
    RunRequest,
    Tenant,
    cancel_anywhere,
    resolve_collections,
)
from reactive_rag.store import RunNotResumable

from ._card import SKILL_MODES
from ._proto import to_json
from ._tasks import TaskFold, Update

__all__ = ["CANCEL_WAIT_S", "Caller", "RunTaskHandler"]

CANCEL_WAIT_S = 10.0
"""How long ``CancelTask`` waits for the cancelled run to end before it answers."""

A2aEvent = Task | Update


class Caller(User):
    """The tenant an A2A call was authenticated as, and the request it came in on."""

    def __init__(self, tenant: Tenant, request: web.Request) -> None:
        self.tenant = tenant
        self.request = request

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.tenant.name

    @property
    def app(self) -> web.Application:
        return self.request.app


def _caller(context: ServerCallContext) -> Caller:
    if not isinstance(context.user, Caller):  # only if a transport forgot to authenticate
        raise InternalError(message="the call has no authenticated caller")
    return context.user


def _run_id(task_id: str) -> str:
    """The run a task id names (a malformed id is just an id that does not exist)."""
    if not task_id or len(task_id) > 64 or not task_id.isascii() or not task_id.isalnum():
        raise TaskNotFoundError()
    return task_id


def _question(message: Message) -> str:
    if any(not part.HasField("text") for part in message.parts):
        raise ContentTypeNotSupportedError(message="only text parts are read: send the "
                                           "question as text (options go in metadata)")
    return "\n".join(part.text for part in message.parts)


def _metadata(struct: Any) -> dict[str, Any]:
    """A ``metadata`` Struct as a dict (``{}`` when none was sent)."""
    return to_json(struct) if struct.fields else {}


def _whole(value: Any) -> Any:
    """A JSON number read back from a protobuf Struct (always a double) as the client wrote it."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    return value


def _run_request(params: SendMessageRequest) -> RunRequest:
    """The run a message asks for, validated as a ``POST /v1/runs`` body."""
    options = {**_metadata(params.message.metadata), **_metadata(params.metadata)}
    skill = options.get("skill", "research")
    if skill not in SKILL_MODES:
        raise InvalidParamsError(message=f"metadata.skill must be one of "
                                 f"{', '.join(SKILL_MODES)}", data={"field": "skill"})
    body: dict[str, Any] = {"question": _question(params.message), "mode": SKILL_MODES[skill]}
    if "collections" in options:
        body["collections"] = options["collections"]
    budget = options.get("budget")
    if budget is not None:
        body["budget"] = ({k: _whole(v) for k, v in budget.items()}
                          if isinstance(budget, dict) else budget)
    try:
        return RunRequest.model_validate(body)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        field = "message" if where == "question" else f"metadata.{where}"
        raise InvalidParamsError(message=f"{field}: {err['msg']}"[:300],
                                 data={"field": field}) from None


class RunTaskHandler(RequestHandler):
    """The A2A 1.0 methods, each call scoped to its :class:`Caller`'s tenant."""

    # --- reading tasks ----------------------------------------------------------------------

    async def _fold(self, caller: Caller, task_id: str) -> TaskFold:
        """The task as the store holds it now (a run that has just ended: once stored)."""
        run_id = _run_id(task_id)
        store = caller.app[STORE_KEY]
        record = await store.get_run(run_id, caller.tenant.name)  # RunNotFound: not visible
        await caller.app[MANAGER_KEY].settle(run_id)
        fold = TaskFold(run_id, record.question)
        stored = cast(AsyncGenerator[Event, None], store.events(run_id, tenant=caller.tenant.name))
        async with contextlib.aclosing(stored) as events:
            async for event in events:
                fold.apply(event)
        return fold

    def _live(self, caller: Caller, fold: TaskFold) -> AsyncIterator[Event]:
        """The run's committed events after the fold's last: stored tail, then live."""
        return caller.app[STORE_KEY].attach(fold.task_id, fold.last_seq,
                                            tenant=caller.tenant.name)

    async def _updates(self, caller: Caller, fold: TaskFold) -> AsyncGenerator[Update, None]:
        """The updates of the run's events after the fold's last, until the run ends.

        Through the same bounded buffer as the API's SSE: the run never waits for a
        slow client, and one that falls too far behind is cut off, told why.
        """
        feed = EventFeed(self._live(caller, fold), maxsize=caller.app[CONFIG_KEY].sse_buffer)
        async with feed:
            while batch := await feed.get_batch():
                for event in batch:
                    for update in fold.apply(event):
                        yield update
        if feed.detached_reason is not None:
            raise InternalError(message=f"the stream stopped ({feed.detached_reason}): "
                                "subscribe to the task again")

    @validate_request_params
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        validate_history_length(params)
        fold = await self._fold(_caller(context), params.id)
        return apply_history_length(fold.snapshot(), params)

    async def on_list_tasks(self, params: ListTasksRequest,
                            context: ServerCallContext) -> ListTasksResponse:
        raise UnsupportedOperationError(message="ListTasks is not served: list the tenant's "
                                        "runs with GET /v1/runs (a task id is a run id)")

    # --- starting and continuing ------------------------------------------------------------

    async def _start(self, caller: Caller, params: SendMessageRequest) -> str:
        """Start (or resume) the run a message asks for; return its id, the task id."""
        message = params.message
        if message.task_id:
            return await self._resume(caller, message)
        if message.context_id:
            raise InvalidParamsError(
                message="contextId: every task is its own context (contextId = taskId) and "
                        "no conversation is kept between tasks; send the message without one",
                data={"field": "message.contextId"})
        run = _run_request(params)
        app = caller.app
        collections = resolve_collections(
            caller.tenant, run.collections, defaults=app[CONFIG_KEY].default_collections,
            index=app[ENGINE_KEY].index, building=app.get(CORPUS_TASK_KEY))
        return await app[MANAGER_KEY].start(caller.tenant, run.question, mode=run.mode,
                                            collections=collections, budget=run.budget)

    async def _resume(self, caller: Caller, message: Message) -> str:
        run_id = _run_id(message.task_id)
        record = await caller.app[STORE_KEY].get_run(run_id, caller.tenant.name)
        if message.context_id and message.context_id != run_id:
            raise InvalidParamsError(message="contextId is not the context of this task",
                                     data={"field": "message.contextId"})
        try:
            if record.status != "interrupted":
                raise RunNotResumable(run_id, record.status)
            return await caller.app[MANAGER_KEY].resume(caller.tenant, run_id)
        except RunNotResumable as exc:
            raise UnsupportedOperationError(
                message=f"the task is {'still working' if exc.status == 'running' else 'over'}"
                        ": only an interrupted task (input-required) takes a message; send a "
                        "new message without taskId for a new task") from None

    @validate_request_params
    async def on_message_send(self, params: SendMessageRequest,
                              context: ServerCallContext) -> Task:
        """Start the run; answer its task once it ends, or at once with ``return_immediately``."""
        validate_history_length(params.configuration)
        caller = _caller(context)
        run_id = await self._start(caller, params)
        fold = await self._fold(caller, run_id)
        if not params.configuration.return_immediately:
            async with contextlib.aclosing(
                    cast(AsyncGenerator[Event, None], self._live(caller, fold))) as events:
                async for event in events:
                    fold.apply(event)
            await caller.app[MANAGER_KEY].settle(run_id)
        return apply_history_length(fold.snapshot(), params.configuration)

    @validate_request_params
    async def on_message_send_stream(self, params: SendMessageRequest,
                                     context: ServerCallContext,
                                     ) -> AsyncGenerator[A2aEvent, None]:
        """The task first, then its updates as the run goes, until it ends."""
        validate_history_length(params.configuration)
        caller = _caller(context)
        run_id = await self._start(caller, params)
        record = await caller.app[STORE_KEY].get_run(run_id, caller.tenant.name)
        fold = TaskFold(run_id, record.question)
        yield apply_history_length(fold.snapshot(), params.configuration)
        async for update in self._updates(caller, fold):
            yield update

    @validate_request_params
    async def on_subscribe_to_task(self, params: SubscribeToTaskRequest,
                                   context: ServerCallContext,
                                   ) -> AsyncGenerator[A2aEvent, None]:
        """The task as stored now, then its updates from the stored tail on, live."""
        caller = _caller(context)
        fold = await self._fold(caller, params.id)
        if fold.terminal:
            raise UnsupportedOperationError(
                message=f"the task is over ({TaskState.Name(fold.state)}): get it instead")
        yield fold.snapshot()
        async for update in self._updates(caller, fold):
            yield update

    # --- cancelling -------------------------------------------------------------------------

    @validate_request_params
    async def on_cancel_task(self, params: CancelTaskRequest,
                             context: ServerCallContext) -> Task:
        """Cancel the run and answer its task once the cancel is stored."""
        caller = _caller(context)
        fold = await self._fold(caller, params.id)
        if fold.terminal:
            raise TaskNotCancelableError(
                message=f"the task is over ({TaskState.Name(fold.state)})")
        answer = await cancel_anywhere(caller.app[MANAGER_KEY], fold.task_id, caller.tenant.name)
        if not answer.accepted:  # (recorded for the replica running it: it cancels there)
            fold = await self._fold(caller, fold.task_id)  # it may have ended meanwhile
            why = (f"the task is over ({TaskState.Name(fold.state)})" if fold.terminal else
                   "the task is not running on this server"
                   + (" (interrupted: resume it first)"
                      if fold.state == TaskState.TASK_STATE_INPUT_REQUIRED else ""))
            raise TaskNotCancelableError(message=why)
        events = cast(AsyncGenerator[Event, None], self._live(caller, fold))
        with contextlib.suppress(TimeoutError):
            async with contextlib.aclosing(events), asyncio.timeout(CANCEL_WAIT_S):
                async for _ in events:  # until the run's end is stored
                    pass
        return (await self._fold(caller, fold.task_id)).snapshot()

    # --- not offered ------------------------------------------------------------------------

    async def on_create_task_push_notification_config(
            self, params: TaskPushNotificationConfig,
            context: ServerCallContext) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(
            self, params: GetTaskPushNotificationConfigRequest,
            context: ServerCallContext) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(
            self, params: ListTaskPushNotificationConfigsRequest,
            context: ServerCallContext) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(
            self, params: DeleteTaskPushNotificationConfigRequest,
            context: ServerCallContext) -> None:
        raise PushNotificationNotSupportedError()

    async def on_get_extended_agent_card(self, params: GetExtendedAgentCardRequest,
                                         context: ServerCallContext) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError()
