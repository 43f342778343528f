"""The swimlane model of a run: lanes per actor, a bar per request and reply, budgets beside."""

from __future__ import annotations

import io

from rich.console import Console

from reactive_rag.cli._timeline import build_timeline, render_timeline
from streams import (
    ActorFailed,
    AnswerDrafted,
    AnswerRequested,
    BudgetTick,
    ErrorInfo,
    Event,
    PlanDecided,
    PlanRequested,
    ProviderCall,
    RunFinished,
    RunResumed,
    RunStarted,
    ScrapeFailed,
    ScrapeRequested,
    SearchCompleted,
    SearchRequested,
    VerifyFailed,
)


class _Log:
    """Events stamped like the stream does (seq, ts), with causes by seq."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, ev: Event, at: float, cause: int | None = None) -> int:
        seq = len(self.events) + 1
        self.events.append(ev.model_copy(update={"seq": seq, "ts": 1000.0 + at, "cause": cause,
                                                 "run_id": "r"}))
        return seq


def _fanout() -> _Log:
    log = _Log()
    log.add(RunStarted(question="q"), 0.0)
    plan = log.add(PlanRequested(round=1, remaining_pages=2), 0.0)
    log.add(PlanDecided(action="search"), 0.1, plan)
    a = log.add(SearchRequested(call_id="p1-0", query="alpha"), 0.1)
    b = log.add(SearchRequested(call_id="p1-1", query="beta"), 0.1)
    log.add(BudgetTick(steps=1, tool_calls=2, max_steps=8, max_tool_calls=10,
                       elapsed_s=0.1, deadline_s=30.0), 0.1)
    log.add(SearchCompleted(call_id="p1-0", query="alpha", providers=("local",),
                            provider_calls=(ProviderCall(provider="local", elapsed_s=0.1),
                                            ProviderCall(provider="web", elapsed_s=0.4,
                                                         error="ProviderTimeout"))), 0.5, a)
    log.add(SearchCompleted(call_id="p1-1", query="beta"), 0.6, b)
    return log


SCENARIOS = {"fanout": _fanout}  # filled below: the event lists the page's port is checked on


def test_parallel_calls_overlap_in_their_lane_on_separate_rows() -> None:
    tl = build_timeline(_fanout().events)
    searches = tl.lane_bars("searcher")
    assert [b.label for b in searches] == ["alpha", "beta"]
    assert {b.row for b in searches} == {0, 1}  # both in flight at once: stacked
    assert searches[0].start < searches[1].end and searches[1].start < searches[0].end  # type: ignore[operator]
    assert [lane.name for lane in tl.lanes][:2] == ["planner", "searcher"]
    assert next(lane for lane in tl.lanes if lane.name == "searcher").rows == 2
    assert all(b.status == "ok" for b in searches)
    assert searches[0].end is not None and abs(searches[0].end - searches[0].start - 0.4) < 1e-9


def test_each_provider_of_a_search_gets_its_own_lane_and_a_failing_one_is_marked() -> None:
    tl = build_timeline(_fanout().events)
    (local,) = tl.lane_bars("search:local")
    (web,) = tl.lane_bars("search:web")
    assert local.status == "ok" and web.status == "failed" and web.detail == "ProviderTimeout"
    assert web.end is not None and local.end is not None and web.end > local.end  # the slow one


def _failures() -> _Log:
    log = _Log()
    log.add(RunStarted(question="q"), 0.0)
    s = log.add(ScrapeRequested(call_id="c1", url="https://x.test/a"), 0.0)
    log.add(ScrapeFailed(call_id="c1", url="https://x.test/a",
                         error=ErrorInfo(kind="FetchError", message="403")), 0.2, s)
    p = log.add(PlanRequested(round=2), 0.3)
    log.add(ActorFailed(request_type="plan.requested",
                        error=ErrorInfo(kind="ValueError", message="bad json")), 0.4, p)
    return log


def test_a_failed_request_is_marked_failed_with_its_error() -> None:
    tl = build_timeline(_failures().events)
    (scrape,) = tl.lane_bars("scraper")
    (plan,) = tl.lane_bars("planner")
    assert scrape.status == "failed" and scrape.detail == "FetchError: 403"
    assert plan.status == "failed" and "bad json" in plan.detail
    assert next(g for g in tl.gauges if g.name == "pages").used == 1


def _ended_mid_call() -> _Log:
    log = _fanout()
    log.add(SearchRequested(call_id="p2-0", query="gamma"), 0.7)
    log.add(RunFinished(outcome="answered_from_evidence", reason="deadline"), 0.9)
    return log


def test_a_run_that_ended_mid_call_leaves_the_bar_open() -> None:
    tl = build_timeline(_ended_mid_call().events)
    gamma = tl.lane_bars("searcher")[-1]
    assert gamma.label == "gamma" and gamma.status == "open" and gamma.end is None
    assert tl.outcome == "answered_from_evidence" and abs(tl.duration - 0.9) < 1e-9


def _cancelled() -> _Log:
    log = _Log()
    log.add(RunStarted(question="q"), 0.0)
    log.add(SearchRequested(call_id="p1-0", query="alpha"), 0.1)
    log.add(RunFinished(outcome="cancelled"), 0.2)
    return log


def test_a_cancelled_run_marks_its_calls_in_flight_cancelled() -> None:
    (bar,) = build_timeline(_cancelled().events).lane_bars("searcher")
    assert bar.status == "cancelled" and bar.end is None


def _resumed() -> _Log:
    log = _Log()
    log.add(RunStarted(question="q"), 0.0)
    log.add(SearchRequested(call_id="p1-0", query="alpha"), 0.1)
    log.add(RunFinished(outcome="interrupted"), 0.2)
    log.add(RunResumed(after_seq=3), 5.0)
    again = log.add(SearchRequested(call_id="p1-0", query="alpha"), 5.0)
    log.add(SearchCompleted(call_id="p1-0", query="alpha"), 5.3, again)
    log.add(RunFinished(outcome="answered"), 5.5)
    return log


def test_a_call_issued_again_after_a_resume_is_a_retry_and_the_lost_one_is_marked() -> None:
    first, second = build_timeline(_resumed().events).lane_bars("searcher")
    assert first.status == "retried" and first.end is None and not first.is_retry
    assert second.status == "ok" and second.attempt == 2 and second.is_retry


def _repaired() -> _Log:
    log = _Log()
    log.add(RunStarted(question="q"), 0.0)
    w1 = log.add(AnswerRequested(attempt=1), 0.1)
    d1 = log.add(AnswerDrafted(text="t", claims=()), 0.2, w1)
    log.add(VerifyFailed(errors=()), 0.3, d1)
    w2 = log.add(AnswerRequested(mode="repair", attempt=2), 0.3)
    log.add(AnswerDrafted(text="t", claims=(), attempt=2, mode="repair"), 0.4, w2)
    w3 = log.add(AnswerRequested(mode="finalize"), 0.5)
    log.add(AnswerDrafted(text="t", claims=(), mode="finalize"), 0.6, w3)
    return log


def test_a_rejected_draft_fails_the_verifier_bar_and_the_repair_is_a_retry() -> None:
    tl = build_timeline(_repaired().events)
    assert [b.status for b in tl.lane_bars("verifier")] == ["failed", "open", "open"]
    assert [b.attempt for b in tl.lane_bars("writer")] == [1, 2]
    assert len(tl.lane_bars("finalizer")) == 1
    assert [lane.name for lane in tl.lanes][-3:] == ["writer", "verifier", "finalizer"]


SCENARIOS.update(failures=_failures, ended_mid_call=_ended_mid_call, cancelled=_cancelled,
                 resumed=_resumed, repaired=_repaired)


def test_budget_gauges_come_from_the_last_tick_and_the_page_limit() -> None:
    gauges = {g.name: g for g in build_timeline(_fanout().events).gauges}
    assert (gauges["tool calls"].used, gauges["tool calls"].limit) == (2, 10)
    assert (gauges["model steps"].used, gauges["model steps"].limit) == (1, 8)
    assert gauges["time"].limit == 30.0 and (gauges["pages"].used, gauges["pages"].limit) == (0, 2)


def test_no_events_is_an_empty_timeline() -> None:
    tl = build_timeline([])
    assert tl.lanes == () and tl.bars == () and tl.duration == 0.0


def test_the_text_view_draws_every_lane_with_its_bars_and_the_budget() -> None:
    log = _fanout()
    log.add(RunFinished(outcome="answered", reason="verified"), 1.0)
    out = io.StringIO()
    render_timeline(build_timeline(log.events), Console(file=out, width=90, color_system=None))
    text = out.getvalue()
    lines = text.splitlines()
    assert all(len(line) <= 90 for line in lines), "a line wider than the terminal"
    for lane in ("planner", "searcher", "search:local", "search:web"):
        assert any(line.startswith(lane) for line in lines), lane
    web = next(line for line in lines if line.startswith("search:web"))
    assert "▓" in web and "1 failed" in web
    assert "tool calls 2/10" in text and "outcome: answered (verified)" in text
