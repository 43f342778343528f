"""ChatWriter: no claim dropped in the parser, the answer claim (or a yes/no lead) marked,
prompt hygiene (numbered passages with scores, edges order, no stubs, the token cap
stated) and a cut reply retried once with a larger limit, never as the same request."""

from __future__ import annotations

import json
from typing import Any

from actors.models import OpenAIChatClient
from reactive_rag.judgement.model._writer import ChatWriter, parse_draft
from streams import EvidenceChunk
from tests.actors._openai_fixtures import FakeOpenAI, Status, stream_reply

QUESTION = "Which river flows through Paris?"
EVIDENCE = [  # best first, as the selector gives them
    EvidenceChunk(id="paris#2", title="Paris", score=0.91,
                  text="Paris lies on the Seine river, in the north of France."),
    EvidenceChunk(id="seine#0", title="Seine", score=0.74, text="The Seine is 777 km long."),
    EvidenceChunk(id="loire#0", title="Loire", score=0.40, text="The Loire is the longest river."),
]


def reply(*claims: dict[str, Any]) -> str:
    return json.dumps({"claims": list(claims)})


def claim(statement: str, source_id: str, quote: str, answers: bool = False) -> dict[str, Any]:
    return {"statement": statement, "source_id": source_id, "quote": quote, "answers": answers}


ANSWER = claim("The Seine flows through Paris.", "paris#2", "Paris lies on the Seine river",
               answers=True)
DETAIL = claim("The Seine is 777 km long.", "seine#0", "The Seine is 777 km long.")


def prompt_of(body: dict[str, Any]) -> str:
    return str(body["messages"][1]["content"])


# --- no silent drops ------------------------------------------------------------------------


async def test_unknown_ids_and_empty_fields_reach_the_verifier(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(stream_reply(reply(
        ANSWER,
        claim("Paris has 2 million people.", "wiki#99", "2.1 million inhabitants"),
        {"statement": "It is long.", "source_id": "seine#0"},
        {"source_id": "", "quote": "The Loire"},
    )))

    draft = await ChatWriter(client).write(QUESTION, EVIDENCE, mode="answer")

    assert [(c.source_id, c.quote) for c in draft.claims] == [
        ("paris#2", "Paris lies on the Seine river"),
        ("wiki#99", "2.1 million inhabitants"),
        ("seine#0", ""),
        ("", "The Loire"),
    ]
    assert draft.claims[3].statement == ""
    assert any("wiki#99" in n and "not given" in n for n in draft.notes)
    assert any("claim 2: empty quote" in n for n in draft.notes)
    assert any("claim 3: empty statement, source_id" in n for n in draft.notes)


async def test_a_bare_number_names_the_passage_shown_at_that_place(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    # edges order shows paris, loire, seine: passage 2 is the Loire one
    server.script(stream_reply(reply(claim("The Loire is long.", "2", "The Loire is"))))

    draft = await ChatWriter(client).write(QUESTION, EVIDENCE, mode="answer")

    assert draft.claims[0].source_id == "loire#0"
    assert any("'2'" in n and "loire#0" in n for n in draft.notes)


# --- the answer claim -----------------------------------------------------------------------


async def test_the_claim_marked_answers_becomes_the_answer_index(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(stream_reply(reply(DETAIL, ANSWER)))
    draft = await ChatWriter(client).write(QUESTION, EVIDENCE, mode="answer")
    assert draft.answer_index == 1
    assert draft.claims[1].source_id == "paris#2"


async def test_no_marked_claim_means_no_answer_index(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(stream_reply(reply(DETAIL, {**ANSWER, "answers": False})))
    draft = await ChatWriter(client).write(QUESTION, EVIDENCE, mode="answer")
    assert draft.answer_index is None and len(draft.claims) == 2


async def test_the_answer_claim_survives_the_claim_limit(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    extra = [claim(f"Detail {i}.", "seine#0", "The Seine") for i in range(3)]
    server.script(stream_reply(reply(*extra, ANSWER)))

    draft = await ChatWriter(client, max_claims=2).write(QUESTION, EVIDENCE, mode="answer")

    assert len(draft.claims) == 2
    assert draft.answer_index == 1 and draft.claims[1].source_id == "paris#2"
    assert any("answer claim" in n for n in draft.notes)


def test_two_marked_claims_the_first_counts_and_duplicates_map_to_the_kept_one() -> None:
    text = reply(DETAIL, DETAIL | {"answers": True}, ANSWER)
    parsed = parse_draft(text, EVIDENCE)
    assert len(parsed.claims) == 2  # the exact duplicate is merged
    assert parsed.answer_index == 0
    assert any("first one counts" in n for n in parsed.notes)


# --- the prompt -----------------------------------------------------------------------------


async def test_prompt_numbers_passages_with_ids_titles_scores_in_edges_order(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    stub = EvidenceChunk(id="seine#9", title="Seine (disambiguation)", text="Seine")
    server.script(stream_reply(reply(ANSWER)))

    await ChatWriter(client, max_tokens=300).write(QUESTION, [*EVIDENCE, stub], mode="answer")

    body = server.requests[0]
    prompt = prompt_of(body)
    assert prompt.startswith(f"Question: {QUESTION}\n")
    headers = [line for line in prompt.splitlines() if line.startswith("[")]
    assert headers == [
        "[1] [paris#2] Paris (score 0.91)",
        "[2] [loire#0] Loire (score 0.40)",  # the weakest in the middle
        "[3] [seine#0] Seine (score 0.74)",
    ]
    assert "seine#9" not in prompt  # the stub only repeats its title
    assert "at most 300 tokens" in prompt and body["max_tokens"] == 300
    system = body["messages"][0]["content"]
    assert system.startswith("You answer questions using only the evidence given")
    assert '"answers"' in system and "numbers" in system


async def test_given_order_keeps_the_selectors_order(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(stream_reply(reply(ANSWER)))
    await ChatWriter(client, order="given").write(QUESTION, EVIDENCE, mode="answer")
    ids = [line.split("] [")[1].split("]")[0]
           for line in prompt_of(server.requests[0]).splitlines() if line.startswith("[")]
    assert ids == ["paris#2", "seine#0", "loire#0"]


# --- a reply cut at max_tokens --------------------------------------------------------------


async def test_a_cut_reply_is_retried_once_with_a_larger_limit_not_identically(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    full = reply(ANSWER, DETAIL)
    server.script(stream_reply(full[:70], finish="length"), stream_reply(full))

    writer = ChatWriter(client, max_tokens=100, max_tokens_cap=1000)
    draft = await writer.write(QUESTION, EVIDENCE, mode="answer")

    first, second = server.requests
    assert first != second
    assert (first["max_tokens"], second["max_tokens"]) == (100, 200)
    assert "at most 200 tokens" in prompt_of(second) and "cut off" in prompt_of(second)
    assert len(draft.claims) == 2 and draft.answer_index == 0
    assert any("retried with max_tokens 200" in n for n in draft.notes)
    assert draft.tokens == 60  # both calls counted


async def test_a_long_prompt_is_retried_with_fewer_passages(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    cut = reply(ANSWER, DETAIL)[:70]
    server.script(stream_reply(cut, usage=(5000, 100), finish="length"),
                  stream_reply(reply(ANSWER)))

    draft = await ChatWriter(client).write(QUESTION, EVIDENCE, mode="answer")

    retried = prompt_of(server.requests[1])
    assert "[paris#2]" in retried and "[seine#0]" in retried  # the best half
    assert "[loire#0]" not in retried
    assert any("2 of 3 passages" in n for n in draft.notes)


async def test_at_the_cap_the_retry_still_differs_by_its_passages_and_prompt(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    cut = reply(ANSWER, DETAIL)[:30]  # no complete claim
    server.script(stream_reply(cut, finish="length"), stream_reply(cut, finish="length"))

    writer = ChatWriter(client, max_tokens=100, max_tokens_cap=100)
    draft = await writer.write(QUESTION, EVIDENCE, mode="answer")

    first, second = server.requests
    assert first["max_tokens"] == second["max_tokens"] == 100
    assert first["messages"] != second["messages"]
    assert draft.claims == ()
    assert any("cut off" in n for n in draft.notes)


async def test_a_failed_retry_keeps_the_complete_claims_of_the_cut_reply(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    full = reply(ANSWER, DETAIL)
    cut = full[: full.index("777 km long.") - 3]
    server.script(stream_reply(cut, finish="length"), Status(503, "overloaded"))

    draft = await ChatWriter(client).write(QUESTION, EVIDENCE, mode="answer")

    assert [c.source_id for c in draft.claims] == ["paris#2"]
    assert draft.answer_index == 0
    assert any("retry failed" in n for n in draft.notes)


async def test_a_yes_no_verdict_comes_as_the_lead_and_the_claims_keep_the_facts(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(stream_reply(json.dumps({"lead": "Yes", "claims": [DETAIL]})))

    draft = await ChatWriter(client).write("Is the Seine longer than 700 km?", EVIDENCE,
                                           mode="answer")

    assert draft.lead == "Yes" and [c.statement for c in draft.claims] == [DETAIL["statement"]]
    assert '"lead"' in str(server.requests[0]["messages"][0]["content"])
