"""The loop guard refuses queries that repeat barren searches, and knows when to stop."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.models import FloatMatrix, HashingEmbedder, l2_normalize
from reactive_rag.judgement.offline import LoopGuard, normalize_query
from reactive_rag.run import Budget, round_overlap, saturated
from streams import QueryStat


class _TableEmbedder:
    """Fixed vectors per normalised text, so similarities are exactly what a test says."""

    name = "table"
    dim = 2

    def __init__(self, table: dict[str, tuple[float, float]]) -> None:
        self.table = table
        self.calls = 0

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        self.calls += 1
        return l2_normalize(np.array([self.table[t] for t in texts], dtype=np.float32))

    def embed_passages(self, texts: Sequence[str]) -> FloatMatrix:
        return self.embed_queries(texts)


def test_exact_normalised_duplicates_are_always_refused() -> None:
    guard = LoopGuard(HashingEmbedder())
    guard.record(QueryStat(query="Who founded YG Entertainment?", hits=5, new_evidence=5))
    verdict = guard.check("who founded  yg entertainment")
    assert not verdict.ok
    assert "duplicate" in verdict.reason
    assert verdict.nearest_query == "Who founded YG Entertainment?"
    assert verdict.similarity == 1.0


def test_paraphrase_of_a_barren_query_is_refused_with_a_reason() -> None:
    guard = LoopGuard(HashingEmbedder())
    guard.record(QueryStat(query="roman empire history", hits=3, new_evidence=0))
    verdict = guard.check("Roman empires' histories?")  # same stems, other surface form
    assert not verdict.ok
    assert "semantic loop" in verdict.reason and "roman empire history" in verdict.reason
    assert verdict.nearest_query == "roman empire history"
    assert verdict.similarity >= 0.92


def test_paraphrase_of_a_productive_query_may_run() -> None:
    guard = LoopGuard(HashingEmbedder())
    guard.record(QueryStat(query="roman empire history", hits=3, new_evidence=2))
    assert guard.check("Roman empires' histories?").ok


def test_unrelated_query_runs_and_reports_nearest() -> None:
    guard = LoopGuard(HashingEmbedder())
    guard.record(QueryStat(query="roman empire history", hits=3, new_evidence=0))
    verdict = guard.check("photosynthesis in desert plants")
    assert verdict.ok and verdict.reason == ""
    assert verdict.nearest_query == "roman empire history"
    assert verdict.similarity < 0.92


def test_threshold_decides_what_is_too_close() -> None:
    emb = _TableEmbedder({"a": (1.0, 0.0), "b": (0.95, 0.3122), "c": (0.6, 0.8)})
    guard = LoopGuard(emb, threshold=0.92)
    guard.record(QueryStat(query="a", hits=0, new_evidence=0))
    close = guard.check("b")
    assert not close.ok and close.similarity == pytest.approx(0.95, abs=1e-3)
    assert guard.check("c").ok
    assert LoopGuard(emb, threshold=0.99).check("b").ok  # nothing recorded there


def test_consecutive_refusals_end_the_search_phase_and_reset_on_success() -> None:
    guard = LoopGuard(HashingEmbedder(), max_refusals=2)
    guard.record(QueryStat(query="roman empire history", hits=0, new_evidence=0))
    assert not guard.check("roman empire history").ok
    assert guard.consecutive_refusals == 1 and not guard.should_stop_searching
    assert guard.check("greek city states").ok
    assert guard.consecutive_refusals == 0
    assert not guard.check("Roman Empire history!").ok
    assert not guard.check("roman empires history").ok
    assert guard.should_stop_searching


def test_empty_query_is_refused() -> None:
    assert not LoopGuard(HashingEmbedder()).check(" ?! ").ok


def test_sync_records_only_what_is_new_and_embeddings_are_cached() -> None:
    emb = _TableEmbedder({"a": (1.0, 0.0), "b": (0.0, 1.0), "c": (0.7, 0.7)})
    guard = LoopGuard(emb)
    log = [QueryStat(query="a", hits=0, new_evidence=0)]
    guard.sync(log)
    guard.sync(log)  # idempotent
    log.append(QueryStat(query="b", hits=2, new_evidence=2))
    guard.sync(log)
    assert not guard.check("a").ok  # duplicate
    assert not guard.check("b").ok  # duplicate
    assert guard.check("c").ok
    before = emb.calls
    assert guard.check("c").ok
    assert emb.calls == before  # "a" and "c" were embedded once


def test_constructor_validates_arguments() -> None:
    with pytest.raises(ValueError):
        LoopGuard(HashingEmbedder(), threshold=1.5)
    with pytest.raises(ValueError):
        LoopGuard(HashingEmbedder(), max_refusals=0)


def test_normalize_query() -> None:
    assert normalize_query("  Who's   THE  best?? ") == "who's the best"


# --- saturation ---------------------------------------------------------------------


def test_saturated_when_a_round_brings_back_the_same_evidence() -> None:
    assert saturated([{"a", "b", "c", "d", "e"}, {"a", "b", "c", "d", "e"}])
    assert saturated([{"a", "b"}, {"c"}, {"a", "c"}])  # nothing new at all
    assert not saturated([{"a", "b", "c"}, {"d", "e", "f"}])
    assert not saturated([{"a", "b", "c", "d", "e"}])  # one round cannot saturate
    assert not saturated([])


def test_saturation_threshold_and_consecutive_rounds() -> None:
    r0 = {"a", "b", "c", "d", "e"}
    r1 = {"a", "b", "c", "x", "y"}  # 3 of its 5 already held
    assert round_overlap(r1, r0) == pytest.approx(0.6)
    assert not saturated([r0, r1], threshold=0.8)
    assert saturated([r0, r1], threshold=0.6)
    assert not saturated([{"q"}, r0, r0], consecutive=2)
    assert saturated([r0, r0, r0], consecutive=2)
    with pytest.raises(ValueError):
        saturated([r0, r0], consecutive=0)


def test_an_empty_round_brought_nothing_new_but_saturates_only_once_evidence_is_held() -> None:
    assert round_overlap(set(), {"a"}) == 1.0
    assert saturated([{"a"}, set()])  # the run's rule: nothing new is as stale as all old
    assert not saturated([set(), set()])  # nothing held, nothing to answer from
    assert not saturated([set(), {"a"}])


def test_the_budget_settings_drive_the_rule() -> None:
    budget = Budget()
    r0 = {"a", "b", "c", "d", "e"}
    assert saturated([r0, r0, r0], budget.saturation_overlap,
                     consecutive=budget.saturation_rounds)
    assert not saturated([r0, r0], budget.saturation_overlap, consecutive=budget.saturation_rounds)


@given(st.lists(st.sets(st.sampled_from("abcdefgh"), max_size=5), max_size=6))
def test_saturation_is_pure_and_grows_only_with_overlap(rounds: list[set[str]]) -> None:
    snapshot = [set(r) for r in rounds]
    result = saturated(rounds)
    assert rounds == snapshot  # inputs untouched
    assert saturated(rounds) == result  # deterministic
    if result:
        assert len(rounds) >= 2 and any(rounds)
        assert round_overlap(rounds[-1], set().union(*rounds[:-1])) >= 0.8


async def test_prepare_embeds_in_a_worker_thread_and_check_then_needs_no_model() -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []

    class _Recording(_TableEmbedder):
        def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
            threads.append(threading.get_ident())
            return super().embed_queries(texts)

    table = {"roman empire history": (1.0, 0.0), "history of the roman empire": (0.99, 0.05)}
    guard = LoopGuard(_Recording(table), threshold=0.9)
    inline = LoopGuard(_TableEmbedder(table), threshold=0.9)
    for g in (guard, inline):
        g.record(QueryStat(query="roman empire history", hits=3, new_evidence=0))
    await guard.prepare(["history of the roman empire"])
    assert threads and all(t != loop_thread for t in threads)  # off the event loop
    made = len(threads)
    verdict = guard.check("history of the roman empire")
    assert len(threads) == made  # the check embedded nothing more
    assert verdict == inline.check("history of the roman empire")  # same verdict as inline
    assert not verdict.ok
