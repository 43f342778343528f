"""How passages say what a question asks without its words: lifespans, two pages, slips.

Each rule is shown with the evidence it accepts and a near miss it still refuses.

These tests check what the judge measures (names, linked pages, words, values), read
through its fixed word shares (``judge_answerability_fixed``, the ``[judgement]
sufficiency_head = false`` judge), where each measure shows as a verdict; the fitted
score's decisions are tested in ``test_sufficiency_head.py``.
"""

from __future__ import annotations

from reactive_rag.judgement.offline import judge_answerability_fixed as judge_answerability
from reactive_rag.judgement.offline._sufficiency import holds_new_value
from streams import EvidenceChunk


def chunk(cid: str, title: str, text: str) -> EvidenceChunk:
    return EvidenceChunk(id=cid, title=title, text=text, doc_id=cid)


PLAY = chunk("play", "Four Oars on a Pond", (
    "Four Oars on a Pond is a play by Tarvo Meresk. The comedy follows a clerk who bets "
    "on rowing races."))
LIFESPAN = chunk("tm", "Tarvo Meresk", (
    "Tarvo Meresk (June 2, 1901 \u2013 May 3, 1980) was an Estonian playwright and director."))
NO_LIFESPAN = chunk("tm", "Tarvo Meresk", (
    "Tarvo Meresk was an Estonian playwright and director; a festival began in 1901."))
BORN_QUESTION = "Four Oars on a Pond is a play by a playwright born in which year?"


def test_a_lifespan_in_brackets_says_when_its_bearer_was_born() -> None:
    # The question's "born" is in no passage; the lifespan after the name says it.
    verdict = judge_answerability(BORN_QUESTION, [PLAY, LIFESPAN])
    assert verdict.verdict == "answerable"
    assert "born" in verdict.covered


def test_a_year_without_a_lifespan_does_not_say_born() -> None:
    assert "born" not in judge_answerability(BORN_QUESTION, [PLAY, NO_LIFESPAN]).covered


GRAY = chunk("g", "Gray Lantern", (
    "Gray Lantern is a 1966 science fiction film that contained scenes from \"Nordlys\"."))
SILVER = chunk("s", "Silver Harbour (film)", (
    "Silver Harbour is the English version of \"Nordlys\", a 1961 Danish feature."))
SILVER_TOUR = chunk("t", "Silver Harbour Tour", (
    "The tour showed the English version of \"Nordlys\", a 1961 Danish feature."))
TWO_PAGES = ("The movies Gray Lantern and Silver Harbour both contained scenes from what "
             "1961 Danish feature?")


def test_the_pages_of_two_named_things_answer_together() -> None:
    # Neither page names the other, but each is the page of one thing the question names.
    assert judge_answerability(TWO_PAGES, [SILVER]).verdict != "answerable"
    assert judge_answerability(TWO_PAGES, [GRAY, SILVER]).verdict == "answerable"


def test_a_page_only_naming_the_second_thing_in_its_title_is_not_its_page() -> None:
    # "Silver Harbour Tour" is about something else: no pair, the same words are not enough.
    assert judge_answerability(TWO_PAGES, [GRAY, SILVER_TOUR]).verdict != "answerable"


ARCHITECT = chunk("a", "Piret Kallas", (
    "Piret Kallas (1544-1590) was an architect who became supervisor of the royal works "
    "under Karl IV."))
KING = chunk("k", "Karl IV of Velmar", (
    "Karl IV (1551-1589) was King of the Ostmark Union from 1573 to 1575 and King of Velmar "
    "until his death."))
KING_LATER = chunk("k", "Karl IV of Velmar", (
    "Karl IV (1551-1589) was King of Velmar until his death. He was the last of his house. "
    "He was also King of the Ostmark Union from 1573 to 1575."))
KING_QUESTION = ("What was the position of Piret Kallas under the man who was King of the "
                 "Ostmark Union from 1573 to 1575?")


def test_a_page_whose_first_sentence_names_the_thing_pairs_with_the_other_page() -> None:
    # The architect's page says "Karl IV", the king's page is titled "Karl IV of Velmar":
    # no link, but its first sentence says its subject is the king the question names.
    assert judge_answerability(KING_QUESTION, [ARCHITECT]).verdict != "answerable"
    assert judge_answerability(KING_QUESTION, [ARCHITECT, KING]).verdict == "answerable"


def test_the_thing_named_further_down_a_page_does_not_make_it_that_things_page() -> None:
    assert judge_answerability(KING_QUESTION, [ARCHITECT, KING_LATER]).verdict != "answerable"


MEMORIAL = chunk("m", "Orsley Hall Memorial", (
    "The Orsley Hall Memorial commemorates the fallen of the Lirean War who had worked for "
    "the Orsley gas company."))
SLIP = "Which war does the Orsley Hal Memorial commemorate the fallen of?"


def test_a_name_one_letter_off_a_page_title_is_that_page() -> None:
    verdict = judge_answerability(SLIP, [MEMORIAL])
    assert verdict.verdict == "answerable"
    assert "Orsley Hal Memorial" in verdict.covered


def test_a_name_two_letters_off_a_page_title_is_still_missing() -> None:
    verdict = judge_answerability(SLIP.replace("Orsley Hal", "Orsly Hal"), [MEMORIAL])
    assert verdict.verdict != "answerable"
    assert "Orsly Hal Memorial" in verdict.missing


def test_a_compass_adjective_is_its_direction() -> None:
    frisian = chunk("f", "Old Lirean", (
        "Old Lirean is a West Orvelic language spoken in the Orvel valley from 1100 to "
        "1500."))
    question = "When was the Western Orvelic language of the Orvel valley spoken?"
    verdict = judge_answerability(question, [frisian])
    assert verdict.verdict == "answerable"
    assert "Western Orvelic" in verdict.covered


def test_a_century_answers_when_but_not_which_year() -> None:
    sentence = "Old Lirean was spoken between the 8th and 16th centuries."
    assert holds_new_value("when", sentence, "When was Old Lirean spoken?")
    assert holds_new_value("when", "It was popular in the 1990s.", "When was it popular?")
    assert not holds_new_value("when", sentence, "In which year was Old Lirean spoken?")
    # a century the question gives is no answer
    assert not holds_new_value("when", "It rose in the 16th century.",
                               "When in the 16th century did it rise?")
