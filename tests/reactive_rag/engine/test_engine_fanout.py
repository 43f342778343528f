"""A run's plan step fans out, its expansion is published, and it reads on from search hits."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.models import HashingEmbedder
from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex, Document
from reactive_rag.judgement import Decision, PlannerView
from streams import QueriesExpanded, ReadCompleted, SearchCompleted, SearchRequested, ToolCall

FILLER = ("The survey party crossed the northern moors in early spring, mapping streams, "
          "stone walls and the old drove roads that linked the upland farms. ") * 14
DOCS = [
    Document(id="marlow", title="Marlow survey",
             text=("The Marlow survey was a mapping expedition of the northern moors. " + FILLER
                   + "Supplies reached the party by boat. The boat that carried them was "
                   "called the Saltwren, a flat-bottomed barge from the river port.")),
    Document(id="other", title="Moorland birds",
             text="Curlews and larks nest on the open moor in spring and leave in autumn."),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> CorpusIndex:
    idx = CorpusIndex(Path(tmp_path_factory.mktemp("fanout")), HashingEmbedder())
    idx.index_documents("notes", DOCS)
    return idx


class ReadOnFromTheTopHit:
    """Searches for one passage, then reads the passage after it, then answers."""

    name = "read-on"

    async def decide(self, view: PlannerView) -> Decision:
        if view.round == 1:
            return Decision(action="search", calls=(ToolCall(
                id="s", tool="search", args={"query": "Marlow survey mapping expedition",
                                             "k": 1}),))
        if view.round == 2:
            top = next(c for c in view.evidence if c.next_id)
            return Decision(action="read", calls=(ToolCall(
                id="r", tool="read", args={"chunk_id": top.id, "direction": "next"}),))
        return Decision(action="answer")


async def test_the_answer_in_the_chunk_after_a_search_hit_is_read_and_cited(
        index: CorpusIndex) -> None:
    assert len(index.neighbours("marlow#0", "next", 3, collection="notes")) >= 1
    engine = Engine(index, planner=ReadOnFromTheTopHit, judge=None)
    result = await engine.ask("What was the boat of the Marlow survey called?",
                              collections=["notes"])
    found = next(e for e in result.events if isinstance(e, SearchCompleted)).hits
    assert found[0].next_id and "Saltwren" not in (found[0].content or "")
    read = next(e for e in result.events if isinstance(e, ReadCompleted))
    assert read.chunks and read.chunks[0].prev_id == found[0].chunk_id
    assert any("Saltwren" in c.quote for c in (cite.claim for cite in result.citations))


async def test_round_one_searches_go_out_together_and_the_expansion_is_published(
        index: CorpusIndex) -> None:
    result = await Engine(index).ask("Who supplied the Marlow survey on the northern moors?",
                                     collections=["notes"])
    expanded = [e for e in result.events if isinstance(e, QueriesExpanded)]
    assert len(expanded) == 1 and len(expanded[0].queries) >= 2
    types = [e.type for e in result.events]
    first_reply = types.index("search.completed")
    round_one = [e for e in result.events if isinstance(e, SearchRequested)][
        : len(expanded[0].queries)]
    assert [r.query for r in round_one] == list(expanded[0].queries)
    assert all(result.events.index(r) < first_reply for r in round_one)  # all in flight at once
