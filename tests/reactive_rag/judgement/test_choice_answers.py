"""Which of two named things is older / came first: a lead naming it, backed by both quotes."""

from __future__ import annotations

from reactive_rag.agent import verify
from reactive_rag.agent._verifier import lead_is_backed
from reactive_rag.judgement.offline import ExtractiveWriter
from reactive_rag.judgement.offline._choice import answer_choice
from streams import EvidenceChunk

ORLA = EvidenceChunk(id="orla", title="Orla Venn", text=(
    "Orla Maeve Venn (born 10 July 1971), known professionally as Orla Venn, is an American "
    "singer and actress.  Her second album, \"Glass Hours\", was released in 2009."))
TEO = EvidenceChunk(id="teo", title="Teo Marsh", text=(
    "Teo Marsh (born 10 April 1992) is a French football player who plays for Valmont.  In "
    "1950 his grandfather founded the club."))
BAND_A = EvidenceChunk(id="ba", title="The Pale Rooks", text=(
    "The Pale Rooks are an English rock band formed in Leeds in 1995.  They split in 2004."))
BAND_B = EvidenceChunk(id="bb", title="Cinder Vale", text=(
    "Cinder Vale is a Welsh rock band formed in Cardiff in March 1995."))
BAND_C = EvidenceChunk(id="bc", title="Lumen Drift", text=(
    "Lumen Drift is a Scottish rock band formed in Dundee in 1988."))
EVIDENCE = [TEO, ORLA, BAND_A, BAND_B, BAND_C]
REGISTRY = {c.id: c for c in EVIDENCE}


def test_the_older_one_is_named_first_with_both_dates_from_the_quotes() -> None:
    choice = answer_choice("Who was born first, Teo Marsh or Orla Venn?",
                           ["Teo Marsh", "Orla Venn"], EVIDENCE)
    assert choice is not None and choice.chosen == "Orla Venn"
    assert choice.lead == "Orla Venn: 10 July 1971, before Teo Marsh: 10 April 1992."
    assert [c.source_id for c in choice.claims] == ["orla", "teo"]
    assert lead_is_backed(choice.lead, choice.claims, REGISTRY)


def test_younger_asks_for_the_later_date() -> None:
    choice = answer_choice("Who is younger, Orla Venn or Teo Marsh?",
                           ["Orla Venn", "Teo Marsh"], EVIDENCE)
    assert choice is not None and choice.chosen == "Teo Marsh"
    assert choice.lead.startswith("Teo Marsh: 10 April 1992, after Orla Venn")


def test_dates_are_compared_only_as_precisely_as_both_are_written() -> None:
    # 1995 against March 1995 is a tie by year: no verdict rather than a guess.
    assert answer_choice("Which band was formed first, The Pale Rooks or Cinder Vale?",
                         ["The Pale Rooks", "Cinder Vale"], EVIDENCE) is None
    choice = answer_choice("Which band was formed first, Cinder Vale or Lumen Drift?",
                           ["Cinder Vale", "Lumen Drift"], EVIDENCE)
    assert choice is not None and choice.chosen == "Lumen Drift"


def test_no_verdict_without_both_descriptions_or_a_comparison_word() -> None:
    assert answer_choice("Who was born first, Teo Marsh or Ida Quell?",
                         ["Teo Marsh", "Ida Quell"], EVIDENCE) is None
    assert answer_choice("Which is a singer, Teo Marsh or Orla Venn?",
                         ["Teo Marsh", "Orla Venn"], EVIDENCE) is None
    assert answer_choice("Who was born first, Teo Marsh?", ["Teo Marsh"], EVIDENCE) is None


async def test_the_writer_leads_a_choice_answer_with_the_verdict() -> None:
    question = "Who was born first, Teo Marsh or Orla Venn?"
    draft = await ExtractiveWriter(max_claims=3, min_gain=0.15).write(question, EVIDENCE)
    assert draft.lead.startswith("Orla Venn:")
    assert draft.text.startswith(draft.lead)
    assert {c.source_id for c in draft.claims[:2]} == {"orla", "teo"}
    assert verify(draft.claims, REGISTRY, question=question).passed


def test_a_date_in_a_later_sentence_of_the_description_is_used() -> None:
    journal = EvidenceChunk(id="j", title="Tern Review", text=(
        "Tern Review is a women's magazine published by Harbor Media.  The magazine was "
        "started in 1989."))
    gazette = EvidenceChunk(id="g", title="Pike Gazette", text=(
        "Pike Gazette (1844-1846) was an American literary periodical."))
    choice = answer_choice("Which magazine was started first, Tern Review or Pike Gazette?",
                           ["Tern Review", "Pike Gazette"], [journal, gazette])
    assert choice is not None and choice.chosen == "Pike Gazette"
    assert choice.lead == "Pike Gazette: 1844, before Tern Review: 1989."
    assert choice.claims[1].quote == "The magazine was started in 1989."
