"""The remote client against a real server on loopback: same results and events as in
process, resume across a cut connection, typed errors.

The resume tests that need a server to misbehave on purpose (send a seq twice, skip one,
detach the client, answer 503) run against a scripted aiohttp server on loopback.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from reactive_rag.client import (
    Forbidden,
    NotFound,
    RateLimited,
    RemoteClient,
    RetryPolicy,
    ServerUnreachable,
    StreamGap,
    Unauthorized,
    Unavailable,
)
from reactive_rag.engine import RunResult
from reactive_rag.events import EVENT_TYPES, BudgetTick, Event, RunFinished, RunStarted
from reactive_rag.index import CorpusIndex
from streams import encode_json

from .._server_fixtures import (
    QUESTION,
    TOKENS,
    GatedPlanner,
    auth,
    read_sse,
    serve,
    start_run,
    two_tenants,
)
from .._tcp_proxy import TcpProxy

FAST = RetryPolicy(attempts=40, first_delay_s=0.02, max_delay_s=0.2)
"""Quick reconnections, and enough of them to outlast a proxy being restarted."""


def url_of(client: TestClient[Any, Any]) -> str:
    return str(client.make_url(""))


async def stored_log(client: TestClient[Any, Any], run_id: str,
                     tenant: str | None = None) -> list[dict[str, Any]]:
    """The run's whole stored log, read straight from the server's SSE route."""
    async with client.get(f"/v1/runs/{run_id}/events",
                          headers=auth(tenant) if tenant else None) as resp:
        return [m.data for m in (await read_sse(resp)).events]


def as_json(events: list[Event]) -> list[dict[str, Any]]:
    return [json.loads(encode_json(e)) for e in events]


@contextmanager
def gated() -> Iterator[asyncio.Event]:
    """Runs stop before their first plan until the gate opens."""
    GatedPlanner.gate = asyncio.Event()
    try:
        yield GatedPlanner.gate
    finally:
        GatedPlanner.gate = None


# --- the in-process API's results, remotely ---------------------------------------------------


async def test_ask_returns_the_answer_citations_and_outcome_the_server_stored(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client, RemoteClient(url_of(client)) as remote:
        result = await remote.ask(QUESTION, collections=["demo"], budget={"max_tool_calls": 6})
        assert isinstance(result, RunResult)
        assert result.outcome == "answered" and "1863" in result.answer
        assert result.citations and all(c.chunk is not None and c.claim.quote in c.chunk.text
                                        for c in result.citations)
        stored = await (await client.get(f"/v1/runs/{result.run_id}")).json()
        assert (stored["outcome"], stored["answer"], stored["reason"]) == (
            result.outcome, result.answer, result.reason)
        assert stored["citations"] == [c.to_json() for c in result.citations]
        summary = await remote.get(result.run_id)
        assert summary.done and summary.status == "finished" and summary.outcome == "answered"
        assert summary.question == QUESTION and summary.collections == ("demo",)
        assert [c.model_dump() for c in summary.citations] == stored["citations"]
        assert summary.last_seq == result.events[-1].seq
        assert as_json(list(result.events)) == await stored_log(client, result.run_id)


async def test_stream_yields_the_runs_typed_events_in_seq_order_through_run_finished(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client, RemoteClient(url_of(client)) as remote:
        events = [e async for e in remote.stream(QUESTION, collections=["demo"], mode="rag")]
        assert all(type(e) is EVENT_TYPES[e.type] for e in events)
        assert isinstance(events[0], RunStarted) and events[0].mode == "rag"
        assert isinstance(events[-1], RunFinished) and events[-1].outcome == "answered"
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        run_id = events[0].run_id
        assert as_json(events) == await stored_log(client, run_id)
        # the result rebuilt from the streamed events is the one ask would return
        assert RunResult.from_events(events).answer == (await remote.get(run_id)).answer


async def test_events_of_a_finished_run_replay_it_all_or_the_rest_after_a_seq(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client, RemoteClient(url_of(client)) as remote:
        run_id = await start_run(client, collections=["demo"])
        log = await stored_log(client, run_id)  # (read to its end: the run has finished)
        assert as_json([e async for e in remote.events(run_id)]) == log
        assert as_json([e async for e in remote.events(run_id, after=5)]) == log[5:]
        # past the end there is nothing more (the server's repeat of the end is not news)
        assert [e async for e in remote.events(run_id, after=len(log))] == []
        run = await remote.start(QUESTION, collections=["demo"])
        assert (await run.wait()).outcome == "answered"
        assert [e.seq async for e in run] == list(range(1, (await run.summary()).last_seq + 1))
        with pytest.raises(ValueError, match="after"):
            _ = [e async for e in remote.events(run_id, after=-1)]


# --- resume --------------------------------------------------------------------------------


class CountingProxy(TcpProxy):
    """The loopback proxy, counting the connections it accepted."""

    accepted = 0

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        await super()._accept(reader, writer)


async def test_a_connection_cut_mid_run_is_resumed_and_every_event_arrives_once(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    with gated() as gate:
        async with serve(tmp_path, server_index, planner=GatedPlanner) as client:
            assert client.port is not None
            proxy = CountingProxy("127.0.0.1", client.port)
            await proxy.start()
            try:
                async with RemoteClient(f"http://127.0.0.1:{proxy.port}", retry=FAST) as remote:
                    run = await remote.start(QUESTION, collections=["demo"])
                    seen: list[Event] = []
                    some = asyncio.Event()

                    async def consume() -> None:
                        async for event in run:
                            seen.append(event)
                            if len(seen) >= 2:
                                some.set()

                    consumer = asyncio.create_task(consume())
                    await asyncio.wait_for(some.wait(), 30)
                    before_cut = len(seen)
                    connections = proxy.accepted
                    await proxy.stop()  # every open connection dropped, new ones refused
                    await proxy.start()  # same port: the client's retries get through
                    gate.set()  # the rest of the run happens after the cut
                    await asyncio.wait_for(consumer, 60)
            finally:
                await proxy.stop()
            log = await stored_log(client, run.run_id)
    assert proxy.accepted > connections, "the client did not reconnect"
    assert before_cut < len(log)
    assert [e.seq for e in seen] == list(range(1, len(log) + 1))
    assert as_json(seen) == log
    assert isinstance(seen[-1], RunFinished) and seen[-1].outcome == "answered"


def _log(run_id: str, n: int) -> list[Event]:
    """A made-up run of ``n`` events: started, ticks, finished."""
    middle: list[Event] = [BudgetTick(run_id=run_id, seq=s, steps=s) for s in range(2, n)]
    return [RunStarted(run_id=run_id, seq=1, question="q"), *middle,
            RunFinished(run_id=run_id, seq=n, outcome="answered", answer="a")]


Answer = Callable[[web.Request], Awaitable[web.StreamResponse]]


def sse(events: list[Event], *, then: str = "end") -> Answer:
    """An SSE answer of ``events``; ``then``: ``end`` cleanly, ``drop`` the connection,
    or ``detach`` the client as the server does for a slow one."""

    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"retry: 1000\n\n")
        for e in events:
            await response.write(f"id: {e.seq}\nevent: {e.type}\ndata: {encode_json(e)}\n\n"
                                 .encode())
        if then == "drop":
            await response.write(b"id: 99\nevent: budget.tick\ndata: {\"ty")  # cut mid-event
            assert request.transport is not None
            request.transport.close()
            return response
        if then == "detach":
            await response.write(b': detached\nevent: detached\ndata: {"reason": "slow"}\n\n')
        await response.write_eof()
        return response

    return answer


def problem(status: int, retry_after: str) -> Answer:
    async def answer(request: web.Request) -> web.StreamResponse:
        return web.json_response({"type": "urn:x", "title": "busy", "status": status,
                                  "code": "store_unavailable", "detail": "try later"},
                                 status=status, headers={"Retry-After": retry_after})

    return answer


@asynccontextmanager
async def scripted(*answers: Answer) -> AsyncIterator[tuple[str, list[str | None]]]:
    """A server whose events route gives ``answers`` in turn; yields its URL and the
    ``Last-Event-ID`` of each request."""
    asked: list[str | None] = []
    queue = iter(answers)

    async def events(request: web.Request) -> web.StreamResponse:
        asked.append(request.headers.get("Last-Event-ID"))
        return await next(queue)(request)

    app = web.Application()
    app.router.add_get("/v1/runs/{run_id}/events", events)
    async with TestServer(app, host="127.0.0.1") as server:
        yield str(server.make_url("")), asked


async def test_a_seq_sent_again_after_a_reconnection_is_not_yielded_twice() -> None:
    log = _log("r1", 6)
    # the second server replays from seq 2 (as a lagging replica could): 2 and 3 are old
    async with scripted(sse(log[:3], then="drop"), sse(log[1:])) as (url, asked), \
            RemoteClient(url, retry=FAST) as remote:
        got = [e async for e in remote.events("r1")]
    assert asked == ["0", "3"]
    assert got == log


async def test_a_detached_client_resumes_where_it_was() -> None:
    log = _log("r1", 5)
    async with scripted(sse(log[:2], then="detach"), sse(log[2:])) as (url, asked), \
            RemoteClient(url, retry=FAST) as remote:
        got = [e async for e in remote.events("r1", after=0)]
    assert asked == ["0", "2"] and got == log


async def test_a_gap_in_the_seqs_is_an_error_not_a_silent_hole() -> None:
    log = _log("r1", 6)
    async with scripted(sse([*log[:2], *log[3:]])) as (url, _), \
            RemoteClient(url, retry=FAST) as remote:
        got: list[Event] = []
        with pytest.raises(StreamGap) as caught:
            async for event in remote.events("r1"):
                got.append(event)
    assert got == log[:2]
    assert (caught.value.last, caught.value.got, caught.value.run_id) == (2, 4, "r1")


async def test_a_busy_server_is_waited_for_only_when_asked() -> None:
    log = _log("r1", 3)
    async with scripted(problem(503, "0"), sse(log)) as (url, asked), \
            RemoteClient(url, retry=FAST) as remote:
        with pytest.raises(Unavailable) as caught:
            _ = [e async for e in remote.events("r1")]
    assert caught.value.retry_after == 0.0 and caught.value.code == "store_unavailable"
    assert asked == ["0"]
    patient = RetryPolicy(attempts=3, first_delay_s=0.01, max_delay_s=0.01, retry_busy=True)
    async with scripted(problem(503, "0"), problem(429, "0"), sse(log)) as (url, asked), \
            RemoteClient(url, retry=patient) as remote:
        assert [e async for e in remote.events("r1")] == log
    assert asked == ["0", "0", "0"]


async def test_a_server_that_stays_away_ends_the_stream_with_server_unreachable() -> None:
    log = _log("r1", 6)
    proxies: list[TcpProxy] = []
    received = asyncio.Event()

    async def then_go_away(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for e in log[:2]:
            await response.write(f"id: {e.seq}\nevent: {e.type}\ndata: {encode_json(e)}\n\n"
                                 .encode())
        await received.wait()
        await proxies[0].stop()  # the connection drops and the port refuses from now on
        return response

    async with scripted(then_go_away) as (url, asked):
        proxy = TcpProxy("127.0.0.1", int(url.rstrip("/").rpartition(":")[2]))
        proxies.append(proxy)
        await proxy.start()
        remote = RemoteClient(f"http://127.0.0.1:{proxy.port}",
                              retry=RetryPolicy(attempts=2, first_delay_s=0.01, max_delay_s=0.01))
        got: list[Event] = []
        try:
            with pytest.raises(ServerUnreachable, match="2 reconnection"):
                async for event in remote.events("r1"):
                    got.append(event)
                    if len(got) == 2:
                        received.set()
        finally:
            await remote.aclose()
            await proxy.stop()
    assert asked == ["0"]
    assert got == log[:2]  # what came before the server went away was yielded once


# --- errors ---------------------------------------------------------------------------------


async def test_a_wrong_token_is_unauthorized_and_another_tenants_run_is_not_found(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        run_id = await start_run(client, "beta", collections=["secret"])
        async with RemoteClient(url_of(client), "not-a-token") as wrong:
            with pytest.raises(Unauthorized) as caught:
                await wrong.start(QUESTION)
            assert (caught.value.status, caught.value.code) == (401, "unauthorized")
            with pytest.raises(Unauthorized):
                await wrong.get(run_id)
            with pytest.raises(Unauthorized):
                _ = [e async for e in wrong.events(run_id)]
        async with RemoteClient(url_of(client), TOKENS["acme"]) as acme:
            with pytest.raises(NotFound):
                await acme.get(run_id)
            with pytest.raises(Forbidden) as forbidden:
                await acme.start(QUESTION, collections=["secret"])
            assert forbidden.value.code == "collection_forbidden"
            assert forbidden.value.field == "collections"
        async with RemoteClient(url_of(client), TOKENS["beta"]) as beta:
            assert (await beta.get(run_id)).run_id == run_id


async def test_an_unknown_run_is_not_found_on_every_call(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client, RemoteClient(url_of(client)) as remote:
        for call in (remote.get, remote.cancel):
            with pytest.raises(NotFound) as caught:
                await call("nosuchrun")
            assert (caught.value.status, caught.value.code) == (404, "run_not_found")
            assert isinstance(caught.value, LookupError)
        with pytest.raises(NotFound):
            _ = [e async for e in remote.events("nosuchrun")]


async def test_a_session_of_the_callers_is_used_and_left_open(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client, aiohttp.ClientSession() as session:
        async with RemoteClient(url_of(client), session=session) as remote:
            result = await remote.ask(QUESTION, collections=["demo"])
        assert not session.closed
        async with session.get(f"{url_of(client)}/v1/runs/{result.run_id}") as resp:
            assert (await resp.json())["outcome"] == result.outcome
        with pytest.raises(RuntimeError, match="closed"):
            await remote.get(result.run_id)
    with pytest.raises(ValueError, match="base_url"):
        RemoteClient("127.0.0.1:8080")


async def test_cancelling_a_running_run_ends_it_cancelled(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    with gated():
        async with serve(tmp_path, server_index, planner=GatedPlanner) as client, \
                RemoteClient(url_of(client)) as remote:
            run = await remote.start(QUESTION, collections=["demo"])
            seen: list[Event] = []
            async for event in run:
                seen.append(event)
                if len(seen) == 1:  # the run is going: it waits at its first plan
                    assert not (await run.summary()).done
                    assert await run.cancel() is True
            assert isinstance(seen[-1], RunFinished) and seen[-1].outcome == "cancelled"
            assert await run.cancel() is False  # already ended
            summary = await run.summary()
            assert summary.outcome == "cancelled" and summary.done
            assert (await run.wait()).outcome == "cancelled"


async def test_a_rate_limited_start_raises_with_retry_after_and_is_never_retried(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    patient = RetryPolicy(retry_busy=True)  # even so: a POST that starts a run is not retried
    with gated() as gate:
        async with serve(tmp_path, server_index, planner=GatedPlanner,
                         tenants=two_tenants(max_concurrent_runs=1)) as client, \
                RemoteClient(url_of(client), TOKENS["acme"], retry=patient) as remote:
            first = await remote.start(QUESTION)
            with pytest.raises(RateLimited) as caught:
                await remote.start(QUESTION)
            assert caught.value.status == 429 and caught.value.retry_after == 1.0
            assert caught.value.code == "too_many_concurrent_runs"
            listing = await (await client.get("/v1/runs", headers=auth("acme"))).json()
            assert [r["run_id"] for r in listing["runs"]] == [first.run_id]
            gate.set()
            assert (await first.wait()).outcome == "answered"
