"""The per-client buffer: a slow client is coalesced, then detached; the run never waits."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reactive_rag.cli._main import main as cli_main
from reactive_rag.cli._serve import add_serve_commands
from reactive_rag.server import EventFeed
from reactive_rag.store import Recorder, RunMeta, SqliteRunStore
from streams import BudgetTick, Event, RunFinished, RunStarted, RunStream, SearchRequested
from tests._eventually import eventually


async def _source(events: list[Event], gate: asyncio.Event | None = None) -> AsyncIterator[Event]:
    for event in events:
        if gate is not None:
            await gate.wait()
        yield event


def _stamped(n_normal: int, ticks_between: int = 0) -> list[Event]:
    stream = RunStream("r1")
    stream.publish(RunStarted(question="q"))
    for i in range(n_normal):
        for _ in range(ticks_between):
            stream.publish(BudgetTick(steps=i, tool_calls=i, elapsed_s=0.0))
        stream.publish(SearchRequested(query=f"q{i}"))
    stream.publish(RunFinished(outcome="answered"))
    return stream.history()


async def test_a_client_that_keeps_up_gets_everything_in_order() -> None:
    events = _stamped(50, ticks_between=1)
    async with EventFeed(_source(events), maxsize=4) as feed:
        got = []
        while (event := await feed.get(5)) is not None:
            got.append(event.seq)
    assert got == [e.seq for e in events] and feed.detached_reason is None


async def test_a_stalled_client_has_progress_coalesced_then_is_detached_with_a_reason() -> None:
    events = _stamped(3, ticks_between=5)
    feed = EventFeed(_source(events), maxsize=4)
    async with feed:
        # the client takes nothing while the run publishes
        await eventually(lambda: feed.detached_reason is not None, "the stalled client detached")
        stats = feed.statistics()
        assert stats.coalesced > 0
        assert feed.detached_reason is not None and "too slow" in feed.detached_reason
        assert await feed.get(1) is None


async def test_a_failing_source_detaches_the_client_and_says_so() -> None:
    async def broken() -> AsyncIterator[Event]:
        yield _stamped(0)[0]
        raise OSError("disk gone")

    async with EventFeed(broken(), maxsize=4) as feed:
        assert (await feed.get(1)) is not None
        assert await feed.get(1) is None
    assert feed.detached_reason == "event source failed: OSError"


@pytest.mark.parametrize("bad", [0, -1])
def test_feed_size_must_be_positive(bad: int) -> None:
    with pytest.raises(ValueError):
        EventFeed(_source([]), maxsize=bad)


async def _stored_run(path: Path) -> str:
    async with SqliteRunStore(path) as store:
        stream = RunStream("abc123")
        async with Recorder(store, stream, RunMeta("abc123", "default", "Who?")):
            stream.publish(RunStarted(question="Who?"))
            stream.publish(SearchRequested(query="who"))
            stream.publish(RunFinished(outcome="answered", answer="Somebody."))
    return "abc123"


def test_cli_runs_and_replay_read_the_store(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert callable(add_serve_commands)
    db = tmp_path / "runs.db"
    run_id = asyncio.run(_stored_run(db))
    import argparse

    parser = argparse.ArgumentParser()
    add_serve_commands(parser.add_subparsers(dest="command"))

    def run(*argv: str) -> int:
        args = parser.parse_args(list(argv))
        return int(args.func(args))

    assert run("runs", "--store", str(db), "--json") == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["run_id"] == run_id and rows[0]["outcome"] == "answered"
    assert run("replay", run_id, "--store", str(db), "--json") == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(x)["seq"] for x in lines] == [1, 2, 3]
    assert run("replay", run_id, "--store", str(db)) == 0
    out = capsys.readouterr().out
    assert "Somebody." in out and "search.requested" in out
    assert run("replay", "nope", "--store", str(db)) == 2  # a bad argument, said in one line
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope" in err[0]
    assert cli_main is not None


async def test_a_stalled_sse_client_is_detached_and_told_why_while_the_source_runs_on(
) -> None:
    import socket

    from aiohttp import web

    from reactive_rag.server._sse import serve_sse
    from streams import Hit, SearchCompleted

    stream = RunStream("big")
    stream.publish(RunStarted(question="q"))
    big = "x" * 100_000
    for i in range(60):  # ~6 MB: more than the kernel buffers hold
        stream.publish(SearchCompleted(query=f"q{i}", hits=(Hit(url="u", content=big),)))
    stream.publish(RunFinished(outcome="answered"))
    pumped: list[int] = []

    async def source() -> AsyncIterator[Event]:
        for event in stream.history():
            pumped.append(event.seq)
            yield event

    async def handler(request: web.Request) -> web.StreamResponse:
        async with EventFeed(source(), maxsize=4) as feed:
            return await serve_sse(request, feed, keepalive_s=5, write_timeout_s=0.2)

    app = web.Application()
    app.router.add_get("/events", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=2**24)
        writer.write(b"GET /events HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(1.5)  # stalled far longer than the write timeout
        body = await asyncio.wait_for(reader.read(), 30)
        writer.close()
        await writer.wait_closed()
    finally:
        await runner.cleanup()
    text = body.decode(errors="replace")
    assert "event: detached" in text and "client too slow" in text
    seqs = [int(line[4:]) for line in text.splitlines() if line.startswith("id: ")]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) < 62
