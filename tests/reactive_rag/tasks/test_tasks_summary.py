"""The extractive summary: exact quotes, central sentences, resumable state."""

from __future__ import annotations

import json

import pytest

from actors.models import HashingEmbedder
from actors.text import split_sentences
from reactive_rag.tasks import SummaryState

CHUNKS = [
    ("rivers#0", "Rivers carry water from mountains to the sea. The river valley is fertile. "
                 "Boats float."),
    ("rivers#1", "Most rivers carry sediment and water toward the sea. Fish swim in rivers "
                 "and lakes. My neighbour owns a red bicycle with two bells."),
    ("rivers#2", "Floods happen when rivers carry more water than their banks can hold. "
                 "Dams store river water for dry seasons."),
]


def summarise(state: SummaryState, embedder: HashingEmbedder) -> SummaryState:
    state.start([t for _, t in CHUNKS], embedder)
    while not state.complete:
        cid, text = CHUNKS[state.done]
        state.add_chunk(cid, text, embedder)
    return state


def test_sentences_are_exact_substrings_of_their_text() -> None:
    text = 'He said "stop." Then left!  What now?\nA new line without a stop'
    sentences = [text[a:b] for a, b in split_sentences(text)]
    assert sentences == ['He said "stop."', "Then left!", "What now?", "A new line without a stop"]
    assert all(s in text for s in sentences)


def test_summary_quotes_exactly_and_prefers_central_sentences() -> None:
    embedder = HashingEmbedder()
    result = summarise(SummaryState(len(CHUNKS), 3), embedder).result()
    texts = dict(CHUNKS)
    assert len(result) == 3
    for sentence in result:
        assert sentence["text"] in texts[sentence["chunk_id"]]
    assert not any("bicycle" in s["text"] for s in result)  # off-topic sentence left out
    assert "Boats float." not in [s["text"] for s in result]  # too short to carry content
    order = [(s["chunk_id"], texts[s["chunk_id"]].index(s["text"])) for s in result]
    assert order == sorted(order), "summary sentences are in document order"


def test_a_state_restored_from_json_ends_with_the_same_summary() -> None:
    embedder = HashingEmbedder()
    whole = summarise(SummaryState(len(CHUNKS), 2), embedder).result()

    half = SummaryState(len(CHUNKS), 2)
    half.start([t for _, t in CHUNKS], embedder)
    half.add_chunk(*CHUNKS[0], embedder)
    restored = SummaryState.from_json(json.loads(json.dumps(half.to_json())))
    assert restored.done == 1
    assert summarise(restored, embedder).result() == whole


@pytest.mark.parametrize("data", [None, [], {"total": 3}, {"total": 1, "sentences": 1,
                                                           "done": 0, "centroid": None}])
def test_malformed_state_is_refused_clearly(data: object) -> None:
    with pytest.raises(ValueError, match="summary state"):
        SummaryState.from_json(data)


def test_add_chunk_before_start_is_a_usage_error() -> None:
    with pytest.raises(RuntimeError, match="start"):
        SummaryState(1, 1).add_chunk("x#0", "Some text here for you.", HashingEmbedder())
