"""HTML pages read as a browser shows them: no hard-wrap artefacts, tables as rows."""

from __future__ import annotations

from actors.text import clean_markup, split_sentences


def _sentences(text: str) -> list[str]:
    return [text[s:e] for s, e in split_sentences(text)]


PAGE = """<!DOCTYPE html>
<html><head><title>Widget manual</title></head>
<body>
<ul class="menu"><li><a href="index.html">Home</a><li><a href="docs.html">Docs</a></ul>
<h2>Permissions</h2>
    <p>To drop a widget one must ordinarily be the widget's owner or a
    member of the <a href="admin.html">admin</a>
    group.

    <p>Ownership can be handed over
       at any time.
<table>
<tr><th>Setting</th><th>Default</th></tr>
<tr><td>spin
    speed</td><td>40 rpm<br>(fast)</td></tr>
</table>
<dl>
<dt><code>--verbose</code>
<dd>Print every step
    as it runs.
<dt>--quiet</dt><dd><p>Print nothing.</p></dd>
</dl>
<p><b>WIDGET_MAX_SIZE=<i>&lt;N&gt;</i></b></p><blockquote><p>
  The largest widget, in bytes.
</p></blockquote>
<pre>spin --fast
  --twice</pre>
</body></html>
"""


def test_hard_wrapped_paragraphs_stay_whole_sentences() -> None:
    out = clean_markup(PAGE)
    assert ("To drop a widget one must ordinarily be the widget's owner or a member of the "
            "admin group.") in _sentences(out)
    assert "Ownership can be handed over at any time." in _sentences(out)
    for sentence in _sentences(out):
        assert "\n" not in sentence or sentence.startswith("spin --fast"), sentence  # code


def test_tables_become_one_text_row_per_table_row() -> None:
    out = clean_markup(PAGE)
    assert "\n\nSetting | Default\n\nspin speed | 40 rpm (fast)\n\n" in out


def test_definition_lists_headings_and_bold_terms_stay_labels() -> None:
    out = clean_markup(PAGE)
    assert out.startswith("Permissions:\n\n")
    assert "--verbose:\n\nPrint every step as it runs.\n\n--quiet:\n\nPrint nothing." in out
    assert "WIDGET_MAX_SIZE=<N>:\n\nThe largest widget, in bytes." in out


def test_menus_scripts_and_the_head_are_not_text_but_pre_stays_code() -> None:
    out = clean_markup(PAGE)
    assert "Home" not in out and "Widget manual" not in out
    assert out.endswith("    spin --fast\n      --twice")


def test_ordered_list_items_keep_their_numbers_and_a_layout_table_its_paragraphs() -> None:
    out = clean_markup(
        "<body><ol><li><p><b>Max length</b></p><p>One billion bytes.</p><li>Second.</ol>"
        "<table><tr><td><p>Left column text.</p></td><td><p>Right column text.</p></td></tr>"
        "</table></body>"
    )
    assert out == ("1. Max length:\n\nOne billion bytes.\n\n2. Second.\n\n"
                   "Left column text.\n\nRight column text.")


def test_markdown_with_a_little_html_is_still_read_as_markdown() -> None:
    out = clean_markup('<p align="center">Logo</p>\n\n# Title\n\n* item one\n\nText.')
    assert out == "Logo\n\nTitle:\n\nitem one\n\nText."
