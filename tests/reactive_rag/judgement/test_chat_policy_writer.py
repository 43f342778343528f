"""ChatWriter over a real HTTP client against a local OpenAI-protocol server."""

from __future__ import annotations

import json

import pytest

from actors.models._chat import OpenAIChatClient
from actors.models._chat_exceptions import ChatServerError
from reactive_rag.judgement.model._writer import ChatWriter, parse_claims
from streams import Claim, ClaimError, EvidenceChunk
from tests.actors._openai_fixtures import FakeOpenAI, Status, stream_reply

QUESTION = "Which river flows through Paris?"
EVIDENCE = [
    EvidenceChunk(id="paris#2", title="Paris", text="Paris lies on the Seine river, in the north."),
    EvidenceChunk(id="seine#0", title="Seine", text="The Seine is 777 km long."),
]


def claims_json(*claims: tuple[str, str, str]) -> str:
    return json.dumps(
        {"claims": [{"statement": s, "source_id": i, "quote": q} for s, i, q in claims]}
    )


GOOD = claims_json(
    ("The Seine flows through Paris.", "paris#2", "Paris lies on the Seine river"),
    ("It is 777 km long.", "seine#0", "The Seine is 777 km long."),
)


@pytest.fixture
def writer(client: OpenAIChatClient) -> ChatWriter:
    return ChatWriter(client)


async def test_claims_parse_from_fenced_json_in_a_streamed_reply(
    server: FakeOpenAI, writer: ChatWriter
) -> None:
    reply = f"Here is the answer:\n```json\n{GOOD}\n```\nI hope this helps!"
    server.script(stream_reply(reply, usage=(300, 80), piece=3))
    draft = await writer.write(QUESTION, EVIDENCE, mode="answer")

    assert draft.claims == (
        Claim(statement="The Seine flows through Paris.", source_id="paris#2",
              quote="Paris lies on the Seine river"),
        Claim(statement="It is 777 km long.", source_id="seine#0",
              quote="The Seine is 777 km long."),
    )
    assert draft.text == "The Seine flows through Paris. It is 777 km long."
    assert draft.tokens == 380


async def test_prompt_numbers_the_evidence_with_ids_and_asks_for_json(
    server: FakeOpenAI, writer: ChatWriter
) -> None:
    server.script(stream_reply(GOOD))

    await writer.write(QUESTION, EVIDENCE, mode="answer")

    body = server.requests[0]
    assert body["response_format"] == {"type": "json_object"}
    prompt = body["messages"][1]["content"]
    assert "[1] [paris#2] Paris" in prompt and "[2] [seine#0] Seine" in prompt
    assert "Paris lies on the Seine river" in prompt and QUESTION in prompt
    assert '"claims"' in body["messages"][0]["content"]


async def test_claims_citing_ids_not_given_are_passed_on_with_a_note(
    server: FakeOpenAI, writer: ChatWriter
) -> None:
    """The verifier rejects an unknown id with a typed reason; the parser never drops it."""
    server.script(
        stream_reply(
            claims_json(
                ("Paris is on the Seine.", "paris#2", "Paris lies on the Seine river"),
                ("Paris has 2 million people.", "wiki#99", "2.1 million inhabitants"),
                ("The Seine is long.", "[2]", "The Seine is 777 km long."),
            )
        )
    )

    draft = await writer.write(QUESTION, EVIDENCE, mode="answer")

    assert [c.source_id for c in draft.claims] == ["paris#2", "wiki#99", "seine#0"]
    assert any("wiki#99" in n and "not given" in n for n in draft.notes)
    assert any("'[2]'" in n and "seine#0" in n for n in draft.notes)


async def test_quotes_are_passed_on_verbatim_even_when_empty_or_missing(
    server: FakeOpenAI, writer: ChatWriter
) -> None:
    wrong = "Paris sits by the Seine"  # not in the chunk: the verifier's call, not ours
    reply = json.dumps(
        {
            "claims": [
                {"statement": "On the Seine.", "source_id": "paris#2", "quote": wrong},
                {"statement": "It is long.", "source_id": "seine#0", "quote": ""},
                {"statement": "It is 777 km.", "source_id": "seine#0"},
            ]
        }
    )
    server.script(stream_reply(reply))

    draft = await writer.write(QUESTION, EVIDENCE, mode="answer")

    assert [c.quote for c in draft.claims] == [wrong, "", ""]
    assert sum("empty quote" in n for n in draft.notes) == 2


async def test_repair_mode_shows_the_verifiers_exact_errors_and_the_previous_draft(
    server: FakeOpenAI, writer: ChatWriter
) -> None:
    first = claims_json(("On the Seine.", "paris#2", "Paris sits by the Seine"))
    server.script(stream_reply(first), stream_reply(GOOD))
    await writer.write(QUESTION, EVIDENCE, mode="answer")
    errors = [ClaimError(index=0, source_id="paris#2", reason="quote not found in paris#2")]

    draft = await writer.write(QUESTION, EVIDENCE, mode="repair", errors=errors)

    prompt = server.requests[1]["messages"][1]["content"]
    assert "- claim 0 (source paris#2): quote not found in paris#2" in prompt
    assert "Paris sits by the Seine" in prompt  # the rejected draft, so it can be fixed
    assert len(draft.claims) == 2


async def test_finalize_mode_says_the_budget_is_spent(
    server: FakeOpenAI, writer: ChatWriter
) -> None:
    server.script(stream_reply(GOOD))
    await writer.write(QUESTION, EVIDENCE, mode="finalize")
    assert "budget is used up" in server.requests[0]["messages"][1]["content"]


async def test_a_reply_cut_at_the_token_limit_twice_keeps_the_complete_claims(
    server: FakeOpenAI, writer: ChatWriter
) -> None:
    cut = GOOD[: GOOD.index("777 km long.\"}") - 3]
    server.script(stream_reply(cut, finish="length"), stream_reply(cut, finish="length"))

    draft = await writer.write(QUESTION, EVIDENCE, mode="answer")

    assert [c.source_id for c in draft.claims] == ["paris#2"]
    assert any("cut off" in n for n in draft.notes)
    assert len(server.requests) == 2  # retried once, with a larger limit
    assert server.requests[1]["max_tokens"] > server.requests[0]["max_tokens"]


async def test_a_reply_with_no_json_gives_an_empty_draft_not_an_error(
    server: FakeOpenAI, writer: ChatWriter
) -> None:
    server.script(stream_reply("Sources: Paris lies on the Seine river. Answer: the Seine"))
    draft = await writer.write(QUESTION, EVIDENCE, mode="answer")

    assert draft.claims == () and draft.text == ""
    assert any("no JSON claims" in n for n in draft.notes)


async def test_a_failing_server_raises_a_typed_error(
    server: FakeOpenAI, writer: ChatWriter
) -> None:
    server.script(Status(503, "overloaded", content_type="text/plain"))
    with pytest.raises(ChatServerError):
        await writer.write(QUESTION, EVIDENCE, mode="answer")


async def test_writer_respects_the_time_the_run_has_left(server: FakeOpenAI) -> None:
    server.script(stream_reply(GOOD))
    async with OpenAIChatClient(server.base_url, model="m") as client:
        writer = ChatWriter(client, timeout_for=lambda: 0.0)
        with pytest.raises(TimeoutError):
            await writer.write(QUESTION, EVIDENCE, mode="answer")
    assert server.requests == []


@pytest.mark.parametrize(
    "text",
    [
        '[{"statement": "S.", "source_id": "paris#2", "quote": "Paris lies"}]',
        'noise {"claims": [{"statement": "S.", "source_id": "paris#2", "quote": "Paris lies"}]} x',
        '{"other": 1} then {"claims": [{"statement": "S.", "source_id": "paris#2", '
        '"quote": "Paris lies"}]}',
    ],
)
def test_parse_claims_finds_the_claims_wherever_they_are(text: str) -> None:
    claims, _ = parse_claims(text, EVIDENCE)
    assert claims == [Claim(statement="S.", source_id="paris#2", quote="Paris lies")]


def test_parse_claims_drops_duplicates() -> None:
    one = {"statement": "S.", "source_id": "paris#2", "quote": "Paris lies"}
    claims, _ = parse_claims(json.dumps({"claims": [one, one]}), EVIDENCE)
    assert len(claims) == 1


async def test_no_evidence_means_an_empty_draft_without_a_model_call(
    server: FakeOpenAI, writer: ChatWriter
) -> None:
    draft = await writer.write(QUESTION, [], mode="finalize")
    assert draft.claims == () and draft.notes == ("no evidence was given",)
    assert server.requests == []
