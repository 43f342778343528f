"""What the chat planner shows its model and how it takes the model's turns (issue 25).

Prompt hygiene: numbered passages with ids, titles and scores, no title-only
stubs, only the tools the run can use, bounded schemas, every budget stated,
compaction by relevance to the open question. Pretend retrieval: prose or an
early ``answer()`` gets typed feedback and one retry, then the fallback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from actors.models._chat import OpenAIChatClient
from actors.models._chat_exceptions import ChatServerError
from reactive_rag.judgement._policy import Decision, PlannerView
from reactive_rag.judgement.model._planner import (
    DEFAULT_PLANNER_PROMPT,
    PLANNER_TOOLS,
    ChatPlanner,
    planner_prompt,
    planner_tools,
)
from streams import EvidenceChunk, KeyPoint, QueryStat, ToolCall
from tests.actors._openai_fixtures import FakeOpenAI, Status, stream_reply

QUESTION = "Which river flows through the city where the Eiffel Tower stands?"


def passage(cid: str, text: str, *, title: str = "", score: float | None = None,
            nxt: str | None = None) -> EvidenceChunk:
    return EvidenceChunk(id=cid, text=text, title=title or cid.split("#")[0], score=score,
                         next_id=nxt, source="local:wiki")


EIFFEL = passage("hotpot:Eiffel Tower#0", "The Eiffel Tower is a wrought-iron tower in Paris.",
                 title="Eiffel Tower", score=0.83)
SEINE = passage("hotpot:Seine#0", "The Seine flows through Paris to the English Channel.",
                title="Seine", score=0.61)
STUB = passage("hotpot:Gustave Eiffel#0", "Gustave Eiffel", title="Gustave Eiffel", score=0.4)
EMPTY = passage("hotpot:Paris#9", "  ", title="Paris", score=0.2)


def view(round_: int = 1, evidence: Sequence[EvidenceChunk] = (),
         queries: Sequence[QueryStat] = (), **kw: Any) -> PlannerView:
    return PlannerView(question=QUESTION, round=round_, evidence=evidence, queries=queries, **kw)


def call(call_id: str, name: str, args: Any) -> tuple[str, str, str]:
    return (call_id, name, args if isinstance(args, str) else json.dumps(args))


@pytest.fixture
def planner(client: OpenAIChatClient) -> ChatPlanner:
    return ChatPlanner(client)


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request["tools"]]


def tool_messages(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


def search_schema(request: dict[str, Any]) -> dict[str, Any]:
    tool = next(t for t in request["tools"] if t["function"]["name"] == "search")
    params: dict[str, Any] = tool["function"]["parameters"]
    return params


# --- 1. numbered passages with ids, titles and scores; no stubs ------------------------------


async def test_passages_are_numbered_with_id_title_and_score_and_stubs_are_not_shown(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(stream_reply(tool_calls=[call("s", "search", {"query": "Seine Paris"})]))

    await planner.decide(view(evidence=[EIFFEL, STUB, EMPTY, SEINE]))

    opening = server.messages[0][1]["content"]
    assert opening.splitlines()[0] == f"Question: {QUESTION}"
    assert ("[1] [hotpot:Eiffel Tower#0] Eiffel Tower (score 0.83)\n"
            "The Eiffel Tower is a wrought-iron tower in Paris.") in opening
    assert "[2] [hotpot:Seine#0] Seine (score 0.61)\nThe Seine flows" in opening
    # stubs are named (their ids stay usable) but never shown as passages
    assert "[hotpot:Gustave Eiffel#0] Gustave Eiffel" in opening
    assert "(score 0.40)" not in opening and "(score 0.20)" not in opening
    assert "no text beyond the title" in opening


async def test_passage_numbers_run_on_across_turns_and_a_number_can_be_used_as_an_id(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    nxt = passage("hotpot:Seine#5", "Its basin covers most of northern France.", title="Seine",
                  score=0.5)
    seine = SEINE.model_copy(update={"next_id": "hotpot:Seine#1"})  # not shown yet
    server.script(
        stream_reply(tool_calls=[call("s", "search", {"query": "Seine"})]),
        stream_reply(tool_calls=[call("r", "read", {"chunk_id": "[2]"})]),
    )
    await planner.decide(view(round_=1, evidence=[EIFFEL]))
    second = await planner.decide(view(
        round_=2, evidence=[EIFFEL, seine, nxt],
        queries=[QueryStat(query="Seine", hits=5, new_evidence=2)]))

    result = tool_messages(server.messages[1])["s"]
    assert "search('Seine'): 2 new passages:" in result
    assert "[2] [hotpot:Seine#0] Seine (score 0.61)" in result
    assert "[3] [hotpot:Seine#5] Seine (score 0.50)" in result
    # "[2]" is passage 2 of this run: the read is of its id, not refused
    assert second.calls == (ToolCall(id="r", tool="read",
                                     args={"chunk_id": "hotpot:Seine#0", "direction": "next"}),)


# --- 2. only the tools the run can use -------------------------------------------------------


async def test_a_local_run_is_offered_no_pages_no_filters_and_no_page_budget(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(stream_reply(tool_calls=[call("s", "search", {"query": "Eiffel Tower"})]))

    await planner.decide(view(remaining_pages=6, today="2025-06-01"))

    request = server.requests[0]
    assert tool_names(request) == ["search", "read", "answer"]
    assert "filters" not in search_schema(request)["properties"]
    system, opening = request["messages"][0]["content"], request["messages"][1]["content"]
    assert system == DEFAULT_PLANNER_PROMPT
    for offered_elsewhere in ("open_page", "date_from", "exclude_sites", "page budget"):
        assert offered_elsewhere not in system
    assert "pages to open" not in opening


async def test_a_web_run_is_offered_pages_filters_and_its_page_budget(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(stream_reply(tool_calls=[call("s", "search", {"query": "Eiffel Tower"})]))

    await planner.decide(view(remaining_pages=6, web=True))

    request = server.requests[0]
    assert tool_names(request) == ["search", "read", "open_page", "answer"]
    assert "filters" in search_schema(request)["properties"]
    assert request["messages"][0]["content"] == planner_prompt(web=True)
    assert "open_page(result_id)" in request["messages"][0]["content"]
    assert "6 pages to open" in request["messages"][1]["content"]


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (call("x", "open_page", {"result_id": "hotpot:Eiffel Tower#0"}),
         "this run does not search the web"),
        (call("x", "search", {"query": "Paris", "filters": {"date_from": "2024-01-01"}}),
         "filters are not available: this run does not search the web"),
        (call("x", "recall", {"point_id": "k1-1"}), "no key points to recall"),
        (call("x", "extend_budget", {}), "extended only once, near its end"),
    ],
)
async def test_a_tool_the_run_does_not_offer_is_refused_back_to_the_model(
    server: FakeOpenAI, planner: ChatPlanner, bad: tuple[str, str, str], why: str
) -> None:
    server.script(
        stream_reply(tool_calls=[bad]),
        stream_reply(tool_calls=[call("y", "search", {"query": "Seine river"})]),
    )

    decision = await planner.decide(view(evidence=[EIFFEL]))

    assert [c.id for c in decision.calls] == ["y"] and not decision.extend
    assert why in decision.rejected[0].reason
    assert why in tool_messages(server.messages[1])["x"]


POINT = KeyPoint(id="k1-1", text="The Seine flows through Paris.", chunk_ids=("hotpot:Seine#0",))


def compact(chunk: EvidenceChunk) -> EvidenceChunk:
    return chunk.model_copy(update={"text": ""})


async def test_a_compressed_view_offers_recall_by_point_and_shows_the_recalled_passages(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("rc", "recall", {"point_id": "k1-1"})]),
        stream_reply(tool_calls=[call("fin", "answer", {})]),
    )
    first = await planner.decide(view(round_=2, evidence=[compact(SEINE)], compressed=True,
                                      points=[POINT]))

    assert tool_names(server.requests[0]) == ["search", "read", "answer", "recall"]
    opening = server.messages[0][1]["content"]
    assert "[1] [hotpot:Seine#0] Seine (score 0.61)\nkey point k1-1: The Seine flows" in opening
    assert "recall(point_id)" in opening
    assert first.action == "recall"
    assert first.calls == (ToolCall(id="rc", tool="recall", args={"point": "k1-1"}),)

    await planner.decide(view(round_=3, evidence=[SEINE], compressed=True, points=[POINT],
                              expanded=("hotpot:Seine#0",)))
    result = tool_messages(server.messages[1])["rc"]
    assert "recall('k1-1'): 1 passage in full:" in result
    assert "[1] [hotpot:Seine#0] Seine (score 0.61)\nThe Seine flows through Paris to" in result


async def test_recall_of_an_unknown_point_is_refused(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("rc", "recall", {"point_id": "k9-9"})]),
        stream_reply(tool_calls=[call("s", "search", {"query": "Seine"})]),
    )

    decision = await planner.decide(view(evidence=[compact(SEINE)], compressed=True,
                                         points=[POINT]))

    assert [c.id for c in decision.calls] == ["s"]
    assert "unknown point 'k9-9'" in decision.rejected[0].reason


async def test_near_the_end_the_model_can_ask_for_the_extension_with_its_calls(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(stream_reply(tool_calls=[
        call("s", "search", {"query": "Seine river Paris"}), call("e", "extend_budget", {})]))

    decision = await planner.decide(view(evidence=[EIFFEL], can_extend=True,
                                         missing=("the river",)))

    assert tool_names(server.requests[0])[-1] == "extend_budget"
    opening = server.messages[0][1]["content"]
    assert "extend_budget()" in opening and "Still missing: the river." in opening
    assert decision.extend and [c.id for c in decision.calls] == ["s"]
    assert "asked for the budget extension" in decision.reason


async def test_an_extension_asked_alone_is_ignored_and_the_model_asked_again(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("e", "extend_budget", {})]),
        stream_reply(tool_calls=[call("s", "search", {"query": "Seine"}),
                                 call("e2", "extend_budget", {})]),
    )

    decision = await planner.decide(view(evidence=[EIFFEL], can_extend=True))

    assert "together with the tool calls" in tool_messages(server.messages[1])["e"]
    assert decision.extend and [c.id for c in decision.calls] == ["s"]


# --- 3. schema bounds and strict-mode validity -----------------------------------------------


def _objects(schema: Any) -> Iterator[dict[str, Any]]:
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            yield schema
        for value in schema.values():
            yield from _objects(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _objects(value)


@pytest.mark.parametrize("web", [False, True])
@pytest.mark.parametrize("extras", [False, True])
def test_every_tool_schema_is_closed_and_valid_where_strict(web: bool, extras: bool) -> None:
    tools = planner_tools(max_k=7, web=web, recall=extras, extend=extras)
    search = next(t for t in tools if t["function"]["name"] == "search")
    assert search["function"]["parameters"]["properties"]["k"]["maximum"] == 7
    for tool in (*tools, *PLANNER_TOOLS):
        function = tool["function"]
        for obj in _objects(function["parameters"]):
            assert obj["additionalProperties"] is False
            if function.get("strict"):  # OpenAI strict mode: every property is required
                assert set(obj["required"]) == set(obj["properties"])
            assert set(obj.get("required", ())) <= set(obj["properties"])


async def test_search_k_is_bounded_in_the_schema_sent(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    server.script(stream_reply(tool_calls=[call("s", "search", {"query": "Seine", "k": 5})]))

    await ChatPlanner(client, max_k=5).decide(view())

    assert search_schema(server.requests[0])["properties"]["k"]["maximum"] == 5


# --- 4. every budget stated ------------------------------------------------------------------


async def test_the_budget_line_states_steps_calls_seconds_and_model_tokens(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(stream_reply(tool_calls=[call("s", "search", {"query": "Seine"})]))

    await planner.decide(view(remaining_steps=3, remaining_tool_calls=5, remaining_s=40.2,
                              remaining_tokens=1200))

    assert ("Budget left: 3 model steps, 5 tool calls, 40 s, 1200 model tokens."
            in server.messages[0][1]["content"])


# --- 5. compaction by relevance, not age -----------------------------------------------------


async def test_compaction_cuts_the_least_related_passages_first_whatever_their_age(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    gold = passage("hotpot:Seine#0", "The Seine river flows through Paris, the city of the "
                   "Eiffel Tower. " * 8, title="Seine", score=0.7)
    junk = passage("hotpot:Cheese#0", "Camembert is a soft cheese from Normandy. " * 8,
                   title="Camembert", score=0.9)
    server.script(
        stream_reply(tool_calls=[call("s1", "search", {"query": "Seine Paris"})]),
        stream_reply(tool_calls=[call("s2", "search", {"query": "cheese"})]),
        stream_reply(tool_calls=[call("fin", "answer", {})]),
    )
    planner = ChatPlanner(client, max_chunk_chars=2000, max_context_chars=3100)
    await planner.decide(view(round_=1))
    await planner.decide(view(round_=2, evidence=[gold],
                              queries=[QueryStat(query="Seine Paris", hits=1, new_evidence=1)]))
    await planner.decide(view(round_=3, evidence=[gold, junk],
                              queries=[QueryStat(query="Seine Paris", hits=1, new_evidence=1),
                                       QueryStat(query="cheese", hits=1, new_evidence=1)]))

    results = tool_messages(server.messages[2])
    assert "The Seine river flows through Paris" in results["s1"]  # older, but on the question
    assert "Camembert is a soft cheese" not in results["s2"]  # newer, off the question
    assert "[2] [hotpot:Cheese#0] Camembert (score 0.90) [text left out" in results["s2"]
    assert len(json.dumps(server.messages[2])) <= 3100


async def test_compaction_weighs_the_parts_the_run_reports_missing(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    # neither passage shares a word with the question; the older holds the missing part
    bridge = passage("hotpot:Rouen#0", "Rouen is a port on the lower course. " * 8,
                     title="Rouen", score=0.5)
    other = passage("hotpot:Lyon#0", "Lyon hosts a large food market. " * 8,
                    title="Lyon", score=0.5)
    server.script(
        stream_reply(tool_calls=[call("s1", "search", {"query": "Rouen"})]),
        stream_reply(tool_calls=[call("s2", "search", {"query": "Lyon"})]),
        stream_reply(tool_calls=[call("fin", "answer", {})]),
    )
    planner = ChatPlanner(client, max_chunk_chars=2000, max_context_chars=2850)
    await planner.decide(view(round_=1))
    await planner.decide(view(round_=2, evidence=[bridge],
                              queries=[QueryStat(query="Rouen", hits=1, new_evidence=1)]))
    await planner.decide(view(round_=3, evidence=[bridge, other], missing=("port Rouen",),
                              queries=[QueryStat(query="Rouen", hits=1, new_evidence=1),
                                       QueryStat(query="Lyon", hits=1, new_evidence=1)]))

    results = tool_messages(server.messages[2])
    assert "Rouen is a port" in results["s1"]
    assert "Lyon hosts" not in results["s2"]


async def test_a_compacted_passage_of_a_compressed_view_says_which_point_recalls_it(
    server: FakeOpenAI, client: OpenAIChatClient
) -> None:
    far = KeyPoint(id="k1-2", text="Camembert is a soft cheese. " * 30,
                   chunk_ids=("hotpot:Cheese#0",))
    cheese = passage("hotpot:Cheese#0", "", title="Camembert", score=0.9)
    server.script(stream_reply(tool_calls=[call("s", "search", {"query": "Seine"})]))
    planner = ChatPlanner(client, max_chunk_chars=2000, max_context_chars=2500)

    await planner.decide(view(round_=2, evidence=[compact(SEINE), cheese], compressed=True,
                              points=[POINT, far]))

    opening = server.messages[0][1]["content"]
    assert "key point k1-1: The Seine flows through Paris." in opening
    assert "recall('k1-2') shows it again" in opening


# --- 6. search results say what they returned ------------------------------------------------


async def test_a_search_that_found_only_earlier_passages_says_so_instead_of_looking_empty(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("s", "search", {"query": "Eiffel Tower Paris"})]),
        stream_reply(tool_calls=[call("fin", "answer", {})]),
    )
    await planner.decide(view(round_=1, evidence=[EIFFEL],
                              queries=[QueryStat(query="Eiffel", hits=3, new_evidence=1)]))
    await planner.decide(view(round_=2, evidence=[EIFFEL], queries=[
        QueryStat(query="Eiffel", hits=3, new_evidence=1),
        QueryStat(query="Eiffel Tower Paris", hits=4, new_evidence=0)]))

    result = tool_messages(server.messages[1])["s"]
    assert "no new passages: its 4 results had all been shown before" in result
    assert "nothing new" not in result


async def test_a_search_lists_earlier_passages_it_returned_as_references(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("s", "search", {"query": "Eiffel Tower Paris"})]),
        stream_reply(tool_calls=[call("fin", "answer", {})]),
    )
    first = QueryStat(query="Eiffel", hits=3, new_evidence=1, chunk_ids=(EIFFEL.id,))
    await planner.decide(view(round_=1, evidence=[EIFFEL], queries=[first]))
    await planner.decide(view(round_=2, evidence=[EIFFEL], queries=[first, QueryStat(
        query="Eiffel Tower Paris", hits=4, new_evidence=0, chunk_ids=(EIFFEL.id,))]))

    result = tool_messages(server.messages[1])["s"]
    assert "it returned passages shown before" in result
    assert f"Also returned, shown before: [1] [{EIFFEL.id}]" in result


# --- 7. pretend retrieval ----------------------------------------------------------------------


async def test_prose_twice_with_evidence_falls_back_to_answering_with_a_typed_reason(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(stream_reply("I will search for the river."),
                  stream_reply("Let me look up the river next."))

    decision = await planner.decide(view(evidence=[EIFFEL, SEINE]))

    assert decision.action == "answer" and decision.calls == ()
    assert decision.reason.startswith("no_tool_call: the model wrote text but called no tool, "
                                      "again after being told to call one")
    assert "Let me look up the river next." in decision.reason
    assert "fallback: answer from the evidence gathered" in decision.reason
    assert decision.tokens == 60  # both model calls counted


async def test_answer_before_any_search_is_refused_once_and_the_retry_searches(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(
        stream_reply(tool_calls=[call("a", "answer", {})]),
        stream_reply(tool_calls=[call("s", "search", {"query": "Eiffel Tower city river"})]),
    )

    decision = await planner.decide(view())

    assert decision.action == "search" and [c.id for c in decision.calls] == ["s"]
    assert [(r.call_id, r.tool) for r in decision.rejected] == [("a", "answer")]
    assert "before any search" in tool_messages(server.messages[1])["a"]
    assert "after feedback (answer_before_search)" in decision.reason


async def test_answer_before_any_search_twice_falls_back_to_searching_the_question(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(stream_reply(tool_calls=[call("a", "answer", {})]),
                  stream_reply(tool_calls=[call("b", "answer", {})]))

    decision = await planner.decide(view())

    assert decision.action == "search" and decision.calls[0].args == {"query": QUESTION}
    assert decision.reason.startswith("answer_before_search:")
    assert "fallback: search the question" in decision.reason


async def test_answer_after_a_search_that_found_nothing_is_taken(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(stream_reply(tool_calls=[call("a", "answer", {})]))

    decision = await planner.decide(view(queries=[QueryStat(query="Eiffel", hits=0)]))

    assert decision.action == "answer" and decision.reason


async def test_every_decision_carries_a_reason(server: FakeOpenAI, planner: ChatPlanner) -> None:
    server.script(stream_reply(tool_calls=[call("s", "search", {"query": "Seine"})]))

    decision = await planner.decide(view())

    assert "the model called search('Seine')" in decision.reason


# --- 8. the first model call's failure is the run's to handle ---------------------------------


async def test_a_failing_first_call_raises_for_the_run_to_fall_back(
    server: FakeOpenAI, planner: ChatPlanner
) -> None:
    server.script(Status(500, '{"error": {"message": "overloaded"}}'))

    with pytest.raises(ChatServerError):
        await planner.decide(view(evidence=[EIFFEL]))


# --- the planner actor fills the new view fields -----------------------------------------------


async def test_the_planner_actor_tells_its_policy_web_and_tokens_left() -> None:
    from reactive_rag.agent import PlannerActor
    from streams import PlanRequested, RunStarted

    seen: list[PlannerView] = []

    class _Recording:
        name = "rec"

        async def decide(self, view: PlannerView) -> Decision:
            seen.append(view)
            return Decision(action="answer", reason="done")

    for web in (False, True):
        actor = PlannerActor(_Recording(), web=web)
        await actor.on_receive(RunStarted(question=QUESTION), None)  # type: ignore[arg-type]
        await actor.on_receive(PlanRequested(round=1, remaining_tokens=900),
                               None)  # type: ignore[arg-type]
    assert [(v.web, v.remaining_tokens) for v in seen] == [(False, 900), (True, 900)]
