"""HTML to clean main text: the article stays, menus, banners and footers go."""

from __future__ import annotations

import pytest

from actors.scrape import ExtractionFailed, extract_html
from actors.scrape._extract import extract_selectolax, trafilatura_available

from ._scrape_fixtures import BOILERPLATE, MAIN_PARAGRAPHS, article_html


def test_main_text_is_kept_and_boilerplate_removed() -> None:
    got = extract_html(article_html())
    for p in MAIN_PARAGRAPHS:
        assert p in got.text
    for b in BOILERPLATE:
        assert b not in got.text
    assert "track()" not in got.text and "font-family" not in got.text
    assert "Section 3" not in got.text  # the menu
    assert got.title == "The shrinking delta | Example News"


def test_paragraphs_are_separated_by_blank_lines() -> None:
    got = extract_selectolax(article_html())
    assert f"{MAIN_PARAGRAPHS[0]}\n\n{MAIN_PARAGRAPHS[1]}" in got.text


def test_pages_without_semantic_tags_still_yield_their_text() -> None:
    html = ("<html><body><div class='top'><a href=/>Home</a> <a href=/x>X</a></div>"
            + "".join(f"<div class='c'>{p}</div>" for p in MAIN_PARAGRAPHS)
            + "<div class='footer'>Copyright 2024 Example</div></body></html>")
    got = extract_html(html)
    assert all(p in got.text for p in MAIN_PARAGRAPHS)
    assert "Copyright" not in got.text


def test_inline_markup_does_not_split_words() -> None:
    got = extract_html("<article><p>Photo<b>synthesis</b> uses <a href=/l>light</a> "
                       "energy to make sugars in every green leaf of the plant.</p></article>")
    assert "Photosynthesis uses light energy" in got.text


def test_a_page_with_no_text_fails_with_a_typed_error() -> None:
    with pytest.raises(ExtractionFailed):
        extract_html("<html><head><script>x()</script></head><body><img src=a.png></body></html>")


def test_hostile_markup_does_not_crash() -> None:
    html = ("<div>" * 5000 + "deep text that is still text " * 20 + "</div>" * 10
            + "<p><<<>>>&&&#x0;")
    got = extract_html(html)
    assert "deep text" in got.text


@pytest.mark.skipif(not trafilatura_available(), reason="trafilatura not installed")
def test_trafilatura_can_be_chosen() -> None:
    got = extract_html(article_html(), extractor="trafilatura")
    assert got.extractor == "trafilatura"
    assert MAIN_PARAGRAPHS[2] in got.text


def test_code_blocks_keep_their_lines() -> None:
    html = ("<main><p>Install the package and call the function as shown below, then read "
            "the result from the returned object.</p><pre><code>import pkg\n"
            "result = pkg.run(3)\nprint(result)</code></pre></main>")
    assert "import pkg\nresult = pkg.run(3)\nprint(result)" in extract_html(html).text


def test_extraction_order_follows_the_config() -> None:
    from actors.scrape._extract import extraction_order

    assert extraction_order("selectolax", fallback=False) == ["selectolax"]
    with_fallback = extraction_order("selectolax")
    assert with_fallback[0] == "selectolax"
    assert with_fallback[1:] == (["trafilatura"] if trafilatura_available() else [])
    assert extraction_order("auto", fallback=False) == (
        ["trafilatura"] if trafilatura_available() else ["selectolax"])
