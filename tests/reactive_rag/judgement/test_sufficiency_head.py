"""The fitted answerability score: rewordings with their answer held pass, absent things do not.

Passages and questions are written for the tests; the head is the shipped one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reactive_rag.index import EMBEDDER_NAMES
from reactive_rag.judgement import QuestionSimilarity
from reactive_rag.judgement.offline import (
    SufficiencyHeadError,
    judge_answerability,
    judge_answerability_fixed,
    load_sufficiency_head,
    sufficiency_features,
)
from streams import EvidenceChunk

COPYTREE = EvidenceChunk(id="copytree", title="shutil.copytree", text=(
    "Recursively copy an entire directory tree rooted at src to a directory named dst and "
    "return the destination directory."))
SLEEP = EvidenceChunk(id="sleep", title="time.sleep", text=(
    "Suspend execution of the calling thread for the given number of seconds."))
REWORDED = "How do I copy a whole folder, including everything inside it, to another place?"
ABSENT = "How do I draw a histogram of my data with matplotlib?"
MINILM = EMBEDDER_NAMES["minilm"]


def _similarity(model: str, score: float) -> QuestionSimilarity:
    return QuestionSimilarity(model, {"copytree": score, "sleep": 0.1})


def test_the_shipped_head_names_the_embedder_its_cosines_were_fitted_on() -> None:
    head = load_sufficiency_head()
    assert head.dense_model == MINILM
    assert len(head.weights) == len(type(sufficiency_features("q?", [])).names_in_order())


def test_the_same_words_judged_answerable_only_when_the_passage_is_close_in_meaning() -> None:
    # the rewording shares few words with the passage ("whole", "folder", "inside" are
    # absent): its cosine to the passage decides, so a close passage answers, a far one not
    close = judge_answerability(REWORDED, [COPYTREE, SLEEP], similarity=_similarity(MINILM, 0.8))
    far = judge_answerability(REWORDED, [COPYTREE, SLEEP], similarity=_similarity(MINILM, 0.3))
    assert close.verdict == "answerable"
    assert far.verdict != "answerable"
    # the fixed word shares reject it whatever the cosine
    assert judge_answerability_fixed(REWORDED, [COPYTREE, SLEEP]).verdict != "answerable"


def test_a_question_far_from_every_passage_is_not_answerable() -> None:
    far = QuestionSimilarity(MINILM, {"copytree": 0.12, "sleep": 0.08})
    assert judge_answerability(ABSENT, [COPYTREE, SLEEP], similarity=far).verdict != \
        "answerable"


def test_cosines_of_another_embedder_are_not_read_as_the_fitted_ones() -> None:
    # an embedder whose cosines run high for everything must not make evidence sufficient
    other = _similarity("some-other-model", 0.95)
    features = sufficiency_features(ABSENT, [COPYTREE, SLEEP], similarity=other)
    assert features.dense_known == 0.0
    assert features.dense == pytest.approx(load_sufficiency_head().dense_fill)
    assert judge_answerability(ABSENT, [COPYTREE, SLEEP], similarity=other).verdict != \
        "answerable"


def test_a_head_file_missing_a_weight_is_refused_with_its_path(tmp_path: Path) -> None:
    bad = tmp_path / "head.json"
    bad.write_text(json.dumps({"weights": {"share": 1.0}, "bias": 0.0}), encoding="utf-8")
    with pytest.raises(SufficiencyHeadError, match=r"head\.json"):
        load_sufficiency_head(bad)
