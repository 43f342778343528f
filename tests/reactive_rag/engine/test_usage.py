"""Usage per run: the one fold over a run's events, run.finished carrying it, costs by the
price table."""

from __future__ import annotations

from pathlib import Path

import pytest

from reactive_rag import Engine
from reactive_rag.engine import (
    ModelPrice,
    PriceTable,
    add_usage,
    fold_usage,
    usage_json,
    usage_line,
    usage_of,
)
from reactive_rag.index import CorpusIndex
from reactive_rag.run import RunConfigError
from streams import (
    AnswerabilityJudged,
    AnswerDrafted,
    Event,
    EvidenceChunk,
    ModelUsage,
    PageScraped,
    PlanDecided,
    ProviderCall,
    RunFinished,
    RunResumed,
    RunStarted,
    RunStream,
    RunUsage,
    SearchCompleted,
    SearchFailed,
    decode_msgpack,
    encode_msgpack,
)
from streams import ErrorInfo as Err


def _log(*events: Event) -> list[Event]:
    """Events as a stream stamps them: seq 1.. and ``ts`` 100 + seq."""
    return [e.model_copy(update={"run_id": "r1", "seq": i, "ts": 100.0 + i})
            for i, e in enumerate(events, 1)]


RECORDED = _log(
    RunStarted(question="q"),
    PlanDecided(action="search", model="gpt-x", input_tokens=120, output_tokens=30),
    SearchCompleted(query="q", provider_calls=(ProviderCall(provider="brave"),
                                               ProviderCall(provider="local"))),
    SearchFailed(query="q2", error=Err(kind="timeout", message="slow"),
                 provider_calls=(ProviderCall(provider="brave", error="timeout"),)),
    PageScraped(url="https://a.example", chunks=(EvidenceChunk(id="c1", text="héllo"),
                                                 EvidenceChunk(id="c2", text="world"))),
    PlanDecided(action="answer", model="gpt-x", input_tokens=200, output_tokens=10),
    PlanDecided(action="search"),  # an offline decision: no model call
    AnswerabilityJudged(verdict="answerable", by="model", model="judge-m"),
    AnswerabilityJudged(verdict="answerable"),  # the offline rules judged: no call
    AnswerDrafted(text="t", claims=(), model="gpt-x", input_tokens=300, output_tokens=50),
)


def test_the_fold_counts_model_calls_by_role_provider_calls_pages_and_wall_time() -> None:
    usage = fold_usage(RECORDED)
    assert usage.models == (
        ModelUsage(role="judge", model="judge-m", calls=1),
        ModelUsage(role="planner", model="gpt-x", calls=2, input_tokens=320, output_tokens=40),
        ModelUsage(role="writer", model="gpt-x", calls=1, input_tokens=300, output_tokens=50),
    )
    assert usage.provider_calls == {"brave": 2, "local": 1}  # a failed call is a call
    assert usage.pages == 1 and usage.page_bytes == len("héllo".encode()) + len("world")
    assert usage.wall_s == RECORDED[-1].ts - RECORDED[0].ts


def test_a_resumed_run_counts_the_time_before_its_crash_not_the_downtime() -> None:
    log = _log(RunStarted(question="q"), PlanDecided(action="search"),
               RunFinished(outcome="interrupted"),
               RunResumed(after_seq=3, elapsed_s=7.5), PlanDecided(action="answer"))
    log[3] = log[3].model_copy(update={"ts": 5000.0})  # resumed long after the crash
    log[4] = log[4].model_copy(update={"ts": 5002.0})
    assert fold_usage(log).wall_s == 7.5 + 2.0


async def test_an_offline_run_finishes_with_its_usage_zero_tokens_and_zero_cost(
        index: CorpusIndex) -> None:
    engine = Engine(index)
    try:
        events = list((await engine.ask("Who founded Bayer and when?",
                                        collections=["demo"])).events)
    finally:
        await engine.aclose()
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.usage is not None
    searches = sum(1 for e in events if isinstance(e, SearchCompleted))
    assert searches >= 1
    assert finished.usage.models == ()  # no model: no calls, no tokens
    assert finished.usage.provider_calls == {"local": searches}
    # what the runtime counted is the fold of the run's own events before the terminal
    assert finished.usage == fold_usage(events[:-1])
    assert usage_of(events) is finished.usage
    table = PriceTable(models={"gpt-x": ModelPrice(input_per_1k=1.0, output_per_1k=2.0)})
    assert table.estimate_cost(finished.usage).total == 0.0
    assert "offline: 0 tokens" in usage_line(finished.usage, table)


def test_run_finished_with_its_usage_survives_the_wire() -> None:
    finished = RunFinished(outcome="answered", usage=fold_usage(RECORDED))
    assert decode_msgpack(encode_msgpack(finished)) == finished
    # a run stored before usage was counted still decodes, and its events are counted
    old = decode_msgpack(encode_msgpack(RunFinished(outcome="answered")))
    assert isinstance(old, RunFinished) and old.usage is None
    assert usage_of([*RECORDED, old]) == fold_usage([*RECORDED, old])


def test_cost_comes_from_the_price_table_and_unpriced_models_are_named() -> None:
    usage = fold_usage(RECORDED)
    table = PriceTable(currency="EUR",
                       models={"gpt-x": ModelPrice(input_per_1k=0.5, output_per_1k=1.5)},
                       providers={"brave": 0.005})
    cost = table.estimate_cost(usage)
    # gpt-x: 620 input and 90 output tokens; brave: 2 calls; local: free; judge-m: no tokens
    assert cost.models == pytest.approx((620 * 0.5 + 90 * 1.5) / 1000)
    assert cost.providers == pytest.approx(0.01)
    assert cost.total == pytest.approx(cost.models + cost.providers)
    assert cost.currency == "EUR" and cost.unpriced == ()
    bare = PriceTable().estimate_cost(usage)
    assert bare.total == 0.0 and bare.unpriced == ("gpt-x",)  # said, not silently free
    body = usage_json(usage, table)
    assert (body["model_calls"], body["input_tokens"], body["output_tokens"]) == (4, 620, 90)
    assert body["cost"]["total"] == cost.total


def test_sums_add_each_role_and_provider_over_runs() -> None:
    one = fold_usage(RECORDED)
    total = add_usage([one, one, RunUsage()])
    assert [(m.role, m.calls, m.input_tokens) for m in total.models] == [
        ("judge", 2, 0), ("planner", 4, 640), ("writer", 2, 600)]
    assert total.provider_calls == {"brave": 4, "local": 2}
    assert total.pages == 2 and total.wall_s == pytest.approx(2 * one.wall_s)


def test_a_price_table_file_loads_and_a_bad_one_says_where(tmp_path: Path) -> None:
    good = tmp_path / "prices.toml"
    good.write_text('currency = "USD"\n[models."gpt-x"]\ninput_per_1k = 0.25\n'
                    'output_per_1k = 1.0\n[providers]\nbrave = 0.004\n')
    table = PriceTable.load(good)
    assert table.models["gpt-x"].input_per_1k == 0.25 and table.providers["brave"] == 0.004
    bad = tmp_path / "bad.toml"
    bad.write_text('[models."gpt-x"]\ninput_per_1k = -1\n')
    with pytest.raises(RunConfigError, match=r"models\.gpt-x\.input_per_1k"):
        PriceTable.load(bad)
    with pytest.raises(RunConfigError, match="cannot read"):
        PriceTable.load(tmp_path / "missing.toml")


def test_the_terminal_counts_events_still_waiting_to_be_delivered() -> None:
    """An event published while another is delivered (re-entrant) waits for that delivery;
    a terminal built meanwhile still counts it: ``RunStream.stamped`` holds it."""
    stream = RunStream("r1")
    seen: list[list[Event] | None] = []

    def on_start(event: Event) -> None:
        stream.publish(PageScraped(url="https://a.example",
                                   chunks=(EvidenceChunk(id="c", text="abc"),)))
        seen.append(stream.stamped())  # the page is stamped, not yet delivered

    stream.tap(["run.started"], on_start, name="test")
    stream.publish(RunStarted(question="q"))
    stamped = seen[0]
    assert stamped is not None and [e.type for e in stamped] == ["run.started", "page.scraped"]
    assert fold_usage(stamped).page_bytes == 3
    assert RunStream("r2", keep_history=False).stamped() is None  # no history: no count
