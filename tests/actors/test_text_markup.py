"""clean_markup: prose without markup, code kept as code; looks_like_code tells them apart."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.text import chunk_text, clean_markup, looks_like_code, split_sentences


def _sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in split_sentences(text)]


def test_comments_are_removed_even_across_lines() -> None:
    text = "<!-- YAML\nadded: v1.2\n-->\nThe widget spins. <!-- inline note --> It stops."
    out = clean_markup(text)
    assert out == "The widget spins. It stops."


def test_html_tags_go_their_text_stays_and_entities_are_decoded() -> None:
    text = '<p align="center">A <b>bold</b> &amp; <a href="x.html">linked</a> word.</p><br>Next.'
    out = clean_markup(text)
    assert "<" not in out and ">" not in out and "&amp;" not in out
    assert "A bold & linked word." in out and "Next." in out


def test_script_and_style_elements_are_dropped_with_their_content() -> None:
    out = clean_markup(
        "Before.<script>var tracking = 1;</script><style>p{color:red}</style> After."
    )
    assert "tracking" not in out and "color" not in out
    assert "Before." in out and "After." in out


@pytest.mark.parametrize(
    "text",
    [
        "## Spinning widgets ##\n\nWidgets spin when pushed.",
        "Spinning widgets\n================\n\nWidgets spin when pushed.",
        "Spinning widgets\n----------------\nWidgets spin when pushed.",
        "<h3>Spinning widgets</h3><p>Widgets spin when pushed.</p>",
    ],
)
def test_headings_lose_their_markers_and_become_labels(text: str) -> None:
    out = clean_markup(text)
    assert _sentences(out) == ["Spinning widgets:", "Widgets spin when pushed."]


def test_emphasis_links_images_and_roles_keep_only_their_text() -> None:
    text = (
        "Use **strong** and *light* and _two words_ and ~~old~~ text, see "
        '[the guide](http://x.org/a_(b) "Title") or [ref text][1] and ![a diagram](d.png), '
        "call :func:`~pkg.run_all` or "
        "``pkg.stop`` or `pkg.pause`, read `the manual <http://x.org>`_.\n\n[1]: http://x.org/ref"
    )
    out = clean_markup(text)
    assert out == (
        "Use strong and light and two words and old text, see the guide or ref text and "
        "a diagram, call pkg.run_all or pkg.stop or pkg.pause, read the manual."
    )


def test_names_with_underscores_and_stars_in_arithmetic_are_not_emphasis() -> None:
    text = "Override __init__ and call lru_table, _private_helper or 2*3*4 with *args."
    assert clean_markup(text) == text


def test_fenced_code_stays_code_without_its_fence_markers() -> None:
    text = (
        "Intro sentence here.\n\n```python\nx = load('a.txt')  # Reads it. Then parses.\n"
        "print(x)\n```\nAfter it."
    )
    out = clean_markup(text)
    assert "```" not in out and "python" not in out
    sentences = _sentences(out)
    # The block is one unit: its comment's periods end no sentence.
    assert sentences == [
        "Intro sentence here.",
        "x = load('a.txt')  # Reads it. Then parses.\n    print(x)",
        "After it.",
    ]
    assert looks_like_code(sentences[1])
    assert "    x = load" in out  # indented: recognisable as code by its shape


def test_rest_literal_blocks_and_doctests_stay_code() -> None:
    text = (
        "The proper way to use this is::\n\n    for item in feed(src):\n"
        "        result = await item  # May raise.\n        # Use result.\n\n"
        ">>> total(1, 2)\n3\n\nPlain closing sentence."
    )
    out = clean_markup(text)
    sentences = _sentences(out)
    assert sentences[0] == "The proper way to use this is:"
    assert sentences[-1] == "Plain closing sentence."
    code = sentences[1:-1]
    assert len(code) == 2 and all(looks_like_code(c) for c in code)
    assert not any(s.strip() == "# Use result." for s in sentences)


def test_html_pre_block_stays_code() -> None:
    out = clean_markup("<p>Run it.</p><pre>make all\nmake  test. done</pre><p>Done.</p>")
    sentences = _sentences(out)
    assert "make all\n    make  test. done" in sentences
    assert sentences[0] == "Run it." and sentences[-1] == "Done."


def test_lists_tables_rules_and_quotes_lose_their_markers() -> None:
    text = (
        "Steps to follow:\n- first bullet item\n* second bullet item\n1. numbered item\n\n"
        "| name | size |\n|------|------|\n| bolt | 4 |\n\n---\n\n> A quoted line of text."
    )
    out = clean_markup(text)
    assert "- first" not in out and "* second" not in out and "---" not in out
    assert "|------|" not in out and "> A" not in out
    assert _sentences(out)[:4] == [
        "Steps to follow:", "first bullet item", "second bullet item", "1. numbered item",
    ]
    assert "A quoted line of text." in out


def test_prose_passes_through_unchanged_but_for_spacing() -> None:
    text = (
        "The 2015 Diamond Head Classic was a college basketball tournament held in "
        "Honolulu, Hawaii.  Buddy Hield was named the tournament's MVP (most valuable player)."
    )
    assert clean_markup(text) == " ".join(text.split())


def test_hanging_indents_of_prose_are_not_code() -> None:
    text = "Args:\n    size: how many widgets to build.\n    name: what to call them."
    out = clean_markup(text)
    assert not out.startswith(" ") and "\n " not in out
    assert not looks_like_code(_sentences(out)[0])


@pytest.mark.parametrize(
    "text",
    [
        "widgets.build_all(count=3, *, name=None)",
        "render(frame, scale[, offset]) -> image",
        "Widget.spin()",
        "x = compute(1, 2)",
        "result = await task  # May raise.",
        "import widgets",
        "return value",
        "for item in items:\n    handle(item)",
        ">>> spin(3)",
        "See: https://example.org/wiki/Some_page#Part_(x)",
        "WIDGET_DEFAULTS",
    ],
)
def test_code_signatures_and_identifiers_look_like_code(text: str) -> None:
    assert looks_like_code(text)


@pytest.mark.parametrize(
    "text",
    [
        "Return a future aggregating results from the given tasks.",
        "For example, f(3.0) and f(3) will be treated as distinct calls.",
        "If typed is True, arguments of different types are kept apart.",
        "Clear the cache and statistics with f.cache_clear().",
        "str -> Construct a date from a string in ISO 8601 format.",
        "He was born on December 17, 1992 in Freeport, Bahamas.",
        "Simple lightweight unbounded cache.",
        "The well-known U.S. city, e.g. Boston, is old.",
    ],
)
def test_prose_mentioning_code_is_not_code(text: str) -> None:
    assert not looks_like_code(text)


def test_chunks_of_cleaned_text_never_split_a_code_block() -> None:
    prose = " ".join(f"Sentence number {i} says something plain." for i in range(40))
    code = "\n".join(f"value_{i} = compute({i})  # Step {i}. Next." for i in range(12))
    text = clean_markup(f"{prose}\n\n```\n{code}\n```\n\n{prose}")
    chunks = chunk_text(text, target_words=80, overlap_ratio=0.1, max_words=120)
    holding = [c for c in chunks if "value_0 =" in c.text]
    assert holding and all("value_11 =" in c.text for c in holding)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400))
def test_any_text_gives_text_without_comment_markers(text: str) -> None:
    out = clean_markup(text)
    assert "<!--" not in out and "\x00" not in out


def test_rows_of_a_docstring_table_are_paragraphs_not_one_run_on() -> None:
    text = (
        "Main functions:\n"
        "    spin      Turn the widget around its axis.\n"
        "    stop      Halt the widget at once\n"
        "              and keep it there.\n"
        "build(...): Make a widget from parts.\n"
        "PARTS:   Default parts used by build\n\n"
        "Closing sentence of the text."
    )
    assert _sentences(clean_markup(text)) == [
        "Main functions:",
        "spin Turn the widget around its axis.",
        "stop Halt the widget at once and keep it there.",
        "build(...): Make a widget from parts.",
        "PARTS: Default parts used by build",
        "Closing sentence of the text.",
    ]
