"""The ``summarize`` MCP tool and the hand-off of a research call, on the API server."""

from __future__ import annotations

from pathlib import Path

from mcp.types import CallToolResult, TextContent

from reactive_rag.index import CorpusIndex

from .._server_fixtures import auth, two_tenants
from .test_mcp_http import mcp_session, serve


def _text(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def test_summarize_starts_the_tenants_task_reports_each_chunk_and_returns_the_summary(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        async with mcp_session(client, auth("acme")) as session:
            result = await session.call_tool("summarize", {"doc_id": "aspirin"},
                                             progress_callback=on_progress)
        assert not result.is_error, _text(result)
        out = result.structured_content
        assert out is not None and out["status"] == "done"
        assert out["collection"] == "demo" and out["summary"]
        for sentence in out["sentences"]:
            assert sentence["text"] in server_index.chunk(sentence["chunk_id"],
                                                          collection="demo").text
        assert progress and progress[-1].startswith("chunk ")
        mine = await client.get(out["link"], headers=auth("acme"))
        assert mine.status == 200 and (await mine.json())["status"] == "done"
        theirs = await client.get(out["link"], headers=auth("beta"))
        assert theirs.status == 404


async def test_summarize_refuses_a_document_the_tenant_may_not_read(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        async with mcp_session(client, auth("acme")) as session:
            hidden = await session.call_tool("summarize", {"doc_id": "vault"})
            forbidden = await session.call_tool("summarize",
                                                {"doc_id": "vault", "collection": "secret"})
            started = await session.call_tool("summarize", {"doc_id": "tea", "wait": False})
        assert hidden.is_error and "vault" in _text(hidden)
        assert forbidden.is_error and "secret" in _text(forbidden)
        assert not started.is_error and started.structured_content is not None
        assert started.structured_content["status"] in ("pending", "running", "done")


async def test_research_hands_a_whole_document_question_to_its_task(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        async with mcp_session(client, auth("acme")) as session:
            result = await session.call_tool(
                "research", {"question": "Summarise the Aspirin document"})
        answer = result.structured_content
        assert not result.is_error and answer is not None
        assert answer["outcome"] == "handed_off"
        assert answer["task"]["doc_id"] == "aspirin"
        assert answer["task"]["link"] in answer["answer"]
