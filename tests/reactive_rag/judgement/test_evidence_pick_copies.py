"""The final evidence pick: copies take no place, a named second hop the rerank left out is kept.

States and chunks are built directly; the machine's steps are driven with facts.
"""

from __future__ import annotations

from reactive_rag.judgement.offline._evidence_pick import named_hops, select_evidence, title_keys
from reactive_rag.run import Phase, RunState, initial_state, step
from streams import (
    AnswerRequested,
    EvidenceChunk,
    EvidenceSelected,
    Hit,
    PlanDecided,
    RerankCompleted,
    RerankRequested,
    RunStarted,
    SearchCompleted,
    SelectionRequested,
    ToolCall,
)

Q = "Which river flows through the capital of the Kingdom of Lirea?"
LIREA = ("The Kingdom of Lirea is a small state on the western coast. Its capital is Port "
         "Orvel, a city built where two roads meet near the coast.")


def page(cid: str, text: str, title: str, host: str = "wiki.example") -> EvidenceChunk:
    return EvidenceChunk(id=cid, text=text, title=title, url=f"https://{host}/{cid}",
                         source="scraper")


def test_a_mirror_of_a_chosen_page_takes_no_place_and_the_second_hop_gets_it() -> None:
    original = page("w1", LIREA, "Kingdom of Lirea")
    mirror = page("m1", LIREA.replace(" the ", " "), "Kingdom of Lirea | Mirror", "mirror.example")
    other = page("w2", "The Kingdom of Lirea joined the coastal league of the western states "
                       "in the old century.", "Lirea history")
    hop = page("w3", "Port Orvel is a city; the river Tamsin flows through it to the sea.",
               "Port Orvel")
    picked = select_evidence(Q, [original, mirror, other, hop], [Q, "Port Orvel river"], k=3)
    ids = [c.id for c in picked]
    assert not {"w1", "m1"} <= set(ids)  # one copy of the text, not two
    assert "w3" in ids and len(ids) == 3


def test_of_two_copies_the_one_from_the_host_most_evidence_comes_from_is_kept() -> None:
    mirror = page("m1", LIREA + " A river flows by.", "Kingdom of Lirea | Mirror",
                  "mirror.example")
    original = page("w1", LIREA, "Kingdom of Lirea")
    hop = page("w3", "Port Orvel is a city; the river Tamsin flows through it to the sea.",
               "Port Orvel")
    # The mirror ranks first (one more question word), yet the big site's copy is kept.
    picked = select_evidence(Q, [mirror, original, hop], k=2)
    assert [c.id for c in picked] == ["w1", "w3"]


def test_a_page_title_with_its_sites_name_still_names_the_page() -> None:
    assert "efl cup" in title_keys("EFL Cup - SimWiki")
    assert "port orvel" in title_keys("Port Orvel | Mirror")
    assert title_keys("Winner (band)") == ("winner",)
    lirea = page("w1", LIREA, "Kingdom of Lirea - Wiki")
    hop = page("w3", "A city on the coast, founded by traders.", "Port Orvel - Wiki")
    assert [c.id for c in named_hops([lirea], [hop])] == ["w3"]


def test_copies_still_fill_places_nothing_else_would_take() -> None:
    original = page("w1", LIREA, "Kingdom of Lirea")
    mirror = page("m1", LIREA, "Kingdom of Lirea", "mirror.example")
    assert [c.id for c in select_evidence(Q, [original, mirror], k=5)] == ["w1", "m1"]


def test_named_hops_are_the_chunks_whose_title_a_shortlisted_chunk_names() -> None:
    lirea = page("w1", LIREA, "Kingdom of Lirea")
    hop = page("w3", "A city on the coast, founded by traders.", "Port Orvel")
    stray = page("w4", "A mountain range in the east.", "Ambra Mountains")
    assert [c.id for c in named_hops([lirea], [stray, hop])] == ["w3"]
    assert named_hops([], [hop]) == []


# --- the run machine hands the selector what the final rerank left out -------------------------


def _shortlisted(kept: int) -> tuple[RunState, list[object], list[str]]:
    """A run whose one search found 4 web results; the final rerank keeps ``kept``."""
    state = initial_state(selects=True)
    state, _ = step(state, RunStarted(question=Q, ts=1_700_000_000.0))
    state, _ = step(state, PlanDecided(action="search", ts=1_700_000_001.0, calls=(
        ToolCall(id="s1", tool="search", args={"query": Q}),)))
    hits = tuple(Hit(url=f"https://site{i}.example/p", title=f"Page {i}",
                     snippet=f"the first words of page {i}", source="searxng")
                 for i in range(4))
    state, cmds = step(state, SearchCompleted(call_id="s1", query=Q, hits=hits))
    rerank = next(c for c in cmds if isinstance(c, RerankRequested))
    state, _ = step(state, RerankCompleted(call_id="s1", query=Q, chunks=rerank.candidates))
    state, cmds = step(state, PlanDecided(action="answer", ts=1_700_000_003.0))
    final = next(c for c in cmds if isinstance(c, RerankRequested))
    ids = [c.id for c in final.candidates]
    state, out = step(state, RerankCompleted(call_id="final", query=Q,
                                             chunks=final.candidates[:kept]))
    return state, list(out), ids


def test_the_selector_is_offered_what_the_final_rerank_left_out_and_may_pick_it() -> None:
    state, cmds, ids = _shortlisted(kept=2)
    request = next(c for c in cmds if isinstance(c, SelectionRequested))
    assert state.phase is Phase.CHOOSING
    assert request.candidate_ids == tuple(ids[:2]) and request.left_out == tuple(ids[2:])
    state, cmds = step(state, EvidenceSelected(ids=(ids[0], ids[3], "invented")))
    answer = next(c for c in cmds if isinstance(c, AnswerRequested))
    assert answer.evidence_ids == (ids[0], ids[3])


def test_without_a_choice_the_run_falls_back_to_the_shortlist_only() -> None:
    state, _, ids = _shortlisted(kept=1)
    state, cmds = step(state, EvidenceSelected(ids=()))
    answer = next(c for c in cmds if isinstance(c, AnswerRequested))
    assert answer.evidence_ids == (ids[0],)  # nothing left out sneaks in
