"""Long chunks split where a manual's structure starts a new item, offsets intact."""

from __future__ import annotations

import itertools

from actors.text import chunk_text

_FILLER = ("The setting changes how the widget behaves when it is spun under load. "
           "Larger values make it spin longer before it stops on its own. ")


def _entry(name: str) -> str:
    return f"{name}:\n\n{_FILLER * 2}The default is {len(name)} turns."


def _check_offsets(text: str) -> None:
    for c in chunk_text(text):
        assert c.text == text[c.start:c.end]


def test_a_chunk_covering_several_parameters_splits_into_one_per_parameter() -> None:
    text = "Widget settings:\n\n" + "\n\n".join(
        _entry(n) for n in ("spin_speed", "spin_limit", "wobble", "drag_factor"))
    chunks = chunk_text(text)
    _check_offsets(text)
    assert len(text) > 1100 and len(chunks) == 4
    # each chunk leads with its own label and holds that parameter's default only
    assert chunks[0].text.startswith("Widget settings:\n\nspin_speed:")
    for chunk, name in zip(chunks[1:], ("spin_limit", "wobble", "drag_factor"), strict=True):
        assert chunk.text.startswith(f"{name}:")
        assert chunk.text.count("The default is") == 1


def test_definition_terms_and_headings_start_chunks_without_overlap() -> None:
    text = ("Installing:\n\n" + _FILLER * 2 + "\n\nRemoving:\n\n" + _FILLER * 2
            + "\n\n--force  " + _FILLER)
    chunks = chunk_text(text)
    _check_offsets(text)
    assert [c.text.split("\n")[0][:9] for c in chunks] == ["Installin", "Removing:"]
    assert "Installing" not in chunks[1].text


def test_for_example_lead_ins_do_not_start_an_item() -> None:
    text = _FILLER * 3 + "\n\nFor example:\n\n    spin(3)\n\n" + _FILLER
    chunks = chunk_text(text)
    assert len(chunks) == 1


def test_numbered_items_only_cut_a_chunk_that_is_half_full() -> None:
    items = "\n\n".join(f"{i}. Short step number {i} of the recipe." for i in range(1, 9))
    assert len(chunk_text(items)) == 1
    long_items = "\n\n".join(f"{i}. {_FILLER * 5}" for i in range(1, 5))
    chunks = chunk_text(long_items)
    _check_offsets(long_items)
    assert [c.text[:3] for c in chunks] == ["1. ", "2. ", "3. ", "4. "]


def test_plain_prose_paragraphs_chunk_as_before() -> None:
    text = "\n\n".join(_FILLER * 3 for _ in range(6))
    chunks = chunk_text(text, target_words=100)
    _check_offsets(text)
    # overlapping windows as ever: each chunk after the first starts with the last one's tail
    for a, b in itertools.pairwise(chunks):
        assert b.start < a.end
