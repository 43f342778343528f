"""Collections written over HTTP: create, upload (files and JSON), follow, search, delete.

A real server over a real index: every build runs as a background task whose
events a client follows to ``task.finished``; a run started right after finds
the new text, an update replaces it, a delete removes it. Tenants write only
their own collections, see only theirs (or what config shares read-only), and a
storage quota refuses an upload whole.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiohttp import FormData
from aiohttp.test_utils import TestClient

from reactive_rag.index import CorpusIndex, Document
from reactive_rag.server import (
    CollectionWriter,
    CollectionWritesConfig,
    Tenant,
    TenantConfig,
    hash_token,
)
from reactive_rag.store import SqliteRunStore
from reactive_rag.tasks import TaskManager

from .._server_fixtures import TOKENS, auth, build_index, serve, two_tenants

Client = TestClient[Any, Any]

KAYAK = "# Kayaks\n\nThe zephyrine kayak is folded from sailcloth and weighs nine kilograms.\n"
QUOKKA = "The marsupial quokka lives on Rottnest Island and smiles for photographs."


async def follow_task(client: Client, task: dict[str, Any], tenant: str) -> list[dict[str, Any]]:
    """The task's events from its SSE stream, up to and including ``task.finished``."""
    events: list[dict[str, Any]] = []
    async with client.get(task["links"]["events"], headers=auth(tenant)) as resp:
        assert resp.status == 200
        async for raw in resp.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
    assert events and events[-1]["type"] == "task.finished", events
    return events


async def hit_docs(client: Client, tenant: str, question: str,
                   collections: list[str]) -> set[str]:
    """The document ids a fresh RAG run's searches found."""
    resp = await client.post("/v1/runs", headers=auth(tenant), json={
        "question": question, "mode": "rag", "collections": collections})
    assert resp.status == 201, await resp.text()
    run_id = (await resp.json())["run_id"]
    found: set[str] = set()
    async with client.get(f"/v1/runs/{run_id}/events", headers=auth(tenant)) as events:
        async for raw in events.content:
            line = raw.decode()
            if line.startswith("data:"):
                event = json.loads(line[5:])
                if event["type"] == "search.completed":
                    found |= {h["doc_id"] for h in event["hits"]}
    return found


async def upload(client: Client, tenant: str, name: str, files: dict[str, bytes]
                 ) -> tuple[int, dict[str, Any]]:
    form = FormData()
    for filename, data in files.items():
        form.add_field("file", data, filename=filename,
                       content_type="application/octet-stream")
    resp = await client.post(f"/v1/collections/{name}/documents", data=form,
                             headers=auth(tenant))
    return resp.status, await resp.json()


async def add_json(client: Client, tenant: str, name: str,
                   documents: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    resp = await client.post(f"/v1/collections/{name}/documents", headers=auth(tenant),
                             json={"documents": documents})
    return resp.status, await resp.json()


async def names(client: Client, tenant: str) -> list[str]:
    body = await (await client.get("/v1/collections", headers=auth(tenant))).json()
    return [c["name"] for c in body["collections"]]


async def test_upload_search_update_delete_round_trip(tmp_path: Path) -> None:
    index = build_index(tmp_path / "idx")
    try:
        async with serve(tmp_path, index, tenants=two_tenants()) as client:
            resp = await client.post("/v1/collections", headers=auth("acme"),
                                     json={"name": "acme-notes"})
            assert resp.status == 201, await resp.text()
            assert (await resp.json())["generation"] == 0
            assert "acme-notes" in await names(client, "acme")  # listed before any document

            status, body = await upload(client, "acme", "acme-notes", {
                "kayak.md": KAYAK.encode(),
                "photo.png": b"\x89PNG\r\n\x1a\n\x00\x00",
                "dump.txt": b"head\x00\x01\x02\x00tail" * 50,
                "latin.txt": "Le caf\xe9 cr\xe8me du matin est tr\xe8s bon.".encode("cp1252"),
            })
            assert status == 202, body
            reasons = {s["path"]: s["reason"] for s in body["skipped"]}
            assert reasons == {"photo.png": "binary", "dump.txt": "binary"}
            events = await follow_task(client, body["task"], "acme")
            assert events[0]["type"] == "task.started"
            assert any(e["type"] == "task.progress" for e in events)
            assert events[-1]["status"] == "done", events[-1]
            result = events[-1]["result"]
            assert result["added"] == 2 and result["skipped"] == body["skipped"]
            assert "kayak.md" in await hit_docs(client, "acme", "zephyrine kayak sailcloth",
                                                ["acme-notes"])

            status, body = await add_json(client, "acme", "acme-notes", [
                {"id": "kayak.md", "title": "Quokkas", "text": QUOKKA},
                {"id": "note-2", "title": "Empty", "text": "   "}])
            assert status == 202, body
            assert body["skipped"] == [{"path": "note-2", "reason": "empty",
                                        "detail": "no text"}]
            done = (await follow_task(client, body["task"], "acme"))[-1]
            assert done["status"] == "done" and done["result"]["updated"] == 1
            assert "kayak.md" in await hit_docs(client, "acme", "quokka Rottnest Island",
                                                ["acme-notes"])
            task = await (await client.get(body["task"]["links"]["self"],
                                           headers=auth("acme"))).json()
            assert task["kind"] == "index" and task["status"] == "done"

            resp = await client.delete("/v1/collections/acme-notes/documents/kayak.md",
                                       headers=auth("acme"))
            assert resp.status == 202
            done = (await follow_task(client, (await resp.json())["task"], "acme"))[-1]
            assert done["status"] == "done" and done["result"]["removed"] == 1
            assert "kayak.md" not in await hit_docs(client, "acme", "quokka Rottnest Island",
                                                    ["acme-notes"])
            again = await client.delete("/v1/collections/acme-notes/documents/kayak.md",
                                        headers=auth("acme"))
            assert again.status == 404
            assert (await again.json())["code"] == "document_not_found"

            resp = await client.delete("/v1/collections/acme-notes", headers=auth("acme"))
            assert resp.status == 200 and (await resp.json())["deleted"] is True
            assert "acme-notes" not in await names(client, "acme")
            gone = await client.post("/v1/runs", headers=auth("acme"), json={
                "question": "quokka", "collections": ["acme-notes"]})
            assert gone.status in (403, 422)
    finally:
        index.close()


async def test_tenants_write_and_see_only_their_own_collections(tmp_path: Path) -> None:
    index = build_index(tmp_path / "idx")
    tenants = {**two_tenants(), "gamma": TenantConfig(
        token_sha256=(hash_token("gamma-token"),), collections=("demo", "acme-private"))}
    TOKENS["gamma"] = "gamma-token"
    try:
        async with serve(tmp_path, index, tenants=tenants) as client:
            assert (await client.post("/v1/collections", headers=auth("acme"),
                                      json={"name": "acme-private"})).status == 201
            status, body = await add_json(client, "acme", "acme-private", [
                {"id": "plan", "title": "Plan", "text": "Project heliotrope ships in May."}])
            assert status == 202
            assert (await follow_task(client, body["task"], "acme"))[-1]["status"] == "done"

            assert "acme-private" not in await names(client, "beta")
            status, body = await add_json(client, "beta", "acme-private", [
                {"id": "x", "text": "overwrite"}])
            assert status == 403 and body["code"] == "collection_forbidden"
            resp = await client.delete("/v1/collections/acme-private", headers=auth("beta"))
            assert resp.status == 403
            run = await client.post("/v1/runs", headers=auth("beta"), json={
                "question": "heliotrope", "collections": ["acme-private"]})
            assert run.status == 403 and (await run.json())["code"] == "collection_forbidden"
            taken = await client.post("/v1/collections", headers=auth("beta"),
                                      json={"name": "acme-private"})
            assert taken.status == 409 and (await taken.json())["code"] == "collection_exists"
            task = await client.get(body.get("task", {}).get("links", {}).get(
                "self", "/v1/tasks/none"), headers=auth("beta"))
            assert task.status == 404

            # shared read-only by config: gamma searches it but cannot write it
            assert "acme-private" in await names(client, "gamma")
            assert "plan" in await hit_docs(client, "gamma", "heliotrope ships",
                                            ["acme-private"])
            status, body = await add_json(client, "gamma", "acme-private", [
                {"id": "x", "text": "overwrite"}])
            assert status == 403 and body["code"] == "collection_read_only"

            # an operator's collection is read-only unless config lists it as writable
            status, body = await add_json(client, "acme", "demo", [{"id": "x", "text": "y"}])
            assert status == 403 and body["code"] == "collection_read_only"
    finally:
        TOKENS.pop("gamma", None)
        index.close()


async def test_an_upload_over_the_storage_quota_is_refused_whole(tmp_path: Path) -> None:
    index = build_index(tmp_path / "idx")
    small = CollectionWritesConfig(max_chunks=2)
    tenants = {"acme": TenantConfig(token_sha256=(hash_token(TOKENS["acme"]),),
                                    collections=("demo",), collection_writes=small)}
    notes = [{"id": f"d{i}", "text": f"Document number {i} about otters."} for i in range(3)]
    try:
        async with serve(tmp_path, index, tenants=tenants) as client:
            assert (await client.post("/v1/collections", headers=auth("acme"),
                                      json={"name": "tiny"})).status == 201
            over, body = await add_json(client, "acme", "tiny", notes)
            listing = await (await client.get("/v1/collections", headers=auth("acme"))).json()
            fits, first = await add_json(client, "acme", "tiny", notes[:2])
            # refused whether or not the first build has finished: queued builds count
            then, second = await add_json(client, "acme", "tiny", notes[2:])
            done = (await follow_task(client, first["task"], "acme"))[-1]
            update, _ = await add_json(client, "acme", "tiny", [
                {"id": "d0", "text": "Document zero, now about beavers."}])
    finally:
        index.close()
    assert over == 413 and body["code"] == "storage_quota"
    assert "max_chunks" in body["detail"] and "2 chunks" in body["detail"]
    tiny = next(c for c in listing["collections"] if c["name"] == "tiny")
    assert tiny["generation"] == 0 and tiny["documents"] == 0  # nothing was written
    assert fits == 202 and done["status"] == "done" and done["result"]["chunks"] == 2
    assert then == 413 and second["code"] == "storage_quota"
    assert update == 202  # replacing a document frees its chunks first


async def test_bad_requests_are_problems(tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        async def post(path: str, body: Any) -> tuple[int, str]:
            resp = await client.post(path, json=body)
            return resp.status, (await resp.json()).get("code", "")

        assert (await post("/v1/collections", {"name": "../etc"}))[0] == 422
        assert (await post("/v1/collections", {"name": "ok", "owner": "x"}))[0] == 422
        assert (await post("/v1/collections", {"name": "ok", "embedder": "gpt"}))[0] == 422
        assert await post("/v1/collections/nope/documents",
                          {"documents": [{"id": "a", "text": "b"}]}) == (
            404, "collection_not_found")
        assert (await post("/v1/collections", {"name": "ok"}))[0] == 201
        assert await post("/v1/collections", {"name": "ok"}) == (409, "collection_exists")
        assert (await post("/v1/collections/ok/documents", {"documents": []}))[0] == 422
        assert (await post("/v1/collections/ok/documents", {"docs": []}))[0] == 422
        status, body = await upload(client, "acme", "ok", {"a.png": b"\x89PNG\x00",
                                                           "b.docx": b"PK"})
        assert status == 200 and body["task"] is None  # nothing to build: no task
        assert {(s["path"], s["reason"]) for s in body["skipped"]} == {
            ("a.png", "binary"), ("b.docx", "unsupported_type")}
        resp = await client.post("/v1/collections/ok/documents", data=(
            b'--BB\r\nContent-Disposition: form-data; name="\x15"\r\n\r\n[]\r\n--BB--\r\n'),
            headers={"Content-Type": "multipart/form-data; boundary=BB"})
        assert resp.status == 400 and (await resp.json())["code"] == "invalid_body"
        listing = await (await client.get("/v1/collections")).json()
        assert next(c for c in listing["collections"] if c["name"] == "ok")["generation"] == 0


async def test_a_build_left_unfinished_by_a_shutdown_is_finished_by_the_next_start(
        tmp_path: Path) -> None:
    index = build_index(tmp_path / "idx")
    store = SqliteRunStore(tmp_path / "runs.db")
    await store.open()
    manager = TaskManager(store, index)
    writer = CollectionWriter(index, manager)
    tenant = Tenant("acme", two_tenants()["acme"], writer.owner_of)
    await writer.create(tenant, "later")
    doc = Document(id="ibis", title="Ibis", text="The sacred ibis probes mud with its bill.")
    task = await writer.add(tenant, "later", [doc], [])
    await manager.aclose()  # the process stops before the build ran
    await store.close()
    try:
        assert not index.exists("later")
        async with serve(tmp_path, index, tenants=two_tenants()) as client:
            view = {"links": {"events": f"/v1/tasks/{task.task_id}/events"}}
            done = (await follow_task(client, view, "acme"))[-1]
            found = await hit_docs(client, "acme", "sacred ibis mud bill", ["later"])
    finally:
        index.close()
    assert done["status"] == "done" and done["result"]["added"] == 1
    assert "ibis" in found
    assert not list((tmp_path / "idx" / ".uploads").glob("*.json"))  # staged copy removed
