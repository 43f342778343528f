"""``GET /v1/collections``: each tenant lists only the indexed collections it may search."""

from __future__ import annotations

from pathlib import Path

from reactive_rag.index import Document
from reactive_rag.server import TenantConfig, hash_token

from .._corpus import DOCS
from .._server_fixtures import TOKENS, auth, build_index, serve, two_tenants


async def test_each_tenant_sees_its_own_collections_with_their_sizes(tmp_path: Path) -> None:
    index = build_index(tmp_path / "idx")
    try:
        async with serve(tmp_path, index, tenants=two_tenants()) as client:
            acme = await (await client.get("/v1/collections", headers=auth("acme"))).json()
            beta = await (await client.get("/v1/collections", headers=auth("beta"))).json()
    finally:
        index.close()
    assert [c["name"] for c in acme["collections"]] == ["demo"]
    assert [c["name"] for c in beta["collections"]] == ["demo", "secret"]
    demo = acme["collections"][0]
    assert demo["documents"] == len(DOCS) and demo["chunks"] >= len(DOCS)
    assert demo["generation"] == 1 and demo["updated"] > 0 and demo["embedder"]
    assert beta["collections"][1]["documents"] == 1
    assert "secret" not in str(acme)  # not even the name of another tenant's collection


async def test_a_reindex_shows_its_new_generation_and_counts(tmp_path: Path) -> None:
    index = build_index(tmp_path / "idx")
    try:
        async with serve(tmp_path, index, tenants=two_tenants()) as client:
            before = (await (await client.get("/v1/collections", headers=auth("acme")))
                      .json())["collections"][0]
            extra = Document(id="extra", title="Extra", text="A new page about kayaks.")
            index.index_documents("demo", [extra], mode="add")
            after = (await (await client.get("/v1/collections", headers=auth("acme")))
                     .json())["collections"][0]
    finally:
        index.close()
    assert after["generation"] == before["generation"] + 1
    assert after["documents"] == before["documents"] + 1
    assert after["updated"] >= before["updated"]


async def test_no_token_is_a_401_problem_and_unindexed_names_are_not_listed(
        tmp_path: Path) -> None:
    index = build_index(tmp_path / "idx")
    tenants = {
        **two_tenants(),
        "gamma": TenantConfig(token_sha256=(hash_token("gamma-token"),),
                              collections=("demo", "not-indexed-yet")),
    }
    try:
        async with serve(tmp_path, index, tenants=tenants) as client:
            resp = await client.get("/v1/collections")
            problem = await resp.json()
            wrong = await client.get("/v1/collections",
                                     headers={"Authorization": f"Bearer {TOKENS['acme']}x"})
            gamma = await (await client.get(
                "/v1/collections", headers={"Authorization": "Bearer gamma-token"})).json()
    finally:
        index.close()
    assert resp.status == 401 and problem["code"] == "unauthorized"
    assert resp.headers["Content-Type"].startswith("application/problem+json")
    assert wrong.status == 401
    assert [c["name"] for c in gamma["collections"]] == ["demo"]


async def test_open_mode_lists_every_collection(tmp_path: Path) -> None:
    index = build_index(tmp_path / "idx")
    try:
        async with serve(tmp_path, index) as client:
            body = await (await client.get("/v1/collections")).json()
            doc = await (await client.get("/v1/openapi.json")).json()
    finally:
        index.close()
    assert [c["name"] for c in body["collections"]] == ["demo", "secret"]
    listed = doc["paths"]["/v1/collections"]["get"]
    assert listed["operationId"] == "listCollections" and "401" not in listed["responses"]
