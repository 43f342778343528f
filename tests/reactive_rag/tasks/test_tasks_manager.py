"""Background summary tasks: persisted, independent of clients, resumed after a restart."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from actors.models import HashingEmbedder
from reactive_rag.index import ChunkingConfig, CorpusIndex, Document
from reactive_rag.server import Authenticator, TenantConfig, hash_token
from reactive_rag.server._problems import problem_middleware
from reactive_rag.server._requests import AUTH_KEY
from reactive_rag.server._tasks import TASK_MANAGER, task_routes, tasks_context
from reactive_rag.store import SqliteRunStore, TaskStatus
from reactive_rag.tasks import DocumentNotFound, TaskManager, UnknownTask
from streams import Event, decode_json

TOPICS = ["rivers", "water", "the sea", "floods", "dams", "valleys", "rain", "lakes"]
LONG_TEXT = " ".join(
    f"Paragraph {i} explains how {TOPICS[i % len(TOPICS)]} shape rivers and carry water "
    f"to the sea over many years. Sentence {i} adds that {TOPICS[(i + 3) % len(TOPICS)]} "
    f"change the river course near village number {i}."
    for i in range(40))


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CorpusIndex]:
    idx = CorpusIndex(tmp_path_factory.mktemp("tasks-idx"), HashingEmbedder(),
                      chunking=ChunkingConfig(target_words=60, overlap_ratio=0.0, max_words=80))
    idx.index_documents("docs", [
        Document(id="rivers", title="Rivers", text=LONG_TEXT),
        Document(id="short", title="Short", text="Tea is a drink made from leaves of a plant."),
    ])
    yield idx
    idx.close()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteRunStore]:
    async with SqliteRunStore(tmp_path / "runs.db") as s:
        yield s


def chunk_count(index: CorpusIndex) -> int:
    return 1 + len(index.neighbours("rivers#0", "next", 1000, collection="docs"))


async def test_summary_runs_to_the_end_with_progress_and_exact_quotes(
        store: SqliteRunStore, index: CorpusIndex) -> None:
    manager = TaskManager(store, index, sentences=4)
    try:
        task = await manager.submit_summary("docs", "rivers")
        stream = manager.stream(task.task_id)
        assert stream is not None
        done = await manager.wait(task.task_id)
    finally:
        await manager.aclose()
    assert done.status is TaskStatus.DONE and done.progress == 1.0
    assert isinstance(done.result, dict)
    sentences = done.result["sentences"]
    assert isinstance(sentences, list) and len(sentences) == 4
    for s in sentences:
        assert isinstance(s, dict)
        chunk = index.chunk(str(s["chunk_id"]), collection="docs")
        assert s["text"] in chunk.text
    events = stream.history()
    total = chunk_count(index)
    assert total >= 5
    assert [e.type for e in events] == (
        ["task.started"] + ["task.progress"] * total + ["task.finished"])
    assert [e.done for e in events[1:-1]] == list(range(1, total + 1))  # type: ignore[attr-defined]


async def test_a_restart_resumes_from_the_last_persisted_chunk(
        store: SqliteRunStore, index: CorpusIndex, tmp_path: Path) -> None:
    first = TaskManager(store, index, sentences=3, pace_s=0.05)
    task = await first.submit_summary("docs", "rivers")
    stream = first.stream(task.task_id)
    assert stream is not None
    reached = asyncio.Event()
    stream.subscribe(lambda e: reached.set() if getattr(e, "done", 0) >= 2 else None,
                     name="watch")
    await asyncio.wait_for(reached.wait(), 10)
    await first.aclose()  # the process "dies" mid-task

    stored = await store.get_task(task.task_id)
    assert stored.status is TaskStatus.RUNNING
    total = chunk_count(index)
    stopped_at = round(stored.progress * total)
    assert 2 <= stopped_at < total

    second = TaskManager(store, index, sentences=3)
    try:
        assert await second.start() == [task.task_id]
        resumed_stream = second.stream(task.task_id)
        assert resumed_stream is not None
        done = await second.wait(task.task_id)
    finally:
        await second.aclose()
    events = resumed_stream.history()
    started = events[0]
    assert started.type == "task.started"
    assert started.resumed_from == stopped_at and started.attempt == 2  # type: ignore[attr-defined]
    assert events[1].done == stopped_at + 1  # type: ignore[attr-defined]
    assert done.status is TaskStatus.DONE

    # The same summary as a run that was never interrupted.
    fresh = TaskManager(store, index, sentences=3)
    try:
        again = await fresh.submit_summary("docs", "rivers")
        uninterrupted = await fresh.wait(again.task_id)
    finally:
        await fresh.aclose()
    assert isinstance(done.result, dict) and isinstance(uninterrupted.result, dict)
    assert done.result["sentences"] == uninterrupted.result["sentences"]


async def test_the_task_does_not_belong_to_whoever_watches_it(
        store: SqliteRunStore, index: CorpusIndex) -> None:
    manager = TaskManager(store, index, pace_s=0.01)
    try:
        task = await manager.submit_summary("docs", "rivers")
        stream = manager.stream(task.task_id)
        assert stream is not None
        watcher = stream.subscribe(lambda e: None, name="client")
        watcher.dispose()  # the client leaves at once
        done = await manager.wait(task.task_id)
    finally:
        await manager.aclose()
    assert done.status is TaskStatus.DONE


async def test_unknown_document_is_refused_and_nothing_is_stored(
        store: SqliteRunStore, index: CorpusIndex) -> None:
    manager = TaskManager(store, index)
    try:
        with pytest.raises(DocumentNotFound, match="nope"):
            await manager.submit_summary("docs", "nope")
        with pytest.raises(DocumentNotFound):
            await manager.submit_summary("no-such-collection", "rivers")
        assert await store.list_unfinished_tasks() == []
        with pytest.raises(UnknownTask):
            await manager.get("missing")
    finally:
        await manager.aclose()


async def test_cancel_is_final_and_said_on_the_stream(
        store: SqliteRunStore, index: CorpusIndex) -> None:
    manager = TaskManager(store, index, pace_s=0.2)
    try:
        task = await manager.submit_summary("docs", "rivers")
        assert await manager.cancel(task.task_id) is True
        assert await manager.cancel(task.task_id) is False
        stored = await store.get_task(task.task_id)
        stream = manager.stream(task.task_id)
        assert stream is not None
    finally:
        await manager.aclose()
    assert stored.status is TaskStatus.CANCELLED
    assert stream.history()[-1].type == "task.finished"
    assert stream.history()[-1].status == "cancelled"  # type: ignore[attr-defined]
    restarted = TaskManager(store, index)
    try:
        assert await restarted.start() == []  # a cancelled task is not resumed
    finally:
        await restarted.aclose()


async def test_a_document_that_vanished_fails_the_task_with_a_reason(
        store: SqliteRunStore, index: CorpusIndex, tmp_path: Path) -> None:
    manager = TaskManager(store, index)
    task = await manager.submit_summary("docs", "short")
    done = await manager.wait(task.task_id)
    await manager.aclose()
    assert done.status is TaskStatus.DONE
    # A task whose document is gone by the time it resumes ends as failed, not stuck.
    other = CorpusIndex(tmp_path / "empty", HashingEmbedder())
    other.index_documents("docs", [Document(id="else", title="Else", text="Nothing here at all.")])
    from reactive_rag.store import BackgroundTask

    await store.create_task(BackgroundTask(task_id="orphan", tenant="local", kind="summary",
                                           doc_id="rivers",
                                           params={"collection": "docs", "doc_id": "rivers"}))
    resumer = TaskManager(store, other)
    try:
        assert await resumer.start() == ["orphan"]
        failed = await resumer.wait("orphan")
    finally:
        await resumer.aclose()
        other.close()
    assert failed.status is TaskStatus.FAILED and "rivers" in (failed.error or "")


# --- HTTP ---------------------------------------------------------------------------------


def sse_events(body: str) -> list[tuple[str, Event]]:
    out = []
    for frame in body.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in frame.splitlines())
        out.append((fields["id"], decode_json(fields["data"])))
    return out


@pytest.fixture
async def api(store: SqliteRunStore, index: CorpusIndex) -> AsyncIterator[tuple[str, Any]]:
    app = web.Application(middlewares=[problem_middleware])
    app[AUTH_KEY] = Authenticator({name: TenantConfig(token_sha256=(hash_token(f"{name}-token"),))
                                   for name in ("local", "alice", "bob")}, open_mode=False)
    app[TASK_MANAGER] = TaskManager(store, index, sentences=3, pace_s=0.03)
    app.add_routes(task_routes)
    app.cleanup_ctx.append(tasks_context)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession(headers=bearer("local")) as http:
            yield f"http://127.0.0.1:{port}", http
    finally:
        await runner.cleanup()


def bearer(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant}-token"}


async def read_frames(response: Any, limit: int | None = None) -> list[tuple[str, Event]]:
    frames: list[tuple[str, Event]] = []
    lines: list[str] = []
    async for raw in response.content:
        line = raw.decode().rstrip("\n")
        if line:
            lines.append(line)
            continue
        frames.extend(sse_events("\n".join(lines)))
        lines = []
        if limit is not None and len(frames) >= limit:
            break
    return frames


async def test_http_start_watch_resume_and_read_a_summary(api: tuple[str, Any]) -> None:
    base, http = api
    async with http.post(f"{base}/v1/tasks", json={"collection": "docs", "doc_id": "rivers"}) as r:
        assert r.status == 201
        task = await r.json()
    assert task["status"] == "pending" and task["result"] is None
    async with http.get(f"{base}{task['links']['events']}") as r:
        assert r.headers["Content-Type"].startswith("text/event-stream")
        head = await read_frames(r, limit=3)  # then the client goes away
    async with http.get(f"{base}{task['links']['events']}",
                        headers={"Last-Event-ID": head[-1][0]}) as r:
        rest = await read_frames(r)
    ids = [i for i, _ in head + rest]
    assert [int(i.split(".")[1]) for i in ids] == list(range(1, len(ids) + 1))
    assert rest[-1][1].type == "task.finished"
    async with http.get(f"{base}/v1/tasks/{task['task_id']}") as r:
        view = await r.json()
    assert view["status"] == "done" and len(view["result"]["sentences"]) == 3
    assert "partial" not in json.dumps(view)
    # Once finished, the events endpoint tells the stored outcome.
    async with http.get(f"{base}{task['links']['events']}") as r:
        final = await read_frames(r)
    assert [e.type for _, e in final] == ["task.finished"]


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"collection": "docs", "doc_id": "nope"}, 404, "document_not_found"),
    ({"collection": "docs"}, 422, "validation_failed"),
    ({"collection": "docs", "doc_id": "rivers", "extra": 1}, 422, "validation_failed"),
    ({"collection": 3, "doc_id": "rivers"}, 422, "validation_failed"),
    ([], 422, "validation_failed"),
])
async def test_http_bad_requests_get_problems(api: tuple[str, Any], body: Any, status: int,
                                              code: str) -> None:
    base, http = api
    async with http.post(f"{base}/v1/tasks", json=body) as r:
        assert r.status == status
        assert (await r.json())["code"] == code


async def test_http_tasks_are_scoped_to_their_tenant(api: tuple[str, Any]) -> None:
    base, http = api
    async with http.post(f"{base}/v1/tasks", json={"collection": "docs", "doc_id": "short"},
                         headers=bearer("alice")) as r:
        task = await r.json()
    for path in ("", "/events"):
        async with http.get(f"{base}/v1/tasks/{task['task_id']}{path}",
                            headers=bearer("bob")) as r:
            assert r.status == 404
            assert task["task_id"] not in await r.text()
    async with http.get(f"{base}/v1/tasks/{task['task_id']}",
                        headers=bearer("alice")) as r:
        assert r.status == 200
    async with http.post(f"{base}/v1/tasks", data=b"{not json") as r:
        assert r.status == 400


# --- mounted on the real server ---------------------------------------------------------------


async def test_the_server_mounts_tasks_with_its_tenants_and_scopes(
        index: CorpusIndex, tmp_path: Path) -> None:
    from reactive_rag.engine._engine import Engine
    from reactive_rag.server import ServerConfig, TenantConfig, create_app, hash_token

    config = ServerConfig(port=0, store=str(tmp_path / "runs.db"), tenants={
        "alice": TenantConfig(token_sha256=(hash_token("alice-token"),), collections=("docs",)),
        "bob": TenantConfig(token_sha256=(hash_token("bob-token"),), collections=("other",)),
    })
    runner = web.AppRunner(create_app(config, engine=Engine(index)))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    alice = {"Authorization": "Bearer alice-token"}
    bob = {"Authorization": "Bearer bob-token"}
    body = {"collection": "docs", "doc_id": "short"}
    try:
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{base}/v1/tasks", json=body) as r:
                assert r.status == 401
            async with http.post(f"{base}/v1/tasks", json=body, headers=bob) as r:
                assert r.status == 403 and (await r.json())["code"] == "collection_forbidden"
            async with http.post(f"{base}/v1/tasks", json=body, headers=alice) as r:
                assert r.status == 201
                task = await r.json()
            async with http.get(f"{base}{task['links']['events']}", headers=alice) as r:
                frames = await read_frames(r)
            assert frames[-1][1].type == "task.finished"
            async with http.get(f"{base}/v1/tasks/{task['task_id']}", headers=bob) as r:
                assert r.status == 404
            async with http.get(f"{base}/v1/tasks/{task['task_id']}", headers=alice) as r:
                assert (await r.json())["status"] == "done"
    finally:
        await runner.cleanup()


def test_the_openapi_fragment_documents_every_task_route() -> None:
    from reactive_rag.server._tasks import task_openapi_paths as openapi_paths

    routed = {(r.path, r.method.lower()) for r in task_routes  # type: ignore[union-attr]
              if isinstance(r, web.RouteDef)}
    documented = {(p, m) for p, ops in openapi_paths().items() for m in ops}
    assert routed == documented
    json.dumps(openapi_paths())  # plain JSON, mergeable into the server's document


async def test_http_takes_any_media_type_and_refuses_big_bodies(api: tuple[str, Any]) -> None:
    """As before the routes moved into the server: no 415, a 16 KiB cap (413)."""
    base, http = api
    body = json.dumps({"collection": "docs", "doc_id": "short"}).encode()
    async with http.post(f"{base}/v1/tasks", data=body,
                         headers={"Content-Type": "text/plain"}) as r:
        assert r.status == 201
    async with http.post(f"{base}/v1/tasks", data=b" " * (16 * 1024 + 1)) as r:
        assert r.status == 413 and (await r.json())["code"] == "body_too_large"
