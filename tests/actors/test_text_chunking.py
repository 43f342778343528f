"""chunk_text: sentence boundaries, overlap, offsets and neighbour positions."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.text import chunk_text, split_sentences


def _sentence(i: int, words: int = 12) -> str:
    return f"Sentence{i} " + " ".join(f"w{i}x{j}" for j in range(words - 2)) + " end."


def test_sentences_split_at_punctuation_not_abbreviations() -> None:
    text = (
        'Dr. Smith met Mr. Jones, e.g. at 5 p.m. in the U.S. He said "Hi!" Then left?\n\n'
        "New part"
    )
    got = [text[a:b] for a, b in split_sentences(text)]
    assert got == [
        "Dr. Smith met Mr. Jones, e.g. at 5 p.m. in the U.S. He said \"Hi!\"",
        "Then left?",
        "New part",
    ]


def test_chunks_never_split_a_sentence_and_offsets_are_exact() -> None:
    text = " ".join(_sentence(i) for i in range(60))
    chunks = chunk_text(text, target_words=50, overlap_ratio=0.1, max_words=80)
    assert len(chunks) > 5
    for c in chunks:
        assert text[c.start : c.end] == c.text
        assert c.text.startswith("Sentence") and c.text.endswith("end.")
        assert c.word_count == len(c.text.split()) <= 80
    assert chunks[0].start == 0 and chunks[-1].end == len(text)


def test_neighbours_overlap_by_about_ten_percent() -> None:
    text = " ".join(_sentence(i, words=10) for i in range(100))
    chunks = chunk_text(text, target_words=100, overlap_ratio=0.1)
    assert [c.position for c in chunks] == list(range(len(chunks)))
    for prev, nxt in itertools.pairwise(chunks):
        shared = text[nxt.start : prev.end]
        assert nxt.start < prev.end, "consecutive chunks must overlap"
        words = len(shared.split())
        assert 10 <= words <= 20  # one or two 10-word sentences of a 100-word chunk
        assert nxt.start > prev.start  # progress


def test_whole_text_is_covered_in_order() -> None:
    text = " ".join(_sentence(i, words=7) for i in range(200))
    chunks = chunk_text(text, target_words=60)
    covered_to = 0
    for c in chunks:
        assert c.start <= covered_to + 1  # no gap (at most the separating space)
        covered_to = max(covered_to, c.end)
    assert covered_to == len(text)


def test_overlong_sentence_is_cut_into_windows() -> None:
    long = " ".join(f"tok{i}" for i in range(700)) + "."
    text = "Intro sentence here. " + long + " Outro sentence."
    chunks = chunk_text(text, target_words=200, max_words=300)
    assert all(c.word_count <= 300 for c in chunks)
    assert chunks[0].text == "Intro sentence here."
    assert any("tok699." in c.text for c in chunks)
    assert chunks[-1].text.endswith("Outro sentence.")


def test_short_and_empty_texts() -> None:
    assert chunk_text("") == []
    assert chunk_text("   \n\n ") == []
    [only] = chunk_text("Just one sentence.")
    assert (only.text, only.position, only.start, only.end) == ("Just one sentence.", 0, 0, 18)


def test_defaults_give_chunks_in_the_200_300_word_range() -> None:
    text = " ".join(_sentence(i, words=18) for i in range(300))
    chunks = chunk_text(text)
    assert all(180 <= c.word_count <= 300 for c in chunks[:-1])


@pytest.mark.parametrize(
    "kwargs",
    [dict(target_words=0), dict(target_words=300, max_words=200), dict(overlap_ratio=0.6)],
)
def test_bad_sizes_raise(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        chunk_text("Some text.", **kwargs)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab .!?\n"), max_size=400),
       st.integers(min_value=1, max_value=30))
def test_any_text_gives_valid_chunks(text: str, target: int) -> None:
    chunks = chunk_text(text, target_words=target, max_words=target * 2)
    for i, c in enumerate(chunks):
        assert c.position == i and text[c.start : c.end] == c.text and c.text.strip() == c.text
        assert c.word_count <= target * 2
    words_in = len(text.split())
    assert (words_in == 0) == (not chunks)


def test_a_long_sentence_after_another_is_cut_into_its_own_words() -> None:
    text = "Short one. " + " ".join(f"w{i}" for i in range(50)) + "."
    chunks = chunk_text(text, target_words=10, max_words=20)
    assert chunks[0].text == "Short one."
    assert chunks[1].text.startswith("w0 w1") and chunks[-1].text.endswith("w49.")
    assert all(text[c.start:c.end] == c.text for c in chunks)
