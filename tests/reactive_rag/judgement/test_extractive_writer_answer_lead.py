"""The offline writer's answer sentence: about the question, holding what it asks, up front.

Every name below is invented; each case mirrors a way a related-but-wrong
sentence used to win (a passage about something else, a restatement of the
question, another number, a common word shared with the question).
"""

from __future__ import annotations

from reactive_rag.agent import verify
from reactive_rag.judgement import Draft
from reactive_rag.judgement.offline import ExtractiveWriter
from streams import EvidenceChunk


async def _write(question: str, evidence: list[EvidenceChunk]) -> Draft:
    draft = await ExtractiveWriter(max_claims=3, min_gain=0.15).write(question, evidence)
    assert 1 <= len(draft.claims) <= 4
    assert verify(draft.claims, {c.id: c for c in evidence}, question=question).passed
    return draft


def _position(draft: Draft, text: str) -> int | None:
    return next((i for i, c in enumerate(draft.claims) if text in c.quote), None)


OTTERS = EvidenceChunk(id="otters", title="Kelton Otters", text=(
    "The Kelton Otters were a junior ice hockey team of the Northern League based in Kelton.  "
    "The team played its home games at the Riverside Dome.  They won the league title twice."))
DOME = EvidenceChunk(id="dome", title="Riverside Dome", text=(
    "The Riverside Dome (formerly Kelton Civic Hall) is a 5,000 capacity (4,200 seated) "
    "multi-purpose arena in Kelton that opened in 1961."))
BULLS = EvidenceChunk(id="bulls", title="Marlow Bulls", text=(
    "The Marlow Bulls were a junior ice hockey organization based in Marlow.  They most "
    "recently played home games at the 550-seat Centennial Arena and due to the arena's small "
    "size, the Bulls frequently sold out games."))


async def test_a_passage_about_nothing_the_question_names_does_not_lead() -> None:
    draft = await _write(
        "The arena where the Kelton Otters played their home games can seat how many people?",
        [BULLS, OTTERS, DOME],
    )
    # The Bulls' sentence shares more of the question's words ("played home games",
    # "arena", "seat"), but it is about another team; the Dome is the Otters' next hop.
    assert draft.claims[0].source_id != "bulls"
    assert _position(draft, "4,200 seated") in (0, 1)


async def test_a_value_question_leads_with_the_sentence_holding_the_value() -> None:
    draft = await _write(
        "The arena where the Kelton Otters played their home games can seat how many people?",
        [OTTERS, DOME],
    )
    assert "4,200" in draft.claims[0].quote


CARROW = EvidenceChunk(id="carrow", title="Carrow, Vermont", text=(
    "Carrow is a town in Dane County, Vermont.  Located at the intersection of Routes 12 and "
    "40, the town has long been a crossroads for travelers.  It has a public library and two "
    "parks.  Carrow's population was 6,410 at the 2010 census."))
ROUTE = EvidenceChunk(id="route", title="Route 40 in Vermont", text=(
    "Route 40 is the longest highway within the borders of Vermont.  It runs from the "
    "Massachusetts line to the Canadian border."))


async def test_a_quantity_question_quotes_the_sentence_naming_that_quantity() -> None:
    draft = await _write(
        "What is the population of the town at the intersection of Route 12 and the longest "
        "highway within the borders of Vermont?", [CARROW, ROUTE],
    )
    # "Routes 12 and 40" is a number the question does not give, but not a population.
    assert _position(draft, "6,410") in (0, 1)


LANTERNS = EvidenceChunk(id="la", title="Lantern Awards", text=(
    "The Lantern Awards (originally known as the Friends of Film Awards), founded in 1990, are "
    "awards dedicated to independent filmmakers.  Winners were typically presented with glass "
    "lanterns representing the small budgets of independent films."))
NINTH = EvidenceChunk(id="aw", title="9th Lantern Awards", text=(
    "The 2002 Lantern Awards, honouring the best in independent filmmaking for 2002, were "
    "announced on March 22, 2003.  It was hosted by Dana Brook."))
BROOK = EvidenceChunk(id="db", title="Dana Brook", text=(
    "Dana Brook (born April 2, 1946) is an American film director and author."))


async def test_the_answer_says_the_asked_relation_not_a_common_word_of_the_question() -> None:
    draft = await _write(
        "Which American film director hosted the 9th Lantern Awards in 2002?",
        [LANTERNS, NINTH, BROOK],
    )
    # "films" is a word of the question too, and "Winners" looks like a name, but only
    # "hosted by" says what is asked.
    assert _position(draft, "It was hosted by Dana Brook.") in (0, 1)


WREN = EvidenceChunk(id="wren", title="The Legend of Wren", text=(
    "The Legend of Wren is an American animated television series that aired on the Pallas "
    "network from 2012 to 2014.  It was created by Ann Vole and Rey Omond as a sequel to "
    "\"Tide\", which aired from 2005 to 2008."))
KIVA = EvidenceChunk(id="kiva", title="Kiva", text=(
    "Kiva is a fictional character in \"The Legend of Wren\", created by Ann Vole and Rey "
    "Omond.  Introduced in the third season of the series, she becomes the main antagonist of "
    "the fourth season."))


async def test_a_sentence_that_only_restates_the_question_does_not_lead() -> None:
    question = (
        "What season was the character introduced that becomes the main antagonist in the "
        "following season, from the animated series created by Ann Vole and Rey Omond as a "
        "sequel to \"Tide\", which aired from 2005 to 2008?"
    )
    draft = await _write(question, [WREN, KIVA])
    assert "It was created by Ann Vole" not in draft.claims[0].quote
    assert _position(draft, "third season") is not None


HOLLIS = EvidenceChunk(id="hollis", title="Tobias Hollis", text=(
    "Tobias Hollis (July 19, 1924 - January 3, 2009) was an American actor who appeared in "
    "hundreds of television shows and feature films.  His first film was \"Dock Street\" in "
    "1954.  Hollis was a close friend of Carl Easton and appeared in the Easton films \"High "
    "Noon Again\" and \"The Glove\"."))
EASTON = EvidenceChunk(id="easton", title="Carl Easton", text=(
    "Carl Easton Jr. (born May 31, 1930) is an American actor and filmmaker.  After achieving "
    "success in the Western TV series \"Dustline\", he rose to international fame with his "
    "role as the Man with No Name."))


async def test_the_answer_chunk_a_claim_links_to_gives_the_relation() -> None:
    draft = await _write(
        "Tobias Hollis was a close friend of an actor who achieved success in what Western TV "
        "series?", [HOLLIS, EASTON],
    )
    # The friend's name is in a claim; his own chunk says what he achieved success in.
    assert _position(draft, "\"Dustline\"") is not None


ALBUM = EvidenceChunk(id="album", title="Sunfire: The New Broadway Cast Recording", text=(
    "Sunfire: The New Broadway Cast Recording is the cast album for the 2007 Broadway "
    "production of the hit musical \"Sunfire\"."))
QUIST = EvidenceChunk(id="quist", title="Mara Quist", text=(
    "Mara Ellen Quist (born November 19, 1985) is an American actress and singer known for "
    "her work on the Broadway stage.  She starred in \"Glass Slipper\" on Broadway, for which "
    "she received a Drama Desk Award.  She was part of the cast album for the 2007 Broadway "
    "production of \"Sunfire\"."))


async def test_a_who_answer_is_introduced_even_when_the_lead_is_another_chunks_first() -> None:
    draft = await _write(
        "What is the name of the actress who has received a Drama Desk award and was part of "
        "the cast album for the 2007 Broadway production of the hit musical \"Sunfire\"?",
        [ALBUM, QUIST],
    )
    # The album's own first sentence leads; the actress's chunk still says who she is.
    assert _position(draft, "Mara Ellen Quist (born") is not None


async def test_prose_opening_with_an_acronym_is_a_claim_a_table_row_is_not() -> None:
    workshop = EvidenceChunk(id="ws", title="KBX Theatre Hour", text=(
        "KBX Theatre Hour is an American anthology series which aired on KBX from January to "
        "April 1952.  The series is noted for early appearances of several actors."))
    table = EvidenceChunk(id="tb", title="stream constants", text=(
        "PIPE Special value that can be used as the input of a stream."))
    draft = await _write("What year did the anthology series on KBX air?", [workshop, table])
    assert draft.claims[0].quote.startswith("KBX Theatre Hour is an American anthology series")
    assert "tb" not in {c.source_id for c in draft.claims}


LATTICE = EvidenceChunk(id="lattice", title="Lattice (protocol)", text=(
    "Lattice is a replication protocol designed as an alternative to the Quorra family of "
    "protocols.  It was meant to be easier to teach than Quorra.  Lattice was designed by "
    "Ilse Marrow and Tomas Venn at Harlow University in 2011."))
QUORRA = EvidenceChunk(id="quorra", title="Quorra", text=(
    "Quorra is a family of protocols for reaching agreement among unreliable machines."))


async def test_a_sentence_saying_the_asked_relation_with_a_person_leads_over_a_next_hop() -> None:
    # "Who designed X?": X's own sentence "X was designed by <person>" is the answer; the
    # page of another thing X's first sentence names (a next hop) is not.
    draft = await _write("Who designed Lattice?", [LATTICE, QUORRA])
    assert _position(draft, "designed by Ilse Marrow") == 0
