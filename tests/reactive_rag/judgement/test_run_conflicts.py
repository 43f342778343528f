"""Conflicting evidence: found only where both sides answer the question, shown and cited."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors import ActorContext
from actors.rerank import Credibility
from actors.text import content_terms
from reactive_rag.agent import WriterActor, render_answer, verify
from reactive_rag.judgement import Draft
from reactive_rag.judgement.offline import conflict_claims, conflicts_for_answer, find_conflicts
from streams import (
    AnswerDelta,
    AnswerDrafted,
    AnswerRequested,
    Claim,
    ClaimError,
    Conflict,
    ConflictDetected,
    Event,
    EvidenceChunk,
    EvidenceRegistered,
    RunStarted,
    WriteMode,
)


def chunk(cid: str, text: str, title: str = "", url: str = "", position: int = 0,
          source: str = "") -> EvidenceChunk:
    return EvidenceChunk(id=cid, text=text, title=title, url=url, position=position,
                         source=source)


BORN = "When was Mira Castellane born?"
REGISTER = chunk("reg", "Mira Castellane was born on 4 March 1921 in Oldport. She studied law.",
                 title="Mira Castellane", url="https://archives.example.gov/castellane")
BLOG = chunk("blog", "The painter Mira Castellane was born in 1923, and she moved abroad later.",
             title="Ten painters", url="https://www.ehow.com/painters")


# --- what is a conflict ------------------------------------------------------------------


def test_conflicting_years_for_the_same_subject_are_a_conflict_citing_both_sentences() -> None:
    (conflict,) = find_conflicts(BORN, [REGISTER, BLOG])
    assert conflict.subject == "Mira Castellane" and conflict.attribute == "born"
    assert [s.chunk_id for s in conflict.sides] == ["reg", "blog"]
    assert [s.value for s in conflict.sides] == ["4 March 1921", "1923"]
    by_id = {"reg": REGISTER, "blog": BLOG}
    for side in conflict.sides:
        assert side.quote in by_id[side.chunk_id].text  # an exact slice of its chunk
        assert side.value in side.quote
        assert side.title == by_id[side.chunk_id].title
    assert conflict.sides[0].quote == "Mira Castellane was born on 4 March 1921 in Oldport."
    assert conflict.preferred is None  # no credibility table: no side is preferred


def test_the_same_value_in_other_words_is_no_conflict() -> None:
    other = chunk("o", "Mira Castellane was born in 1921 and trained as a lawyer.", title="Law")
    assert find_conflicts(BORN, [REGISTER, other]) == ()


def test_another_subject_is_no_conflict() -> None:
    # her mother's birth, and a second person born in another year, in chunks about Mira
    mother = chunk("m", "Mira Castellane's mother was born in 1890.", title="Castellane family")
    father = chunk("f", "Her father Tomas Reyn was born in 1888.", title="Mira Castellane")
    friend = chunk("p", "Anton Veil, a friend of Mira Castellane, was born in 1919.",
                   title="Anton Veil")
    assert find_conflicts(BORN, [REGISTER, mother, father, friend]) == ()


def test_same_name_in_differently_qualified_titles_is_two_subjects() -> None:
    question = "What is the population of Brackwell?"
    east = chunk("e", "Brackwell has a population of 30,000.", title="Brackwell, Northshire")
    west = chunk("w", "Brackwell has a population of 150,000.", title="Brackwell, Southmoor")
    assert find_conflicts(question, [east, west]) == ()
    same = chunk("s", "Brackwell has a population of 150,000.", title="Brackwell, Northshire")
    assert len(find_conflicts(question, [east, same])) == 1


def test_an_attribute_the_question_does_not_ask_about_is_no_conflict() -> None:
    died = chunk("d", "Mira Castellane died in 1923 in Oldport.", title="Mira Castellane")
    assert find_conflicts(BORN, [REGISTER, died]) == ()
    # ... while asking about it finds the register's silence on it: nothing to compare
    assert find_conflicts("When did Mira Castellane die?", [REGISTER, died]) == ()


def test_a_pronoun_counts_only_in_a_chunk_about_the_subject_right_after_it() -> None:
    opening = chunk("a", "She was born in 1923 in Oldport.", title="Mira Castellane")
    assert len(find_conflicts(BORN, [REGISTER, opening])) == 1
    later = chunk("b", "She was born in 1923 in Oldport.", title="Mira Castellane", position=3)
    assert find_conflicts(BORN, [REGISTER, later]) == ()  # "she" may be someone else here
    elsewhere = chunk("c", "She was born in 1923 in Oldport.", title="Oldport")
    assert find_conflicts(BORN, [REGISTER, elsewhere]) == ()


@pytest.mark.parametrize("text", [
    "Mira Castellane was reportedly born in 1923.",
    "Mira Castellane was not born in 1923, as often claimed.",
    "Mira Castellane was born in 1923 or 1924.",
    "Mira Castellane was born before 1923.",
    "Mira Castellane was born between 1921 and 1923.",
    "Mira Castellane was born c. 1923 in Oldport.",
])
def test_hedged_negated_bounded_or_ranged_values_are_not_read(text: str) -> None:
    assert find_conflicts(BORN, [REGISTER, chunk("x", text, title="Notes")]) == ()


def test_comparisons_and_questions_of_no_known_kind_find_nothing() -> None:
    assert len(find_conflicts("When was Mira Castellane born?", [REGISTER, BLOG])) == 1
    assert find_conflicts("When was Mira Castellane born: 1921 or 1923?", [REGISTER, BLOG]) == ()
    assert find_conflicts("When was Mira Castellane born, earlier than Anton Veil?",
                          [REGISTER, BLOG]) == ()
    assert find_conflicts("Why was Mira Castellane born?", [REGISTER, BLOG]) == ()


def test_one_chunk_against_itself_is_not_held_evidence_disagreeing() -> None:
    both = chunk("x", "Mira Castellane was born in 1921. Mira Castellane was born in 1923.",
                 title="Notes")
    assert find_conflicts(BORN, [both]) == ()


# --- numbers and names ---------------------------------------------------------------


def test_numbers_with_units_conflict_only_in_the_same_unit() -> None:
    question = "How tall is the Varn Tower?"
    metres = chunk("m", "The Varn Tower is 330 metres tall.", title="Varn Tower")
    other = chunk("o", "The Varn Tower is 300 m tall.", title="City guide")
    feet = chunk("f", "The Varn Tower is 1,083 feet tall.", title="Tall buildings")
    (conflict,) = find_conflicts(question, [metres, other, feet])
    assert [s.value for s in conflict.sides] == ["330 metres", "300 m"]
    assert find_conflicts(question, [metres, feet]) == ()  # a conversion, not a disagreement


def test_a_rounded_figure_or_a_figure_of_another_year_is_no_conflict() -> None:
    question = "What is the population of Brackwell?"
    exact = chunk("a", "In 2010 the population of Brackwell was 30,412.", title="Census")
    rounded = chunk("b", "In 2010 the population of Brackwell was 30,000.", title="Guide")
    later = chunk("c", "In 2020 the population of Brackwell was 41,000.", title="Census 2020")
    assert find_conflicts(question, [exact, rounded, later]) == ()
    wrong = chunk("d", "In 2010 the population of Brackwell was 45,500.", title="Blog")
    (conflict,) = find_conflicts(question, [exact, wrong])
    assert [s.value for s in conflict.sides] == ["30,412", "45,500"]


def test_who_questions_compare_names_of_the_same_role() -> None:
    question = "Who founded Quellway Freight?"
    a = chunk("a", "Quellway Freight was founded by Ida Marsh in 1901.", title="Quellway Freight")
    b = chunk("b", "Quellway Freight was founded in 1901 by Oskar Lund.", title="Shipping firms")
    (conflict,) = find_conflicts(question, [a, b])
    assert [s.value for s in conflict.sides] == ["Ida Marsh", "Oskar Lund"]
    same = chunk("c", "Quellway Freight was founded by Marsh's partner, Ida Marsh.", title="x")
    assert find_conflicts(question, [a, same]) == ()
    # a side that also names the other person (co-founders, successors) is no disagreement
    knows = chunk("d", "Quellway Freight was founded by Oskar Lund. Ida Marsh ran it later.",
                  title="History")
    assert find_conflicts(question, [a, knows]) == ()
    # the founder of the subject, not something its founder founded
    active = chunk("e", "Oskar Lund founded a bakery, Quellway Freight bought it.", title="y")
    assert find_conflicts(question, [a, active]) == ()
    assert len(find_conflicts(question, [a, chunk("f", "Oskar Lund founded the Quellway Freight "
                                                       "company.", title="y")])) == 1


# --- credibility --------------------------------------------------------------------------


def test_the_more_credible_side_comes_first_and_is_preferred() -> None:
    cred = Credibility.defaults()
    (conflict,) = find_conflicts(BORN, [BLOG, REGISTER], cred)
    assert [s.chunk_id for s in conflict.sides] == ["reg", "blog"]  # .gov before a farm
    assert [s.credibility for s in conflict.sides] == [1.3, 0.5]
    assert conflict.preferred == 0
    (plain,) = find_conflicts(BORN, [BLOG, REGISTER], Credibility())
    assert [s.chunk_id for s in plain.sides] == ["blog", "reg"]  # evidence order
    assert plain.preferred is None


def test_the_machine_hook_uses_only_the_writers_evidence_and_makes_the_events() -> None:
    evidence = {"reg": REGISTER, "blog": BLOG}
    events, conflicts = conflicts_for_answer(BORN, evidence, ("reg", "blog", "gone"))
    assert len(conflicts) == 1
    assert events == (ConflictDetected.of(conflicts[0]),)
    assert events[0].conflict() == conflicts[0]
    assert conflicts_for_answer(BORN, evidence, ("reg",)) == ((), ())


# --- the claims that show it ------------------------------------------------------------------


def _conflict() -> Conflict:
    (conflict,) = find_conflicts(BORN, [REGISTER, BLOG], Credibility.defaults())
    return conflict


def test_conflict_claims_cite_each_side_and_say_the_sources_differ() -> None:
    claims = conflict_claims([_conflict()])
    assert [c.source_id for c in claims] == ["reg", "blog"]
    assert claims[0].statement == ("Mira Castellane, born: 4 March 1921 in "
                                   "\u201cMira Castellane\u201d")
    assert claims[1].statement == "but 1923 in \u201cTen painters\u201d"
    answer = render_answer(claims)
    assert answer.endswith("[1] but 1923 in \u201cTen painters\u201d [2]")


def test_every_statement_word_is_in_its_quote_or_its_chunk_title() -> None:
    titles = {"reg": REGISTER.title, "blog": BLOG.title}
    for claim in conflict_claims([_conflict()]):
        support = set(content_terms(claim.quote)) | set(content_terms(titles[claim.source_id]))
        assert set(content_terms(claim.statement)) <= support, claim.statement


def test_a_statement_leaves_out_the_subject_when_its_sentence_and_title_lack_it() -> None:
    conflict = _conflict()
    first = conflict.sides[0].model_copy(update={"title": "Register",
                                                 "quote": "She was born on 4 March 1921."})
    (claim, _) = conflict_claims([conflict.model_copy(update={"sides": (first,
                                                                        conflict.sides[1])})])
    assert claim.statement == "born: 4 March 1921 in \u201cRegister\u201d"


def test_conflict_claims_pass_the_verifier() -> None:
    result = verify(conflict_claims([_conflict()]), {"reg": REGISTER, "blog": BLOG}, question=BORN)
    assert result.passed and result.dropped == 0 and len(result.kept) == 2


# --- the writer appends them ----------------------------------------------------------------


class _Policy:
    name = "fake"

    def __init__(self) -> None:
        self.errors: list[Sequence[ClaimError]] = []

    async def write(self, question: str, evidence: Sequence[EvidenceChunk], *,
                    mode: WriteMode, errors: Sequence[ClaimError] = ()) -> Draft:
        self.errors.append(tuple(errors))
        claim = Claim(statement="She studied law.", source_id="reg", quote="She studied law.")
        return Draft(text="She studied law. [1]", claims=(claim,))


class _Ctx:
    def __init__(self) -> None:
        self.emitted: list[Event] = []

    def emit(self, event: Event, cause: Any = None) -> Event:
        self.emitted.append(event)
        return event


async def _writer(policy: _Policy) -> tuple[WriterActor, _Ctx]:
    writer, ctx = WriterActor(policy), _Ctx()
    for fact in (RunStarted(question=BORN), EvidenceRegistered(chunks=(REGISTER, BLOG))):
        assert await writer.on_receive(fact, cast(ActorContext, ctx)) is None
    return writer, ctx


async def test_writer_appends_one_claim_per_side_after_the_policys_claims() -> None:
    policy = _Policy()
    writer, ctx = await _writer(policy)
    request = AnswerRequested(evidence_ids=("reg", "blog"), conflicts=(_conflict(),))
    (draft,) = await writer.on_receive(request, cast(ActorContext, ctx)) or ()
    assert isinstance(draft, AnswerDrafted)
    assert [c.source_id for c in draft.claims] == ["reg", "reg", "blog"]
    assert draft.claims[1:] == tuple(conflict_claims([_conflict()]))
    assert draft.text == ("She studied law. [1] Mira Castellane, born: 4 March 1921 in "
                          "\u201cMira Castellane\u201d [2] but 1923 in "
                          "\u201cTen painters\u201d [3]")
    # nothing unverified is streamed: the verifier publishes the deltas of what it keeps
    assert not [e for e in ctx.emitted if isinstance(e, AnswerDelta)]
    assert verify(draft.claims, {"reg": REGISTER, "blog": BLOG}).dropped == 0


async def test_writer_without_conflicts_returns_the_policys_draft_as_is() -> None:
    writer, ctx = await _writer(_Policy())
    (draft,) = await writer.on_receive(AnswerRequested(evidence_ids=("reg",)),
                                       cast(ActorContext, ctx)) or ()
    assert isinstance(draft, AnswerDrafted)
    assert draft.text == "She studied law. [1]" and len(draft.claims) == 1


async def test_a_refused_conflict_is_left_out_of_the_repair_and_not_blamed_on_the_policy() -> None:
    policy = _Policy()
    writer, ctx = await _writer(policy)
    conflicts = (_conflict(),)
    await writer.on_receive(AnswerRequested(evidence_ids=("reg", "blog"), conflicts=conflicts),
                            cast(ActorContext, ctx))
    errors = (ClaimError(index=2, source_id="blog", reason="statement not supported"),)
    repair = AnswerRequested(mode="repair", attempt=2, evidence_ids=("reg", "blog"),
                             errors=errors, conflicts=conflicts)
    (draft,) = await writer.on_receive(repair, cast(ActorContext, ctx)) or ()
    assert isinstance(draft, AnswerDrafted)
    assert [c.source_id for c in draft.claims] == ["reg"]  # both sides go, not just one
    assert policy.errors == [(), ()]  # the policy's own claim was fine


# --- never a crash inside the machine ----------------------------------------------------------

_WORDS = ["Mira", "Castellane", "was", "born", "in", "1921", "1923", "on", "4", "March", "She",
          "her", "father", "of", "by", "founded", "Ida", "Marsh", "population", "30,000", "km",
          "metres", "tall", "about", "not", "or", "-", "(", ")", ",", ".", "'s", "$5", "million",
          "%", "between", "and", "BC", "It", "10th", "\u2013", "May", "Dec.", "2010"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_WORDS), max_size=30), min_size=1, max_size=4),
       st.sampled_from([BORN, "Who founded Mira Castellane?", "How tall is Mira Castellane?",
                        "What is the population of Mira Castellane?", "when was mira born"]))
def test_any_text_gives_well_formed_conflicts_or_none(texts: list[list[str]],
                                                      question: str) -> None:
    chunks = [chunk(f"c{i}", " ".join(words), title=("Mira Castellane" if i % 2 else "Notes"))
              for i, words in enumerate(texts)]
    by_id = {c.id: c for c in chunks}
    for conflict in find_conflicts(question, chunks, Credibility.defaults()):
        assert 2 <= len(conflict.sides) <= 3
        assert len({s.chunk_id for s in conflict.sides}) >= 2
        for side in conflict.sides:
            assert side.quote in by_id[side.chunk_id].text and side.value in side.quote
        assert verify(conflict_claims([conflict]), by_id).dropped == 0
