"""ChatSupportJudge through a real HTTP client against a local OpenAI-shaped server:
one call per draft, cached verdicts, and every failure a JudgeError that says why."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from actors.models import OpenAIChatClient
from reactive_rag.judgement._judges import JudgeError, SupportItem, SupportVerdict
from reactive_rag.judgement.model._support import SUPPORT_SCHEMA, ChatSupportJudge
from tests.actors._openai_fixtures import (
    FakeOpenAI,
    Hang,
    JsonBody,
    Status,
    stream_reply,
)

from ._schemas import strict_problems

QUESTION = "Which country is the band from?"
PASSAGE = "The Kooks are an English indie rock band formed in Brighton in 2004."
ITEMS = [
    SupportItem(0, "The band comes from England.", "an English indie rock band",
                "kooks#0", "The Kooks", PASSAGE),
    SupportItem(1, "It was formed in 2004.", "formed in Brighton in 2004",
                "kooks#0", "The Kooks", PASSAGE),
]


def verdicts(*rows: tuple[int, str]) -> str:
    return json.dumps({"verdicts": [{"claim": i, "reason": "r", "label": label}
                                    for i, label in rows]})


@pytest.fixture
async def client(server: FakeOpenAI) -> AsyncIterator[OpenAIChatClient]:
    async with OpenAIChatClient(server.base_url, model="judge-m", max_retries=0) as c:
        yield c


def user_message(body: dict[str, Any]) -> str:
    return str(body["messages"][1]["content"])


def test_the_schema_is_valid_under_strict_mode() -> None:
    assert strict_problems(SUPPORT_SCHEMA) == []
    assert strict_problems({"type": "object", "properties": {"a": {}}, "required": [],
                            "additionalProperties": False})  # the checker itself bites


async def test_one_call_judges_every_claim_with_question_title_and_passage(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(stream_reply(verdicts((1, "unsupported"), (0, "supported"))))
    judge = ChatSupportJudge(client)

    got = await judge.judge(QUESTION, ITEMS)

    assert [(v.index, v.label) for v in got] == [(0, "supported"), (1, "unsupported")]
    assert len(server.requests) == 1 and judge.name == "judge-m"
    body = server.requests[0]
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "support"
    assert fmt["json_schema"]["strict"] is True
    assert strict_problems(fmt["json_schema"]["schema"]) == []
    text = user_message(body)
    assert text.startswith(f"Question: {QUESTION}\n")
    assert "Claim 0: The band comes from England.\nCites: [kooks#0] The Kooks\n" \
           "Quote: an English indie rock band\nPassage: " + PASSAGE in text
    assert "Claim 1: It was formed in 2004." in text
    system = body["messages"][0]["content"]
    assert "off_question" in system and "abbreviations" in system


async def test_a_repaired_draft_sends_only_its_new_claims_and_a_known_one_none(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    judge = ChatSupportJudge(client)
    new = SupportItem(2, "It was formed in Brighton.", "formed in Brighton", "kooks#0",
                      "The Kooks", PASSAGE)
    server.script(stream_reply(verdicts((0, "supported"), (1, "supported"))),
                  stream_reply(verdicts((1, "supported"))))

    await judge.judge(QUESTION, ITEMS)
    # the repaired draft: claim 1 is now claim 0, the new claim is claim 1
    moved = [SupportItem(0, *vars_of(ITEMS[1])), SupportItem(1, *vars_of(new))]
    second = await judge.judge(QUESTION, moved)
    third = await judge.judge(QUESTION, moved)

    assert len(server.requests) == 2 and judge.calls == 2  # the third made no call
    resent = user_message(server.requests[1])
    assert "Claim 1: It was formed in Brighton." in resent and "Claim 0" not in resent
    assert [v.index for v in second] == [0, 1] and second == third
    assert all(v.label == "supported" for v in second)


def vars_of(item: SupportItem) -> tuple[str, str, str, str, str]:
    return item.statement, item.quote, item.source_id, item.title, item.passage


async def test_the_same_claim_for_another_question_is_judged_again(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    judge = ChatSupportJudge(client)
    server.script(stream_reply(verdicts((0, "supported"), (1, "supported"))),
                  stream_reply(verdicts((0, "off_question"), (1, "off_question"))))
    await judge.judge(QUESTION, ITEMS)
    got = await judge.judge("When did the band split?", ITEMS)
    assert [v.label for v in got] == ["off_question", "off_question"]


async def test_no_claims_means_no_call(server: FakeOpenAI, client: OpenAIChatClient) -> None:
    assert await ChatSupportJudge(client).judge(QUESTION, []) == []
    assert server.requests == []


async def test_a_verdict_wrapped_in_prose_and_odd_label_spelling_is_read(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    body = ('Sure!\n```json\n{"verdicts": [{"claim": "0", "label": "Supported", '
            '"reason": "says English"}, {"claim": 1, "label": "off-question", "reason": ""}]}\n```')
    server.script(JsonBody({"choices": [{"index": 0, "message": {"role": "assistant",
                                                                  "content": body},
                                         "finish_reason": "stop"}]}))
    got = await ChatSupportJudge(client, response_format="none").judge(QUESTION, ITEMS)
    assert got == [SupportVerdict(0, "supported", "says English"),
                   SupportVerdict(1, "off_question", "")]
    assert "response_format" not in server.requests[0]


@pytest.mark.parametrize("content", ["I think both are fine.", '{"verdicts": "yes"}'])
async def test_a_malformed_reply_is_a_judge_error(
    server: FakeOpenAI, client: OpenAIChatClient, content: str
) -> None:
    server.script(stream_reply(content))
    with pytest.raises(JudgeError, match="support judge 'judge-m' replied with no JSON"):
        await ChatSupportJudge(client).judge(QUESTION, ITEMS)


async def test_a_missing_verdict_is_a_judge_error_and_nothing_is_cached(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    judge = ChatSupportJudge(client)
    server.script(stream_reply(verdicts((0, "supported"), (7, "supported"))),
                  stream_reply(verdicts((0, "supported"), (1, "maybe"))),
                  stream_reply(verdicts((0, "supported"), (1, "contradicted"))))
    for _ in range(2):
        with pytest.raises(JudgeError, match=r"no usable verdict for claim\(s\) 1"):
            await judge.judge(QUESTION, ITEMS)
    got = await judge.judge(QUESTION, ITEMS)
    assert [v.label for v in got] == ["supported", "contradicted"]
    assert len(server.requests) == 3


async def test_a_server_error_is_a_judge_error_with_its_status(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(Status(500, '{"error": {"message": "boom"}}'))
    with pytest.raises(JudgeError) as caught:
        await ChatSupportJudge(client).judge(QUESTION, ITEMS)
    assert caught.value.status == 500 and caught.value.model == "judge-m"
    assert caught.value.role == "support"
    assert "support judge 'judge-m' failed (HTTP 500)" in str(caught.value)


async def test_a_rate_limit_carries_retry_after(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(Status(429, "slow down", headers={"Retry-After": "60"}))
    with pytest.raises(JudgeError) as caught:
        await ChatSupportJudge(client).judge(QUESTION, ITEMS)
    assert caught.value.status == 429 and caught.value.retry_after == 60.0
    assert "retry after 60 s" in str(caught.value)


async def test_a_stalled_server_is_a_judge_error_naming_the_timeout(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(Hang())
    with pytest.raises(JudgeError) as caught:
        await ChatSupportJudge(client, timeout_s=0.3).judge(QUESTION, ITEMS)
    assert caught.value.timeout_s == 0.3
    assert str(caught.value) == "support judge 'judge-m' timed out after 0.3 s"


async def test_a_long_passage_is_shown_around_the_quote(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    filler = "Lorem ipsum dolor sit amet. " * 200
    item = SupportItem(0, "It was formed in 2004.", "formed in Brighton in 2004", "kooks#3",
                       "The Kooks", filler + PASSAGE + " " + filler)
    server.script(stream_reply(verdicts((0, "supported"))))

    await ChatSupportJudge(client, max_passage_chars=400).judge(QUESTION, [item])

    passage = user_message(server.requests[0]).split("Passage: ", 1)[1].split("\n")[0]
    assert "formed in Brighton in 2004" in passage and len(passage) <= 420


async def test_a_reply_cut_at_max_tokens_says_so(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(stream_reply(verdicts((0, "supported"), (1, "supported"))[:50],
                               finish="length"))
    with pytest.raises(JudgeError, match="cut off at max_tokens 40"):
        await ChatSupportJudge(client, max_tokens=40).judge(QUESTION, ITEMS)
    assert server.requests[0]["max_tokens"] == 40
