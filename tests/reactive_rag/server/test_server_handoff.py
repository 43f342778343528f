"""Over HTTP: a whole-document question ends ``handed_off`` with its task, the tenant's own."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient

from reactive_rag.index import CorpusIndex

from .._server_fixtures import auth, serve, two_tenants


async def _finished(client: TestClient[Any, Any], path: str, tenant: str,
                    done: tuple[str, ...]) -> dict[str, Any]:
    while True:  # until the run (or task) reaches a final state; pytest's timeout bounds it
        body: dict[str, Any] = await (await client.get(path, headers=auth(tenant))).json()
        if body["status"] in done:
            return body
        await asyncio.sleep(0.05)


async def test_a_summary_question_ends_handed_off_and_its_task_is_followed_by_its_tenant(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        resp = await client.post("/v1/runs", headers=auth("acme"), json={
            "question": "Give me a summary of the Aspirin document", "collections": ["demo"]})
        assert resp.status == 201, await resp.text()
        run_id = (await resp.json())["run_id"]
        run = await _finished(client, f"/v1/runs/{run_id}", "acme", ("finished",))

        assert run["outcome"] == "handed_off"
        task = run["task"]
        assert task["doc_id"] == "aspirin" and task["collection"] == "demo"
        assert task["link"] == f"/v1/tasks/{task['task_id']}" and task["link"] in run["answer"]
        summary = await _finished(client, task["link"], "acme", ("done", "failed"))
        assert summary["status"] == "done" and summary["run_id"] == run_id
        assert summary["result"]["text"]
        theirs = await client.get(task["link"], headers=auth("beta"))
        assert theirs.status == 404  # the task is the asking tenant's


async def test_a_factual_question_over_http_is_answered_with_no_task(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        resp = await client.post("/v1/runs", headers=auth("acme"), json={
            "question": "Who founded Bayer and when?", "collections": ["demo"]})
        run_id = (await resp.json())["run_id"]
        run = await _finished(client, f"/v1/runs/{run_id}", "acme", ("finished",))
        assert run["outcome"] == "answered" and run["task"] is None


async def test_a_summary_of_a_collection_the_tenant_may_not_read_is_not_handed_off(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    secret = server_index.document_titles("secret")
    title = next(iter(secret.values()))
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        resp = await client.post("/v1/runs", headers=auth("acme"), json={
            "question": f"Summarise the {title} document"})
        run_id = (await resp.json())["run_id"]
        run = await _finished(client, f"/v1/runs/{run_id}", "acme", ("finished",))
        assert run["outcome"] != "handed_off" and run["task"] is None
        resp = await client.post("/v1/runs", headers=auth("beta"), json={
            "question": f"Summarise the {title} document", "collections": ["secret"]})
        run_id = (await resp.json())["run_id"]
        run = await _finished(client, f"/v1/runs/{run_id}", "beta", ("finished",))
        assert run["outcome"] == "handed_off"  # the tenant that may read it is handed off
