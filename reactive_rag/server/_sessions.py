"""Conversation sessions over HTTP: follow-up questions read against earlier turns.

A session is stored in the run store (so it survives a restart and is seen by
every replica) as the JSON of a :class:`~reactive_rag.conversation.SessionState`,
tenant-scoped exactly like runs (the same 404 for a missing, expired or another
tenant's session). ``POST /v1/sessions/{id}/runs`` reads the question against
the conversation (:func:`~reactive_rag.conversation.aprepare_turn`), starts the
run of its standalone rewrite through the run manager, and once the run ends
:class:`SessionManager` appends the turn (:func:`~reactive_rag.conversation.arecord_turn`)
and saves the session, whether or not the client is still connected. One run
at a time per session (in this process): a second one while the first is
going is a 409 ``session_busy``. Sessions live ``ttl_s`` after their last use
(every request about one, and every turn's end, slides it); a periodic sweep
deletes the expired ones and what this process kept about them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Annotated, Any, cast

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from reactive_rag.conversation import PreparedTurn, SessionState, aprepare_turn, arecord_turn
from reactive_rag.engine import RunHandle, RunResult
from reactive_rag.store import SessionNotFound, SessionStore, StoreError, session_id_ok
from streams import Event

from ._auth import Tenant
from ._config import SESSION_TTL_CAP_S, ServerConfig
from ._models import RunRequest
from ._periodic import repeat
from ._problems import make_problem, session_not_found
from ._requests import (
    CONFIG_KEY,
    STORE_KEY,
    json_body,
    request_tenant,
    run_links,
    scoped_collections,
)
from ._runs import RunManager

__all__ = ["SESSIONS_KEY", "SessionManager", "SessionRequest", "session_routes"]

log = logging.getLogger("reactive_rag.server")

session_routes = web.RouteTableDef()
"""The routes of this module; ``create_app`` adds them."""

SETTLE_S = 5.0
"""How long a request waits for a finished run's turn to be saved before it answers."""


class SessionRequest(BaseModel):
    """Body of ``POST /v1/sessions`` (optional)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    ttl_s: Annotated[StrictInt | StrictFloat, Field(ge=1, le=SESSION_TTL_CAP_S)] | None = None
    """Idle lifetime; cut to the server's ``session_max_ttl_s`` (default ``session_ttl_s``)."""


@dataclass(slots=True)
class _Turn:
    """The run going on in a session (``handle`` is None until it has started)."""

    run_id: str | None = None
    handle: RunHandle | None = None
    task: asyncio.Task[None] | None = None


class SessionManager:
    """Starts the runs of sessions, saves their turns when they end, sweeps expired sessions.

    Args:
        store: where sessions are kept.
        runs: starts and records the runs.
        sweep_interval_s: how often expired sessions are deleted.
    """

    def __init__(self, store: SessionStore, runs: RunManager, *, sweep_interval_s: float) -> None:
        self.store = store
        self.runs = runs
        self._interval = sweep_interval_s
        self._busy: dict[str, _Turn] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    @classmethod
    def for_config(cls, store: SessionStore, runs: RunManager,
                   config: ServerConfig) -> SessionManager:
        """A manager sweeping every quarter of the session TTL (at most every minute)."""
        return cls(store, runs, sweep_interval_s=min(60.0, max(0.05, config.session_ttl_s / 4)))

    def start(self) -> SessionManager:
        """Start the periodic sweep; returns ``self``."""
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(
                repeat(self.sweep, interval_s=self._interval, what="session sweep"),
                name="session-sweeper")
        return self

    def busy(self, session_id: str) -> bool:
        """Whether a run of this session is going on (or its turn is being saved) here."""
        return session_id in self._busy

    def run_of(self, session_id: str) -> str | None:
        """The id of the session's run going on here, if any."""
        turn = self._busy.get(session_id)
        return None if turn is None else turn.run_id

    async def settle(self, session_id: str, timeout_s: float = SETTLE_S) -> bool:
        """If the session's run has ended, wait (at most ``timeout_s``) until its turn is saved.

        A client that saw ``run.finished`` and asks again at once must see the
        turn, and may ask its follow-up without a 409. True if it waited.
        """
        turn = self._busy.get(session_id)
        if turn is None or turn.task is None or turn.handle is None \
                or turn.handle.stream.finished is None:
            return False
        await asyncio.wait([turn.task], timeout=timeout_s)
        return True

    async def start_turn(self, tenant: Tenant, session_id: str, run: RunRequest,
                         collections: tuple[str, ...]) -> tuple[str, PreparedTurn]:
        """Start the session's next run; return its id and how its question was read.

        Runs in a task of its own, so a client that disconnects meanwhile
        neither stops it half-way nor loses the turn.

        Raises:
            Problem: 409 ``session_busy``, a run of this session is going on.
            SessionNotFound, RateLimited, RunConfigError, StoreError: as the
                store and :meth:`RunManager.start` raise them (nothing started).
        """
        if session_id in self._busy:
            raise make_problem(409, "session_busy", "this session's previous run is still "
                               "going: wait for its run.finished, then ask again")
        turn = self._busy[session_id] = _Turn()
        task = asyncio.get_running_loop().create_task(
            self._start(tenant, session_id, run, collections, turn),
            name=f"session-start:{session_id}")
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return await asyncio.shield(task)

    def _done(self, task: asyncio.Task[Any]) -> None:
        """Forget a finished task; an error nobody awaited (the client left) is only logged."""
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("a session task ended with %r", task.exception())

    async def _start(self, tenant: Tenant, session_id: str, run: RunRequest,
                     collections: tuple[str, ...], turn: _Turn) -> tuple[str, PreparedTurn]:
        try:
            # Read after marking it busy: the previous turn's save is in what we read.
            record = await self.store.get_session(session_id, tenant.name, touch=False)
            state = _state(record.data, session_id)
            engine = self.runs.engine_for(tenant.name)
            prepared = await aprepare_turn(state, run.question, engine.judgement.followups,
                                           engine.rewriter)
            run_id = await self.runs.start(tenant, prepared.standalone, mode=run.mode,
                                           collections=collections, budget=run.budget,
                                           context=prepared.context, here=True)
        except BaseException:
            if self._busy.get(session_id) is turn:
                del self._busy[session_id]
            raise
        active = self.runs.active.get(run_id)
        turn.run_id = run_id
        turn.handle = active.handle if active is not None else None
        turn.task = asyncio.get_running_loop().create_task(
            self._record(tenant.name, session_id, prepared, run_id, turn),
            name=f"session-turn:{session_id}")
        self._tasks.add(turn.task)
        turn.task.add_done_callback(self._done)
        return run_id, prepared

    async def _record(self, tenant: str, session_id: str, prepared: PreparedTurn, run_id: str,
                      turn: _Turn) -> None:
        """Wait for the run, then append its turn and save the session (errors are logged)."""
        try:
            result = await self._result(run_id, tenant, turn.handle)
            record = await self.store.get_session(session_id, tenant, touch=False)
            state = await arecord_turn(_state(record.data, session_id), prepared, run_id,
                                       result, self.runs.engine_for(tenant).rewriter)
            await self.store.save_session(session_id, state.to_json(), tenant=tenant)
        except SessionNotFound:
            log.info("session %s ended before its run %s did: the turn is not kept",
                     session_id, run_id)
        except (StoreError, ValueError) as exc:
            log.warning("session %s: the turn of run %s was not saved: %s: %s", session_id,
                        run_id, type(exc).__name__, exc)
        except Exception:
            log.exception("session %s: the turn of run %s was not saved", session_id, run_id)
        finally:
            if self._busy.get(session_id) is turn:
                del self._busy[session_id]

    async def _result(self, run_id: str, tenant: str, handle: RunHandle | None) -> RunResult:
        """The run's result: from its handle, or (if that failed) from its stored events."""
        if handle is not None:
            try:
                return await handle.wait()
            except Exception as exc:
                log.warning("run %s of a session: %s: %s", run_id, type(exc).__name__, exc)
        await self.runs.settle(run_id)
        replay = cast(AsyncGenerator[Event, None], self.runs.store.events(run_id, tenant=tenant))
        async with contextlib.aclosing(replay) as stored:
            return RunResult.from_events([event async for event in stored])

    def forget(self, session_id: str) -> None:
        """Drop what this process keeps about a session (its run, if any, goes on)."""
        self._busy.pop(session_id, None)

    async def sweep(self) -> list[str]:
        """Delete the expired sessions from the store and here; return their ids."""
        swept = await self.store.sweep_sessions()
        for session_id in swept:
            self.forget(session_id)
        if swept:
            log.info("swept %d expired session(s)", len(swept))
        return swept

    async def aclose(self, timeout_s: float = 10.0) -> None:
        """Stop sweeping; give the turns of ended runs ``timeout_s`` to be saved."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        pending = [task for task in self._tasks if not task.done()]
        if pending:
            _done, late = await asyncio.wait(pending, timeout=timeout_s)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        self._busy.clear()


SESSIONS_KEY = web.AppKey("sessions", SessionManager)


def _state(data: dict[str, Any], session_id: str) -> SessionState:
    try:
        return SessionState.from_json(data)
    except ValueError as exc:
        raise StoreError(f"session {session_id!r} holds no valid state: {exc}") from exc


# --- routes ---------------------------------------------------------------------------------


def _session_id(request: web.Request) -> str:
    session_id = request.match_info["session_id"]
    if not session_id_ok(session_id):
        raise session_not_found()  # a malformed id is just an id that does not exist
    return session_id


def _session_links(session_id: str) -> dict[str, str]:
    base = f"/v1/sessions/{session_id}"
    return {"self": base, "runs": f"{base}/runs"}


def _validated(model: type[BaseModel], body: Any) -> Any:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        raise make_problem(422, "validation_failed", f"{where or 'body'}: {err['msg']}"[:300],
                           field=where or None) from None


@session_routes.post("/v1/sessions")
async def create_session(request: web.Request) -> web.Response:
    tenant = request_tenant(request)
    config = request.app[CONFIG_KEY]
    body = await json_body(request, config.max_body_bytes) if request.body_exists else {}
    asked = cast(SessionRequest, _validated(SessionRequest, body))
    ttl_s = min(float(asked.ttl_s or config.session_ttl_s), config.session_max_ttl_s)
    session_id = uuid.uuid4().hex
    state = SessionState.new(session_id, tenant.name)
    record = await request.app[STORE_KEY].create_session(session_id, tenant.name,
                                                         state.to_json(), ttl_s=ttl_s)
    return web.json_response(
        {"session_id": session_id, "links": _session_links(session_id),
         "expires": record.expires_at},
        status=201, headers={"Location": f"/v1/sessions/{session_id}"})


@session_routes.get("/v1/sessions/{session_id}")
async def get_session(request: web.Request) -> web.Response:
    tenant = request_tenant(request)
    session_id = _session_id(request)
    sessions = request.app[SESSIONS_KEY]
    store = request.app[STORE_KEY]
    record = await store.get_session(session_id, tenant.name)  # 404 first; a use: slides the TTL
    if await sessions.settle(session_id):
        record = await store.get_session(session_id, tenant.name, touch=False)
    state = _state(record.data, session_id)
    return web.json_response({
        "session_id": session_id,
        "created": record.created_at,
        "updated": record.updated_at,
        "expires": record.expires_at,
        "turns": [{"run_id": t.run_id, "question": t.question, "standalone": t.standalone,
                   "outcome": t.outcome, "answer": t.answer} for t in state.turns],
        "summary": state.summary.text,
        "busy": sessions.busy(session_id),
    })


@session_routes.delete("/v1/sessions/{session_id}")
async def delete_session(request: web.Request) -> web.Response:
    tenant = request_tenant(request)
    session_id = _session_id(request)
    if not await request.app[STORE_KEY].delete_session(session_id, tenant.name):
        raise session_not_found()
    request.app[SESSIONS_KEY].forget(session_id)
    return web.Response(status=204)


@session_routes.post("/v1/sessions/{session_id}/runs")
async def start_session_run(request: web.Request) -> web.Response:
    tenant = request_tenant(request)
    session_id = _session_id(request)
    config = request.app[CONFIG_KEY]
    body = await json_body(request, config.max_body_bytes)
    run = cast(RunRequest, _validated(RunRequest, body))
    sessions = request.app[SESSIONS_KEY]
    store = request.app[STORE_KEY]
    await store.get_session(session_id, tenant.name)  # 404 first; a use: slides the TTL
    collections = scoped_collections(request, tenant, run.collections)
    await sessions.settle(session_id)
    run_id, prepared = await sessions.start_turn(tenant, session_id, run, collections)
    return web.json_response(
        {"run_id": run_id, "session_id": session_id, "question": prepared.question,
         "standalone": prepared.standalone, "links": run_links(run_id)},
        status=201, headers={"Location": f"/v1/runs/{run_id}"})

