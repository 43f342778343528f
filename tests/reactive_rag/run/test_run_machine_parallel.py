"""The machine's dispatch of one plan step: calls in parallel, applied in order, cleaned, scoped.

States are built directly; every reply is a fact handed to ``step``.
"""

from __future__ import annotations

from reactive_rag.judgement.offline import offline_judgement
from reactive_rag.run import Budget, Phase, RunState, initial_state, step
from streams import (
    ActorFailed,
    AnswerRequested,
    BudgetExhausted,
    ErrorInfo,
    Event,
    EvidenceChunk,
    EvidenceRegistered,
    EvidenceSelected,
    Hit,
    PageScraped,
    PlanDecided,
    PlanRequested,
    RerankCompleted,
    RerankRequested,
    ResultsFlagged,
    RunStarted,
    ScrapeRequested,
    SearchCompleted,
    SearchRequested,
    SelectionRequested,
    ToolCall,
    ToolRejected,
)

Commands = list[object]


def of(commands: Commands, cls: type) -> list:  # type: ignore[type-arg]
    return [c for c in commands if isinstance(c, cls)]


def chunk(cid: str, **fields: object) -> EvidenceChunk:
    return EvidenceChunk(id=cid, text=f"text of {cid}", doc_id=cid.split("#")[0], **fields)


def local_hit(cid: str) -> Hit:
    return Hit(url=f"corpus://c/{cid}", title=cid, content=f"text of {cid}", chunk_id=cid,
               doc_id=cid.split("#")[0])


def web_hit(n: int) -> Hit:
    return Hit(url=f"https://site{n}.example/page", title=f"Page {n}",
               snippet=f"the first words of page {n}", source="searxng")


def search(cid: str, query: str, **args: object) -> ToolCall:
    return ToolCall(id=cid, tool="search", args={"query": query, **args})  # type: ignore[dict-item]


def started(budget: Budget | None = None, **kw: object) -> RunState:
    state = initial_state(budget=budget, judgement=offline_judgement(sufficiency=None), **kw)  # type: ignore[arg-type]
    state, _ = step(state, RunStarted(question="Who founded the lab?", ts=1_700_000_000.0))
    return state


def plan(state: RunState, *calls: ToolCall) -> tuple[RunState, Commands]:
    return step(state, PlanDecided(action="search", calls=calls, ts=1_700_000_001.0))


def complete(state: RunState, call_id: str, hits: tuple[Hit, ...]) -> tuple[RunState, Commands]:
    """The tool's reply and, if it asks for one, the rerank's (keeping every candidate)."""
    state, cmds = step(state, SearchCompleted(call_id=call_id, query="q", hits=hits,
                                              ts=1_700_000_002.0))
    reranks = of(cmds, RerankRequested)
    if not reranks:
        return state, cmds
    state, more = step(state, RerankCompleted(call_id=call_id, query="q",
                                              chunks=reranks[0].candidates, ts=1_700_000_002.0))
    return state, cmds + more


def test_one_plan_step_dispatches_its_calls_at_once_up_to_the_parallel_cap() -> None:
    state = started(Budget(max_parallel_calls=2))
    state, cmds = plan(state, search("a", "one"), search("b", "two"), search("c", "three"))
    assert [r.call_id for r in of(cmds, SearchRequested)] == ["a", "b"]
    assert state.tool_calls == 2  # counted at dispatch, before any reply
    state, cmds = complete(state, "a", (local_hit("d1#0"),))
    assert [r.call_id for r in of(cmds, SearchRequested)] == ["c"]  # a slot came free


def test_replies_arriving_out_of_order_are_applied_in_dispatch_order() -> None:
    state = started()
    state, _ = plan(state, search("a", "one"), search("b", "two"), search("c", "three"))
    state, cmds = complete(state, "c", (local_hit("d3#0"),))
    state, more = complete(state, "b", (local_hit("d2#0"),))
    assert not of(cmds + more, EvidenceRegistered)  # a, dispatched first, is still out
    state, cmds = complete(state, "a", (local_hit("d1#0"),))
    registered = [e.chunks[0].id for e in of(cmds, EvidenceRegistered)]
    assert registered == ["d1#0", "d2#0", "d3#0"]
    assert [q.query for q in of(cmds, PlanRequested)[0].queries] == ["one", "two", "three"]


def test_the_tool_budget_stops_dispatch_and_the_run_finalizes_after_the_calls_in_flight() -> None:
    state = started(Budget(max_tool_calls=2))
    state, cmds = plan(state, search("a", "one"), search("b", "two"), search("c", "three"))
    assert [r.call_id for r in of(cmds, SearchRequested)] == ["a", "b"]
    state, cmds = complete(state, "a", (local_hit("d1#0"),))
    assert not of(cmds, BudgetExhausted)  # b is paid for: its result is waited for
    state, cmds = complete(state, "b", (local_hit("d2#0"),))
    assert of(cmds, BudgetExhausted)[0].resource == "tool_calls"
    assert state.phase is Phase.SELECTING and state.write_mode == "finalize"
    assert set(state.evidence) == {"d1#0", "d2#0"}


def test_arguments_are_cleaned_before_dispatch_and_the_cleaning_is_recorded() -> None:
    state = started()
    long_query = "alpha\x00 beta\u200b " + " ".join(f"word{i}" for i in range(60))
    state, cmds = plan(state, search("a", long_query))
    request = of(cmds, SearchRequested)[0]
    assert "\x00" not in request.query and "\u200b" not in request.query
    assert len(request.query) <= 200 and request.query.split()[-1].startswith("word")
    assert any("control character" in n for n in request.cleaned)
    assert any("cut from" in n for n in request.cleaned)


def test_clean_queries_are_sent_untouched() -> None:
    _, cmds = plan(started(), search("a", "who founded the lab"))
    assert of(cmds, SearchRequested)[0].cleaned == ()


def test_filters_travel_typed_and_bad_ones_are_refused_with_a_reason() -> None:
    state = started()
    state, cmds = plan(state,
                       search("a", "lab news", filters={"date_from": "2025-01-01",
                                                        "exclude_sites": ["Spam.example"]}),
                       search("b", "lab history", filters={"date_from": "last tuesday"}))
    request = of(cmds, SearchRequested)[0]
    assert request.filters.date_from == "2025-01-01"
    assert request.filters.exclude_sites == ("spam.example",)
    rejected = of(cmds, ToolRejected)
    assert [r.call_id for r in rejected] == ["b"] and "date_from" in rejected[0].reason


def test_unapplied_filters_reach_the_planner_as_typed_feedback() -> None:
    state = started()
    state, _ = plan(state, search("a", "lab", filters={"sites": ["lab.example"]}))
    state, cmds = step(state, SearchCompleted(call_id="a", query="lab", hits=(web_hit(1),),
                                              unapplied=("brave: sites (no parameter)",),
                                              ts=1_700_000_002.0))
    state, cmds = step(state, RerankCompleted(call_id="a", query="lab",
                                              chunks=of(cmds, RerankRequested)[0].candidates))
    feedback = of(cmds, PlanRequested)[0].feedback
    assert [(f.kind, f.call_id) for f in feedback] == [("unapplied_filter", "a")]
    assert "brave: sites" in feedback[0].detail


def _with_web_results(state: RunState, n: int = 3) -> RunState:
    state, _ = plan(state, search("s", "lab founder"))
    state, _ = complete(state, "s", tuple(web_hit(i) for i in range(n)))
    return state


def test_a_page_is_opened_only_if_it_was_a_result_of_this_run() -> None:
    state = _with_web_results(started())
    snippet = next(c for c in state.evidence.values() if c.url == "https://site1.example/page")
    assert snippet.snippet
    calls = (ToolCall(id="o1", tool="scrape", args={"result_id": snippet.id}),
             ToolCall(id="o2", tool="scrape", args={"url": "https://elsewhere.example/x"}),
             ToolCall(id="o3", tool="scrape", args={"result_id": "made-up"}))
    state, cmds = step(state, PlanDecided(action="scrape", calls=calls, ts=1_700_000_003.0))
    assert [(r.call_id, r.url) for r in of(cmds, ScrapeRequested)] == [
        ("o1", "https://site1.example/page")]
    reasons = {r.call_id: r.reason for r in of(cmds, ToolRejected)}
    assert "not a result this run has seen" in reasons["o2"]
    assert "unknown result id" in reasons["o3"]


def test_the_page_budget_and_repeated_pages_are_refused_as_typed_feedback() -> None:
    state = _with_web_results(started(Budget(max_pages=1)), n=3)
    calls = (ToolCall(id="o1", tool="scrape", args={"url": "https://site0.example/page"}),
             ToolCall(id="o2", tool="scrape", args={"url": "https://site0.example/page#top"}),
             ToolCall(id="o3", tool="scrape", args={"url": "https://site2.example/page"}))
    state, cmds = step(state, PlanDecided(action="scrape", calls=calls, ts=1_700_000_003.0))
    assert [r.call_id for r in of(cmds, ScrapeRequested)] == ["o1"]
    kinds = {f.call_id: f.kind for f in state.feedback}
    assert kinds == {"o2": "duplicate", "o3": "page_limit"}


def test_an_opened_page_replaces_its_snippet_in_the_final_choice() -> None:
    state = _with_web_results(started(), n=2)
    url = "https://site0.example/page"
    state, _ = step(state, PlanDecided(action="scrape", calls=(
        ToolCall(id="o1", tool="scrape", args={"url": url}),), ts=1_700_000_003.0))
    page = (chunk("web:p#0", url=url, next_id="web:p#1"), chunk("web:p#1", url=url))
    state, cmds = step(state, PageScraped(call_id="o1", url=url, chunks=page))
    state, cmds = step(state, RerankCompleted(call_id="o1", query="q",
                                              chunks=of(cmds, RerankRequested)[0].candidates))
    state, cmds = step(state, PlanDecided(action="answer", ts=1_700_000_004.0))
    final = of(cmds, RerankRequested)[0]
    urls = [(c.url, c.snippet) for c in final.candidates]
    assert (url, True) not in urls and (url, False) in urls
    assert ("https://site1.example/page", True) in urls  # an unopened result stays


def _to_shortlist(state: RunState) -> tuple[RunState, Commands]:
    state, _ = plan(state, search("a", "one"))
    state, _ = complete(state, "a", tuple(local_hit(f"d{i}#0") for i in range(8)))
    state, cmds = step(state, PlanDecided(action="answer", ts=1_700_000_003.0))
    rerank = of(cmds, RerankRequested)[0]
    assert rerank.k == (state.budget.shortlist if state.selects else state.budget.final_evidence)
    return step(state, RerankCompleted(call_id="final", query="q", chunks=rerank.candidates))


def test_evidence_selection_is_its_own_stage_with_the_shortlist_as_its_bound() -> None:
    state, cmds = _to_shortlist(started(selects=True))
    request = of(cmds, SelectionRequested)[0]
    assert state.phase is Phase.CHOOSING and len(request.candidate_ids) == 8
    assert request.queries == ("one",) and request.k == 5
    state, cmds = step(state, EvidenceSelected(ids=("d7#0", "invented#0", "d2#0")))
    assert of(cmds, AnswerRequested)[0].evidence_ids == ("d7#0", "d2#0")


def test_a_failed_selector_degrades_to_the_reranks_order() -> None:
    state, _ = _to_shortlist(started(selects=True))
    state, cmds = step(state, ActorFailed(request_type="selection.requested",
                                          error=ErrorInfo(kind="Boom", message="x")))
    ids = of(cmds, AnswerRequested)[0].evidence_ids
    assert ids == tuple(f"d{i}#0" for i in range(5))


def test_without_a_selector_the_rerank_picks_the_writers_evidence_directly() -> None:
    _, cmds = _to_shortlist(started())
    assert not of(cmds, SelectionRequested) and of(cmds, AnswerRequested)


def test_late_and_duplicate_replies_leave_the_state_alone() -> None:
    state = started()
    state, _ = plan(state, search("a", "one"), search("b", "two"))
    state, _ = complete(state, "a", (local_hit("d1#0"),))
    again: list[Event] = [SearchCompleted(call_id="a", query="one", hits=(local_hit("d9#0"),)),
                          SearchCompleted(call_id="zzz", query="x")]
    for event in again:
        new, cmds = step(state, event)
        assert cmds == [] and new == state
    assert [f.call.id for f in state.in_flight] == ["b"]


def _stuffed(n: int) -> Hit:
    words = " ".join(["lab founder founded lab best lab founders who founded lab"] * 6)
    return Hit(url=f"https://spam{n}.example/lab", title="lab founder lab", content=words,
               source="searxng")


def _article(n: int) -> Hit:
    text = ("The laboratory was founded in 1921 by a group of physicists who wanted a place "
            "for long experiments. Its first director raised money from several universities, "
            "and within a decade the lab employed more than two hundred people.")
    return Hit(url=f"https://news{n}.example/history", title="History of the lab", content=text,
               source="searxng", published_at="2020-05-01")


def test_spam_results_are_dropped_flagged_and_their_hosts_reported_to_the_planner() -> None:
    state = started()
    state, _ = plan(state, search("a", "who founded the lab"))
    state, cmds = step(state, SearchCompleted(call_id="a", query="who founded the lab",
                                              hits=(_stuffed(1), _article(1)),
                                              ts=1_700_000_002.0))
    assert [c.url for c in of(cmds, RerankRequested)[0].candidates] == [
        "https://news1.example/history"]
    state, cmds = step(state, RerankCompleted(call_id="a", query="q",
                                              chunks=of(cmds, RerankRequested)[0].candidates))
    flagged = of(cmds, ResultsFlagged)
    assert [(f.kind, f.urls, f.hosts) for f in flagged] == [
        ("spam", ("https://spam1.example/lab",), ("spam1.example",))]
    feedback = of(cmds, PlanRequested)[0].feedback
    assert [(f.kind, f.hosts) for f in feedback] == [("spam", ("spam1.example",))]


def test_the_local_corpus_is_never_judged_as_spam() -> None:
    state = started()
    state, _ = plan(state, search("a", "who founded the lab"))
    own = _stuffed(1).model_copy(update={"source": "local:notes", "chunk_id": "n#0"})
    state, cmds = step(state, SearchCompleted(call_id="a", query="q", hits=(own,),
                                              ts=1_700_000_002.0))
    assert len(of(cmds, RerankRequested)[0].candidates) == 1


def test_results_all_older_than_the_asked_period_are_flagged_stale_for_a_retry() -> None:
    state = initial_state(judgement=offline_judgement(sufficiency=None))
    state, _ = step(state, RunStarted(question="Who ran the lab last year?",
                                      ts=1_700_000_000.0))  # 2023-11-14
    state, _ = plan(state, search("a", "lab director"))
    state, cmds = step(state, SearchCompleted(call_id="a", query="lab director",
                                              hits=(_article(1), _article(2)),
                                              ts=1_700_000_002.0))
    state, cmds = step(state, RerankCompleted(call_id="a", query="q",
                                              chunks=of(cmds, RerankRequested)[0].candidates))
    assert [f.kind for f in of(cmds, ResultsFlagged)] == ["stale"]
    feedback = of(cmds, PlanRequested)[0].feedback
    assert [(f.kind, f.query) for f in feedback] == [("stale", "lab director")]
    assert len(state.evidence) == 2  # stale results are kept, only flagged
