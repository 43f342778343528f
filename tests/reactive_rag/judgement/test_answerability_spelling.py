"""The judge reads a question as typed: accents, initials, typos, verb forms, answer kinds.

These tests check what the judge measures (names, linked pages, words, values), read
through its fixed word shares (``judge_answerability_fixed``, the ``[judgement]
sufficiency_head = false`` judge), where each measure shows as a verdict; the fitted
score's decisions are tested in ``test_sufficiency_head.py``.
"""

from __future__ import annotations

from reactive_rag.judgement.offline import analyse_question
from reactive_rag.judgement.offline import judge_answerability_fixed as judge_answerability
from streams import EvidenceChunk


def chunk(cid: str, title: str, text: str) -> EvidenceChunk:
    return EvidenceChunk(id=cid, title=title, text=text, doc_id=cid)


BRIDGE = chunk("b", "Kessund Bridge", (
    "The Kessund Bridge is a road and rail bridge across the Kessund strait between Kopen "
    "and Zürich.  The bridge runs nearly 8 km from the coast to an artificial island."))
SINGER = chunk("s", "Robert Venn", (
    "Robert Clark Venn (born May 6, 1945) is an American singer and songwriter.  He recorded "
    "the album Tidewater in 1980."))
TRACK = chunk("t", "Harlow Motor Speedway", (
    "Harlow Motor Speedway is a race track in the midwest that hosts a 500 mile race every "
    "May.  It opened in 1909."))


def test_a_name_typed_without_its_accent_is_still_found() -> None:
    verdict = judge_answerability("How long is the bridge between Kopen and Zurich?", [BRIDGE])
    assert "Zurich" not in verdict.missing
    assert verdict.verdict == "answerable"


def test_a_middle_initial_matches_the_middle_name() -> None:
    verdict = judge_answerability("What album did Robert C Venn record in 1980?", [SINGER])
    assert "Robert C Venn" not in verdict.missing
    assert verdict.verdict == "answerable"


def test_a_misspelt_word_no_passage_holds_does_not_sink_the_answer() -> None:
    question = "What race track in the midwest hosts a 500 mile race eavery May?"
    assert judge_answerability(question, [TRACK]).verdict == "answerable"
    # The same question about a passage on something else is still not answered.
    assert judge_answerability(question, [SINGER]).verdict != "answerable"


def test_a_rare_word_a_passage_holds_is_no_typo() -> None:
    # "varnite" is unknown to general English but the passage has it: it still counts,
    # so a passage without it does not answer the question.
    ore = chunk("o", "Varnite", "Varnite is a copper mineral mined in the Tesk hills.")
    other = chunk("x", "Tesk", "The Tesk hills are a range of low hills with copper mines.")
    question = "Which hills is the copper mineral varnite mined in?"
    assert judge_answerability(question, [ore]).verdict == "answerable"
    assert judge_answerability(question, [other]).verdict != "answerable"


def test_the_noun_naming_the_kind_of_answer_need_not_be_in_the_passage() -> None:
    needs = analyse_question("In what city was the composer of the Tern Sonatas born?")
    assert "city" not in needs.words
    assert needs.answer_type == "where"


HOUSE = chunk("h", "House of Vendle", (
    "The House of Vendle is a European dynasty.  Its cadet branches include the Ostrander "
    "family, which holds the title of counts of Marl."))


def test_a_capitalised_common_word_misspelt_is_a_typo_not_a_name() -> None:
    # "Eurpean" is no name to look for: "european" is one letter away and every passage
    # lacks it.
    question = "Which family is a cadet branch of the House of Vendle, a Eurpean dynasty?"
    verdict = judge_answerability(question, [HOUSE])
    assert "Eurpean" not in verdict.missing
    assert verdict.verdict == "answerable"
    # The same question about a passage on something else is still not answered.
    assert judge_answerability(question, [SINGER]).verdict != "answerable"


def test_an_unknown_name_far_from_any_word_is_still_looked_for() -> None:
    # "Zorvathi" is no misspelling of a common word: a passage without it does not answer.
    question = "Which family is a cadet branch of the House of Vendle, a Zorvathi dynasty?"
    verdict = judge_answerability(question, [HOUSE])
    assert "Zorvathi" in verdict.missing
    assert verdict.verdict != "answerable"


GROWER = chunk("v", "Aro Venn", (
    "Aro Venn was a tulip grower.  In his youth he was fighting in the river war."))
WATCHER = chunk("w", "Aro Venn", (
    "Aro Venn was a tulip grower.  In his youth he was watching the river war."))


def test_an_irregular_verb_form_counts_as_its_verb() -> None:
    # "fought" is the past of "fighting": the passage covers the question's verb.
    question = "Which tulip grower fought in the river war?"
    verdict = judge_answerability(question, [GROWER])
    assert "fought" in verdict.covered
    assert verdict.verdict == "answerable"
    # Another verb is not the one asked about.
    verdict = judge_answerability(question, [WATCHER])
    assert "fought" in verdict.missing
    assert verdict.verdict != "answerable"
