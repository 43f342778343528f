"""Yes/no questions get a direct answer inferred in code, and only one its quotes back."""

from __future__ import annotations

from reactive_rag.agent import render_answer, verify
from reactive_rag.agent._verifier import lead_is_backed
from reactive_rag.judgement.offline import ExtractiveWriter
from reactive_rag.judgement.offline._yes_no import answer_yes_no
from streams import Claim, EvidenceChunk


def chunk(cid: str, title: str, text: str) -> EvidenceChunk:
    return EvidenceChunk(id=cid, title=title, doc_id=cid, text=text)


ADA = chunk("a", "Ada Quill", "Ada Quill (born 1961) is an American director and producer.")
BEN = chunk("b", "Ben Marsh", "Ben Marsh (1920 - 1990) was an American actor, writer and producer.")
CLAIRE = chunk("c", "Claire Dumont", "Claire Dumont (1899 - 1979) was a French painter and actor.")
OTHER = chunk("o", "Film festivals", "Many festivals show films by new directors every year.")


async def test_same_nationality_is_answered_yes_with_both_descriptions_cited() -> None:
    q = "Were Ada Quill and Ben Marsh of the same nationality?"
    draft = await ExtractiveWriter().write(q, [ADA, BEN, OTHER])
    assert draft.lead == "Yes: both are American."
    assert draft.text.startswith("Yes: both are American. ")
    assert {c.source_id for c in draft.claims[:2]} == {"a", "b"}
    checked = verify(draft.claims, {c.id: c for c in (ADA, BEN, OTHER)}, question=q)
    assert checked.passed and lead_is_backed(draft.lead, checked.kept, {"a": ADA, "b": BEN})


async def test_different_nationalities_are_answered_no_naming_each() -> None:
    draft = await ExtractiveWriter().write(
        "Were Ada Quill and Claire Dumont of the same nationality?", [ADA, CLAIRE])
    assert draft.lead == "No: Ada Quill is American, while Claire Dumont is French."


def test_both_with_a_property_each_description_holds_is_yes() -> None:
    verdict = answer_yes_no("Are Ada Quill and Ben Marsh both producers?",
                            ["Ada Quill", "Ben Marsh"], [ADA, BEN])
    assert verdict is not None and verdict.verdict == "yes"


def test_both_with_a_property_only_one_holds_is_no_and_says_which() -> None:
    verdict = answer_yes_no("Are Ada Quill and Claire Dumont both actors?",
                            ["Ada Quill", "Claire Dumont"], [ADA, CLAIRE])
    assert verdict is not None and verdict.verdict == "no"
    assert "only Claire Dumont" in verdict.lead


def test_no_lead_when_one_description_is_missing() -> None:
    assert answer_yes_no("Were Ada Quill and Dora Finch of the same nationality?",
                         ["Ada Quill", "Dora Finch"], [ADA, OTHER]) is None


def test_a_shared_place_name_is_not_taken_for_the_same_district() -> None:
    one = chunk("p", "Old Mill", "The Old Mill is a building in Eastgate, Riverton.")
    two = chunk("q", "Glass House", "The Glass House is a building in Westgate, Riverton.")
    assert answer_yes_no("Are the Old Mill and Glass House in the same district?",
                         ["Old Mill", "Glass House"], [one, two]) is None


def test_a_lead_saying_more_than_its_quotes_is_refused() -> None:
    claims = [Claim(statement=ADA.text, source_id="a", quote=ADA.text),
              Claim(statement=BEN.text, source_id="b", quote=BEN.text)]
    registry = {"a": ADA, "b": BEN}
    assert lead_is_backed("Yes: both are American.", claims, registry)
    assert not lead_is_backed("Yes: both are Canadian.", claims, registry)
    # a bare verdict rests on the kept claims as they stand; with none kept it rests on nothing
    assert lead_is_backed("Yes.", claims, registry)
    assert not lead_is_backed("Yes.", [], registry)


def test_the_rendered_answer_puts_the_lead_before_the_citations() -> None:
    claims = [Claim(statement="Ada Quill is American.", source_id="a", quote="x")]
    assert render_answer(claims, "Yes: both are American.") == (
        "Yes: both are American. Ada Quill is American. [1]")
    assert render_answer(claims) == "Ada Quill is American. [1]"


def test_both_looks_past_the_first_sentence_and_past_linking_words() -> None:
    # "located" only links the place to the property; the province is said in each
    # description, once in its second sentence.
    east = EvidenceChunk(id="e", title="Varnholm", text=(
        "Varnholm is a prefecture-level city in eastern Kessel province."))
    west = EvidenceChunk(id="w", title="Ostrava Bay", text=(
        "Ostrava Bay is a port city with a population of 2.1 million.  It lies in the south "
        "of Kessel province."))
    verdict = answer_yes_no("Are Varnholm and Ostrava Bay both located in Kessel province?",
                            ["Varnholm", "Ostrava Bay"], [east, west])
    assert verdict is not None and verdict.verdict == "yes"
    assert verdict.claims[1].quote == "It lies in the south of Kessel province."


def test_a_and_b_with_a_property_asks_it_of_each() -> None:
    east = EvidenceChunk(id="e", title="Varnholm", text=(
        "Varnholm is a prefecture-level city in eastern Kessel province."))
    west = EvidenceChunk(id="w", title="Ostrava Bay", text=(
        "Ostrava Bay is a port city on the coast of Dremmen."))
    verdict = answer_yes_no("Are Varnholm and Ostrava Bay in Kessel province?",
                            ["Varnholm", "Ostrava Bay"], [east, west])
    assert verdict is not None and verdict.verdict == "no"
    assert verdict.lead == "No: only Varnholm is described as kessel province."
