"""ChatWholeDocument against a local OpenAI-shaped server: the model picks a listed
document (the rules' verdict is only its hint); anything else is a judge error."""

from __future__ import annotations

import json

import pytest

from actors.models import OpenAIChatClient
from reactive_rag.judgement import DocumentRef, JudgeError, WholeDocumentRequest
from reactive_rag.judgement.model import WHOLE_DOCUMENT_SCHEMA, ChatWholeDocument
from tests.actors._openai_fixtures import FakeOpenAI, Status, stream_reply

from ._schemas import strict_problems

DOCS = [DocumentRef("docs", "guides/deployment.md", "Deployment guide"),
        DocumentRef("docs", "notes/release-2.md", "Release notes 2.0")]
QUESTION = "Walk me through the release notes"


def reply(flag: bool, document: str = "", reason: str = "") -> str:
    return json.dumps({"whole_document": flag, "document": document, "reason": reason})


def test_the_schema_is_valid_under_strict_mode() -> None:
    assert strict_problems(WHOLE_DOCUMENT_SCHEMA) == []


async def test_the_model_names_a_listed_document_by_number_over_the_rules_hint(
        server: FakeOpenAI, client: OpenAIChatClient) -> None:
    server.script(stream_reply(reply(True, "2", "asks for the notes as a whole")))

    got = await ChatWholeDocument(client).judge(QUESTION, DOCS, None)

    assert got == WholeDocumentRequest(DOCS[1], "asks for the notes as a whole", by="model")
    text = str(server.requests[0]["messages"][1]["content"])
    assert text.startswith(f"Question: {QUESTION}\n")
    assert "[2] id=notes/release-2.md collection=docs title=Release notes 2.0" in text
    assert "Offline hint: not a whole-document question" in text


async def test_the_model_may_say_no_to_the_rules(
        server: FakeOpenAI, client: OpenAIChatClient) -> None:
    server.script(stream_reply(reply(False)))
    hint = WholeDocumentRequest(DOCS[0], "rules")
    assert await ChatWholeDocument(client).judge("Summarise the deployment guide's TLS part",
                                                 DOCS, hint) is None
    assert "the whole of 'guides/deployment.md'" in str(
        server.requests[0]["messages"][1]["content"])


@pytest.mark.parametrize("content", ["Sure, the notes.", reply(True, "9"),
                                     reply(True, "secret/other.md")])
async def test_a_reply_naming_no_listed_document_is_a_judge_error(
        server: FakeOpenAI, client: OpenAIChatClient, content: str) -> None:
    server.script(stream_reply(content))
    with pytest.raises(JudgeError):
        await ChatWholeDocument(client).judge(QUESTION, DOCS, None)


async def test_a_server_error_is_a_judge_error_with_its_status(
        server: FakeOpenAI, client: OpenAIChatClient) -> None:
    server.script(Status(503, '{"error": {"message": "busy"}}'))
    with pytest.raises(JudgeError) as caught:
        await ChatWholeDocument(client).judge(QUESTION, DOCS, None)
    assert caught.value.status == 503 and caught.value.role == "whole_document"
