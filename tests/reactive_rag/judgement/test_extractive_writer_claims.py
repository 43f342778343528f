"""The offline writer answers with evidence sentences whose citations always verify."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.models import HashingEmbedder
from reactive_rag.agent import verify
from reactive_rag.judgement import Draft
from reactive_rag.judgement.offline import ExtractiveWriter
from streams import ClaimError, EvidenceChunk

DIAMOND = EvidenceChunk(
    id="d1",
    title="2015 Diamond Head Classic",
    text=(
        "The 2015 Diamond Head Classic was a college basketball tournament held in "
        "Honolulu, Hawaii. The tournament began on December 22, 2015.  Buddy Hield was "
        "named the tournament's MVP after leading Oklahoma to the title."
    ),
)
HIELD = EvidenceChunk(
    id="h1",
    title="Buddy Hield",
    text=(
        'Chavano Rainier "Buddy" Hield is a Bahamian professional basketball player. '
        "He plays for the Sacramento Kings of the National Basketball Association (NBA). "
        "He was born on December 17, 1992 in Freeport, Bahamas."
    ),
)
NOISE = EvidenceChunk(
    id="n1",
    title="Honolulu",
    text="Honolulu is the capital of Hawaii. It lies on the island of Oahu.",
)
EVIDENCE = [DIAMOND, HIELD, NOISE]
REGISTRY = {c.id: c for c in EVIDENCE}
QUESTION = "Which team does the player named 2015 Diamond Head Classic's MVP play for?"


async def test_claims_quote_their_chunks_exactly_and_verify() -> None:
    draft = await ExtractiveWriter().write(QUESTION, EVIDENCE, mode="answer")
    assert 1 <= len(draft.claims) <= 4
    for claim in draft.claims:
        assert claim.quote in REGISTRY[claim.source_id].text
    result = verify(draft.claims, REGISTRY, fuzzy_threshold=1.0)
    assert result.passed and not result.errors


async def test_multi_hop_answer_cites_both_hops_and_skips_noise() -> None:
    draft = await ExtractiveWriter().write(QUESTION, EVIDENCE, mode="answer")
    cited = {c.source_id for c in draft.claims}
    assert {"d1", "h1"} <= cited
    assert any("Sacramento Kings" in c.statement for c in draft.claims)
    assert any("MVP" in c.statement for c in draft.claims)


async def test_text_has_numbered_citations_claim_by_claim() -> None:
    draft = await ExtractiveWriter().write(QUESTION, EVIDENCE, mode="answer")
    assert re.findall(r"\[(\d+)\]", draft.text) == [str(i + 1) for i in range(len(draft.claims))]
    for claim in draft.claims:
        assert claim.statement in draft.text


async def test_answer_type_prefers_a_sentence_with_a_year() -> None:
    draft = await ExtractiveWriter(max_claims=1).write(
        "When was Buddy Hield born?", EVIDENCE, mode="answer"
    )
    assert len(draft.claims) == 1 and "1992" in draft.claims[0].quote


async def test_near_duplicate_sentences_are_not_repeated() -> None:
    twin = EvidenceChunk(
        id="h2", title="Buddy Hield", text=HIELD.text.replace("He plays", "He currently plays")
    )
    draft = await ExtractiveWriter().write(
        "Who does Buddy Hield play for?", [HIELD, twin], mode="answer"
    )
    statements = [c.statement for c in draft.claims]
    assert sum("Sacramento Kings" in s for s in statements) == 1


async def test_repair_avoids_the_claims_named_in_errors() -> None:
    writer = ExtractiveWriter()
    first = await writer.write(QUESTION, EVIDENCE, mode="answer")
    bad = first.claims[0]
    errors = [ClaimError(index=0, source_id=bad.source_id, reason="quote not found")]
    second = await writer.write(QUESTION, EVIDENCE, mode="repair", errors=errors)
    assert bad not in second.claims
    assert second.claims
    assert any("repair" in n for n in second.notes)


async def test_repair_without_a_remembered_draft_avoids_the_named_chunk() -> None:
    errors = [ClaimError(index=7, source_id="h1", reason="unknown source id")]
    draft = await ExtractiveWriter().write(QUESTION, EVIDENCE, mode="repair", errors=errors)
    assert draft.claims and all(c.source_id != "h1" for c in draft.claims)


async def test_finalize_uses_the_same_selection() -> None:
    writer = ExtractiveWriter()
    answer = await writer.write(QUESTION, EVIDENCE, mode="answer")
    final = await writer.write(QUESTION, EVIDENCE, mode="finalize")
    assert final.claims == answer.claims
    assert any("evidence only" in n for n in final.notes)


async def test_no_evidence_gives_no_claims() -> None:
    draft = await ExtractiveWriter().write(QUESTION, [], mode="answer")
    assert draft.claims == () and draft.text == ""
    assert draft.notes


async def test_embedder_is_used_when_given() -> None:
    draft = await ExtractiveWriter(HashingEmbedder()).write(QUESTION, EVIDENCE, mode="answer")
    assert verify(draft.claims, REGISTRY).passed
    assert {"d1", "h1"} <= {c.source_id for c in draft.claims}


def test_max_claims_is_validated() -> None:
    with pytest.raises(ValueError):
        ExtractiveWriter(max_claims=0)


_sentence = st.lists(
    st.sampled_from(
        [
            "the",
            "a",
            "tower",
            "river",
            "1889",
            "Paris",
            "built",
            "bridge",
            "old",
            "new",
            "ships",
            "city",
            "was",
            "is",
            "by",
            "of",
            "in",
            "“quoted”",
            "it's",
            "e.g.",
            "Dr.",
            "well-known",
            "3.5",
            "km",
        ]
    ),
    min_size=1,
    max_size=14,
).map(lambda ws: " ".join(ws).capitalize() + ".")


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.lists(_sentence, min_size=1, max_size=5), min_size=1, max_size=4),
    question=st.sampled_from(["When was the tower built?", "Which city has old ships?", "x"]),
)
async def test_every_quote_verifies_on_random_evidence(
    texts: list[list[str]], question: str
) -> None:
    evidence = [
        EvidenceChunk(id=f"c{i}", text="  ".join(sents), title="T") for i, sents in enumerate(texts)
    ]
    draft = await ExtractiveWriter().write(question, evidence, mode="answer")
    assert len(draft.claims) <= 4
    if draft.claims:
        result = verify(draft.claims, {c.id: c for c in evidence})
        assert not result.errors, result.errors


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=3),
    question=st.text(max_size=60),
)
async def test_arbitrary_unicode_evidence_still_verifies(texts: list[str], question: str) -> None:
    evidence = [EvidenceChunk(id=f"u{i}", text=t) for i, t in enumerate(texts)]
    draft = await ExtractiveWriter().write(question, evidence, mode="answer")
    for claim in draft.claims:
        assert claim.quote in next(c.text for c in evidence if c.id == claim.source_id)
    result = verify(draft.claims, {c.id: c for c in evidence})
    assert not result.errors, result.errors


# --- readable answers: subject first, prose only, no internals, no repeats -----------------

MEMO = EvidenceChunk(
    id="memo",
    title="memo.remember",
    text=(
        "memo.remember(func, /, *, size=128)\n\n"
        "Decorator that memoizes the results of a function in a bounded store.\n\n"
        "If size is None, the store grows without bound.\n\n"
        "    @memo.remember(size=32)\n"
        "    def fetch(key):  # Memoizes function results. Calls it once.\n"
        "        return load(key)\n\n"
        "Arguments to the memoized function must be hashable."
    ),
)
ACCUMULATE = EvidenceChunk(
    id="acc",
    title="series.accumulate",
    text=(
        "series.accumulate(iterable, func=None)\n\n"
        "Return series of accumulated sums (or other binary function results)."
    ),
)


def _shape_ok(quote: str) -> bool:
    from actors.text import looks_like_code

    flat = " ".join(quote.split())
    return not (looks_like_code(quote) or flat.endswith(":") or "|" in flat or "<" in flat
                or flat.startswith("#") or "```" in flat or "(" in flat.split()[0])


async def test_how_to_answer_leads_with_the_api_named_by_its_title() -> None:
    draft = await ExtractiveWriter(max_claims=3, min_gain=0.15).write(
        "How do I memoize function results?", [ACCUMULATE, MEMO], mode="answer"
    )
    lead = draft.claims[0]
    assert lead.source_id == "memo"
    assert lead.quote == "Decorator that memoizes the results of a function in a bounded store."
    assert lead.statement == f"memo.remember: {lead.quote}"
    assert draft.text.startswith("memo.remember: Decorator")
    assert verify(draft.claims, {c.id: c for c in (MEMO, ACCUMULATE)}).passed


async def test_code_blocks_signatures_headings_and_markup_are_never_claims() -> None:
    web_page = EvidenceChunk(  # not cleaned by the indexer: raw markup must not be quoted
        id="web",
        title="Memoizing results",
        text=(
            "## Memoize function results\n\n"
            "<div class=\"note\">Memoize function results with care.</div>\n\n"
            "| memoize | function | results |\n\n"
            "```\nresults = memoize(function)  # Memoize function results.\n```\n\n"
            "To memoize function results, the recipe is:"
        ),
    )
    draft = await ExtractiveWriter(max_claims=4, min_gain=-1.0).write(
        "How do I memoize function results?", [MEMO, web_page], mode="answer"
    )
    assert draft.claims
    for claim in draft.claims:
        assert _shape_ok(claim.quote), claim.quote
        assert "def fetch" not in claim.quote and "memo.remember(" not in claim.quote


async def test_a_sentence_without_its_subject_gets_the_title_in_front() -> None:
    draft = await ExtractiveWriter(max_claims=4, min_gain=-1.0).write(
        "Who does Buddy Hield play for, and where was he born?", [HIELD], mode="answer"
    )
    by_quote = {c.quote: c.statement for c in draft.claims}
    plays = next(q for q in by_quote if "Sacramento Kings" in q)
    assert plays.startswith("He plays") and by_quote[plays] == f"Buddy Hield: {plays}"
    named = next((q for q in by_quote if q.startswith("Chavano")), None)
    if named is not None:
        assert by_quote[named] == named  # already says whom it is about
    began = await ExtractiveWriter(max_claims=4, min_gain=-1.0).write(
        "When did the 2015 Diamond Head Classic tournament begin?", [DIAMOND], mode="answer"
    )
    statements = {c.quote: c.statement for c in began.claims}
    # Lacks the title's entity (a shared year is not the entity): the title goes in front.
    assert statements["The tournament began on December 22, 2015."] == (
        "2015 Diamond Head Classic: The tournament began on December 22, 2015."
    )
    first = next(q for q in statements if q.startswith("The 2015 Diamond Head Classic"))
    assert statements[first] == first


async def test_a_method_section_names_its_own_subject() -> None:
    circle = EvidenceChunk(
        id="circle",
        title="shapes.Circle",
        text=(
            "shapes.Circle(radius)\n\nA round shape.\n\n"
            "shapes.Circle.area(self)\n\nReturn the area covered by the circle.\n\n"
            "shapes.Circle.from_text(...)\n\nstr -> Construct a circle from its text form."
        ),
    )
    writer = ExtractiveWriter(max_claims=1)
    area = (await writer.write("How do I get the area of a circle?", [circle])).claims[0]
    assert area.statement == "shapes.Circle.area: Return the area covered by the circle."
    parsed = (await writer.write("How do I construct a circle from text?", [circle])).claims[0]
    assert parsed.quote == "str -> Construct a circle from its text form."
    assert parsed.statement == "shapes.Circle.from_text: Construct a circle from its text form."


async def test_private_names_are_not_answers_unless_the_question_names_them() -> None:
    private = EvidenceChunk(
        id="priv", title="tasks._enter_task",
        text="tasks._enter_task(loop, task)\n\nEnter into task execution or resume a task.",
    )
    public = EvidenceChunk(
        id="pub", title="tasks.Runner",
        text=(
            "tasks.Runner(debug=None)\n\nA context manager that runs a task to completion.\n\n"
            "tasks.Runner._lazy_init(self)\n\nEnter the task loop lazily and resume the task."
        ),
    )
    draft = await ExtractiveWriter(max_claims=4, min_gain=-1.0).write(
        "How do I enter and resume a task?", [private, public], mode="answer"
    )
    assert draft.claims and all(c.source_id == "pub" for c in draft.claims)
    assert all("lazily" not in c.quote for c in draft.claims)
    asked = await ExtractiveWriter(max_claims=1).write(
        "What does _enter_task do?", [private, public], mode="answer"
    )
    assert asked.claims[0].source_id == "priv"


async def test_the_same_text_under_two_titles_is_one_claim() -> None:
    twins = [
        EvidenceChunk(id="a", title="loops.get_running_loop",
                      text="Return the running event loop of this thread."),
        EvidenceChunk(id="b", title="loops.current_loop",
                      text="Return the running event loop of this thread or nothing."),
        EvidenceChunk(id="c", title="The running event loop",
                      text="The running event loop.\n\nEach thread runs one event loop."),
    ]
    draft = await ExtractiveWriter(max_claims=4, min_gain=-1.0).write(
        "How do I get the running event loop of this thread?", twins, mode="answer"
    )
    quotes = [c.quote for c in draft.claims]
    assert sum("Return the running event loop" in q for q in quotes) == 1
    assert "The running event loop." not in quotes  # repeats its own title (the citation)


_title = st.sampled_from(["T", "Buddy Hield", "pkg.mod.fn", "Winner (band)", "pkg._private"])


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.lists(_sentence, min_size=1, max_size=5), min_size=1, max_size=4),
    titles=st.lists(_title, min_size=4, max_size=4),
    question=st.sampled_from(["When was the tower built?", "How do I build a bridge?", "x"]),
)
async def test_statements_add_no_word_beyond_the_quote_and_the_title(
    texts: list[list[str]], titles: list[str], question: str
) -> None:
    from actors.text import tokenize

    evidence = [
        EvidenceChunk(id=f"c{i}", text="  ".join(sents), title=titles[i])
        for i, sents in enumerate(texts)
    ]
    draft = await ExtractiveWriter().write(question, evidence, mode="answer")
    registry = {c.id: c for c in evidence}
    for claim in draft.claims:
        allowed = set(tokenize(claim.quote)) | set(tokenize(registry[claim.source_id].title))
        assert set(tokenize(claim.statement)) <= allowed, claim
    if draft.claims:
        assert not verify(draft.claims, registry).errors


async def test_a_question_naming_an_api_leads_with_what_its_docs_say_first() -> None:
    merge = EvidenceChunk(
        id="merge",
        title="streams.merge_all",
        text=(
            "streams.merge_all(*sources, ordered=False)\n\n"
            "Return one stream with the items of the given sources.\n\n"
            "If ordered is True, merge_all keeps the order of the sources and merge_all "
            "waits for slow ones."
        ),
    )
    draft = await ExtractiveWriter(max_claims=2).write(
        "What does streams.merge_all do?", [merge], mode="answer"
    )
    assert draft.claims[0].statement == (
        "streams.merge_all: Return one stream with the items of the given sources."
    )


async def test_table_rows_run_ons_and_code_after_a_colon_are_not_claims() -> None:
    table = EvidenceChunk(
        id="tbl",
        title="widgets (toolkit)",
        text=(
            "spin Turn the widget around its axis.\n\n"
            "build(...): Make a widget from its parts.\n\n"
            "Equivalent to: sorted(widgets, key=size)[:n]\n\n"
            + " ".join(["Each widget part turns and the widget spins"] * 12) + ".\n\n"
            "A widget spins when its parts turn around its axis."
        ),
    )
    draft = await ExtractiveWriter(max_claims=4, min_gain=-1.0).write(
        "How do I make a widget spin around its axis?", [table], mode="answer"
    )
    assert [c.quote for c in draft.claims] == [
        "A widget spins when its parts turn around its axis."
    ]


# --- the sentence that holds the answer -----------------------------------------------------

def _position(draft: Draft, text: str) -> int | None:
    """The index of the first claim quoting ``text``."""
    return next((i for i, c in enumerate(draft.claims) if text in c.quote), None)


HONOURS = EvidenceChunk(
    id="hon",
    title="1931 Orchard Honours",
    text=(
        "The 1931 Orchard Honours were appointments by King Aldric IV to reward the orchard "
        "keepers of the realm of Varland.  The appointments were made to mark the official "
        "birthday of the King, and were published in the Varland Gazette on 3 June 1931.  "
        "Orchard Honours are bestowed each year."
    ),
)
ALDRIC = EvidenceChunk(
    id="ald",
    title="Aldric IV",
    text=(
        "Aldric IV (Aldric Edmund Leopold; 12 March 1870 \u2013 5 May 1940) was King of Varland "
        "from 1910 until his death.  He married Princess Mara of Oster in 1893."
    ),
)
ORCHARDS = EvidenceChunk(
    id="orc",
    title="Orchard keeping",
    text="Orchard keeping in Varland is honoured each year with appointments by the King.",
)


async def test_a_year_question_quotes_the_next_hop_sentence_with_a_new_year() -> None:
    question = "In which year was the King who made the 1931 Orchard Honours born?"
    draft = await ExtractiveWriter(max_claims=3, min_gain=0.15).write(
        question, [HONOURS, ORCHARDS, ALDRIC], mode="answer"
    )
    # The first hop restates the question (its year, 1931, is no answer); King Aldric IV's
    # own chunk, which the first hop names, holds the year asked for.
    assert "1870" in draft.text
    answer = _position(draft, "1870")
    assert answer is not None and answer <= 1 and draft.claims[answer].source_id == "ald"
    assert len(draft.claims) <= 4
    assert verify(draft.claims, {c.id: c for c in (HONOURS, ORCHARDS, ALDRIC)},
                  question=question).passed


OFFICER = EvidenceChunk(
    id="off",
    title="Tomas Rellin",
    text=(
        "Tomas Rellin was President Jonah Avery's intelligence officer for the eastern "
        "provinces at the Intelligence Council from 1997 to 1998.  While there, Rellin "
        "oversaw the preparation of intelligence estimates for the council director."
    ),
)
AVERY = EvidenceChunk(
    id="av",
    title="Jonah Avery",
    text=(
        "Jonah Peter Avery (born 19 August 1946) is a Varlish politician.  Prior to the "
        "presidency, he was the Governor of Kestria during two terms."
    ),
)
COUNCIL = EvidenceChunk(
    id="ic",
    title="Intelligence Council",
    text="The Intelligence Council was founded in 1979 to prepare intelligence estimates.",
)


async def test_a_possessive_mention_links_the_next_hop() -> None:
    question = "In which year was the president whose intelligence officer was Tomas Rellin born?"
    draft = await ExtractiveWriter(max_claims=3, min_gain=0.15).write(
        question, [OFFICER, COUNCIL, AVERY], mode="answer"
    )
    # "Jonah Avery's" names the chunk titled "Jonah Avery": the next hop, whose year is
    # the answer (the first hop's own years, 1997 and 1998, are not).
    assert "1946" in draft.text
    assert _position(draft, "1946") in (0, 1)


async def test_a_who_answer_is_introduced_as_its_own_chunk_begins() -> None:
    draft = await ExtractiveWriter(max_claims=3, min_gain=0.15).write(
        "Tomas Rellin was the intelligence officer under which former Governor of Kestria?",
        [OFFICER, AVERY], mode="answer",
    )
    assert "av" in {c.source_id for c in draft.claims}
    # The answer's chunk says first who he is, with his full name.
    intro = _position(draft, "Jonah Peter Avery (born")
    assert intro is not None and intro <= 2
    assert draft.claims[intro].statement == draft.claims[intro].quote


async def test_a_how_many_question_gets_a_number_the_question_does_not_give() -> None:
    team = EvidenceChunk(
        id="team",
        title="Kelton Otters",
        text=(
            "The Kelton Otters were a junior ice hockey team of the 1998 Northern League "
            "based in Kelton.  The Otters played their home games at the Riverside Dome in "
            "Kelton.  The Kelton Otters won the 1998 league title."
        ),
    )
    dome = EvidenceChunk(
        id="dome",
        title="Riverside Dome",
        text="The Riverside Dome is a multi-purpose venue with room for 4,200 spectators.",
    )
    draft = await ExtractiveWriter(max_claims=3, min_gain=0.15).write(
        "The arena where the Kelton Otters played their home games in 1998 can seat how many "
        "people?", [team, dome], mode="answer",
    )
    assert "4,200" in draft.text
    assert _position(draft, "4,200") in (0, 1)


async def test_a_who_question_quotes_the_name_beside_the_asked_relation() -> None:
    awards = EvidenceChunk(
        id="aw",
        title="9th Lantern Awards",
        text=(
            "The 9th Lantern Awards, honouring the best independent films of 2002, were "
            "announced on March 3, 2003, in Tacoma.  Winners were given glass lanterns with "
            "the names of their films.  It was hosted by Dana Brook."
        ),
    )
    lanterns = EvidenceChunk(
        id="la",
        title="Lantern Awards",
        text=(
            "The Lantern Awards (originally the Friends of Film Awards), founded in 1990, are "
            "awards for independent film makers in Tacoma."
        ),
    )
    draft = await ExtractiveWriter(max_claims=3, min_gain=0.15).write(
        "Which American film director hosted the 9th Lantern Awards in 2003?",
        [awards, lanterns], mode="answer",
    )
    assert "Dana Brook" in draft.text
    assert _position(draft, "Dana Brook") in (0, 1)


async def test_what_is_x_leads_with_xs_own_first_sentence() -> None:
    mills = EvidenceChunk(
        id="mills",
        title="Harbor Mills",
        text=(
            "Harbor Mills is a regional shopping mall owned by the Vance Group.  It opened in "
            "Dayton, Ohio in 2001 on the site of a former theme park."
        ),
    )
    steamer = EvidenceChunk(
        id="boat",
        title="River Queen",
        text="River Queen was a paddle steamer based at Harbor Mills in Dayton, Ohio.",
    )
    draft = await ExtractiveWriter(max_claims=3, min_gain=0.15).write(
        "What is Harbor Mills in Dayton, Ohio?", [steamer, mills], mode="answer"
    )
    # The steamer's sentence matches every word of the question, but says what it is.
    assert draft.claims[0].quote == (
        "Harbor Mills is a regional shopping mall owned by the Vance Group."
    )


async def test_the_answer_sentence_is_at_most_one_claim_beyond_max_claims() -> None:
    question = "In which year was the King who made the 1931 Orchard Honours born?"
    evidence = [HONOURS, ORCHARDS, ALDRIC]
    for max_claims in (1, 2, 3, 4):
        draft = await ExtractiveWriter(max_claims=max_claims, min_gain=-1.0).write(
            question, evidence, mode="answer"
        )
        assert len(draft.claims) <= min(4, max_claims + 1)
        assert "1870" in draft.text
    # No value asked for: nothing joins beyond max_claims.
    plain = await ExtractiveWriter(max_claims=1).write(
        "Describe the orchard keeping appointments of Varland", evidence, mode="answer"
    )
    assert len(plain.claims) == 1


async def test_a_how_to_answer_adds_no_claim_about_another_task() -> None:
    lru = EvidenceChunk(id="f", title="functools.lru_cache", doc_id="f", text=(
        "Least-recently-used cache decorator.\n\nArguments to the cached function must be "
        "hashable."))
    thread = EvidenceChunk(id="t", title="asyncio.to_thread", doc_id="t", text=(
        "Asynchronously run function func in a separate thread.\n\nReturn a coroutine that "
        "can be awaited to get the eventual result of func."))
    draft = await ExtractiveWriter(max_claims=3, min_gain=0.15).write(
        "How can I cache the results of an expensive function call?", [lru, thread])
    assert draft.claims and draft.claims[0].source_id == "f"
    assert all(c.source_id == "f" for c in draft.claims), draft.text  # nothing about threads
