"""A passage whose text only repeats its title (a disambiguation stub) gives way to real pages."""

from __future__ import annotations

from reactive_rag.judgement.offline._evidence_pick import select_evidence
from streams import EvidenceChunk


def page(cid: str, title: str, text: str) -> EvidenceChunk:
    return EvidenceChunk(id=cid, title=title, text=text, doc_id=cid)


Q = 'When was the author of the novel behind "Round the Quince Tree" born?'
STUB = page("stub", "Round the Quince Tree (disambiguation)",
            "Round the Quince Tree (disambiguation)")
FILM = page("film", "Round the Quince Tree (film)", (
    "Round the Quince Tree is a 1967 film based on the novel of the same name by Edda "
    "Marsh, set in a quince tree town."))
SONG = page("song", "Round the Quince Tree (song)", (
    "Round the Quince Tree is a single by a folk band, the title song of the film."))
AUTHOR = page("author", "Edda Marsh", "Edda Marsh (born 7 January 1936) is an author.")


def test_the_real_page_is_picked_over_a_stub_of_its_title() -> None:
    # The stub's few words are all in the film's page, which made the film's page look
    # like the stub's copy and pushed it out of the pick.
    picked = select_evidence(Q, [STUB, FILM, SONG, AUTHOR], k=3)
    assert FILM in picked
    assert STUB not in picked


def test_a_stub_still_fills_a_place_nothing_else_wants() -> None:
    picked = select_evidence(Q, [STUB, FILM], k=3)
    assert picked == [FILM, STUB]
