"""The offline planner on the web: opening result pages, date filters, typed feedback."""

from __future__ import annotations

from reactive_rag.agent import OfflinePlanner, PlannerView
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
