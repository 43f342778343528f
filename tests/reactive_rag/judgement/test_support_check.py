"""The verifier's statement-support and relevance checks, and pluggable entailment models.

Each test names what it checks and is built so that it fails when that
behaviour goes: e.g. a number test also shows the same claim passing with the
right number, so it is the number, not something else, that drops it.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors import ActorContext
from actors.models import OpenAIChatClient
from reactive_rag.agent import (
    DEFAULT_SUPPORT_THRESHOLD,
    EntailmentModel,
    VerifierActor,
    verify,
    verify_async,
)
from reactive_rag.cli._main import main as cli_main
from reactive_rag.engine import EngineConfig, research_from
from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement import JudgeError, SupportItem, SupportLabel, SupportVerdict
from reactive_rag.judgement.offline import DEFAULT_SUPPORT_WEIGHTS, SupportWeights, support_score
from reactive_rag.server import ConfigError, ServerConfig
from streams import (
    AnswerDelta,
    AnswerDrafted,
    AnswerVerified,
    Claim,
    EvidenceChunk,
    EvidenceRegistered,
    RunStarted,
    VerifyFailed,
)
from tests._bench import bench_module

REPO = Path(__file__).resolve().parents[3]

EIFFEL = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris. "
    "It was designed by the company of Gustave Eiffel and completed in 1889 for the "
    "World's Fair. It was not the tallest structure in the world until 1930."
)
STRPTIME = "Parse a string according to a format. The return value is a struct_time."
BRIDGE = "The Harbor Bridge was designed by Mara Quill and opened in 1932."
QUILL = "She was born in 1901 in Tarn, and trained as an engineer in Lyon."
REGISTRY = {
    "e": EvidenceChunk(id="e", text=EIFFEL, title="Eiffel Tower", doc_id="eiffel"),
    "t": EvidenceChunk(id="t", text=STRPTIME, title="time.strptime", doc_id="time"),
    "b": EvidenceChunk(id="b", text=BRIDGE, title="Harbor Bridge", doc_id="bridge"),
    "q": EvidenceChunk(id="q", text=QUILL, title="Mara Quill", doc_id="quill"),
}


def _ctx(chunk: EvidenceChunk) -> str:
    return f"{chunk.title}\n{chunk.text}"


def _reason(statement: str, quote: str, source_id: str = "e", **kw: Any) -> str | None:
    result = verify([Claim(statement=statement, source_id=source_id, quote=quote)], REGISTRY,
                    **kw)
    return None if result.kept else result.errors[0].reason


# --- support_score: the offline statement-support estimate ---------------------------


def test_a_statement_equal_to_its_quote_scores_one() -> None:
    quote = "It was designed by the company of Gustave Eiffel"
    s = support_score(quote, quote, context=_ctx(REGISTRY["e"]))
    assert s.score == 1.0 and s.reasons == () and s.explain() == "supported"


def test_a_title_prefixed_statement_is_supported_through_the_title() -> None:
    statement = "time.strptime: Parse a string according to a format"
    quote = "Parse a string according to a format"
    with_title = support_score(statement, quote, context=_ctx(REGISTRY["t"]))
    assert with_title.score >= 0.95 and with_title.missing_terms == ()
    # it is the title that covers "time.strptime": without it, those words are added
    without = support_score(statement, quote)
    assert without.score < with_title.score and "strptime" in without.missing_terms
    # given as the title, the prefix is the quote's subject: fully found
    assert support_score(statement, quote, title="time.strptime").score == 1.0


def test_negation_like_words_of_a_title_prefix_are_part_of_a_name() -> None:
    statement = "I Don't Wanna Know: It reached number 1 in the United Kingdom"
    quote = "It reached number 1 in the United Kingdom"
    titled = support_score(statement, quote, title="I Don't Wanna Know")
    assert titled.score == 1.0 and titled.added_negations == ()
    # the same words as a claim of the statement's own are an added negation
    own = support_score("I don't know: it reached number 1 in the United Kingdom", quote,
                        title="Chart history")
    assert own.added_negations == ("don't",) and own.score < DEFAULT_SUPPORT_THRESHOLD


def test_a_changed_year_is_an_added_number() -> None:
    quote = "He was born in 1950 in Leeds"
    assert support_score("He was born in 1950.", quote).score == 1.0
    wrong = support_score("He was born in 1951.", quote)
    assert wrong.missing_numbers == ("1951",) and "adds 1951" in wrong.reasons
    assert wrong.score < DEFAULT_SUPPORT_THRESHOLD


def test_a_year_swapped_for_another_year_of_the_same_chunk_is_caught() -> None:
    quote = "completed in 1889 for the World's Fair"
    context = _ctx(REGISTRY["e"])  # the chunk also says 1930
    swapped = support_score("It was completed in 1930 for the World's Fair.", quote,
                            context=context)
    assert swapped.missing_numbers == ("1930",) and swapped.score < DEFAULT_SUPPORT_THRESHOLD
    # a number from the context is fine when the quote has none of its own
    dated = support_score("In 1889 the company of Gustave Eiffel designed it.",
                          "It was designed by the company of Gustave Eiffel", context=context)
    assert dated.missing_numbers == () and dated.score > 0.9


def test_numbers_match_across_forms_but_digits_inside_names_are_not_numbers() -> None:
    assert support_score("It sold 1,000 copies in two weeks.",
                         "it sold 1000 copies within 2 weeks").missing_numbers == ()
    assert support_score("It sold 1,500 copies.", "it sold 1000 copies").missing_numbers == (
        "1,500",)
    # "A2" is a name with a digit, not the number 2
    assert support_score("Cyclin A2 is degraded.", "cyclin A2 is degraded").missing_numbers == ()


def test_a_month_the_quote_does_not_have_is_an_added_date() -> None:
    quote = "the treaty was signed on 3 March 1950"
    assert support_score("The treaty was signed in March 1950.", quote).score == 1.0
    wrong = support_score("The treaty was signed in April 1950.", quote)
    assert "April" in wrong.missing_numbers and wrong.score < DEFAULT_SUPPORT_THRESHOLD


def test_an_added_not_is_caught() -> None:
    quote = "the bridge is open to cyclists"
    assert support_score("The bridge is open to cyclists.", quote).score == 1.0
    s = support_score("The bridge is not open to cyclists.", quote)
    assert s.added_negations == ("not",) and "adds 'not'" in s.reasons
    assert s.score < DEFAULT_SUPPORT_THRESHOLD


def test_a_dropped_not_is_caught_also_when_contracted() -> None:
    s = support_score("It was the tallest structure in the world.",
                      "It was not the tallest structure in the world")
    assert s.dropped_negations == ("not",) and "drops 'not'" in s.reasons
    assert s.score < DEFAULT_SUPPORT_THRESHOLD
    c = support_score("He plays for the Kings.", "he doesn't play for the Kings")
    assert c.dropped_negations == ("doesn't",) and c.score < DEFAULT_SUPPORT_THRESHOLD
    both = support_score("He does not play for the Kings.", "he doesn't play for the Kings")
    assert both.dropped_negations == () and both.added_negations == ()


def test_a_negating_prefix_counts_as_a_negation() -> None:
    quote = "the treatment was effective in adults"
    assert support_score("The treatment was effective in adults.", quote).score == 1.0
    s = support_score("The treatment was ineffective in adults.", quote)
    assert s.added_negations == ("ineffective",) and s.score < DEFAULT_SUPPORT_THRESHOLD
    # a hyphenated spelling of the same word is not a negation
    same = support_score("Non-surgical care helped.", "nonsurgical care helped")
    assert same.added_negations == () and same.dropped_negations == ()


def test_another_name_is_caught_unless_the_chunk_names_it() -> None:
    quote = "It was designed by the company of Gustave Eiffel"
    wrong = support_score("It was designed by Gustave Flaubert.", quote, context=EIFFEL)
    assert wrong.missing_names == ("Flaubert",) and "names 'Flaubert'" in wrong.reasons
    assert wrong.score < DEFAULT_SUPPORT_THRESHOLD
    # a name the rest of the chunk (here its title) gives is not added
    titled = support_score("Quill was born in 1901.", "She was born in 1901",
                           context=_ctx(REGISTRY["q"]))
    assert titled.missing_names == () and titled.score > 0.9
    untitled = support_score("Quill was born in 1901.", "She was born in 1901")
    assert untitled.score < titled.score


def test_a_spelled_out_abbreviation_is_not_an_added_name() -> None:
    quote = "embryonic stem cells can be derived from the mouse"
    s = support_score("Embryonic stem cells (ESCs) can be derived from the mouse.", quote)
    assert s.missing_names == () and s.score == 1.0


def test_a_paraphrase_with_the_same_content_words_passes() -> None:
    quote = "completed in 1889 for the World's Fair"
    s = support_score("For the World's Fair of 1889 the tower was completed.", quote,
                      context=_ctx(REGISTRY["e"]))
    assert s.score >= 0.9 and s.reasons == ()  # "tower" comes from the chunk: 0.9 credit
    inflected = support_score("Fairs complete towers.", "the fair completed the tower")
    assert inflected.coverage == 1.0


def test_a_statement_adding_content_words_loses_coverage() -> None:
    quote = "completed in 1889 for the World's Fair"
    s = support_score("It was completed in 1889 and painted gold by volunteers.", quote)
    assert {"painted", "gold", "volunteers"} <= set(s.missing_terms)
    assert s.coverage < 0.6 and s.score == pytest.approx(s.coverage)


def test_an_opposite_direction_is_a_conflict() -> None:
    quote = "the drug reduces the growth of tumour cells"
    assert support_score("The drug reduces tumour cell growth.", quote).score == 1.0
    s = support_score("The drug increases the growth of tumour cells.", quote)
    assert s.conflicts == (("increases", "reduces"),)
    assert "says 'increases' where the quote says 'reduces'" in s.reasons
    assert s.score < DEFAULT_SUPPORT_THRESHOLD
    promote = support_score("The drug promotes tumour growth.", quote)
    assert promote.conflicts and promote.score < DEFAULT_SUPPORT_THRESHOLD


def test_weights_change_the_score_and_rescoring_agrees() -> None:
    quote = "He was born in 1950 in Leeds"
    s = support_score("He was born in 1951.", quote)
    assert s.rescored(DEFAULT_SUPPORT_WEIGHTS) == pytest.approx(s.score)
    lenient = SupportWeights(number=0.0)
    assert s.rescored(lenient) == pytest.approx(1.0)
    assert support_score("He was born in 1951.", quote, weights=lenient).score == 1.0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80), st.text(max_size=80), st.text(max_size=40))
def test_support_score_is_bounded_and_deterministic(statement: str, quote: str,
                                                    context: str) -> None:
    a = support_score(statement, quote, context=context)
    b = support_score(statement, quote, context=context)
    assert 0.0 <= a.score <= 1.0 and a == b


# --- check (b) in verify: statement supported by its quote ----------------------------


def test_verify_drops_a_statement_its_quote_does_not_support_and_says_what_changed() -> None:
    quote = "completed in 1889 for the World's Fair"
    assert _reason("The tower was completed in 1889 for the World's Fair.", quote) is None
    reason = _reason("The tower was completed in 1891 for the World's Fair.", quote)
    assert reason is not None
    assert reason.startswith("statement not supported by its quote: adds 1891")
    reason = _reason("It was the tallest structure in the world until 1930.",
                     "It was not the tallest structure in the world until 1930")
    assert reason is not None and "drops 'not'" in reason


def test_verify_keeps_extractive_claims_quote_as_statement_or_title_prefixed() -> None:
    claims = [
        Claim(statement="It was designed by the company of Gustave Eiffel and completed in "
                        "1889 for the World's Fair.", source_id="e",
              quote="It was designed by the company of Gustave Eiffel and completed in 1889 "
                    "for the World's Fair."),
        Claim(statement="time.strptime: Parse a string according to a format.", source_id="t",
              quote="Parse a string according to a format."),
    ]
    result = verify(claims, REGISTRY, question="How do I parse a date string in time.strptime "
                                               "or who designed the Eiffel Tower?")
    assert result.kept == claims, result.errors


def test_support_threshold_zero_switches_the_check_off_and_is_validated() -> None:
    quote = "completed in 1889 for the World's Fair"
    assert _reason("Built in 1891.", quote) is not None
    assert _reason("Built in 1891.", quote, support_threshold=0.0) is None
    with pytest.raises(ValueError):
        verify([], REGISTRY, support_threshold=1.5)


# --- check (c): the claim bears on the question ----------------------------------------


def test_a_claim_sharing_nothing_with_the_question_is_dropped() -> None:
    eiffel = Claim(statement="The Eiffel Tower was completed in 1889.", source_id="e",
                   quote="completed in 1889 for the World's Fair")
    strptime = Claim(statement="time.strptime: Parse a string according to a format.",
                     source_id="t", quote="Parse a string according to a format.")
    result = verify([eiffel, strptime], REGISTRY, question="When was the Eiffel Tower built?")
    assert result.kept == [eiffel]
    assert [(e.index, e.reason) for e in result.errors] == [
        (1, "claim does not bear on the question")]
    # without a question there is nothing to bear on: both kept
    assert verify([eiffel, strptime], REGISTRY).kept == [eiffel, strptime]


def test_frame_words_alone_do_not_make_a_claim_bear_on_the_question() -> None:
    claim = Claim(statement="time.strptime: Parse a string according to a format.",
                  source_id="t", quote="Parse a string according to a format.")
    # "year" and "name" frame the question; "format" would be a real overlap
    assert _reason(claim.statement, claim.quote, "t",
                   question="In what year was the tower given its name?") == (
        "claim does not bear on the question")
    assert _reason(claim.statement, claim.quote, "t",
                   question="Which format does it take?") is None


def test_the_second_hop_of_a_multi_hop_answer_is_kept() -> None:
    question = "Where does the engineer behind the Harbor Bridge come from?"
    first = Claim(statement="The Harbor Bridge was designed by Mara Quill.", source_id="b",
                  quote="The Harbor Bridge was designed by Mara Quill")
    second = Claim(statement="She was born in 1901 in Tarn.", source_id="q",
                   quote="She was born in 1901 in Tarn")
    assert verify([first, second], REGISTRY, question=question).kept == [first, second]
    # the second hop bears on the question only through the first claim
    alone = verify([second], REGISTRY, question=question)
    assert not alone.kept and alone.errors[0].reason == "claim does not bear on the question"


def test_a_question_without_content_words_drops_nothing() -> None:
    claim = Claim(statement="The Harbor Bridge was designed by Mara Quill.", source_id="b",
                  quote="The Harbor Bridge was designed by Mara Quill")
    assert verify([claim], REGISTRY, question="What is it?").kept == [claim]


async def test_the_verifier_actor_passes_the_runs_question() -> None:
    actor = VerifierActor(functools.partial(verify))
    ctx = cast(ActorContext, None)  # the verifier does not use its context
    assert await actor.on_receive(RunStarted(question="When was the Eiffel Tower built?"),
                                  ctx) is None
    assert await actor.on_receive(EvidenceRegistered(chunks=tuple(REGISTRY.values())),
                                  ctx) is None
    off_topic = Claim(statement="time.strptime: Parse a string according to a format.",
                      source_id="t", quote="Parse a string according to a format.")
    out = await actor.on_receive(AnswerDrafted(text="", claims=(off_topic,)), ctx)
    assert out is not None and isinstance(out[0], VerifyFailed)
    assert out[0].errors[0].reason == "claim does not bear on the question"
    on_topic = Claim(statement="The Eiffel Tower was completed in 1889.", source_id="e",
                     quote="completed in 1889 for the World's Fair")
    out = await actor.on_receive(AnswerDrafted(text="", claims=(on_topic,)), ctx)
    assert out is not None and isinstance(out[-1], AnswerVerified)
    # the verified claim's text is streamed, just before the verdict
    assert [(type(e), e.text) for e in out[:-1] if isinstance(e, AnswerDelta)] == [
        (AnswerDelta, "The Eiffel Tower was completed in 1889. [1]")]


# --- support judges: a local entailment model, a model judge, through the engine -----------


class _Fixed:
    """A synchronous entailment model giving one score to everything, recording what it saw."""

    def __init__(self, value: float) -> None:
        self.value = value
        self.calls: list[tuple[str, str]] = []

    def score(self, premise: str, hypothesis: str) -> float:
        self.calls.append((premise, hypothesis))
        return self.value


class _Judge:
    """A model judge answering with fixed labels (or failing), recording each call."""

    name = "judge-model"

    def __init__(self, labels: dict[int, SupportLabel] | Exception) -> None:
        self.labels = labels
        self.calls: list[tuple[str, list[SupportItem]]] = []

    async def judge(self, question: str, items: Sequence[SupportItem]) -> list[SupportVerdict]:
        self.calls.append((question, list(items)))
        if isinstance(self.labels, Exception):
            raise self.labels
        return [SupportVerdict(i.index, self.labels.get(i.index, "supported"), "said so")
                for i in items]


_GOOD = Claim(statement="The Eiffel Tower was completed in 1889.", source_id="e",
              quote="completed in 1889 for the World's Fair")
_BAD_NUMBER = Claim(statement="The Eiffel Tower was completed in 1891.", source_id="e",
                    quote="completed in 1889 for the World's Fair")
_UNKNOWN = Claim(statement="It is in Paris.", source_id="nope",
                 quote="completed in 1889 for the World's Fair")


def test_a_local_entailment_model_is_told_apart_from_a_judge() -> None:
    assert isinstance(_Fixed(1.0), EntailmentModel)
    assert not isinstance(_Judge({}), EntailmentModel)


async def test_the_model_judge_sees_every_provable_claim_in_one_call_and_decides() -> None:
    judge = _Judge({1: "contradicted"})
    result = await verify_async([_GOOD, _BAD_NUMBER, _UNKNOWN], REGISTRY,
                                question="When was the Eiffel Tower completed?", judge=judge)
    assert len(judge.calls) == 1, "one call per draft"
    question, items = judge.calls[0]
    assert question == "When was the Eiffel Tower completed?"
    assert [i.index for i in items] == [0, 1], "an unregistered id never reaches the judge"
    assert items[0].passage == REGISTRY["e"].text and items[0].title == REGISTRY["e"].title
    assert result.kept == [_GOOD] and result.judged_by == "model"
    kinds = {e.index: e.kind for e in result.errors}
    assert kinds == {1: "unsupported", 2: "unknown_source"}


async def test_a_paraphrase_the_lexical_rules_would_drop_stands_when_the_judge_supports_it(
        ) -> None:
    paraphrase = Claim(statement="Construction of the tower in the French capital ended in 1889.",
                       source_id="e", quote="completed in 1889 for the World's Fair")
    result = await verify_async([paraphrase], REGISTRY, judge=_Judge({}))
    assert result.kept == [paraphrase] and result.passed


async def test_a_failing_judge_hands_over_to_the_offline_rules_and_says_so() -> None:
    down = JudgeError("support judge 'judge-model' failed: HTTP 503", status=503,
                      model="judge-model", role="support judge")
    result = await verify_async([_GOOD, _BAD_NUMBER, _GOOD.model_copy(
        update={"statement": "The Eiffel Tower was finished in 1889."})], REGISTRY,
        judge=_Judge(down))
    assert result.judged_by == "offline" and result.passed, "a judge outage fails no draft"
    assert result.judge_failure is not None and result.judge_failure.status == 503
    assert "support judge" in result.judge_failure.describe()
    assert [e.kind for e in result.errors] == ["unsupported"]
    assert "adds 1891" in result.errors[0].reason


async def test_the_claim_marked_as_the_answer_must_survive_for_the_draft_to_pass() -> None:
    result = await verify_async([_GOOD, _BAD_NUMBER, _GOOD], REGISTRY, answer_index=1)
    assert len(result.kept) == 2 and not result.passed
    assert any(e.kind == "answer_dropped" and "claim 1" in e.reason for e in result.errors)


@pytest.mark.parametrize("value", [0.0, 1.0])
async def test_a_local_entailment_model_plugged_into_the_engine_judges_every_kept_claim(
        index: CorpusIndex, value: float) -> None:
    model = _Fixed(value)
    result = await Engine(index, entailment=model).ask("Who founded Bayer and when?",
                                                       collections=["demo"])
    assert model.calls, "the engine never asked the entailment model"
    failed = [e for e in result.events if isinstance(e, VerifyFailed)]
    if value == 1.0:
        assert result.outcome == "answered", result.reason
        assert {(c.claim.quote, c.claim.statement) for c in result.citations} <= set(model.calls)
        assert not failed
    else:
        assert result.outcome != "answered" and not result.citations
        assert failed and all("entailment 0.00" in err.reason
                              for e in failed for err in e.errors if err.index >= 0)


# --- the measurement harness (bench/_support_auc.py) ----------------------------------


def _bench() -> ModuleType:
    return bench_module("_support_auc")


class _Overlap:
    def score(self, premise: str, hypothesis: str) -> float:
        p, h = set(premise.lower().split()), set(hypothesis.lower().split())
        return len(p & h) / len(h) if h else 0.0


def _write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")


def test_evaluate_entailment_measures_auc(tmp_path: Path) -> None:
    rows = [
        {"claim": "cats purr loudly", "label": "SUPPORT", "evidence": ["cats purr loudly"],
         "split": "train"},
        {"claim": "dogs bark", "label": "SUPPORT", "evidence": ["dogs bark at night"],
         "split": "test"},
        {"claim": "fish fly high", "label": "CONTRADICT", "evidence": ["fish swim deep"],
         "split": "test"},
        {"claim": "x", "label": "NOINFO", "evidence": ["ignored"], "split": "test"},
    ]
    path = tmp_path / "nli.jsonl"
    _write_jsonl(path, rows)
    report = _bench().evaluate_entailment(_Overlap(), path)
    assert (report.n, report.positives, report.negatives) == (3, 2, 1)
    assert report.auc == 1.0
    assert _bench().evaluate_entailment(_Overlap(), path, split="test").n == 2


def test_evaluate_entailment_missing_or_one_sided_data(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        _bench().evaluate_entailment(_Overlap(), tmp_path / "absent.jsonl")
    one = tmp_path / "one.jsonl"
    _write_jsonl(one, [{"claim": "a", "label": "SUPPORT", "evidence": ["a"]}])
    with pytest.raises(ValueError):
        _bench().evaluate_entailment(_Overlap(), one)


def test_auc_counts_ties_as_half() -> None:
    auc = _bench().auc
    assert auc([1.0, 0.9], [0.1]) == 1.0
    assert auc([0.1], [0.9]) == 0.0
    assert auc([0.5, 0.5], [0.5]) == 0.5


def test_support_aucs_reports_ours_and_the_baseline_per_split(tmp_path: Path) -> None:
    sci = [
        {"claim": "The drug reduces pain.", "label": "SUPPORT", "split": "train",
         "evidence": ["The drug reduces pain in adults."], "doc_id": "1"},
        {"claim": "The drug increases pain.", "label": "CONTRADICT", "split": "train",
         "evidence": ["The drug reduces pain in adults."], "doc_id": "1"},
        {"claim": "Fever in grown adults is brought down fast by aspirin.", "label": "SUPPORT",
         "split": "test", "evidence": ["Aspirin lowers fever quickly in adults."], "doc_id": "2"},
        {"claim": "Aspirin raises fever.", "label": "CONTRADICT", "split": "test",
         "evidence": ["Aspirin lowers fever quickly in adults."], "doc_id": "2"},
    ]
    _write_jsonl(tmp_path / "scifact_claim_evidence_nli.jsonl", sci)
    climate = [{"claim_id": "0", "claim": "Ice sheets are shrinking.", "evidences": [
        {"evidence_label": "SUPPORTS", "article": "Ice sheet",
         "evidence": "Ice sheets are shrinking every decade."},
        {"evidence_label": "REFUTES", "article": "Ice sheet",
         "evidence": "Ice sheets are growing every decade."},
        {"evidence_label": "NOT_ENOUGH_INFO", "article": "Ice", "evidence": "Ice is cold."},
    ]}]
    _write_jsonl(tmp_path / "climate-fever.jsonl", climate)
    figures = _bench().support_aucs(tmp_path)
    for key in ("support_auc_scifact", "support_auc_climate", "overlap_auc_scifact",
                "overlap_auc_climate", "support_auc_scifact_train", "support_auc_scifact_test",
                "overlap_auc_scifact_train", "overlap_auc_scifact_test"):
        assert key in figures, key
    # the held-out split is the headline figure
    assert figures["support_auc_scifact"] == figures["support_auc_scifact_test"] == 1.0
    # "raises" shares more of its words with the quote than the paraphrase does
    assert figures["overlap_auc_scifact_test"] == 0.0
    assert figures["support_auc_climate"] == 1.0 and figures["n_climate"] == 2


def test_the_bench_prints_a_table_and_one_json_object(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    test_support_aucs_reports_ours_and_the_baseline_per_split(tmp_path)
    assert _bench().main(["--data", str(tmp_path), "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert "support score" in out[0] and "token overlap" in out[0]
    assert json.loads(out[-1])["support_auc_scifact"] == 1.0


_DATA = _bench().data_root()


@pytest.mark.slow
@pytest.mark.skipif(not (_DATA / "scifact_claim_evidence_nli.jsonl").is_file()
                    or not (_DATA / "climate-fever.jsonl").is_file(),
                    reason="shared evaluation data not present")
def test_on_the_shared_data_the_score_beats_token_overlap() -> None:
    figures = _bench().support_aucs(_DATA)
    # measured: SciFact test 0.70 vs 0.57, train 0.69 vs 0.52; Climate-FEVER 0.55 vs 0.53
    assert figures["support_auc_scifact"] >= figures["overlap_auc_scifact"] + 0.08
    assert figures["support_auc_scifact_train"] >= figures["overlap_auc_scifact_train"] + 0.1
    assert figures["support_auc_climate"] >= figures["overlap_auc_climate"]


# --- configuration: the CLI flags and the server's [entailment] table ------------------


class _JudgeHandler(BaseHTTPRequestHandler):
    """A minimal OpenAI-shaped chat server (non-streaming) giving every claim one label.

    ``label`` ``"garbled"``: a reply that is no verdict at all (a broken judge).
    """

    label = "supported"
    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length))
        type(self).bodies.append(body)
        claims = re.findall(r"^Claim (\d+):", body["messages"][-1]["content"], re.MULTILINE)
        verdict = "I cannot tell." if self.label == "garbled" else json.dumps({"verdicts": [
            {"claim": int(n), "label": self.label, "reason": ""} for n in claims]})
        payload = json.dumps({
            "id": "x", "object": "chat.completion", "model": "judge",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": verdict}}],
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        return


@pytest.fixture
def judge_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _JudgeHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _JudgeHandler.bodies.clear()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def notes_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("notes")
    (folder / "raft.md").write_text(
        "# Raft\n\nRaft is a consensus algorithm designed to be easy to understand. "
        "Raft was designed by Diego Ongaro and John Ousterhout at Stanford.\n")
    root = tmp_path_factory.mktemp("root")
    assert cli_main(["index", str(folder), "--collection", "notes", "--root", str(root)]) == 0
    return root


@pytest.mark.parametrize(("label", "answered"), [
    ("supported", True), ("contradicted", False), ("garbled", True)])
def test_ask_with_an_entailment_server_has_it_judge_the_claims(
        notes_root: Path, judge_url: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, label: str, answered: bool) -> None:
    monkeypatch.setattr(_JudgeHandler, "label", label)
    capsys.readouterr()
    code = cli_main(["ask", "Who designed Raft?", "--collection", "notes",
                     "--root", str(notes_root), "--json", "--quiet",
                     "--entailment-url", judge_url, "--entailment-model", "judge-1"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert _JudgeHandler.bodies and {b["model"] for b in _JudgeHandler.bodies} == {"judge-1"}
    assert (out["outcome"] == "answered") is answered, out
    assert bool(out["citations"]) is answered and (code == 0) is answered
    if label == "garbled":  # a broken judge: the offline rules judged, and the outcome says so
        assert "offline support rules" in out["reason"] and "judge-1" in out["reason"]


def test_the_server_config_reads_an_entailment_table(tmp_path: Path) -> None:
    path = tmp_path / "server.toml"
    path.write_text('[entailment]\nurl = "http://127.0.0.1:9/v1"\nmodel = "judge"\n')
    config = ServerConfig.load(path, env={})
    assert config.entailment is not None
    assert (config.entailment.url, config.entailment.model) == ("http://127.0.0.1:9/v1", "judge")
    judge = research_from(EngineConfig(entailment=config.entailment), env={}).judge
    assert isinstance(judge, OpenAIChatClient) and judge.model == "judge"
    assert ServerConfig.load(env={}).entailment is None
    assert research_from(EngineConfig(entailment=None), env={}).judge is None
    path.write_text('[entailment]\nmodel = "judge"\n')  # no url
    with pytest.raises(ConfigError, match="entailment"):
        ServerConfig.load(path, env={})


# --- paraphrase a capable model writes: abbreviations and titles are not new facts --------


@pytest.mark.parametrize(("statement", "quote"), [
    ("He is a US fashion photographer.", "He is an American fashion photographer"),
    ("She was born in the US in 1960.", "She was born in the United States in 1960"),
    ("The show first aired on UK TV.", "The show first aired on British television"),
    ("The USN commissioned her in 1944.", "The United States Navy commissioned her in 1944"),
    ("He was an American painter.", "He was a U.S. painter"),
    ('"I Don\'t Wanna Know" is a song by Mario Winans.',
     '"I Don\'t Wanna Know" is a song by Mario Winans'),
    ("No Doubt recorded the album in Anaheim.", "the band No Doubt recorded the album in Anaheim"),
])
def test_an_abbreviation_or_a_titles_negation_is_not_a_changed_fact(
        statement: str, quote: str) -> None:
    score = support_score(statement, quote, context=quote)
    assert score.score >= DEFAULT_SUPPORT_THRESHOLD, score.explain()
    assert not score.missing_names and not score.added_negations


@pytest.mark.parametrize(("statement", "quote", "reason"), [
    ("He was born in the UK.", "He was born in the United States", "names 'UK'"),
    ("The song is not by Mario Winans.", "The song is by Mario Winans", "adds 'not'"),
    ("It aired on US TV.", "It aired on French television", "names 'US'"),
])
def test_another_country_or_a_real_negation_still_fails(
        statement: str, quote: str, reason: str) -> None:
    score = support_score(statement, quote, context=quote)
    assert score.score < DEFAULT_SUPPORT_THRESHOLD and reason in score.explain()


async def test_a_verdict_word_heading_a_claim_is_not_part_of_the_fact_it_states() -> None:
    registry = {"e": REGISTRY["e"]}
    said = Claim(statement="No: the Eiffel Tower was completed in 1889.", source_id="e",
                 quote="completed in 1889 for the World's Fair")
    changed = said.model_copy(update={"statement": "No: the Eiffel Tower was completed in 1891."})
    result = await verify_async([said, changed], registry)
    assert result.kept == [said]
    assert "adds 1891" in result.errors[0].reason
