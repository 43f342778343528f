"""The final rerank's order counts in the pick: a reworded question's answer is not
pushed out by passages that only share more of the asker's words."""

from __future__ import annotations

from reactive_rag.judgement.offline._evidence_pick import select_evidence
from streams import EvidenceChunk


def page(cid: str, title: str, text: str) -> EvidenceChunk:
    return EvidenceChunk(id=cid, title=title, text=text, doc_id=cid)


Q = "How do I keep my program's settings between runs without a database?"
# The rerank put the answer first (it is close in meaning); it shares no word with Q.
ANSWER = page("shelve", "shelve.open",
              "Open a persistent dictionary backed by a file on disk.")
WORDY = [
    page("db", "dbm", "A database program keeps its settings in a database between runs."),
    page("cfg", "configparser", "Settings of a program, read from an INI file."),
    page("run", "runpy", "Runs a program without importing it first."),
    page("sys", "sys.flags", "Flags the program was started with, its settings."),
]


def test_the_reranks_first_chunk_stays_in_the_pick() -> None:
    pool = [ANSWER, *WORDY]
    picked = select_evidence(Q, pool, k=3, ranked=len(pool))
    assert ANSWER in picked


def test_without_the_rerank_order_only_the_words_count() -> None:
    # The same pool given without its rerank order (a caller that has none): the
    # lexical match alone decides and the reworded answer drops out.
    pool = [ANSWER, *WORDY]
    assert ANSWER not in select_evidence(Q, pool, k=3)


def test_a_chunk_after_the_shortlist_gains_nothing_from_its_place() -> None:
    # A second hop the selector added after the rerank's shortlist is not ranked.
    pool = [*WORDY, ANSWER]
    assert ANSWER not in select_evidence(Q, pool, k=3, ranked=len(WORDY))
