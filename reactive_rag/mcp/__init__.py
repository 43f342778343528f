"""The research tools as an MCP server (the official ``mcp`` SDK): stdio and Streamable HTTP.

``reactive-rag mcp`` serves them on stdio; ``reactive-rag serve`` mounts them at
``/mcp`` with the API's bearer-token tenants. Needs the ``mcp`` extra.
"""

from ._http import MCP_PATH, mount_mcp
from ._stdio import LOCAL_TENANT, local_scope, local_writer, serve_stdio
from ._tools import (
    CitationOut,
    ReadResult,
    ResearchAnswer,
    SearchHitOut,
    SearchResult,
    StartRun,
    ToolScope,
    build_mcp_server,
)

__all__ = [
    "LOCAL_TENANT",
    "MCP_PATH",
    "CitationOut",
    "ReadResult",
    "ResearchAnswer",
    "SearchHitOut",
    "SearchResult",
    "StartRun",
    "ToolScope",
    "build_mcp_server",
    "local_scope",
    "local_writer",
    "mount_mcp",
    "serve_stdio",
]
