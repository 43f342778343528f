"""The judge pairs a passage with the page it names, however the name is inflected.

These tests check what the judge measures (names, linked pages, words, values), read
through its fixed word shares (``judge_answerability_fixed``, the ``[judgement]
sufficiency_head = false`` judge), where each measure shows as a verdict; the fitted
score's decisions are tested in ``test_sufficiency_head.py``.
"""

from __future__ import annotations

from reactive_rag.judgement.offline import judge_answerability_fixed as judge_answerability
from streams import EvidenceChunk


def chunk(cid: str, title: str, text: str) -> EvidenceChunk:
    return EvidenceChunk(id=cid, title=title, text=text, doc_id=cid)


PIANIST = chunk("p", "Oren Talvik", (
    "Oren Talvik, known by his stage name Quillo, is an Estonian pianist who later worked "
    "as a management consultant."))
CONSULTING = chunk("m", "Management consulting", (
    "Management consulting is the practice of helping organizations to improve their "
    "performance through the analysis of existing problems."))
ACCOUNTING = chunk("a", "Tax accounting", (
    "Tax accounting is the practice of helping organizations to improve their "
    "performance through the analysis of existing problems."))
LINK_QUESTION = ("Who was known by his stage name Quillo and helped organizations improve "
                 "their performance as a consultant?")


def test_a_passage_naming_a_page_in_another_inflection_links_to_it() -> None:
    # "a management consultant" names the page "Management consulting": together they
    # answer, though neither does alone.
    assert judge_answerability(LINK_QUESTION, [PIANIST]).verdict != "answerable"
    assert judge_answerability(LINK_QUESTION, [CONSULTING]).verdict != "answerable"
    verdict = judge_answerability(LINK_QUESTION, [PIANIST, CONSULTING])
    assert verdict.verdict == "answerable"


def test_a_passage_the_first_does_not_name_is_not_paired_with_it() -> None:
    # The same words on a page the pianist's passage never names are not his answer.
    assert judge_answerability(LINK_QUESTION, [PIANIST, ACCOUNTING]).verdict != "answerable"
