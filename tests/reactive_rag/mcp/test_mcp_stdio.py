"""``reactive-rag mcp`` over stdio: the SDK's own client against a real subprocess.

The corpus is the four-document test corpus, indexed in ``tmp_path`` with the
default (packaged) embedder the CLI opens it with.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from reactive_rag.index import CorpusIndex

from .._corpus import DOCS
from .._index_helpers import long_doc

REPO = Path(__file__).resolve().parents[3]
QUESTION = "Who founded Bayer and when?"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcp-root")
    index = CorpusIndex(path)
    index.index_documents("demo", DOCS)
    index.index_documents("other", [DOCS[0], long_doc()])
    index.close()
    return path


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    """The child's stderr (its logs), kept aside in ``tmp_path``; shown when a test fails."""
    path = tmp_path / "mcp-child.log"
    with open(path, "w") as log:
        yield log
    print(f"--- stderr of the mcp child ---\n{path.read_text(errors='replace')}")


@asynccontextmanager
async def session(root: Path, errlog: TextIO, *extra: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "reactive_rag", "mcp", "--root", str(root), *extra],
        env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=str(REPO))
    async with stdio_client(params, errlog=errlog) as (read, write), \
            ClientSession(read, write) as client:
        await client.initialize()
        yield client


def _text(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def test_lists_the_three_tools_with_their_schemas(root: Path, errlog: TextIO) -> None:
    async with session(root, errlog, "-c", "demo") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"research", "search", "read", "create_collection", "add_documents",
                          "delete_documents", "delete_collection", "summarize"}
    assert "question" in tools["research"].input_schema["properties"]
    assert tools["research"].input_schema["required"] == ["question"]
    assert tools["research"].output_schema is not None
    assert "citations" in tools["research"].output_schema["properties"]


async def test_search_then_read_a_hit(root: Path, errlog: TextIO) -> None:
    async with session(root, errlog, "-c", "demo") as client:
        found = await client.call_tool("search", {"query": "Bayer founded Barmen"})
        assert not found.is_error, _text(found)
        assert found.structured_content is not None
        hits = found.structured_content["hits"]
        assert hits and hits[0]["title"] == "Bayer"
        assert hits[0]["source"] == "local:demo"
        read = await client.call_tool("read", {"chunk_id": hits[0]["chunk_id"]})
    assert not read.is_error, _text(read)
    assert read.structured_content is not None
    chunk = read.structured_content["chunk"]
    assert chunk["chunk_id"] == hits[0]["chunk_id"]
    assert "Friedrich Bayer" in chunk["text"]


async def test_research_streams_progress_and_returns_cited_answer(
        root: Path, errlog: TextIO) -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async with session(root, errlog, "-c", "demo") as client:
        result = await client.call_tool("research", {"question": QUESTION},
                                        progress_callback=on_progress)
    assert not result.is_error, _text(result)
    answer: dict[str, Any] | None = result.structured_content
    assert answer is not None
    assert answer["outcome"] in ("answered", "answered_from_evidence")
    assert "1863" in answer["answer"]
    assert answer["citations"], answer
    cited = answer["citations"][0]
    assert cited["chunk_id"].startswith("bayer#") and cited["quote"]
    assert "1863" in _text(result)
    messages = [m or "" for _, m in progress]
    assert any(m.startswith("plan: search") for m in messages), messages
    assert any(m.startswith("search ") and "hits" in m for m in messages), messages
    assert messages[-1].startswith("finished: answered"), messages
    values = [v for v, _ in progress]
    assert values == sorted(values) and len(set(values)) == len(values)


async def test_read_gives_the_neighbours_in_reading_order(root: Path, errlog: TextIO) -> None:
    async with session(root, errlog, "-c", "demo", "-c", "other") as client:
        one = await client.call_tool("read", {"chunk_id": "long#2"})
        two = await client.call_tool("read", {"chunk_id": "long#2", "count": 2})
    assert one.structured_content is not None and two.structured_content is not None
    assert one.structured_content["chunk"]["collection"] == "other"
    assert [c["chunk_id"] for c in one.structured_content["before"]] == ["long#1"]
    assert [c["chunk_id"] for c in one.structured_content["after"]] == ["long#3"]
    assert [c["chunk_id"] for c in two.structured_content["before"]] == ["long#0", "long#1"]
    assert [c["chunk_id"] for c in two.structured_content["after"]] == ["long#3", "long#4"]


async def test_an_unknown_chunk_id_is_a_tool_error_and_the_server_goes_on(
        root: Path, errlog: TextIO) -> None:
    async with session(root, errlog, "-c", "demo") as client:
        bad = await client.call_tool("read", {"chunk_id": "nope#7"})
        assert bad.is_error
        assert "no chunk 'nope#7'" in _text(bad)
        malformed = await client.call_tool("read", {"chunk_id": "no-hash"})
        assert malformed.is_error
        still = await client.call_tool("search", {"query": "tea"})
    assert not still.is_error and still.structured_content is not None
    assert still.structured_content["hits"][0]["title"] == "Tea"


async def test_the_call_budget_limits_the_run_and_a_bad_budget_is_refused(
        root: Path, errlog: TextIO) -> None:
    async with session(root, errlog, "-c", "demo") as client:
        small = await client.call_tool("research", {"question": QUESTION,
                                                    "budget": {"max_tool_calls": 1}})
        assert not small.is_error, _text(small)
        assert small.structured_content is not None
        assert small.structured_content["tool_calls"] == 1
        assert small.structured_content["budget"]["max_tool_calls"] == 1
        unknown = await client.call_tool("research", {"question": QUESTION,
                                                      "budget": {"max_spoons": 3}})
        negative = await client.call_tool("research", {"question": QUESTION,
                                                       "budget": {"wall_s": -1}})
    assert unknown.is_error and "unknown budget field 'max_spoons'" in _text(unknown)
    assert negative.is_error and "budget wall_s must be > 0" in _text(negative)


async def test_the_command_line_budget_and_mode_are_each_runs_base(
        root: Path, errlog: TextIO) -> None:
    async with session(root, errlog, "-c", "demo", "--budget", "max_tool_calls=1",
                       "--mode", "rag") as client:
        base = await client.call_tool("research", {"question": QUESTION})
        own = await client.call_tool("research", {"question": QUESTION, "mode": "agent",
                                                  "budget": {"max_tool_calls": 3}})
    assert base.structured_content is not None and own.structured_content is not None
    assert base.structured_content["mode"] == "rag"
    assert base.structured_content["tool_calls"] == 1
    assert base.structured_content["budget"]["max_tool_calls"] == 1
    assert own.structured_content["mode"] == "agent"
    assert own.structured_content["budget"]["max_tool_calls"] == 3
    assert 1 <= own.structured_content["tool_calls"] <= 3


async def test_collections_outside_the_command_line_ones_are_refused(
        root: Path, errlog: TextIO) -> None:
    async with session(root, errlog, "-c", "demo") as client:
        search = await client.call_tool("search", {"query": "aspirin",
                                                   "collections": ["other"]})
        research = await client.call_tool("research", {"question": "What is aspirin?",
                                                       "collections": ["other"]})
        missing = await client.call_tool("search", {"query": "aspirin",
                                                    "collections": ["nowhere"]})
    assert search.is_error and "you may not search collection 'other'" in _text(search)
    assert research.is_error and "you may not search collection 'other'" in _text(research)
    assert missing.is_error and "may not search collection 'nowhere'" in _text(missing)
