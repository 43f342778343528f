"""ChatPlanner over a real HTTP client against a local OpenAI-protocol server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.models._chat import ChatRequest, ChatResult, OpenAIChatClient, RawToolCall
from actors.models._chat_exceptions import ChatAuthError
from reactive_rag.judgement._policy import PlannerView
from reactive_rag.judgement.model._planner import ChatPlanner
from streams import EvidenceChunk, Feedback, QueryStat, SearchFilters, ToolCall
from tests.actors._openai_fixtures import (
    FakeOpenAI,
    JsonBody,
    Status,
    fake_openai,
    stream_reply,
)

QUESTION = "Which river flows through the city where the Eiffel Tower stands?"


def chunk(
    cid: str,
    text: str,
    *,
    prev: str | None = None,
    nxt: str | None = None,
    source: str = "local:wiki",
) -> EvidenceChunk:
    return EvidenceChunk(
        id=cid, text=text, title=cid.split("#")[0], prev_id=prev, next_id=nxt, source=source
    )


EIFFEL = chunk("eiffel#0", "The Eiffel Tower is a tower in Paris, France.", nxt="eiffel#1")
PARIS = chunk("paris#2", "Paris lies on the Seine river.", prev="paris#1", nxt="paris#3")


def view(
    round_: int = 1,
    evidence: Sequence[EvidenceChunk] = (),
    queries: Sequence[QueryStat] = (),
    **kw: Any,
) -> PlannerView:
    return PlannerView(
        question=QUESTION, round=round_, evidence=evidence, queries=queries, **kw
    )


def call(call_id: str, name: str, args: Any) -> tuple[str, str, str]:
    return (call_id, name, args if isinstance(args, str) else json.dumps(args))


@pytest.fixture
def planner(client: OpenAIChatClient) -> ChatPlanner:
    return ChatPlanner(client)


def tool_messages(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


# --- valid calls -----------------------------------------------------------------------


async def test_a_valid_search_is_returned_with_the_servers_token_count(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("call_1", "search", {"query": "Eiffel Tower city"})],
                     usage=(120, 30))
    )

    decision = await planner.decide(view(remaining_steps=11, remaining_tool_calls=8))

    assert decision.action == "search"
    assert decision.calls == (
        ToolCall(id="call_1", tool="search", args={"query": "Eiffel Tower city"}),
    )
    assert decision.tokens == 150
    sent = server.requests[0]
    # a local-only run: no pages to open, no filters, no recall or extension to offer
    assert [t["function"]["name"] for t in sent["tools"]] == ["search", "read", "answer"]
    assert sent["messages"][0]["role"] == "system"
    assert "Never invent ids" in sent["messages"][0]["content"]
    assert QUESTION in sent["messages"][1]["content"]
    assert "8 tool calls" in sent["messages"][1]["content"]


async def test_tool_calls_streamed_in_one_character_pieces_become_calls(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(
            tool_calls=[
                call("a", "search", {"query": "Eiffel Tower", "k": 5}),
                call("b", "read", {"chunk_id": "eiffel#0", "direction": "next"}),
            ],
            piece=1,
        )
    )

    decision = await planner.decide(view(evidence=[EIFFEL]))

    assert [(c.tool, c.args) for c in decision.calls] == [
        ("search", {"query": "Eiffel Tower", "k": 5}),
        ("read", {"chunk_id": "eiffel#0", "direction": "next"}),
    ]


async def test_answer_alone_ends_the_search(server: FakeOpenAI, planner: ChatPlanner) -> None:
    server.script(stream_reply(tool_calls=[call("c", "answer", "")]))

    decision = await planner.decide(view(evidence=[EIFFEL, PARIS]))

    assert decision.action == "answer" and decision.calls == ()


async def test_answer_together_with_a_search_runs_the_search_only(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("s", "search", {"query": "Seine"}), call("a", "answer", {})])
    )

    decision = await planner.decide(view(evidence=[EIFFEL]))

    assert decision.action == "search"
    assert [c.tool for c in decision.calls] == ["search"]


# --- rejections --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (call("x", "search", '{"query": "Eiffel'), "not valid JSON"),
        (call("x", "browse", {"url": "http://evil"}), "unknown tool 'browse'"),
        (call("x", "search", {"query": "Paris", "lang": "en"}), "lang: Extra inputs"),
        (call("x", "search", {}), "query: Field required"),
        (call("x", "search", {"query": 42}), "query: Input should be a valid string"),
        (call("x", "search", {"query": "Paris", "k": "5"}), "k: Input should be a valid integer"),
        (call("x", "search", {"query": "Paris", "k": 500}), "k=500 is too large"),
        (call("x", "search", {"query": "   "}), "query is empty"),
        (call("x", "search", '["Paris"]'), "must be a JSON object"),
        (call("x", "read", {"chunk_id": "doc-9#9"}), "unknown chunk id 'doc-9#9'"),
        (call("x", "read", {"chunk_id": "secret#0"}), "out of scope"),
        (call("x", "read", {"chunk_id": "eiffel#0", "direction": "prev"}), "no passage before"),
        (call("x", "read", {"chunk_id": "eiffel#0", "direction": "up"}), "direction: Input"),
    ],
)
async def test_invalid_calls_are_never_returned_and_the_reason_goes_back_to_the_model(
    server: FakeOpenAI, planner: ChatPlanner, bad: tuple[str, str, str], why: str
) -> None:
    secret = chunk("secret#0", "Payroll figures.", source="local:hr")
    server.script(
        stream_reply(tool_calls=[bad]),
        stream_reply(tool_calls=[call("y", "search", {"query": "Seine river Paris"})]),
    )

    decision = await planner.decide(view(evidence=[EIFFEL, secret], collections=("wiki",)))

    assert [c.id for c in decision.calls] == ["y"]  # the bad call is not among them
    assert why in decision.reason
    assert [(r.call_id, r.tool) for r in decision.rejected] == [("x", bad[1])]
    assert why in decision.rejected[0].reason
    retry = server.messages[1]
    assert retry[-2]["role"] == "assistant" and retry[-2]["tool_calls"][0]["id"] == "x"
    assert json.loads(retry[-2]["tool_calls"][0]["function"]["arguments"]) is not None
    assert why in tool_messages(retry)["x"]
    assert len(server.requests) == 2


async def test_reply_cut_at_the_token_limit_is_rejected_saying_so(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("x", "search", '{"query": "Eif')], finish="length"),
        stream_reply(tool_calls=[call("y", "answer", {})]),
    )

    decision = await planner.decide(view(evidence=[EIFFEL]))

    assert decision.action == "answer"
    assert "cut off" in decision.reason


async def test_two_invalid_turns_without_evidence_fall_back_to_searching_the_question(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("x", "lookup", {"q": "Eiffel"})]),
        stream_reply(tool_calls=[call("y", "search", {"q": "Eiffel"})]),
    )

    decision = await planner.decide(view())

    assert decision.action == "search"
    assert [c.args for c in decision.calls] == [{"query": QUESTION}]
    assert "unknown tool 'lookup'" in decision.reason and "query: Field required" in decision.reason
    assert decision.tokens == 60  # both model calls are counted


async def test_two_invalid_turns_with_evidence_fall_back_to_answering(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("x", "read", {"chunk_id": "made-up#1"})]),
        stream_reply(tool_calls=[call("y", "read", {"chunk_id": "made-up#2"})]),
    )

    decision = await planner.decide(view(evidence=[EIFFEL]))

    assert decision.action == "answer" and decision.calls == ()
    assert "made-up#2" in decision.reason


async def test_a_failed_retry_falls_back_instead_of_raising(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(stream_reply(tool_calls=[call("x", "lookup", {})]), Status(500, "{}"))

    decision = await planner.decide(view(evidence=[EIFFEL]))

    assert decision.action == "answer" and "retry failed" in decision.reason


async def test_mixed_turn_returns_the_valid_call_and_reports_the_rejection_next_turn(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(
            tool_calls=[
                call("good", "search", {"query": "Eiffel Tower"}),
                call("bad", "read", {"chunk_id": "nowhere#0"}),
            ]
        ),
        stream_reply(tool_calls=[call("fin", "answer", {})]),
    )

    first = await planner.decide(view(round_=1))
    assert [c.id for c in first.calls] == ["good"]
    assert len(server.requests) == 1  # one valid call is enough: no retry

    await planner.decide(
        view(round_=2, evidence=[EIFFEL], queries=[QueryStat(query="Eiffel Tower", hits=1,
                                                             new_evidence=1)])
    )
    results = tool_messages(server.messages[1])
    assert "unknown chunk id 'nowhere#0'" in results["bad"]
    assert "[eiffel#0]" in results["good"]


# --- conversation across turns -------------------------------------------------------------


async def test_tool_results_carry_the_ids_of_new_evidence_and_the_runs_feedback(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("s1", "search", {"query": "Eiffel Tower"})]),
        stream_reply(tool_calls=[call("r1", "read", {"chunk_id": "eiffel#0"})]),
        stream_reply(tool_calls=[call("s2", "search", {"query": "Paris river"})]),
    )
    eiffel_1 = chunk("eiffel#1", "It was built for the 1889 World's Fair.", prev="eiffel#0")

    await planner.decide(view(round_=1))
    second = await planner.decide(
        view(
            round_=2,
            evidence=[EIFFEL],
            queries=[QueryStat(query="Eiffel Tower", hits=3, new_evidence=1)],
            feedback=(Feedback(kind="loop", query="Eiffel",
                               detail="query 'Eiffel' was too close to an earlier one"),),
            remaining_tool_calls=7,
        )
    )
    third = await planner.decide(
        view(
            round_=3,
            evidence=[EIFFEL, eiffel_1],
            queries=[QueryStat(query="Eiffel Tower", hits=3, new_evidence=1)],
            reads=("eiffel#0",),
        )
    )

    assert second.calls == (
        ToolCall(id="r1", tool="read", args={"chunk_id": "eiffel#0", "direction": "next"}),
    )
    assert third.calls[0].args == {"query": "Paris river"}
    turn2 = server.messages[1]
    assert [m["role"] for m in turn2] == ["system", "user", "assistant", "tool", "user"]
    assert "[eiffel#0]" in turn2[3]["content"] and "Paris, France" in turn2[3]["content"]
    assert "- loop (search 'Eiffel'): query 'Eiffel' was too close" in turn2[4]["content"]
    assert "7 tool calls" in turn2[4]["content"]
    turn3 = server.messages[2]
    assert turn3[:5] == turn2  # the conversation is kept, not rebuilt
    assert "[eiffel#1]" in tool_messages(turn3)["r1"]


async def test_a_call_the_run_refused_is_reported_as_not_run(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("s1", "search", {"query": "Eiffel"})]),
        stream_reply(tool_calls=[call("fin", "answer", {})]),
    )
    await planner.decide(view(round_=1))
    await planner.decide(
        view(round_=2, feedback=(Feedback(kind="duplicate", detail="duplicate search refused"),))
    )

    assert "not run" in tool_messages(server.messages[1])["s1"]


async def test_repeated_model_call_ids_are_made_unique_for_the_run(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("call_0", "search", {"query": "Eiffel Tower"})]),
        stream_reply(tool_calls=[call("call_0", "search", {"query": "Seine"})]),
    )
    first = await planner.decide(view(round_=1))
    second = await planner.decide(
        view(round_=2, evidence=[EIFFEL], queries=[QueryStat(query="Eiffel Tower", hits=1,
                                                             new_evidence=1)])
    )

    assert first.calls[0].id == "call_0"
    assert second.calls[0].id != "call_0"
    # the model still sees its own id on the tool result
    assert "call_0" in tool_messages(server.messages[1])


async def test_a_new_question_starts_a_new_conversation(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("a", "search", {"query": "Eiffel"})]),
        stream_reply(tool_calls=[call("b", "search", {"query": "Louvre"})]),
    )
    await planner.decide(view(round_=1))
    await planner.decide(PlannerView(question="Where is the Louvre?", round=1, evidence=[],
                                     queries=[]))

    assert [m["role"] for m in server.messages[1]] == ["system", "user"]
    assert "Louvre" in server.messages[1][1]["content"]


async def test_old_tool_results_are_compacted_when_the_context_grows(
    server: FakeOpenAI,
) -> None:
    long = chunk("long#0", "Paris facts. " * 200)
    server.script(
        stream_reply(tool_calls=[call("s1", "search", {"query": "Paris"})]),
        stream_reply(tool_calls=[call("s2", "search", {"query": "Seine"})]),
        stream_reply(tool_calls=[call("fin", "answer", {})]),
    )
    async with OpenAIChatClient(server.base_url, model="m") as client:
        planner = ChatPlanner(client, max_chunk_chars=2000, max_context_chars=3000)
        await planner.decide(view(round_=1))
        await planner.decide(view(round_=2, evidence=[long],
                                  queries=[QueryStat(query="Paris", hits=1, new_evidence=1)]))
        await planner.decide(
            view(round_=3, evidence=[long, PARIS],
                 queries=[QueryStat(query="Paris", hits=1, new_evidence=1),
                          QueryStat(query="Seine", hits=1, new_evidence=1)])
        )

    old = tool_messages(server.messages[2])["s1"]
    assert "[long#0]" in old and "Paris facts. Paris facts." not in old
    assert "Seine river" in tool_messages(server.messages[2])["s2"]


# --- web pages -------------------------------------------------------------------------------

TODAY = "2025-06-01"


def web(cid: str, text: str, url: str, *, snippet: bool = True) -> EvidenceChunk:
    return EvidenceChunk(id=cid, text=text, title=cid, url=url, source="web:brave",
                         snippet=snippet)


SEINE = web("web:seine", "The Seine is a river of northern France.",
            "https://www.example.org/seine")
LOUVRE = web("web:louvre", "The Louvre stands on the Seine.", "https://example.com/louvre")


async def test_open_page_of_a_shown_web_result_becomes_a_scrape_by_result_id(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(stream_reply(tool_calls=[call("o1", "open_page", {"result_id": "web:seine"})]))

    decision = await planner.decide(view(evidence=[EIFFEL, SEINE], remaining_pages=3, web=True))

    assert decision.action == "scrape"
    assert decision.calls == (ToolCall(id="o1", tool="scrape", args={"result_id": "web:seine"}),)
    opening = server.messages[0][1]["content"]
    assert "[2] [web:seine] web:seine (snippet from example.org)\nThe Seine" in opening
    assert "[1] [eiffel#0] eiffel\nThe Eiffel" in opening  # local passages are not snippets
    assert "3 pages to open" in opening
    system = server.messages[0][0]["content"]
    assert "open_page(result_id)" in system and "run at the same time" in system


@pytest.mark.parametrize(
    ("args", "kw", "why"),
    [
        ({"result_id": "web:nowhere"}, {}, "unknown result id 'web:nowhere'"),
        ({"result_id": "eiffel#0"}, {}, "'eiffel#0' is not a web result"),
        ({"result_id": "web:seine"}, {"pages": ("https://WWW.example.org/seine/",)}, "is already"),
        ({"result_id": "web:seine"}, {"remaining_pages": 0}, "no pages left to open"),
        ({}, {}, "result_id: Field required"),
        ({"result_id": "web:seine", "url": "http://evil"}, {}, "url: Extra inputs"),
    ],
)
async def test_open_page_is_refused_back_to_the_model_unless_a_new_shown_web_result(
    server: FakeOpenAI, planner: ChatPlanner, args: dict[str, Any], kw: dict[str, Any], why: str
) -> None:
    server.script(
        stream_reply(tool_calls=[call("x", "open_page", args)]),
        stream_reply(tool_calls=[call("y", "search", {"query": "Seine river Paris"})]),
    )

    decision = await planner.decide(view(evidence=[EIFFEL, SEINE], web=True, **kw))

    assert [c.id for c in decision.calls] == ["y"]
    assert [(r.call_id, r.tool) for r in decision.rejected] == [("x", "open_page")]
    assert why in decision.rejected[0].reason
    assert why in tool_messages(server.messages[1])["x"]


async def test_every_valid_call_of_a_turn_is_returned_within_the_page_budget(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(
            tool_calls=[
                call("s", "search", {"query": "Seine bridges"}),
                call("o1", "open_page", {"result_id": "web:seine"}),
                call("o2", "open_page", {"result_id": "web:seine"}),  # the same page again
                call("o3", "open_page", {"result_id": "web:louvre"}),
                call("o4", "open_page", {"result_id": "web:louvre#x"}),
                call("r", "read", {"chunk_id": "eiffel#0"}),
            ]
        ),
        stream_reply(tool_calls=[call("fin", "answer", {})]),
    )
    decision = await planner.decide(view(evidence=[EIFFEL, SEINE, LOUVRE], remaining_pages=2,
                                         web=True))

    assert decision.action == "search"
    assert [(c.id, c.tool) for c in decision.calls] == [
        ("s", "search"), ("o1", "scrape"), ("o3", "scrape"), ("r", "read"),
    ]
    reasons = {r.call_id: r.reason for r in decision.rejected}
    assert "already being opened in this turn" in reasons["o2"]
    assert "unknown result id" in reasons["o4"]

    await planner.decide(view(round_=2, evidence=[EIFFEL, SEINE, LOUVRE], web=True))
    results = tool_messages(server.messages[1])
    assert "already being opened" in results["o2"]
    assert set(results) == {"s", "o1", "o2", "o3", "o4", "r"}  # one result per call


async def test_an_opened_page_is_reported_on_its_call_and_cannot_be_opened_again(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    page = web("web:page#0", "The Seine flows through Paris, Rouen and Le Havre.",
               "https://www.example.org/seine", snippet=False)
    server.script(
        stream_reply(tool_calls=[call("o1", "open_page", {"result_id": "web:seine"})]),
        stream_reply(tool_calls=[call("o2", "open_page", {"result_id": "web:seine"})]),
        stream_reply(tool_calls=[call("fin", "answer", {})]),
    )
    await planner.decide(view(round_=1, evidence=[EIFFEL, SEINE], remaining_pages=3, web=True))
    second = await planner.decide(
        view(round_=2, evidence=[EIFFEL, SEINE, page], pages=("https://www.example.org/seine",),
             remaining_pages=2, web=True)
    )

    result = tool_messages(server.messages[1])["o1"]
    assert "open_page('web:seine'): 1 new passage:" in result
    assert "[3] [web:page#0] web:page#0 (example.org)\nThe Seine flows through Paris" in result
    assert second.action == "answer"  # the retry answered; the second opening was refused
    assert "already open" in tool_messages(server.messages[2])["o2"]


async def test_a_page_the_run_refused_is_not_run_with_its_typed_feedback(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("o1", "open_page", {"result_id": "web:seine"})]),
        stream_reply(tool_calls=[call("fin", "answer", {})]),
    )
    await planner.decide(view(round_=1, evidence=[SEINE], web=True))
    refused = Feedback(kind="page_limit", call_id="o1", tool="scrape",
                       url="https://www.example.org/seine",
                       detail="scrape o1 refused: this run may open at most 2 pages")
    await planner.decide(view(round_=2, evidence=[SEINE], feedback=(refused,), web=True))

    result = tool_messages(server.messages[1])["o1"]
    assert result.startswith("not run:")
    assert "- page_limit (https://www.example.org/seine): scrape o1 refused" in result
    assert "no more pages can be opened" in result
    assert "Notes from the run" not in server.messages[1][-1]["content"]  # told once, on o1


# --- search filters --------------------------------------------------------------------------


async def test_search_filters_are_validated_normalised_and_passed_to_the_run(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    filters = {"date_from": "2024-01-01", "date_to": "2024-12-31", "sites": ["WWW.Who.int"],
               "exclude_sites": ["farm.example"], "language": "EN"}
    server.script(
        stream_reply(tool_calls=[
            call("s1", "search", {"query": "measles cases", "filters": filters}),
            call("s2", "search", {"query": "measles vaccine", "filters": {}}),
        ])
    )

    decision = await planner.decide(view(today=TODAY, web=True))

    expected = {"date_from": "2024-01-01", "date_to": "2024-12-31", "sites": ["who.int"],
                "exclude_sites": ["farm.example"], "language": "en"}
    assert [c.args for c in decision.calls] == [
        {"query": "measles cases", "filters": expected},
        {"query": "measles vaccine"},  # empty filters constrain nothing: left out
    ]
    assert SearchFilters.model_validate(expected).names() == (
        "date", "sites", "exclude_sites", "language"
    )
    search_tool = server.requests[0]["tools"][0]["function"]["parameters"]
    assert set(search_tool["properties"]["filters"]["properties"]) == {
        "date_from", "date_to", "sites", "exclude_sites", "language"
    }


@pytest.mark.parametrize(
    ("filters", "why"),
    [
        ({"date_from": "2024/01/01"}, "filters.date_from: Value error, not a date as YYYY-MM-DD"),
        ({"date_to": "2024-02-30"}, "not a date as YYYY-MM-DD: '2024-02-30'"),
        ({"date_from": "last year"}, "not a date as YYYY-MM-DD"),
        ({"date_from": "2024-06-01", "date_to": "2024-01-01"}, "is after date_to 2024-01-01"),
        ({"date_from": "2026-01-01"}, f"is after today ({TODAY})"),
        ({"sites": ["https://who.int/news"]}, "not a host name like who.int"),
        ({"sites": "who.int"}, "filters.sites: Input should be a valid list"),
        ({"sites": ["who.int"], "exclude_sites": ["www.who.int"]}, "in both sites and exclude"),
        ({"language": "english"}, "filters.language: String should match"),
        ({"doc_types": ["pdf"]}, "filters.doc_types: Extra inputs"),
        ("2024", "filters: Input should be"),
    ],
)
async def test_bad_search_filters_are_refused_back_to_the_model(
    server: FakeOpenAI, planner: ChatPlanner, filters: Any, why: str
) -> None:
    server.script(
        stream_reply(tool_calls=[call("x", "search", {"query": "measles", "filters": filters})]),
        stream_reply(tool_calls=[call("y", "search", {"query": "measles 2024"})]),
    )

    decision = await planner.decide(view(today=TODAY, web=True))

    assert [c.id for c in decision.calls] == ["y"]
    assert why in decision.rejected[0].reason
    assert why in tool_messages(server.messages[1])["x"]


async def test_todays_date_is_in_the_prompt_for_date_filters(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(stream_reply(tool_calls=[call("s", "search", {"query": "Seine floods"})]))

    await planner.decide(view(today=TODAY, web=True))

    assert f"Today's date: {TODAY}" in server.messages[0][1]["content"]
    assert "today's date" in server.messages[0][0]["content"]


# --- typed feedback --------------------------------------------------------------------------


async def test_typed_feedback_reaches_the_next_prompt_with_kind_detail_and_what_to_do(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("s1", "search", {"query": "Seine floods",
                                                        "filters": {"sites": ["lemonde.fr"]}})]),
        stream_reply(tool_calls=[call("fin", "answer", {})]),
    )
    await planner.decide(view(round_=1, today=TODAY, web=True))
    feedback = (
        Feedback(kind="unapplied_filter", call_id="s1", tool="search", query="Seine floods",
                 detail="filters not applied: duckduckgo: sites (no site parameter)"),
        Feedback(kind="spam", tool="search", query="Seine news", hosts=("farm.example",),
                 detail="2 results look like spam or a content farm"),
        Feedback(kind="stale", tool="search", query="Seine news",
                 detail="every dated result is older than 2024"),
    )
    await planner.decide(
        view(round_=2, evidence=[SEINE], queries=[QueryStat(query="Seine floods", hits=1,
                                                            new_evidence=1)],
             feedback=feedback, today=TODAY, web=True)
    )

    result = tool_messages(server.messages[1])["s1"]
    assert "search('Seine floods', filters {\"sites\": [\"lemonde.fr\"]}): 1 new passage" in result
    assert "- unapplied_filter (search 'Seine floods'): filters not applied: duckduckgo: sites" \
        in result
    notes = server.messages[1][-1]["content"]
    assert "- spam (search 'Seine news'): 2 results look like spam" in notes
    assert 'add filters.exclude_sites ["farm.example"]' in notes
    assert "- stale (search 'Seine news'): every dated result is older than 2024" in notes
    assert f"add filters.date_from (YYYY-MM-DD; today is {TODAY})" in notes
    assert "unapplied_filter" not in notes  # it went with its own call's result


# --- no tool call, errors, budget ------------------------------------------------------------


async def test_plain_text_with_evidence_is_not_taken_as_an_answer(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    # prose is not a tool call: the model is told so and asked once more in the same turn
    server.script(
        stream_reply("I will search for the river of Paris."),
        stream_reply(tool_calls=[call("s", "search", {"query": "river Paris"})]),
    )

    decision = await planner.decide(view(evidence=[EIFFEL, PARIS]))

    assert decision.action == "search" and decision.calls[0].args == {"query": "river Paris"}
    assert "after feedback (no_tool_call)" in decision.reason
    nudge = server.messages[1][-1]
    assert nudge["role"] == "user" and "You wrote text but called no tool" in nudge["content"]
    assert len(server.requests) == 2


async def test_plain_text_without_evidence_is_nudged_once_then_falls_back(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(stream_reply("I think it is the Seine."), stream_reply("Still the Seine."))

    decision = await planner.decide(view())

    assert decision.action == "search" and decision.calls[0].args == {"query": QUESTION}
    assert "You wrote text but called no tool" in server.messages[1][-1]["content"]
    assert decision.reason.startswith("no_tool_call: the model wrote text but called no tool")
    assert "fallback: search the question" in decision.reason


async def test_a_failing_model_server_raises_a_typed_error(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(Status(401, '{"error": {"message": "bad key"}}'))

    with pytest.raises(ChatAuthError):
        await planner.decide(view())


class RecordingModel:
    """A ChatModel that records the timeout it was given (the budget seam)."""

    model = "rec"

    def __init__(self) -> None:
        self.timeouts: list[float | None] = []

    async def complete(self, request: ChatRequest) -> ChatResult:
        self.timeouts.append(request.timeout_s)
        return ChatResult("", (RawToolCall("c", "answer", "{}"),))


@pytest.mark.parametrize(("remaining", "expected"), [(None, 30.0), (100.0, 30.0), (4.0, 4.0)])
async def test_each_model_call_gets_at_most_what_the_run_has_left(
    remaining: float | None, expected: float
) -> None:
    model = RecordingModel()
    planner = ChatPlanner(model, timeout_s=30.0)

    await planner.decide(view(remaining_s=remaining))

    assert model.timeouts[0] is not None
    assert expected - 0.5 <= model.timeouts[0] <= expected


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        ChatPlanner(RecordingModel(), timeout_s=0)


# --- many random turns ------------------------------------------------------------------

_CALL_TEMPLATES = [
    ("search", {"query": "topic {n}"}),
    ("search", {"query": "topic {n}", "k": 3}),
    ("search", '{"query": "cut'),
    ("search", {"q": "wrong field"}),
    ("read", {"chunk_id": "{known}"}),
    ("read", {"chunk_id": "{known}", "direction": "prev"}),
    ("read", {"chunk_id": "ghost#7"}),
    ("answer", {}),
    ("fetch", {"url": "http://x"}),
    ("open_page", {"result_id": "{known}"}),  # local evidence only: always refused
]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(
        st.tuples(
            st.lists(st.integers(0, len(_CALL_TEMPLATES) - 1), max_size=3),
            st.lists(st.integers(0, len(_CALL_TEMPLATES) - 1), max_size=3),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_random_turns_only_ever_yield_valid_unique_calls_and_valid_histories(
    turns: list[tuple[list[int], list[int]]],
) -> None:
    asyncio.run(_play(turns))


async def _play(turns: list[tuple[list[int], list[int]]]) -> None:
    evidence: list[EvidenceChunk] = []
    queries: list[QueryStat] = []
    reads: list[str] = []
    seen_ids: set[str] = set()
    async with fake_openai() as srv, OpenAIChatClient(srv.base_url, model="m") as client:
        planner = ChatPlanner(client)
        for round_, replies in enumerate(turns, 1):
            srv.replies.clear()
            for picks in replies:
                calls = []
                for j, pick in enumerate(picks):
                    name, args = _CALL_TEMPLATES[pick]
                    text = args if isinstance(args, str) else json.dumps(args)
                    known = evidence[-1].id if evidence else "none#0"
                    text = text.replace("{n}", str(round_)).replace("{known}", known)
                    calls.append((f"call_{j}", name, text))
                srv.script(stream_reply("thinking" if not calls else "", tool_calls=calls))
            view_now = PlannerView(
                question=QUESTION, round=round_, evidence=list(evidence), queries=list(queries),
                reads=tuple(reads),
            )
            decision = await planner.decide(view_now)  # a 400 from the server would raise here

            assert decision.tokens > 0
            if decision.action == "answer":
                assert decision.calls == ()
            else:
                assert decision.calls and decision.action == decision.calls[0].tool
            known_ids = {c.id for c in evidence}
            for c in decision.calls:
                assert c.id not in seen_ids
                seen_ids.add(c.id)
                assert c.tool in ("search", "read")
                if c.tool == "read":
                    assert c.args["chunk_id"] in known_ids
                    continue
                assert isinstance(c.args["query"], str) and c.args["query"]
                n = len(evidence)
                queries.append(QueryStat(query=str(c.args["query"]), hits=1, new_evidence=1))
                evidence.append(chunk(f"doc{n}#0", f"Passage {n}.", nxt=f"doc{n}#1"))
            for c in decision.calls:
                if c.tool == "read" and c.args["direction"] == "next":
                    target = str(c.args["chunk_id"])
                    reads.append(target)
                    nxt = target.replace("#0", "#1")
                    if nxt not in {e.id for e in evidence}:
                        evidence.append(chunk(nxt, "More.", prev=target))
            if decision.action == "answer":
                break


async def test_llama_cpp_python_mode_sends_results_as_user_text_without_streaming(
    server: FakeOpenAI,
) -> None:
    # llama-cpp-python: no streamed auto tool calls, and its template drops tool messages
    server.check_history = False
    server.script(
        JsonBody(
            {
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {"id": "c1", "type": "function",
                                 "function": {"name": "search",
                                              "arguments": '{"query": "Eiffel"}'}}
                            ],
                        },
                    }
                ]
            }
        ),
        stream_reply(tool_calls=[call("c2", "answer", {})]),
    )
    async with OpenAIChatClient(server.base_url, model="m") as client:
        planner = ChatPlanner(client, stream=False, results_as_user=True)
        first = await planner.decide(view(round_=1))
        await planner.decide(
            view(round_=2, evidence=[EIFFEL], queries=[QueryStat(query="Eiffel", hits=1,
                                                                 new_evidence=1)])
        )

    assert first.calls[0].args == {"query": "Eiffel"}
    assert server.requests[0]["stream"] is False
    turn2 = server.messages[1]
    assert "tool" not in [m["role"] for m in turn2]
    assert "[eiffel#0]" in turn2[3]["content"] and turn2[3]["role"] == "user"


async def test_the_planner_actor_publishes_the_policy_s_rejections_as_tool_rejected() -> None:
    from reactive_rag.agent import PlannerActor
    from reactive_rag.judgement import Decision, Rejection
    from streams import PlanDecided, PlanRequested, RunStarted, ToolRejected

    class _Refusing:
        async def decide(self, view: PlannerView) -> Decision:
            return Decision(action="search", calls=[
                ToolCall(id="s1", tool="search", args={"query": "Eiffel Tower"})],
                rejected=[Rejection("x", "open_page", "unknown result id 'r9'")])

    actor = PlannerActor(_Refusing())  # type: ignore[arg-type]
    await actor.on_receive(RunStarted(question="Eiffel Tower height?"), None)  # type: ignore[arg-type]
    out = await actor.on_receive(PlanRequested(round=1), None)  # type: ignore[arg-type]
    assert out is not None
    rejected = [e for e in out if isinstance(e, ToolRejected)]
    assert [(e.call_id, e.tool, e.reason) for e in rejected] == [
        ("x", "open_page", "unknown result id 'r9'")]
    decided = [e for e in out if isinstance(e, PlanDecided)]
    assert [c.id for c in decided[0].calls] == ["s1"]  # the valid call still runs
    assert out.index(rejected[0]) < out.index(decided[0])  # seen before the plan runs
