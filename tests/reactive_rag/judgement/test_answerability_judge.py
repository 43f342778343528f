"""The offline answerability judge: which evidence answers which question, and what is missing.

These tests check what the judge measures (names, linked pages, words, values), read
through its fixed word shares (``judge_answerability_fixed``, the ``[judgement]
sufficiency_head = false`` judge), where each measure shows as a verdict; the fitted
score's decisions are tested in ``test_sufficiency_head.py``.
"""

from __future__ import annotations

import pytest

from reactive_rag.judgement.offline import analyse_question
from reactive_rag.judgement.offline import judge_answerability_fixed as judge_answerability
from streams import EvidenceChunk


def chunk(cid: str, title: str, text: str, doc: str | None = None) -> EvidenceChunk:
    return EvidenceChunk(id=cid, title=title, text=text, doc_id=doc or cid)


CAPWORDS = chunk("s1", "string.capwords",
                 "Split the argument into words, capitalize each word and join the words.")
STRPTIME = chunk("t1", "time.strptime", "Parse a string representing a time according to a "
                 "format. The return value is a struct_time.")
LRU = chunk("f1", "functools.lru_cache", "Decorator to wrap a function with a memoizing callable "
            "that saves up to the maxsize most recent calls, so cached results are returned "
            "when the function is called again with the same arguments.")


@pytest.mark.parametrize(("question", "kind"), [
    ("When was the bridge opened?", "when"),
    ("In what year did the war end?", "when"),
    ("The arena can seat how many people?", "how_many"),
    ("Who wrote the report?", "who"),
    ("The group was formed by who?", "who"),
    ("Where is the company headquartered?", "where"),
    ("How do I parse a date string?", "how_to"),
    ("What is a coroutine?", "definition"),
    ("Is the museum open on Mondays?", "yes_no"),
    ("Who is older, Ada Lovelace or Charles Babbage?", "choice"),
])
def test_the_answer_type_is_read_from_the_question(question: str, kind: str) -> None:
    assert analyse_question(question).answer_type == kind


def test_a_named_thing_no_passage_mentions_makes_the_question_unanswerable() -> None:
    judged = judge_answerability("What is the capital of France?", [CAPWORDS, STRPTIME])
    assert judged.verdict == "unanswerable"
    assert "France" in judged.missing
    assert any("France" in q for q in judged.searches), "the run should search for it first"


def test_a_how_to_question_one_passage_covers_is_answerable() -> None:
    judged = judge_answerability("How do I cache function results?", [LRU, CAPWORDS])
    assert judged.verdict == "answerable", judged


def test_question_words_scattered_over_unrelated_passages_do_not_answer() -> None:
    # "version", "compare" and "strings" each occur somewhere, never together.
    parts = [
        chunk("d1", "decimal.Decimal.compare", "Compare the values of two Decimal instances."),
        chunk("p1", "platform.python_version", "Returns the Python version as a tuple."),
        chunk("s2", "str.split", "Return a list of the words in the strings, using sep."),
    ]
    judged = judge_answerability("How do I compare two version strings?", parts)
    assert judged.verdict == "unanswerable"


def test_the_subject_found_but_not_the_asked_value_is_a_partial_answer() -> None:
    about = chunk("a1", "Ada Lovelace", "Ada Lovelace was an English mathematician and writer, "
                  "known for her work on the Analytical Engine.")
    judged = judge_answerability("When was Ada Lovelace born?", [about])
    assert judged.verdict == "partial"
    assert "Ada Lovelace" in judged.covered
    assert "the date asked for" in judged.missing


def test_the_asked_value_in_a_passage_about_the_subject_answers() -> None:
    about = chunk("a1", "Ada Lovelace", "Ada Lovelace (born 10 December 1815) was an English "
                  "mathematician.")
    assert judge_answerability("When was Ada Lovelace born?", [about]).verdict == "answerable"


def test_a_year_the_question_already_gives_is_not_the_answer() -> None:
    about = chunk("a1", "Grand Exhibition", "The Grand Exhibition opened in 1851 in a park.")
    judged = judge_answerability("When did the Grand Exhibition of 1851 close?", [about])
    assert judged.verdict != "answerable"
    assert "the date asked for" in judged.missing


def test_two_linked_passages_answer_a_two_hop_question() -> None:
    first = chunk("m1", "Dunmore Gulls", "The Dunmore Gulls were a junior ice hockey "
                  "team that played its home games at the Pinecrest Arena.")
    second = chunk("c1", "Pinecrest Arena", "The Pinecrest Arena is an arena "
                   "in Dunmore with 4,120 seats for hockey games.")
    judged = judge_answerability(
        "The arena where the Dunmore Gulls played their home games can seat how many "
        "people?", [first, second])
    assert judged.verdict == "answerable", judged


def test_two_unlinked_passages_do_not_add_up_to_an_answer() -> None:
    first = chunk("m1", "Dunmore Gulls", "The Dunmore Gulls were a junior ice hockey "
                  "team based in Dunmore.")
    other = chunk("x1", "Centennial Ice Arena", "The arena has 550 seats and home games sold out.")
    judged = judge_answerability(
        "The arena where the Dunmore Gulls played their home games can seat how many "
        "people?", [first, other])
    assert judged.verdict != "answerable"


def test_a_number_the_question_names_must_be_in_the_evidence() -> None:
    other_year = chunk("g1", "1987 Tech football team", "The 1987 Tech football team played "
                       "its home games at Grant Field in Atlanta.")
    judged = judge_answerability(
        "Where did the 1964 Tech football team play its home games?", [other_year])
    assert judged.verdict != "answerable"
    assert "1964" in judged.missing


def test_a_held_passage_outside_the_pick_that_names_a_missing_entity_is_added() -> None:
    about = chunk("a1", "Ada Lovelace", "Ada Lovelace (born 1815) was an English mathematician.")
    judged = judge_answerability("When was Ada Lovelace born?", [CAPWORDS], [CAPWORDS, about])
    assert judged.extra_ids == ("a1",)
    assert judged.verdict == "answerable"


def test_the_judge_is_deterministic() -> None:
    q = "When was Ada Lovelace born?"
    first = judge_answerability(q, [CAPWORDS, STRPTIME])
    assert all(judge_answerability(q, [CAPWORDS, STRPTIME]) == first for _ in range(3))


def test_a_passage_naming_the_subject_in_passing_must_cover_more_than_its_own_page() -> None:
    question = "What river flows past the old castle of Dunmere?"
    text = "The old castle of Dunmere stands on a hill above the river Tam."  # no "flows past"
    own_page = chunk("c1", "Castle of Dunmere", text)
    in_passing = chunk("c2", "Hill forts", text)
    assert judge_answerability(question, [own_page]).verdict == "answerable"
    assert judge_answerability(question, [in_passing]).verdict != "answerable"


def test_without_names_the_words_must_stand_together_not_across_a_long_page() -> None:
    far_apart = chunk("d1", "decimal.Decimal", " ".join([
        "Compare two operands using their abstract representation.",
        "The context holds the precision.", "Rounding follows the context.",
        "Signals are raised for invalid operations.",
        "The C version may raise an error for an operand it cannot convert to strings."]))
    judged = judge_answerability("How do I compare two version strings?", [far_apart])
    assert judged.verdict == "unanswerable"
    together = chunk("v1", "packaging.version", "Compare two version strings by their release "
                     "numbers, so that 1.10 sorts after 1.9.")
    assert judge_answerability("How do I compare two version strings?",
                               [together]).verdict == "answerable"


def test_a_question_word_glued_into_an_api_name_counts_as_named() -> None:
    strptime = chunk("p1", "datetime.datetime.strptime",
                     "Return an object parsed from a string according to a format.")
    assert judge_answerability("How do I parse a date string?", [strptime]).verdict == (
        "answerable")


def test_a_comparison_is_answered_by_one_passage_about_each_named_thing() -> None:
    ada = chunk("a", "Ada Quill", "Ada Quill (born 1961) is an American film director.")
    ben = chunk("b", "Ben Marsh", "Ben Marsh (1920 - 1990) was an American film director.")
    judged = judge_answerability("Were Ada Quill and Ben Marsh of the same nationality?",
                                 [ada, ben])
    assert judged.verdict == "answerable", judged


def test_two_passages_each_naming_one_thing_do_not_answer_a_bridge_question() -> None:
    one = chunk("a", "Spring fair", "Ada Quill opened the spring fair.")
    two = chunk("b", "Corner shop", "Ben Marsh opened a corner shop.")
    judged = judge_answerability("Which fair did Ada Quill open with Ben Marsh?", [one, two])
    assert judged.verdict != "answerable"


def test_a_how_to_question_is_answered_without_the_askers_qualifiers() -> None:
    lru = chunk("f2", "functools.lru_cache", "Least-recently-used cache decorator. Arguments "
                "to the cached function must be hashable. Distinct calls give distinct results.")
    assert judge_answerability("How can I cache the results of an expensive function call?",
                               [lru]).verdict == "answerable"
    # ...but not without its object: "version" is what the task is about
    strings = chunk("s3", "str.split", "Return a list of the words in the strings, two at most.")
    assert judge_answerability("How do I compare two version strings?",
                               [strings]).verdict == "unanswerable"
