"""Collection writes over HTTP: create, add or update documents, delete them, delete it.

Routes (the rules are :class:`~reactive_rag.server._indexing.CollectionWriter`'s):

* ``POST /v1/collections`` ``{"name", "embedder"?}`` -> 201, an empty collection you own;
* ``POST /v1/collections/{name}/documents``: files as ``multipart/form-data`` (each
  file part's name is its document id) or JSON ``{"documents": [{id, title, text,
  metadata}]}`` -> 202 with the indexing task and the files skipped, each with its
  typed reason (the CLI's loaders: binary, undecodable, too large, unsupported...);
* ``DELETE /v1/collections/{name}/documents/{doc_id}`` -> 202 with the task;
* ``DELETE /v1/collections/{name}`` -> 200.

Follow a task on ``/v1/tasks/{id}/events``; once it is done, searches see the new
generation.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from aiohttp import BodyPartReader, web
from aiohttp.http_exceptions import HttpProcessingError
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from reactive_rag.index import Document, DocumentLoadError, SkippedFile, load_file
from reactive_rag.store import BackgroundTask
from reactive_rag.tasks import TaskManager

from ._auth import Tenant
from ._indexing import CollectionWriter
from ._problems import make_problem
from ._requests import ENGINE_KEY, json_body, request_tenant
from ._tasks import TASK_MANAGER, task_view

__all__ = ["COLLECTION_WRITER", "DocumentIn", "collection_write_openapi_paths",
           "collection_write_routes", "json_documents", "mount_collection_writes"]

COLLECTION_WRITER = web.AppKey("collection_writer", CollectionWriter)
"""The application's collection writer (set at start-up, after the task manager)."""

collection_write_routes = web.RouteTableDef()

_CREATE_MAX_BODY = 4096
NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
"""A collection name (what ``reactive_rag.index.validate_name`` takes)."""


class DocumentIn(BaseModel):
    """One document sent as JSON."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=500)
    text: str
    title: str = ""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)


def json_documents(items: list[DocumentIn], max_bytes: int) -> tuple[list[Document],
                                                                    list[SkippedFile]]:
    """Documents from JSON, with the loaders' size and emptiness rules (skips, typed)."""
    docs: list[Document] = []
    skipped: list[SkippedFile] = []
    for item in items:
        size = len(item.text.encode("utf-8"))
        if size > max_bytes:
            skipped.append(SkippedFile(item.id, "too_large",
                                       f"{size} bytes, over the {max_bytes} bytes cap"))
        elif not item.text.strip():
            skipped.append(SkippedFile(item.id, "empty", "no text"))
        else:
            docs.append(Document(id=item.id, text=item.text, title=item.title or item.id,
                                 metadata=dict(item.metadata)))
    return docs, skipped


def _writer(request: web.Request) -> CollectionWriter:
    return request.app[COLLECTION_WRITER]


def _accepted(task: BackgroundTask, skipped: list[SkippedFile]) -> web.Response:
    body = {"task": task_view(task), "skipped": [s.to_json() for s in skipped]}
    return web.json_response(body, status=202,
                             headers={"Location": f"/v1/tasks/{task.task_id}"})


@collection_write_routes.post("/v1/collections")
async def create_collection(request: web.Request) -> web.Response:
    """Create an empty collection owned by the caller."""
    tenant = request_tenant(request)
    body = await json_body(request, _CREATE_MAX_BODY)
    if not isinstance(body, dict) or set(body) - {"name", "embedder"} \
            or not isinstance(body.get("name"), str) \
            or not isinstance(body.get("embedder", "auto"), str):
        raise make_problem(422, "validation_failed",
                           'expected {"name": str, "embedder"?: str} and nothing else')
    view = await _writer(request).create(tenant, body["name"], body.get("embedder", "auto"))
    return web.json_response(view, status=201,
                             headers={"Location": f"/v1/collections/{body['name']}"})


@collection_write_routes.post("/v1/collections/{name}/documents")
async def add_documents(request: web.Request) -> web.Response:
    """Add or replace documents (files or JSON); the build runs as a background task."""
    tenant = request_tenant(request)
    name = request.match_info["name"]
    writer = _writer(request)
    writer.writable(tenant, name)  # refuse before reading an upload
    limits = tenant.config.collection_writes
    ctype = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if ctype == "multipart/form-data":
        docs, skipped = await _read_files(request, tenant)
    else:
        body = await json_body(request, limits.max_upload_bytes)
        items = body.get("documents") if isinstance(body, dict) and set(body) == {
            "documents"} else None
        if not isinstance(items, list):
            raise make_problem(422, "validation_failed", 'expected {"documents": [...]}')
        try:
            parsed = [DocumentIn.model_validate(i) for i in items]
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in err.get("loc", ()))
            raise make_problem(422, "validation_failed",
                               f"documents: {where or 'item'}: {err['msg']}"[:300]) from None
        if not parsed:
            raise make_problem(422, "validation_failed", "documents: send at least one")
        docs, skipped = json_documents(parsed, limits.max_file_bytes)
    if not docs:  # a valid request whose every file was skipped: say why, build nothing
        return web.json_response({"task": None, "skipped": [s.to_json() for s in skipped]})
    task = await writer.add(tenant, name, docs, skipped)
    return _accepted(task, skipped)


@collection_write_routes.delete("/v1/collections/{name}/documents/{doc_id}")
async def delete_document(request: web.Request) -> web.Response:
    """Remove one document; the build runs as a background task."""
    tenant = request_tenant(request)
    task = await _writer(request).delete_documents(
        tenant, request.match_info["name"], [request.match_info["doc_id"]])
    return _accepted(task, [])


@collection_write_routes.delete("/v1/collections/{name}")
async def delete_collection(request: web.Request) -> web.Response:
    """Delete a collection and free its name."""
    tenant = request_tenant(request)
    name = request.match_info["name"]
    await _writer(request).drop(tenant, name)
    return web.json_response({"name": name, "deleted": True})


async def _read_files(request: web.Request, tenant: Tenant) -> tuple[list[Document],
                                                                     list[SkippedFile]]:
    """Every file part, through the CLI's loader (sniffing, encodings, size cap)."""
    limits = tenant.config.collection_writes
    files: list[tuple[str, bytes]] = []
    received = 0
    try:
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader) or not part.filename:
                raise make_problem(422, "validation_failed", "every part must be a file")
            doc_id = _file_id(part.filename)
            data = bytearray()
            while chunk := await part.read_chunk(65536):
                received += len(chunk)
                if received > limits.max_upload_bytes:
                    raise make_problem(413, "body_too_large",
                                       f"at most {limits.max_upload_bytes} bytes")
                data.extend(chunk)
            files.append((doc_id, bytes(data)))
    except (HttpProcessingError, web.RequestPayloadError, ValueError, RuntimeError,
            AssertionError) as exc:  # what aiohttp raises on a malformed multipart body
        raise make_problem(400, "invalid_body",
                           f"the multipart body could not be read: {type(exc).__name__}"
                           ) from None
    if not files:
        raise make_problem(422, "validation_failed", "send at least one file")
    return await asyncio.to_thread(_load_files, files, limits.max_file_bytes)


def _file_id(filename: str) -> str:
    name = PurePosixPath(filename.replace("\\", "/")).name
    if name in ("", ".", "..") or "\x00" in name or len(name) > 255:
        raise make_problem(422, "validation_failed", f"unusable file name {filename[:80]!r}")
    return name


def _load_files(files: list[tuple[str, bytes]],
                max_bytes: int) -> tuple[list[Document], list[SkippedFile]]:
    """Each file written to a private folder under its name, then read by ``load_file``."""
    docs: list[Document] = []
    skipped: list[SkippedFile] = []
    with tempfile.TemporaryDirectory(prefix="rr-upload-") as tmp:
        for i, (doc_id, data) in enumerate(files):
            path = Path(tmp) / str(i) / doc_id
            path.parent.mkdir()
            path.write_bytes(data)
            try:
                doc = load_file(path, doc_id=doc_id, max_bytes=max_bytes)
            except DocumentLoadError as exc:
                skipped.append(SkippedFile(doc_id, exc.reason, exc.detail))
                continue
            docs.append(Document(id=doc.id, text=doc.text, title=doc.title, url="",
                                 doc_type=doc.doc_type, date=doc.date, tags=doc.tags,
                                 metadata=doc.metadata))  # no URL: the upload is gone
    return docs, skipped


def mount_collection_writes(app: web.Application) -> None:
    """Add the routes and a writer over the server's index and task manager at start-up."""
    app.add_routes(collection_write_routes)

    async def start(app: web.Application) -> None:
        manager: TaskManager = app[TASK_MANAGER]
        app[COLLECTION_WRITER] = CollectionWriter(app[ENGINE_KEY].index, manager)
        await manager.start()  # index tasks left unfinished by a restart go on

    app.on_startup.append(start)


def collection_write_openapi_paths() -> dict[str, Any]:
    """OpenAPI 3.1 path items of the write routes, for the server's document to merge."""
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}

    def problems(*codes: tuple[str, str]) -> dict[str, Any]:
        out: dict[str, Any] = {k: {"description": v, "content": problem} for k, v in codes}
        out["401"] = {"description": "no valid token", "content": problem, "headers": {
            "WWW-Authenticate": {"required": True, "schema": {"type": "string"}}}}
        return out

    count = {"type": "integer", "minimum": 0}
    collection = {"type": "object", "required": ["name", "documents", "chunks", "generation",
                                                 "updated", "embedder"],
                  "properties": {"name": {"type": "string"}, "documents": count,
                                 "chunks": count, "generation": count,
                                 "updated": {"type": "number"},
                                 "embedder": {"type": "string"}}}
    skipped = {"type": "array", "items": {
        "type": "object", "required": ["path", "reason", "detail"],
        "properties": {"path": {"type": "string"},
                       "reason": {"enum": ["unsupported_type", "binary", "undecodable",
                                           "too_large", "dangling_link", "empty",
                                           "unreadable"]},
                       "detail": {"type": "string"}}}}
    accepted = {"description": "the indexing task (follow /v1/tasks/{id}/events)",
                "headers": {"Location": {"schema": {"type": "string"}}},
                "content": {"application/json": {"schema": {
                    "type": "object", "required": ["task", "skipped"],
                    "properties": {"task": {"type": "object"}, "skipped": skipped}}}}}
    name_schema = {"type": "string", "pattern": NAME_PATTERN}
    name = {"name": "name", "in": "path", "required": True, "schema": name_schema}
    doc_id = {"name": "doc_id", "in": "path", "required": True, "schema": {"type": "string"}}
    document = {"type": "object", "additionalProperties": False, "required": ["id", "text"],
                "properties": {"id": {"type": "string", "minLength": 1, "maxLength": 500},
                               "text": {"type": "string"}, "title": {"type": "string"},
                               "metadata": {"type": "object"}}}
    writes = (("403", "not yours to write"), ("404", "no such collection"),
              ("422", "invalid name"))
    return {
        "/v1/collections": {"post": {
            "operationId": "createCollection",
            "summary": "Create an empty collection you own",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "additionalProperties": False, "required": ["name"],
                "properties": {"name": name_schema,
                               "embedder": {"enum": ["auto", "minilm", "multilingual"]}}}}}},
            "responses": {"201": {"description": "the new collection (generation 0)",
                                  "headers": {"Location": {"schema": {"type": "string"}}},
                                  "content": {"application/json": {"schema": collection}}},
                          **problems(("400", "invalid JSON"), ("403", "may not create"),
                                     ("409", "name taken"), ("413", "body too large"),
                                     ("415", "not JSON"), ("422", "invalid body"))}}},
        "/v1/collections/{name}/documents": {"post": {
            "operationId": "addDocuments",
            "summary": "Add or replace documents: files (multipart) or JSON",
            "parameters": [name],
            "requestBody": {"required": True, "content": {
                "application/json": {"schema": {
                    "type": "object", "additionalProperties": False,
                    "required": ["documents"],
                    "properties": {"documents": {"type": "array", "minItems": 1,
                                                 "items": document}}}},
                "multipart/form-data": {"schema": {
                    "type": "object", "required": ["file"], "additionalProperties": False,
                    "properties": {"file": {
                        "type": "array", "minItems": 1, "items": {"type": "string",
                                                   "contentMediaType":
                                                       "application/octet-stream"}}}}}}},
            "responses": {"202": accepted,
                          "200": {"description": "nothing could be indexed: every file "
                                                 "skipped (with its reason), no task",
                                  "content": {"application/json": {"schema": {
                                      "type": "object", "required": ["task", "skipped"],
                                      "properties": {"task": {"type": "null"},
                                                     "skipped": skipped}}}}},
                          **problems(("400", "invalid JSON or multipart body"), *writes,
                                     ("413", "over the upload size or the storage quota"),
                                     ("415", "not JSON"), ("422", "invalid body"))}}},
        "/v1/collections/{name}/documents/{doc_id}": {"delete": {
            "operationId": "deleteDocument",
            "summary": "Remove a document (a background build)",
            "parameters": [name, doc_id],
            "responses": {"202": accepted, **problems(*writes)}}},
        "/v1/collections/{name}": {"delete": {
            "operationId": "deleteCollection",
            "summary": "Delete a collection you may write",
            "parameters": [name],
            "responses": {"200": {"description": "deleted", "content": {"application/json": {
                "schema": {"type": "object", "required": ["name", "deleted"],
                           "properties": {"name": {"type": "string"},
                                          "deleted": {"const": True}}}}}},
                          **problems(*writes)}}},
    }
