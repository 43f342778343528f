"""A folder of hand-written HTML manual pages indexes into clean, item-sized chunks."""

from __future__ import annotations

from pathlib import Path

from reactive_rag.index import CorpusIndex, load_folder

from .._index_helpers import CountingEmbedder

_DESCRIPTION = ("This setting changes how the widget behaves when it\n    is spun under load. "
                "Larger values make it spin\n    longer before it stops on its own. ") * 2


def _page(names: list[str]) -> str:
    entries = "".join(
        f'<a name="{n}"></a><h _id={n} style="display:none"> {n}</h><hr>\n'
        f"    <p><b>SET {n} = </b><i>value</i><b>;</b></p>\n"
        f"    <p>{_DESCRIPTION}\n    The default is\n    {len(n)} turns.\n"
        for n in names
    )
    return (
        "<!DOCTYPE html>\n<html><head><title>Widget settings</title>"
        "<script>var tracking = 1;</script></head><body>\n"
        '<div class="menu"><ul><li><a href="index.html">Home</a>'
        '<li><a href="about.html">About</a></ul></div>\n'
        "<h1>Widget settings</h1>\n"
        "<table><tr><th>Setting<th>Default</tr><tr><td>spin\nspeed<td>40</tr></table>\n"
        f"{entries}</body></html>"
    )


def test_a_folder_of_html_pages_indexes_without_hard_wrap_artefacts(tmp_path: Path) -> None:
    root = tmp_path / "manual"
    root.mkdir()
    (root / "settings.html").write_text(_page(["spin_speed", "spin_limit", "wobble"]))
    (root / "index.html").write_text("<html><body><p>The widget\nmanual.</p></body></html>")
    docs = {d.id: d for d in load_folder(root)}
    assert docs["settings.html"].title == "Widget settings"
    with CorpusIndex(tmp_path / "idx", CountingEmbedder()) as idx:
        idx.index_documents("manual", docs.values())
        with idx.open("manual") as coll:
            chunks = [(coll.chunk_at(r).doc_id, coll.text_at(r)) for r in range(len(coll))]
        hits = idx.search("wobble default turns", collection="manual", k=1)
    texts = [t for d, t in chunks if d == "settings.html"]
    for text in texts:
        for marker in ("<", "tracking", "Home", "  ", "\n\n\n"):
            assert marker not in text, (marker, text)
        for paragraph in text.split("\n\n"):
            assert "\n" not in paragraph  # a hard-wrapped <p> is one paragraph
    assert texts[0].startswith("Widget settings:\n\nSetting | Default\n\nspin speed | 40")
    # one chunk per setting, led by its (hidden) heading, holding its own default only
    assert [t.split(":")[0] for t in texts[1:]] == ["spin_limit", "wobble"]
    assert all(t.count("The default is") == 1 for t in texts)
    best = hits[0].chunk.text
    assert best.startswith("wobble:") and "The default is 6 turns." in best
    assert dict(chunks)["index.html"] == "The widget manual."
