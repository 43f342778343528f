"""ChatSufficiency through a real HTTP client against a local OpenAI-shaped server:
the model decides (the offline verdict is only a hint), conflicts cite given passages."""

from __future__ import annotations

import json
from typing import Any

import pytest

from actors.models import OpenAIChatClient
from reactive_rag.judgement import Answerability
from reactive_rag.judgement._judges import JudgeError
from reactive_rag.judgement.model._sufficiency import ANSWERABILITY_SCHEMA, ChatSufficiency
from streams import ConflictSide, EvidenceChunk
from tests.actors._openai_fixtures import FakeOpenAI, Hang, Status, stream_reply

from ._schemas import strict_problems

QUESTION = "How many parameters does the model have?"
BLOG = EvidenceChunk(id="blog#0", title="My take on the new model", score=0.81,
                     text="Rumour says the model has 70 billion parameters, wow.")
DOCS = EvidenceChunk(id="docs#4", title="Model card", score=0.77,
                     text="The model has 130 billion parameters and a 32k context.")
STUB = EvidenceChunk(id="card#9", title="Model card (disambiguation)", text="Model card")
PASSAGES = [BLOG, DOCS, STUB]


def judgement(verdict: str = "answerable", **kw: Any) -> str:
    body: dict[str, Any] = {"verdict": verdict, "answer_type": "number", "covered": [],
                            "missing": [], "searches": [], "reason": "", "conflicts": []}
    return json.dumps(body | kw)


def user_message(body: dict[str, Any]) -> str:
    return str(body["messages"][1]["content"])


def test_the_schema_is_valid_under_strict_mode() -> None:
    assert strict_problems(ANSWERABILITY_SCHEMA) == []


async def test_one_structured_call_shows_question_passages_and_the_hint(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(stream_reply(judgement("answerable", covered=["parameter count"],
                                         reason="The model card gives the count.")))
    hint = Answerability("partial", missing=("parameters",), reason="a word is missing")

    got = await ChatSufficiency(client).judge(QUESTION, PASSAGES, hint)

    assert got.judged == Answerability("answerable", answer_type="number",
                                       covered=("parameter count",),
                                       reason="The model card gives the count.")
    assert got.conflicts == ()
    body = server.requests[0]
    fmt = body["response_format"]
    assert fmt["json_schema"]["name"] == "answerability" and fmt["json_schema"]["strict"]
    assert strict_problems(fmt["json_schema"]["schema"]) == []
    text = user_message(body)
    assert text.startswith(f"Question: {QUESTION}\n")
    assert "[1] [blog#0] My take on the new model (score 0.81)\n" + BLOG.text in text
    assert "[2] [docs#4] Model card (score 0.77)\n" + DOCS.text in text
    assert "card#9" not in text  # a stub that only repeats its title
    hint_line = next(line for line in text.splitlines() if line.startswith("Offline hint:"))
    assert "partial" in hint_line and "'parameters'" in hint_line and "you decide" in hint_line


async def test_the_model_overrules_an_unanswerable_hint(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(stream_reply(judgement("answerable")))
    got = await ChatSufficiency(client).judge(QUESTION, PASSAGES,
                                              Answerability("unanswerable"))
    assert got.judged.verdict == "answerable"
    assert got.judged.reason  # never empty, even when the model gave none


async def test_without_a_hint_no_hint_line(server: FakeOpenAI, client: OpenAIChatClient) -> None:
    server.script(stream_reply(judgement("partial", missing=["the date"])))
    got = await ChatSufficiency(client).judge(QUESTION, PASSAGES, None)
    assert "Offline hint" not in user_message(server.requests[0])
    assert got.judged.verdict == "partial" and got.judged.missing == ("the date",)


async def test_searches_are_bounded(server: FakeOpenAI, client: OpenAIChatClient) -> None:
    server.script(stream_reply(judgement(
        "partial", searches=["a", "b", "", "b", "c", "d", "e"])))
    got = await ChatSufficiency(client).judge(QUESTION, PASSAGES, None)
    assert got.judged.searches == ("a", "b", "c")


async def test_conflicts_across_titles_cite_given_passages_with_titles(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    conflicts = [
        {"subject": "the model", "attribute": "parameter count", "sides": [
            {"source_id": "blog#0", "value": "70 billion",
             "quote": "the model has 70 billion parameters"},
            {"source_id": "[docs#4]", "value": "130 billion",
             "quote": "The model has 130 billion parameters"},
            {"source_id": "forum#1", "value": "90 billion", "quote": "90 billion"},
        ]},
        {"subject": "the model", "attribute": "context", "sides": [  # one side left: dropped
            {"source_id": "docs#4", "value": "32k", "quote": "a 32k context"},
            {"source_id": "nowhere#0", "value": "8k", "quote": "8k"},
        ]},
    ]
    server.script(stream_reply(judgement("answerable", conflicts=conflicts)))

    got = await ChatSufficiency(client).judge(QUESTION, PASSAGES, None)

    assert len(got.conflicts) == 1
    conflict = got.conflicts[0]
    assert conflict.attribute == "parameter count" and conflict.preferred is None
    assert conflict.sides == (
        ConflictSide(chunk_id="blog#0", value="70 billion",
                     quote="the model has 70 billion parameters", title=BLOG.title),
        ConflictSide(chunk_id="docs#4", value="130 billion",
                     quote="The model has 130 billion parameters", title=DOCS.title),
    )
    assert all(s.quote in (BLOG.text + DOCS.text) for s in conflict.sides)


@pytest.mark.parametrize("content", ["Looks fine to me.", '{"verdict": "maybe"}'])
async def test_a_reply_without_a_known_verdict_is_a_judge_error(
    server: FakeOpenAI, client: OpenAIChatClient, content: str
) -> None:
    server.script(stream_reply(content))
    with pytest.raises(JudgeError, match="sufficiency judge 'm' gave no known verdict"):
        await ChatSufficiency(client).judge(QUESTION, PASSAGES, None)


async def test_a_server_error_is_a_judge_error_with_its_status(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(Status(500, '{"error": {"message": "boom"}}'))
    with pytest.raises(JudgeError) as caught:
        await ChatSufficiency(client).judge(QUESTION, PASSAGES, None)
    assert caught.value.status == 500 and caught.value.role == "sufficiency"


async def test_a_stalled_server_is_a_judge_error_naming_the_timeout(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(Hang())
    with pytest.raises(JudgeError, match=r"sufficiency judge 'm' timed out after 0\.3 s"):
        await ChatSufficiency(client, timeout_s=0.3).judge(QUESTION, PASSAGES, None)


async def test_held_passages_not_chosen_are_listed_and_the_model_may_add_them(
        server: FakeOpenAI, client: OpenAIChatClient) -> None:
    other = EvidenceChunk(id="spec#2", title="Model specification", score=0.40,
                          text="The model has 130 billion parameters in total. " * 20)
    stray = EvidenceChunk(id="misc#1", title="Unrelated", text="Nothing about it.")
    # the model names one by id, one by its number, and one it was never shown
    server.script(stream_reply(judgement(add=["spec#2", "4", "ghost#0"])))

    found = await ChatSufficiency(client).judge(QUESTION, [BLOG], None, [other, stray])

    prompt = user_message(server.requests[0])
    head, _, tail = prompt.partition("Other passages the run holds")
    assert "[1] [blog#0]" in head and "[2] [spec#2]" in tail and "[3] [misc#1]" in tail
    assert len(tail) < 2 * 300 + 400, "other passages are shown briefly"
    assert found.judged.extra_ids == ("spec#2",)
    assert "add" in ANSWERABILITY_SCHEMA["required"]
