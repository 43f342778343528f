"""``GET /v1/collections``: the indexed collections the calling tenant may search.

Tenant-scoped like everything else: a collection outside the tenant's
``collections`` list is not listed, so its name, size and age stay private.
Only each collection's manifest is read (no index is opened), off the event
loop; a collection being re-indexed shows its current generation. A collection
the caller created over the API (:mod:`._collection_writes`) and that holds no
document yet is listed with generation 0. The OpenAPI paths here include the
write routes (one path item per URL).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from reactive_rag.index import CollectionInfo, CorpusError, CorpusIndex

from ._auth import Tenant
from ._collection_writes import COLLECTION_WRITER, collection_write_openapi_paths
from ._requests import ENGINE_KEY, request_tenant

__all__ = ["collection_openapi_paths", "collection_routes", "visible_collections"]

collection_routes = web.RouteTableDef()


def visible_collections(index: CorpusIndex, tenant: Tenant) -> list[CollectionInfo]:
    """The tenant's indexed collections, by name (one unreadable collection is left out)."""
    out: list[CollectionInfo] = []
    for name in index.collections():
        if not tenant.allows(name):
            continue
        try:
            out.append(index.collection_info(name))
        except CorpusError:
            continue  # dropped or corrupt meanwhile: not usable, so not listed
    return out


@collection_routes.get("/v1/collections")
async def list_collections(request: web.Request) -> web.Response:
    """The collections the caller may name in a run, with their sizes."""
    tenant = request_tenant(request)
    index = request.app[ENGINE_KEY].index
    infos = await asyncio.to_thread(visible_collections, index, tenant)
    listed = [i.to_json() for i in infos]
    writer = request.app.get(COLLECTION_WRITER)
    if writer is not None:
        empty = await asyncio.to_thread(writer.owned_empty, tenant)
        listed = sorted([*listed, *(writer.view(n) for n in empty)],
                        key=lambda c: str(c["name"]))
    return web.json_response({"collections": listed})


def collection_openapi_paths() -> dict[str, Any]:
    """OpenAPI 3.1 path item of ``GET /v1/collections``, for the server's document."""
    count = {"type": "integer", "minimum": 0}
    collection = {
        "type": "object",
        "required": ["name", "documents", "chunks", "generation", "updated", "embedder"],
        "properties": {
            "name": {"type": "string"},
            "documents": count, "chunks": count,
            "generation": {"type": "integer", "minimum": 0,
                           "description": "grows by one per re-index (0: no document yet)"},
            "updated": {"type": "number", "description": "Unix seconds: when the current "
                                                         "generation was written"},
            "embedder": {"type": "string", "description": "the model its vectors come from"},
        },
    }
    writes = collection_write_openapi_paths()
    return {**writes, "/v1/collections": {**writes["/v1/collections"], "get": {
        "operationId": "listCollections",
        "summary": "The indexed collections you may search, with their sizes",
        "responses": {
            "200": {"description": "your collections, by name (never another tenant's)",
                    "content": {"application/json": {"schema": {
                        "type": "object", "required": ["collections"],
                        "properties": {"collections": {"type": "array",
                                                       "items": collection}}}}}},
            "401": {"description": "missing or wrong bearer token",
                    "headers": {"WWW-Authenticate": {
                        "description": "the scheme to authenticate with", "required": True,
                        "schema": {"type": "string"}}},
                    "content": {"application/problem+json": {"schema": {
                        "$ref": "#/components/schemas/Problem"}}}},
        },
    }}}
