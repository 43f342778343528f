"""``[tenants.NAME.collection_writes]``: what a tenant may do to collections over the API.

Kept apart from the routes so that ``_config`` can import it without a cycle.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ALL_WRITABLE", "CollectionWritesConfig"]

ALL_WRITABLE = "*"
"""In ``writable``: every collection (the stdio MCP server's local user)."""


class CollectionWritesConfig(BaseModel):
    """A tenant's collection writes: creation, extra writable names, storage quota, sizes.

    A tenant always writes the collections it created. The storage quota counts
    chunks (about 220 words each, the unit the index stores, embeds and
    searches) across every collection the tenant may write; an upload that
    would take it over is refused whole with a 413 ``storage_quota`` problem.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    create: bool = True
    """May create collections (``POST /v1/collections``, the MCP tool)."""
    writable: tuple[str, ...] = ()
    """Collections it did not create but may write (e.g. one indexed with the CLI)."""
    max_chunks: int = Field(default=200_000, ge=0)
    """Storage quota: chunks in all the collections it may write, together."""
    max_file_bytes: int = Field(default=20_000_000, ge=1)
    """Largest file (or JSON document text) indexed; larger ones are skipped ``too_large``."""
    max_upload_bytes: int = Field(default=64_000_000, ge=1024)
    """Largest request body of one upload (multipart or JSON); more is a 413."""

    def lists(self, collection: str) -> bool:
        """Whether the config names ``collection`` as writable."""
        return ALL_WRITABLE in self.writable or collection in self.writable
