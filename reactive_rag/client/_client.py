"""The remote client: the in-process API's shape over a server's HTTP API.

``Engine.start`` / ``engine.ask`` / ``async for event in handle`` become
``await client.start`` / ``await client.ask`` / ``async for event in run`` (or
``client.stream(question)``): the same typed events, decoded with the streams
codec, and the same :class:`~reactive_rag.engine.RunResult`, rebuilt from the
run's events with ``RunResult.from_events`` as the server rebuilds its own.

A run belongs to the server: a dropped connection never ends it, and
:meth:`RemoteClient.events` reconnects with ``Last-Event-ID`` (the last seq it
yielded), so the consumer sees each event once, in seq order, through
``run.finished``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import aiohttp
from pydantic import ValidationError
from yarl import URL

from reactive_rag.engine import Mode, RunResult
from reactive_rag.run import Budget
from streams import DecodeError, Event, RunFinished, decode_json

from ._errors import (
    ProtocolError,
    RemoteError,
    ServerUnreachable,
    StreamGap,
    problem_error,
)
from ._models import RunSummary
from ._retry import RetryPolicy
from ._sse import SseParser

__all__ = ["RemoteClient", "RemoteRun"]

_CONNECTION_ERRORS = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, TimeoutError)
"""A connection that failed, broke (a body cut short) or went silent: worth trying again."""


class RemoteClient:
    """A client of one reactive_rag server (``reactive-rag serve``).

    Use it as ``async with RemoteClient(url, token) as client:``, or call
    :meth:`aclose` when done.

    Args:
        base_url: the server's root (``http://127.0.0.1:8080``; a path prefix is kept).
            Not an absolute http(s) URL: ``ValueError``.
        token: the tenant's bearer token (``None`` for a server without tenants).
        session: an aiohttp session of yours (not closed by the client); default:
            one the client opens on first use and closes in :meth:`aclose`.
        timeout_s: limit on a plain request, and on connecting an event stream.
        read_timeout_s: an event stream silent this long is taken as broken and
            resumed (the server sends a keep-alive every 15 s by default).
        retry: when idempotent reads are tried again (:class:`RetryPolicy`).
    """

    def __init__(self, base_url: str, token: str | None = None, *,
                 session: aiohttp.ClientSession | None = None, timeout_s: float = 30.0,
                 read_timeout_s: float = 60.0, retry: RetryPolicy | None = None) -> None:
        url = URL(base_url)
        if not url.absolute or url.scheme not in ("http", "https"):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.retry = retry if retry is not None else RetryPolicy()
        self._headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        self._session = session
        self._own_session = session is None
        self._closed = False
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._stream_timeout = aiohttp.ClientTimeout(total=None, connect=timeout_s,
                                                     sock_read=read_timeout_s)

    async def __aenter__(self) -> Self:
        self._http()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the client's own session (a session given to it is left open)."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None and self._own_session:
            await session.close()

    # --- the in-process API's shape ---------------------------------------------------------

    async def start(self, question: str, *, mode: Mode = "agent",
                    collections: Sequence[str] | None = None,
                    budget: Budget | Mapping[str, Any] | None = None) -> RemoteRun:
        """Start a run on the server and return its handle once the server has stored it.

        Never retried: on any error no run was started, or the caller cannot know
        (:class:`ServerUnreachable` after the request was sent).

        Raises:
            InvalidRequest: the server refused the options (blank question, bad budget,
                unindexed collection).
            Forbidden: a collection the tenant may not search.
            RateLimited: the tenant is at its limit (``retry_after`` says when to try).
            Unauthorized, Unavailable, RemoteError, ServerUnreachable.
        """
        body: dict[str, Any] = {"question": question, "mode": mode}
        if collections is not None:
            body["collections"] = list(collections)
        if budget is not None:
            body["budget"] = (dataclasses.asdict(budget) if isinstance(budget, Budget)
                              else dict(budget))
        answer = await self._call("POST", "/v1/runs", body=body, expect=201)
        run_id = answer.get("run_id") if isinstance(answer, dict) else None
        if not isinstance(run_id, str):
            raise ProtocolError("POST /v1/runs answered without a run_id")
        return RemoteRun(self, run_id)

    async def ask(self, question: str, *, mode: Mode = "agent",
                  collections: Sequence[str] | None = None,
                  budget: Budget | Mapping[str, Any] | None = None) -> RunResult:
        """Start a run and wait for its result (the in-process ``ask``'s result, rebuilt).

        Raises:
            the errors of :meth:`start` and of :meth:`events`.
        """
        run = await self.start(question, mode=mode, collections=collections, budget=budget)
        return await run.wait()

    async def stream(self, question: str, *, mode: Mode = "agent",
                     collections: Sequence[str] | None = None,
                     budget: Budget | Mapping[str, Any] | None = None,
                     ) -> AsyncGenerator[Event, None]:
        """Start a run and yield its events through ``run.finished`` (resuming as
        :meth:`events` does); ``event.run_id`` names the run."""
        run = await self.start(question, mode=mode, collections=collections, budget=budget)
        async with contextlib.aclosing(self.events(run.run_id)) as events:
            async for event in events:
                yield event

    async def events(self, run_id: str, after: int = 0) -> AsyncGenerator[Event, None]:
        """A stored or live run's events with ``seq > after``, in order, through its end.

        When the connection drops, goes silent past ``read_timeout_s``, or the server
        detaches this client for being slow, the client reconnects with
        ``Last-Event-ID`` set to the last seq it yielded (waiting as ``retry`` says) and
        goes on: each event is yielded once, and a seq the server sends again is
        dropped. The stream ends when the server ends it after ``run.finished`` (an
        interrupted run that is resumed goes on past its ``run.finished(interrupted)``).
        Leaving the loop early leaves the run alone (close the generator, e.g. with
        ``contextlib.aclosing``, to hang up at once).

        Raises:
            ValueError: ``after`` is negative.
            NotFound: no such run (or another tenant's).
            StreamGap: the server skipped a seq (events were lost on the way).
            ServerUnreachable: ``retry.attempts`` reconnections in a row brought no event.
            ProtocolError: what came was not the run's event stream.
            Unauthorized, RateLimited, Unavailable (unless ``retry.retry_busy``).
        """
        if after < 0:
            raise ValueError(f"after must be >= 0, got {after}")
        last = after
        failures = 0
        while True:
            ended = False
            try:
                async with self._open_stream(run_id, last) as response:
                    parser = SseParser()
                    async for chunk in response.content.iter_any():
                        for message in parser.feed(chunk):
                            if message.event == "detached":
                                ended = False
                                continue  # the server closes next; resume after `last`
                            event = _decode(run_id, message.data)
                            ended = isinstance(event, RunFinished)
                            if event.seq <= last:
                                continue  # already yielded (or before `after`)
                            if event.seq != last + 1:
                                raise StreamGap(run_id, last, event.seq)
                            last, failures = event.seq, 0
                            yield event
                if ended:
                    return  # the server ended the stream after run.finished
                cause: BaseException = ProtocolError("the stream ended before run.finished")
            except _CONNECTION_ERRORS as exc:
                cause = exc
            failures += 1
            if failures > self.retry.attempts:
                raise ServerUnreachable(
                    f"run {run_id}: gave up resuming after {self.retry.attempts} "
                    f"reconnection(s) without a new event: {cause}") from cause
            await asyncio.sleep(self.retry.delay_s(failures))

    async def get(self, run_id: str) -> RunSummary:
        """The run's summary: status, outcome and, once it ended, answer and citations.

        Raises:
            NotFound: no such run (or another tenant's).
            Unauthorized, RateLimited, Unavailable (unless ``retry.retry_busy``),
            ServerUnreachable, ProtocolError.
        """
        answer = await self._call("GET", f"/v1/runs/{_segment(run_id)}", expect=200)
        try:
            return RunSummary.model_validate(answer)
        except ValidationError as exc:
            raise ProtocolError(f"GET /v1/runs/{{id}} answered an unexpected body: "
                                f"{exc.error_count()} error(s)") from exc

    async def cancel(self, run_id: str) -> bool:
        """Ask the server to stop the run; False if it had already ended (never retried).

        Raises:
            NotFound: no such run (or another tenant's).
            Unauthorized, RemoteError, ServerUnreachable.
        """
        answer = await self._call("POST", f"/v1/runs/{_segment(run_id)}/cancel", expect=202)
        cancelled = answer.get("cancelled") if isinstance(answer, dict) else None
        if not isinstance(cancelled, bool):
            raise ProtocolError("the cancel answer has no `cancelled`")
        # `accepted`: also true when another replica runs it and will cancel it there
        accepted = answer.get("accepted", cancelled) if isinstance(answer, dict) else None
        if not isinstance(accepted, bool):
            raise ProtocolError("the cancel answer's `accepted` is not a boolean")
        return accepted

    # --- HTTP -------------------------------------------------------------------------------

    def _http(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("this RemoteClient is closed")
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session

    async def _call(self, method: str, path: str, *, body: Any = None, expect: int) -> Any:
        """One JSON request; GETs are retried as ``retry`` says, POSTs never."""
        failures = 0
        while True:
            try:
                async with self._http().request(
                        method, self.base_url + path, json=body, timeout=self._timeout,
                        headers={**self._headers, "Accept": "application/json"}) as response:
                    data = await _json(response)
                    if response.status == expect:
                        return data
                    error = problem_error(response.status, data, response.headers)
            except _CONNECTION_ERRORS as exc:
                if method != "GET":
                    raise ServerUnreachable(f"{method} {path}: {exc}") from exc
                failures += 1
                if failures > self.retry.attempts:
                    raise ServerUnreachable(f"{method} {path}: {exc}") from exc
                await asyncio.sleep(self.retry.delay_s(failures))
                continue
            failures += 1
            if method != "GET" or not self._wait_busy(error, failures):
                raise error
            await asyncio.sleep(error.retry_after or 0.0)

    def _wait_busy(self, error: RemoteError, failures: int) -> bool:
        """Whether a read answered 429/503 is to be tried again after ``Retry-After``."""
        return (self.retry.retry_busy and error.status in (429, 503)
                and error.retry_after is not None
                and error.retry_after <= self.retry.max_retry_after_s
                and failures <= self.retry.attempts)

    @contextlib.asynccontextmanager
    async def _open_stream(self, run_id: str, after: int) -> AsyncIterator[aiohttp.ClientResponse]:
        """The run's SSE response after ``after`` (a busy server waited for if ``retry`` says)."""
        failures = 0
        url = f"{self.base_url}/v1/runs/{_segment(run_id)}/events"
        headers = {**self._headers, "Accept": "text/event-stream", "Last-Event-ID": str(after)}
        while True:
            response = await self._http().get(url, headers=headers, timeout=self._stream_timeout)
            try:
                if response.status == 200:
                    ctype = response.headers.get("Content-Type", "")
                    if not ctype.startswith("text/event-stream"):
                        raise ProtocolError(f"the events route answered {ctype or 'no type'}, "
                                            "not text/event-stream")
                    yield response
                    return
                error = problem_error(response.status, await _json(response), response.headers)
            finally:
                response.release()
            failures += 1
            if not self._wait_busy(error, failures):
                raise error
            await asyncio.sleep(error.retry_after or 0.0)


class RemoteRun:
    """A run started on (or found on) a server: the remote twin of ``RunHandle``.

    ``async for event in run`` yields its events from the first through ``run.finished``
    (resuming on disconnect); :meth:`events` starts after a given seq.
    """

    def __init__(self, client: RemoteClient, run_id: str) -> None:
        self.client = client
        self.run_id = run_id

    def events(self, after: int = 0) -> AsyncGenerator[Event, None]:
        """The run's events with ``seq > after`` (see :meth:`RemoteClient.events`)."""
        return self.client.events(self.run_id, after)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self.events()

    async def wait(self) -> RunResult:
        """The result once the run has ended, rebuilt from its whole event log."""
        async with contextlib.aclosing(self.events()) as stream:
            log = [event async for event in stream]
        return RunResult.from_events(log)

    async def cancel(self) -> bool:
        """Ask the server to stop the run; it ends ``cancelled`` (False if it had ended)."""
        return await self.client.cancel(self.run_id)

    async def summary(self) -> RunSummary:
        """The server's summary of the run (see :meth:`RemoteClient.get`)."""
        return await self.client.get(self.run_id)


def _segment(run_id: str) -> str:
    return quote(run_id, safe="")


def _decode(run_id: str, data: str) -> Event:
    try:
        event = decode_json(data)
    except DecodeError as exc:
        raise ProtocolError(f"run {run_id}: an event could not be read: {exc}") from exc
    if event.run_id != run_id:
        raise ProtocolError(f"an event of run {event.run_id} came on run {run_id}'s stream")
    return event


async def _json(response: aiohttp.ClientResponse) -> Any:
    """The body as JSON, or ``None`` if it is not JSON (an error answer still gets typed)."""
    try:
        return await response.json(content_type=None)
    except (ValueError, UnicodeDecodeError):
        return None

