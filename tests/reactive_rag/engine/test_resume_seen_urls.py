"""A resumed run's searcher knows the pages the log registered, not every result returned."""

from __future__ import annotations

from actors.search import Searcher, SearcherActor
from streams import EvidenceChunk, EvidenceRegistered, Hit, SearchCompleted


def test_a_resumed_searcher_sees_the_registered_pages_only() -> None:
    kept = Hit(url="https://a.example/kept", title="Kept", snippet="kept words")
    passed = Hit(url="https://a.example/passed-over", title="Passed", snippet="other words")
    log = [
        SearchCompleted(call_id="s1", query="q", hits=(kept, passed)),
        EvidenceRegistered(chunks=(
            EvidenceChunk(id="web:1", url=kept.url, text="kept words", snippet=True),
            EvidenceChunk(id="local#0", url="corpus://docs/local", text="a corpus passage"),
        )),
    ]
    actor = SearcherActor(Searcher([]))
    actor.on_restore(log)  # its declared crash-resume hook
    # The passed-over result may come back to a later search; the kept one never does.
    assert actor.seen_urls == {kept.url}
