"""The collection tools through the official MCP client: over ``/mcp`` with tenants, and stdio.

The same round trip as the HTTP API's: create, add (a build followed to the end with
progress notifications), search finds it at once, an update replaces it, a delete
removes it; another tenant can neither write nor find it; a quota refuses; a file
path is read only by a local stdio server, where a binary file is skipped with its
reason.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from reactive_rag.index import CorpusIndex
from reactive_rag.server import CollectionWritesConfig, TenantConfig, hash_token

from .._corpus import DOCS
from .._server_fixtures import TOKENS, auth, build_index, two_tenants
from .test_mcp_http import mcp_session, serve

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    """The stdio child's stderr, shown when a test fails."""
    path = tmp_path / "mcp-child.log"
    with open(path, "w") as log:
        yield log
    print(f"--- stderr of the mcp child ---\n{path.read_text(errors='replace')}")


def _text(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def _hits(session: ClientSession, query: str, collection: str) -> list[str]:
    found = await session.call_tool("search", {"query": query, "collections": [collection]})
    assert not found.is_error, _text(found)
    assert found.structured_content is not None
    return [h["chunk_id"].partition("#")[0] for h in found.structured_content["hits"]]


async def test_tools_round_trip_over_http_within_the_tenant_rules(tmp_path: Path) -> None:
    index = build_index(tmp_path / "idx")
    tenants = {**two_tenants(), "tiny": TenantConfig(
        token_sha256=(hash_token("tiny-token"),), collections=("demo",),
        collection_writes=CollectionWritesConfig(max_chunks=1))}
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    try:
        async with serve(tmp_path, index, tenants=tenants) as client, \
                mcp_session(client, auth("acme")) as acme, \
                mcp_session(client, auth("beta")) as beta, \
                mcp_session(client, {"Authorization": "Bearer tiny-token"}) as tiny:
            made = await acme.call_tool("create_collection", {"name": "acme-kb"})
            assert not made.is_error, _text(made)
            assert made.structured_content is not None
            assert made.structured_content["generation"] == 0

            added = await acme.call_tool("add_documents", {"collection": "acme-kb", "documents": [
                {"id": "otters", "title": "Otters",
                 "text": "Sea otters hold hands while sleeping in kelp forests."},
                {"id": "blank", "text": " "}]}, progress_callback=on_progress)
            assert not added.is_error, _text(added)
            out: dict[str, Any] | None = added.structured_content
            assert out is not None and out["status"] == "done"
            assert out["result"]["added"] == 1 and out["result"]["generation"] == 1
            assert out["skipped"] == [{"path": "blank", "reason": "empty", "detail": "no text"}]
            assert progress and progress == sorted(progress)
            assert "otters" in await _hits(acme, "otters kelp sleeping", "acme-kb")

            updated = await acme.call_tool("add_documents", {"collection": "acme-kb",
                                                             "documents": [
                {"id": "otters", "title": "Otters", "text": "Otters eat sea urchins daily."}]})
            assert updated.structured_content is not None
            assert updated.structured_content["result"]["updated"] == 1
            read = await acme.call_tool("read", {"chunk_id": "otters#0"})
            assert read.structured_content is not None
            assert "urchins" in read.structured_content["chunk"]["text"]

            path = await acme.call_tool("add_documents", {"collection": "acme-kb",
                                                          "paths": ["/etc/hostname"]})
            assert path.is_error and "local (stdio) server" in _text(path)

            # beta neither writes nor finds acme's collection
            write = await beta.call_tool("add_documents", {"collection": "acme-kb",
                                                           "documents": [{"id": "x",
                                                                          "text": "mine now"}]})
            assert write.is_error and "collection_forbidden" in _text(write)
            drop = await beta.call_tool("delete_collection", {"collection": "acme-kb"})
            assert drop.is_error
            look = await beta.call_tool("search", {"query": "otters",
                                                   "collections": ["acme-kb"]})
            assert look.is_error and "may not search" in _text(look)

            # the storage quota refuses a build whole
            assert not (await tiny.call_tool("create_collection", {"name": "t"})).is_error
            over = await tiny.call_tool("add_documents", {"collection": "t", "documents": [
                {"id": f"d{i}", "text": f"Note {i} on herons."} for i in range(3)]})
            assert over.is_error and "storage_quota" in _text(over)
            assert "max_chunks" in _text(over)

            removed = await acme.call_tool("delete_documents", {"collection": "acme-kb",
                                                                "ids": ["otters"]})
            assert removed.structured_content is not None
            assert removed.structured_content["status"] == "done"
            gone = await acme.call_tool("read", {"chunk_id": "otters#0"})
            assert gone.is_error
            dropped = await acme.call_tool("delete_collection", {"collection": "acme-kb"})
            assert not dropped.is_error, _text(dropped)
    finally:
        index.close()
    assert "acme-kb" not in index.collections()
    assert TOKENS  # the shared fixtures' tokens were used as is


async def test_stdio_reads_local_paths_and_skips_a_binary_file(
        tmp_path: Path, errlog: TextIO) -> None:
    root = tmp_path / "root"
    index = CorpusIndex(root)
    index.index_documents("demo", DOCS)
    index.close()
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "herons.md").write_text("# Herons\n\nGrey herons stand still for hours "
                                      "before they strike at a fish.\n")
    (folder / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "reactive_rag", "mcp", "--root", str(root)],
        env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=str(REPO))
    async with stdio_client(params, errlog=errlog) as (read, write), \
            ClientSession(read, write) as client:
        await client.initialize()
        tools = {t.name for t in (await client.list_tools()).tools}
        made = await client.call_tool("create_collection", {"name": "notes"})
        assert not made.is_error, _text(made)
        added = await client.call_tool("add_documents", {"collection": "notes",
                                                         "paths": [str(folder)]})
        assert not added.is_error, _text(added)
        hits = await _hits(client, "grey herons strike fish", "notes")
    assert {"create_collection", "add_documents", "delete_documents",
            "delete_collection"} <= tools
    out = added.structured_content
    assert out is not None and out["status"] == "done" and out["result"]["added"] == 1
    assert [(s["reason"], Path(s["path"]).name) for s in out["skipped"]] == [
        ("binary", "image.png")]
    assert hits and hits[0] == "herons.md"
