"""The offline planner on the web: opening result pages, date filters, typed feedback."""

from __future__ import annotations

from dataclasses import replace

from reactive_rag.judgement import PlannerView
from reactive_rag.judgement.offline import OfflinePlanner
from streams import EvidenceChunk, Feedback, QueryStat

Q = "Which river flows through the capital of the Kingdom of Lirea?"


def snippet(n: int, text: str, title: str = "") -> EvidenceChunk:
    return EvidenceChunk(id=f"web:{n}", url=f"https://site{n}.example/page", title=title,
                         text=text, snippet=True, source="searxng", score=1.0 / (n + 1))


RESULTS = [
    snippet(1, "The Kingdom of Lirea is a small state whose capital", "Kingdom of Lirea"),
    snippet(2, "Lirea capital city river bridges and old town", "Capital of Lirea"),
    snippet(3, "A recipe for apple pie with cinnamon and butter", "Apple pie"),
    snippet(4, "The Kingdom of Lirea joined the league in", "Lirea history"),
]


def view(**kw: object) -> PlannerView:
    base: dict[str, object] = {"question": Q, "round": 2, "evidence": RESULTS,
                               "queries": [QueryStat(query=Q, hits=4,
                                                     new_evidence=4)], "today": "2026-06-15"}
    base.update(kw)
    return PlannerView(**base)  # type: ignore[arg-type]


def opened(decision: object) -> list[object]:
    return [c.args["result_id"] for c in decision.calls if c.tool == "scrape"]  # type: ignore[attr-defined]


def test_opens_the_pages_of_the_results_that_speak_to_the_question() -> None:
    decision = OfflinePlanner(pages_per_round=3).plan(view())
    pages = opened(decision)
    assert len(pages) == 3 and "web:3" not in pages  # the unrelated result stays closed
    assert decision.calls[0].tool == "scrape"  # and pages go out with this round's searches


def test_the_page_budget_and_pages_already_opened_are_respected() -> None:
    assert opened(OfflinePlanner().plan(view(remaining_pages=1))) == ["web:1"]
    assert opened(OfflinePlanner().plan(view(remaining_pages=0))) == []
    pages = opened(OfflinePlanner().plan(view(pages=("https://site1.example/page",))))
    assert "web:1" not in pages and pages


def test_a_page_whose_text_is_held_is_not_opened_again() -> None:
    page = EvidenceChunk(id="web:p#0", url="https://site1.example/page", text="full text",
                         source="scraper")
    assert "web:1" not in opened(OfflinePlanner().plan(view(evidence=[*RESULTS, page])))


def test_before_answering_it_opens_what_the_last_round_found() -> None:
    decision = OfflinePlanner(max_rounds=3).plan(view(round=4))
    assert decision.action == "scrape" and opened(decision)
    assert all(c.tool == "scrape" for c in decision.calls)  # no new searches after the last round
    spent = OfflinePlanner(max_rounds=3).plan(view(round=4, remaining_pages=0))
    assert spent.action == "answer"


def test_a_question_about_last_year_searches_with_that_date_range() -> None:
    q = "Who won the Lirea chess championship last year?"
    decision = OfflinePlanner().plan(PlannerView(question=q, round=1, evidence=[], queries=[],
                                                 today="2026-06-15"))
    filters = [c.args.get("filters") for c in decision.calls]
    assert filters and all(f == {"date_from": "2025-01-01", "date_to": "2025-12-31"}
                           for f in filters)


def test_a_question_about_a_fixed_year_is_not_a_publication_filter() -> None:
    q = "Who won the Lirea chess championship in 1990?"
    decision = OfflinePlanner().plan(PlannerView(question=q, round=1, evidence=[], queries=[],
                                                 today="2026-06-15"))
    assert all("filters" not in c.args for c in decision.calls)


def test_when_dated_searches_find_nothing_the_planner_drops_the_date_filter() -> None:
    q = "Who won the Lirea chess championship last year?"
    planner = OfflinePlanner()
    first = planner.plan(PlannerView(question=q, round=1, evidence=[], queries=[],
                                     today="2026-06-15"))
    empty = [Feedback(kind="empty", query=str(c.args["query"])) for c in first.calls]
    records = [QueryStat(query=str(c.args["query"]), hits=0, new_evidence=0) for c in first.calls]
    second = planner.plan(PlannerView(question=q, round=2, evidence=[], queries=records,
                                      feedback=empty, today="2026-06-15"))
    assert second.calls and all("filters" not in c.args for c in second.calls)


def test_hosts_flagged_as_spam_are_excluded_from_later_searches() -> None:
    planner = OfflinePlanner()
    spam = Feedback(kind="spam", hosts=("spam1.example",), query=Q, detail="keyword stuffing")
    decision = planner.plan(view(feedback=[spam], evidence=[], queries=[QueryStat(query=Q, hits=0,
                                                                                  new_evidence=0)]))
    searches = [c for c in decision.calls if c.tool == "search"]
    assert searches and all(c.args["filters"] == {"exclude_sites": ["spam1.example"]}
                            for c in searches)


def test_stale_results_are_searched_again_with_the_asked_period() -> None:
    q = "What is the latest Lirea census figure?"
    stale = Feedback(kind="stale", query="Lirea census", detail="every result is from 2019")
    decision = OfflinePlanner().plan(PlannerView(
        question=q, round=2, evidence=RESULTS[:1], queries=[QueryStat(query="Lirea census", hits=3,
                                                                      new_evidence=1)],
        feedback=[stale], today="2026-06-15"))
    retry = [c for c in decision.calls if c.tool == "search" and "2026" in str(c.args["query"])]
    assert retry and retry[0].args["filters"]["date_from"] >= "2025"  # type: ignore[index,operator]


def test_a_copy_of_a_page_already_read_is_not_opened_and_better_scored_results_go_first() -> None:
    page = EvidenceChunk(id="web:p#0", url="https://site1.example/page", source="scraper",
                         text="The Kingdom of Lirea is a small state whose capital sits on a "
                              "river delta")
    mirror = EvidenceChunk(id="web:m", url="https://copy.example/lirea", snippet=True,
                           source="searxng", score=0.99, title="Kingdom of Lirea",
                           text="The Kingdom of Lirea is a small state whose capital")
    evidence = [RESULTS[0], mirror, RESULTS[1], RESULTS[3], page]
    pages = opened(OfflinePlanner().plan(view(evidence=evidence,
                                              pages=("https://site1.example/page",))))
    assert "web:m" not in pages
    assert pages == ["web:2", "web:4"]  # by the reranker's score, best first


def test_the_next_hop_named_by_a_page_already_read_is_opened_first() -> None:
    read = EvidenceChunk(id="web:p#0", url="https://site9.example/page", source="scraper",
                         text="Lirea's capital is Orvel, which lies on the river Tamsin.")
    hop = EvidenceChunk(id="web:t", url="https://site7.example/tamsin", snippet=True,
                        source="searxng", score=0.01, title="Tamsin",
                        text="The Tamsin is a river of the Kingdom of Lirea")
    pages = opened(OfflinePlanner(pages_per_round=1).plan(
        view(evidence=[*RESULTS, hop, read], pages=("https://site9.example/page",))))
    assert pages == ["web:t"]  # named by the page read, despite the lowest score


# --- the next hop: read the first pages, then search what they name, then open it -----------

PAGE_URL = "https://site1.example/page"
READ = EvidenceChunk(id="web:p#0", url=PAGE_URL, source="scraper", title="Kingdom of Lirea",
                     text="The Kingdom of Lirea is a small state. Its capital is Port Orvel, "
                          "on the river Tamsin Water.")


def searches(decision: object) -> list[str]:
    return [str(c.args["query"]) for c in decision.calls  # type: ignore[attr-defined]
            if c.tool == "search"]


def test_the_first_pages_are_read_before_the_names_they_mention_are_searched() -> None:
    # Round 2 holds only 20-word snippets: their names are a poor guess at the next hop,
    # so the round opens pages and searches nothing yet.
    decision = OfflinePlanner().plan(view())
    assert opened(decision) and searches(decision) == []
    assert decision.action == "scrape"


def test_a_round_that_only_opened_pages_does_not_use_up_a_search_round() -> None:
    planner = OfflinePlanner(max_rounds=2)
    planner.plan(view())  # round 2: pages only
    after = planner.plan(view(round=3, evidence=[*RESULTS, READ], pages=(PAGE_URL,)))
    assert any("Orvel" in q for q in searches(after))  # the name the page read gives
    fresh = OfflinePlanner(max_rounds=2).plan(view(round=3, evidence=[*RESULTS, READ],
                                                   pages=(PAGE_URL,)))
    assert searches(fresh) == []  # a planner that searched rounds 1-2 stops searching


def test_bridge_searches_on_the_web_leave_calls_to_open_what_they_find() -> None:
    busy = view(round=3, evidence=[*RESULTS, READ], pages=(PAGE_URL,))
    roomy = OfflinePlanner().plan(busy)
    assert searches(roomy) and opened(roomy) == ["web:2"]  # pages kept back for the hop
    tight = OfflinePlanner().plan(replace(busy, remaining_tool_calls=3, remaining_pages=3))
    n_search, n_open = len(searches(tight)), len(opened(tight))
    assert n_search + n_open <= 2  # one call of three stays for the page a search finds
    # Without web results there is nothing to open later: no call is kept back.
    local = [EvidenceChunk(id="d1#0", url="corpus://c/d1", source="local",
                           title="Kingdom of Lirea", text="The capital of the Kingdom of Lirea "
                           "is Port Orvel, where the river Tamsin Water flows into the sea.")]
    spent = OfflinePlanner().plan(PlannerView(question=Q, round=2, evidence=local,
                                              queries=[QueryStat(query=Q, hits=1,
                                                                 new_evidence=1)],
                                              remaining_tool_calls=2))
    assert len(spent.calls) == 2


def test_bridges_come_from_the_passage_about_what_the_question_names() -> None:
    # A passage sharing the question's common words ("river", "capital") but about
    # another place names the wrong hop; the one naming "Kingdom of Lirea" names Orvel.
    decoy = EvidenceChunk(id="web:d#0", url="https://site5.example/page", source="scraper",
                          title="Rivers of Tessaly",
                          text="The river Ambra flows through the capital of Tessaly, past "
                               "Castel Novo, and through the old kingdom's river port.")
    lirea = READ.model_copy(update={"text": "The capital of the Kingdom of Lirea is Port "
                                            "Orvel."})
    decision = OfflinePlanner(bridges_per_round=1).plan(PlannerView(
        question=Q, round=3, evidence=[decoy, lirea],
        queries=[QueryStat(query=Q, hits=2, new_evidence=2)]))
    assert searches(decision) and "Orvel" in searches(decision)[0]
