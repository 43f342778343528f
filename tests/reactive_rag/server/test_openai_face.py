"""The OpenAI-compatible face on a real server, driven by the official ``openai`` client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp.test_utils import TestClient
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

from reactive_rag.index import CorpusIndex
from reactive_rag.store import RunMeta, RunRecord, SqliteRunStore, StoreUnavailable
from streams import Event

from ..._eventually import eventually
from .._server_fixtures import (
    QUESTION,
    TOKENS,
    GatedPlanner,
    auth,
    read_sse,
    serve,
    two_tenants,
)

Client = TestClient[Any, Any]
USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": QUESTION}]


@asynccontextmanager
async def openai_for(client: Client, token: str) -> AsyncIterator[AsyncOpenAI]:
    """The official client pointed at the test server (no retries: each error is seen)."""
    async with AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=token,
                           max_retries=0) as oai:
        yield oai


async def stored_run(client: Client, run_id: str, tenant: str = "acme") -> dict[str, Any]:
    resp = await client.get(f"/v1/runs/{run_id}", headers=auth(tenant))
    assert resp.status == 200, await resp.text()
    body: dict[str, Any] = await resp.json()
    return body


async def run_events(client: Client, run_id: str, tenant: str = "acme") -> list[Any]:
    async with client.get(f"/v1/runs/{run_id}/events", headers=auth(tenant)) as resp:
        return (await read_sse(resp)).events


async def test_the_models_are_listed_for_a_tenant_and_a_wrong_token_is_refused(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        async with openai_for(client, TOKENS["acme"]) as oai:
            models = [m async for m in oai.models.list()]
        assert [m.id for m in models] == ["reactive-rag", "reactive-rag-rag"]
        assert {m.object for m in models} == {"model"} and all(m.owned_by for m in models)
        async with openai_for(client, "not-a-token") as oai:
            with pytest.raises(openai.AuthenticationError) as listed:
                await oai.models.list()
            with pytest.raises(openai.AuthenticationError) as asked:
                await oai.chat.completions.create(model="reactive-rag", messages=USER)
        for refused in (listed.value, asked.value):
            assert refused.status_code == 401 and refused.code == "invalid_api_key"
            assert refused.type == "invalid_request_error"
        assert (await client.get("/v1/runs", headers=auth("acme"))).status == 200
        assert (await (await client.get("/v1/runs", headers=auth("acme"))).json())["runs"] == []


async def test_a_completion_is_the_cited_verified_answer_of_a_stored_run_of_its_tenant(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        async with openai_for(client, TOKENS["acme"]) as oai:
            raw = await oai.chat.completions.with_raw_response.create(
                model="reactive-rag", messages=USER)
            run_id = raw.headers["X-Run-Id"]
            assert raw.headers["X-Run-Events"] == f"/v1/runs/{run_id}/events"
            assert f"</v1/runs/{run_id}/events>" in raw.headers["Link"]
            completion = raw.parse()
            rag = await oai.chat.completions.create(model="reactive-rag-rag", messages=USER)
        choice = completion.choices[0]
        assert completion.object == "chat.completion" and completion.model == "reactive-rag"
        assert choice.finish_reason == "stop" and choice.message.role == "assistant"
        assert completion.usage is not None and completion.usage.total_tokens == 0  # offline
        extension = (completion.model_extra or {})["reactive_rag"]
        assert extension["run_id"] == run_id and extension["outcome"] == "answered"
        run = await stored_run(client, run_id)
        assert run["status"] == "finished" and run["mode"] == "agent"
        assert run["question"] == QUESTION == extension["question"]
        content = choice.message.content or ""
        assert content.startswith(run["answer"]) and "[1]" in run["answer"]
        sources = content[len(run["answer"]):]
        assert sources.startswith("\n\nSources:\n")
        assert extension["citations"] == run["citations"] and run["citations"]
        for cited in run["citations"]:
            assert f"[{cited['number']}] {cited['title']} - {cited['url']}" in sources
            assert cited["quote"] and cited["source_id"]
        rag_run = await stored_run(client, (rag.model_extra or {})["reactive_rag"]["run_id"])
        assert rag_run["mode"] == "rag" and rag_run["outcome"] == "answered"
        mine = await (await client.get("/v1/runs", headers=auth("acme"))).json()
        assert {r["run_id"] for r in mine["runs"]} == {run_id, rag_run["run_id"]}
        theirs = await (await client.get("/v1/runs", headers=auth("beta"))).json()
        assert theirs["runs"] == []
        assert (await client.get(f"/v1/runs/{run_id}", headers=auth("beta"))).status == 404


async def test_a_stream_sends_only_the_verified_answer_then_its_citations(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        async with openai_for(client, TOKENS["acme"]) as oai:
            raw = await oai.chat.completions.with_raw_response.create(
                model="reactive-rag", messages=USER, stream=True,
                stream_options={"include_usage": True})
            run_id = raw.headers["X-Run-Id"]
            assert raw.headers["Content-Type"].startswith("text/event-stream")
            chunks = [chunk async for chunk in raw.parse()]
        assert {c.object for c in chunks} == {"chat.completion.chunk"}
        assert {c.id for c in chunks} == {f"chatcmpl-{run_id}"}
        assert chunks[0].choices[0].delta.role == "assistant"
        *answering, last, usage = chunks
        assert usage.choices == [] and usage.usage is not None
        assert usage.usage.total_tokens == 0
        deltas = [c.choices[0].delta.content or "" for c in answering]
        assert all(c.choices[0].finish_reason is None for c in answering)
        assert last.choices[0].finish_reason == "stop"
        extension = (last.model_extra or {})["reactive_rag"]
        run = await stored_run(client, run_id)
        assert "".join(deltas) == run["answer"] and run["outcome"] == "answered"
        streamed = ""
        for delta in deltas:  # every piece is the next piece of the final answer
            streamed += delta
            assert run["answer"].startswith(streamed)
        published = [e.data["text"] for e in await run_events(client, run_id)
                     if e.event == "answer.delta"]
        assert [d for d in deltas if d] == published  # the verified deltas, one for one
        assert extension["citations"] == run["citations"] and run["citations"]
        assert extension["run_id"] == run_id and extension["outcome"] == "answered"


async def test_a_conversation_id_keeps_the_turns_and_reads_a_follow_up_against_them(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        async with openai_for(client, TOKENS["acme"]) as oai:
            extra = {"conversation_id": "chat-42"}
            first = await oai.chat.completions.with_raw_response.create(
                model="reactive-rag", extra_body=extra,
                messages=[{"role": "user", "content": "Who founded Bayer?"}])
            session_id = first.headers["X-Session-Id"]
            second = await oai.chat.completions.with_raw_response.create(
                model="reactive-rag", extra_body=extra, stream=True,
                messages=[{"role": "user", "content": "When was it founded?"}])
            assert second.headers["X-Session-Id"] == session_id
            chunks = [chunk async for chunk in second.parse()]
        turn = (chunks[-1].model_extra or {})["reactive_rag"]
        assert turn["session_id"] == session_id
        assert turn["question"] != "When was it founded?" and "Bayer" in turn["question"]
        run = await stored_run(client, second.headers["X-Run-Id"])
        assert run["question"] == turn["question"] and run["outcome"] == "answered"
        rewritten = [e for e in await run_events(client, run["run_id"])
                     if e.event == "query.rewritten"]
        assert rewritten and rewritten[0].data["standalone"] == turn["question"]
        resp = await client.get(f"/v1/sessions/{session_id}", headers=auth("acme"))
        turns = (await resp.json())["turns"]
        assert [t["run_id"] for t in turns] == [first.headers["X-Run-Id"], run["run_id"]]
        assert [t["question"] for t in turns] == ["Who founded Bayer?", "When was it founded?"]
        # the same conversation id is another conversation for another tenant
        assert (await client.get(f"/v1/sessions/{session_id}",
                                 headers=auth("beta"))).status == 404
        async with openai_for(client, TOKENS["beta"]) as oai:
            theirs = await oai.chat.completions.with_raw_response.create(
                model="reactive-rag", extra_body=extra,
                messages=[{"role": "user", "content": "When was it founded?"}])
        assert theirs.headers["X-Session-Id"] != session_id
        assert (theirs.parse().model_extra or {})["reactive_rag"]["question"] == \
            "When was it founded?"


async def test_without_a_conversation_id_the_earlier_messages_are_the_conversation(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index) as client:
        async with openai_for(client, "unused") as oai:
            first = await oai.chat.completions.create(
                model="reactive-rag", messages=[{"role": "user", "content": "Who founded Bayer?"}])
            follow_up = await oai.chat.completions.create(model="reactive-rag", messages=[
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Who founded Bayer?"},
                {"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": [{"type": "text", "text": "When was it founded?"}]},
            ])
        extension = (follow_up.model_extra or {})["reactive_rag"]
        assert extension["session_id"] is None
        assert extension["question"] != "When was it founded?" and "Bayer" in extension["question"]
        run = await stored_run(client, extension["run_id"])
        assert run["question"] == extension["question"] and run["outcome"] == "answered"
        assert "1863" in (follow_up.choices[0].message.content or "")


async def test_a_bad_model_collection_or_budget_is_an_openai_error(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    async with serve(tmp_path, server_index, tenants=two_tenants()) as client:
        async with openai_for(client, TOKENS["acme"]) as oai:
            with pytest.raises(openai.NotFoundError) as model:
                await oai.chat.completions.create(model="gpt-4o", messages=USER)
            with pytest.raises(openai.PermissionDeniedError) as forbidden:
                await oai.chat.completions.create(model="reactive-rag", messages=USER,
                                                  extra_body={"collections": ["secret"]})
            with pytest.raises(openai.UnprocessableEntityError) as over:
                await oai.chat.completions.create(model="reactive-rag", messages=USER,
                                                  extra_body={"budget": {"max_steps": 10**7}})
            with pytest.raises(openai.BadRequestError) as empty:
                await oai.chat.completions.create(model="reactive-rag", messages=[])
            with pytest.raises(openai.BadRequestError) as no_user:
                await oai.chat.completions.create(
                    model="reactive-rag", messages=[{"role": "system", "content": "Be brief."}])
        assert (model.value.code, model.value.param) == ("model_not_found", "model")
        assert (forbidden.value.code, forbidden.value.param) == ("collection_forbidden",
                                                                 "collections")
        assert over.value.code == "validation_failed" and over.value.param == "budget"
        assert "max_steps" in over.value.message
        assert empty.value.code == "missing_required_parameter"
        assert no_user.value.code == "no_user_message"
        assert (await (await client.get("/v1/runs", headers=auth("acme"))).json())["runs"] == []


async def test_a_tiny_budget_ends_with_the_documented_finish(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    tiny = {"budget": {"max_tool_calls": 1, "max_steps": 1}}
    async with serve(tmp_path, server_index) as client:
        async with openai_for(client, "unused") as oai:
            completion = await oai.chat.completions.create(
                model="reactive-rag", messages=USER, extra_body=tiny)
            chunks = [c async for c in await oai.chat.completions.create(
                model="reactive-rag", messages=USER, extra_body=tiny, stream=True)]
        extension = (completion.model_extra or {})["reactive_rag"]
        run = await stored_run(client, extension["run_id"])
        assert run["outcome"] == extension["outcome"] == "no_evidence"
        assert completion.choices[0].finish_reason == "stop"
        assert completion.choices[0].message.content == run["reason"] != ""
        assert extension["citations"] == [] and extension["reason"] == run["reason"]
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert streamed == run["reason"]  # no answer: the reason, in the ending chunk
        assert chunks[-1].choices[0].finish_reason == "stop"
        assert (chunks[-1].model_extra or {})["reactive_rag"]["outcome"] == "no_evidence"


async def test_a_client_that_leaves_does_not_cancel_its_run(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, tenants=two_tenants(),
                         planner=GatedPlanner) as client:
            async with openai_for(client, TOKENS["acme"]) as oai:
                raw = await oai.chat.completions.with_raw_response.create(
                    model="reactive-rag", messages=USER, stream=True)
                streamed_id = raw.headers["X-Run-Id"]
                stream = raw.parse()
                first = await stream.__anext__()
                assert first.choices[0].delta.role == "assistant"
                await stream.close()  # mid-run: the planner has not decided anything yet

                waiting = asyncio.create_task(
                    oai.chat.completions.create(model="reactive-rag", messages=USER))

                async def both_running() -> bool:
                    runs = (await (await client.get("/v1/runs", headers=auth("acme"))).json())
                    return len(runs["runs"]) == 2
                await eventually(both_running, "the non-streaming request's run to start")
                waiting.cancel()  # its connection closes while the run is going
                with pytest.raises(asyncio.CancelledError):
                    await waiting
            listing = await (await client.get("/v1/runs", headers=auth("acme"))).json()
            assert {r["status"] for r in listing["runs"]} == {"running"}
            GatedPlanner.gate.set()

            async def all_finished() -> bool:
                runs = (await (await client.get("/v1/runs", headers=auth("acme"))).json())
                return {r["status"] for r in runs["runs"]} == {"finished"}
            await eventually(all_finished, "both runs to finish", timeout_s=30)
            for summary in listing["runs"]:
                run = await stored_run(client, summary["run_id"])
                assert run["outcome"] == "answered" and run["answer"] and run["citations"]
                events = await run_events(client, summary["run_id"])
                assert events[-1].event == "run.finished"
            assert streamed_id in {r["run_id"] for r in listing["runs"]}
    finally:
        GatedPlanner.gate = None


# --- every error is OpenAI-shaped -----------------------------------------------------------


class DownStore(SqliteRunStore):
    """A real SQLite store that cannot create runs while ``down``."""

    down = False

    async def create_run(self, meta: RunMeta) -> RunRecord:
        if self.down:
            raise StoreUnavailable("SQLite: database or disk is full")
        return await super().create_run(meta)

    async def append(self, run_id: str, events: Sequence[Event]) -> int:
        return await super().append(run_id, events)


def _is_openai_error(status: int, body: Any, code: str) -> bool:
    return (isinstance(body, dict) and set(body) == {"error"}
            and set(body["error"]) == {"message", "type", "param", "code"}
            and body["error"]["code"] == code and isinstance(body["error"]["message"], str)
            and body["error"]["message"] != ""
            and isinstance(body["error"]["type"], str)
            and (body["error"]["type"] == "server_error") == (status >= 500))


async def test_every_error_on_these_routes_has_the_openai_shape(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    path = "/v1/chat/completions"
    good = {"model": "reactive-rag", "messages": USER}
    acme = {**auth("acme"), "Content-Type": "application/json"}
    cases: list[tuple[str, str, dict[str, str], bytes, int, str]] = [
        ("GET", "/v1/models", {}, b"", 401, "invalid_api_key"),
        ("POST", path, {"Authorization": "Bearer nope"}, json.dumps(good).encode(), 401,
         "invalid_api_key"),
        ("POST", path, acme, b"{not json", 400, "invalid_json"),
        ("POST", path, acme, b"[1, 2]", 400, "invalid_request"),
        ("POST", path, acme, json.dumps({"model": "reactive-rag"}).encode(), 400,
         "missing_required_parameter"),
        ("POST", path, acme, json.dumps({"messages": USER}).encode(), 400,
         "missing_required_parameter"),
        ("POST", path, acme, json.dumps({**good, "messages": [
            {"role": "assistant", "content": "hi"}]}).encode(), 400, "no_user_message"),
        ("POST", path, acme, json.dumps({**good, "model": "nope"}).encode(), 404,
         "model_not_found"),
        ("POST", path, acme, json.dumps({**good, "collections": ["secret"]}).encode(), 403,
         "collection_forbidden"),
        ("POST", path, acme, b"x" * (65 * 1024), 413, "body_too_large"),
        ("POST", path, {**auth("acme"), "Content-Type": "text/plain"},
         json.dumps(good).encode(), 415, "unsupported_media_type"),
        ("POST", path, acme, json.dumps({**good, "budget": {"max_steps": 0}}).encode(), 422,
         "validation_failed"),
        ("POST", path, acme, json.dumps({**good, "messages": [
            {"role": "robot", "content": "hi"}]}).encode(), 422, "validation_failed"),
        ("POST", path, acme, json.dumps({**good, "stream": "yes"}).encode(), 422,
         "validation_failed"),
    ]
    store = DownStore(tmp_path / "down.db")
    async with serve(tmp_path, server_index, tenants=two_tenants(runs_per_minute=2),
                     store=store) as client:
        for method, route, headers, body, status, code in cases:
            resp = await client.request(method, route, headers=headers, data=body)
            answer = await resp.json()
            assert resp.status == status and _is_openai_error(status, answer, code), \
                (route, code, resp.status, answer)
            assert resp.content_type == "application/json"
            if status == 401:
                assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        store.down = True  # takes one of the two starts a minute; the next one, the other
        refused = await client.post(path, json=good, headers=auth("acme"))
        assert refused.status == 503 and refused.headers["Retry-After"]
        assert _is_openai_error(503, await refused.json(), "store_unavailable")
        store.down = False
        assert (await client.post(path, json=good, headers=auth("acme"))).status == 200
        limited = await client.post(path, json=good, headers=auth("acme"))
        assert limited.status == 429 and 1 <= int(limited.headers["Retry-After"]) <= 60
        assert _is_openai_error(429, await limited.json(), "too_many_runs_per_minute")
        async with openai_for(client, TOKENS["acme"]) as oai:
            with pytest.raises(openai.RateLimitError) as raised:
                await oai.chat.completions.create(model="reactive-rag", messages=USER)
        assert raised.value.code == "too_many_runs_per_minute"
        assert raised.value.response.headers["Retry-After"]
        # the native API keeps its problem shape
        native = await client.post("/v1/runs", json={"question": "x"}, headers=auth("acme"))
        assert native.status == 429 and native.content_type == "application/problem+json"


async def test_the_raw_stream_keeps_alive_while_the_agent_works_then_ends_with_done(
        tmp_path: Path, server_index: CorpusIndex) -> None:
    """What any SSE consumer reads: the role chunk, keep-alive comments while nothing is
    verified yet, the answer's chunks, the ending, ``data: [DONE]``."""
    GatedPlanner.gate = asyncio.Event()
    try:
        async with serve(tmp_path, server_index, planner=GatedPlanner,
                         keepalive_s=0.05) as client:
            async with client.post("/v1/chat/completions",
                                   json={"model": "reactive-rag", "messages": USER,
                                         "stream": True}) as resp:
                assert resp.status == 200
                lines: list[str] = []
                while ": keep-alive\n" not in lines:  # the planner is held: nothing to say
                    lines.append((await resp.content.readline()).decode())
                GatedPlanner.gate.set()
                lines += [line.decode() async for line in resp.content]
            run_id = resp.headers["X-Run-Id"]
        frames = [line for line in lines if line.strip() and not line.startswith(":")]
        assert frames[-1] == "data: [DONE]\n"
        bodies = [json.loads(f.removeprefix("data: ")) for f in frames[:-1]]
        assert bodies[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert all(b["object"] == "chat.completion.chunk" and b["id"] == f"chatcmpl-{run_id}"
                   for b in bodies)
        assert bodies[-1]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None,
                                            "finish_reason": "stop"}
        assert bodies[-1]["reactive_rag"]["outcome"] == "answered"
        text = "".join(b["choices"][0]["delta"].get("content", "") for b in bodies)
        assert "[1]" in text and "1863" in text
    finally:
        GatedPlanner.gate = None
