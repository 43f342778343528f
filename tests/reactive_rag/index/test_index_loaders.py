"""Loading folders of files, the stdlib corpus, and the index/search CLI commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reactive_rag.index import (
    ChunkingConfig,
    CorpusIndex,
    DocumentLoadError,
    SkippedFile,
    load_file,
    load_folder,
    stdlib_documents,
)

from .._index_helpers import CountingEmbedder, run_index_cli


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "notes.txt").write_text("Plain notes about sourdough starters and rye flour.")
    (root / "guide.md").write_text("# Kayak Guide\n\nPaddle strokes: forward, sweep, draw.")
    (root / "sub" / "page.html").write_text(
        "<html><head><title>Ferns</title><style>p{color:red}</style></head><body>"
        "<nav>menu menu</nav><p>Ferns reproduce with spores.</p>"
        "<script>var tracking = 1;</script></body></html>"
    )
    (root / "image.png").write_bytes(b"\x89PNG")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "secret.txt").write_text("do not index")
    return root


def test_load_folder_reads_supported_files_with_metadata(folder: Path) -> None:
    docs = {d.id: d for d in load_folder(folder)}
    assert sorted(docs) == ["guide.md", "notes.txt", "sub/page.html"]
    assert docs["guide.md"].title == "Kayak Guide" and docs["guide.md"].doc_type == "md"
    page = docs["sub/page.html"]
    assert page.title == "Ferns" and page.doc_type == "html"
    assert "Ferns reproduce with spores." in page.text
    assert "tracking" not in page.text and "color" not in page.text and "menu" not in page.text
    assert docs["notes.txt"].url.startswith("file://") and docs["notes.txt"].date


def test_load_file_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(DocumentLoadError, match="unsupported file type"):
        load_file(tmp_path / "x.docx")
    with pytest.raises(DocumentLoadError, match="cannot read"):
        load_file(tmp_path / "missing.txt")
    with pytest.raises(DocumentLoadError, match="no such file"):
        list(load_folder(tmp_path / "nowhere"))


def test_unreadable_file_is_skipped_and_reported(folder: Path) -> None:
    bad = folder / "broken.pdf"  # no pypdf installed, or not a PDF at all: unreadable
    bad.write_bytes(b"this is not a pdf")
    skipped: list[SkippedFile] = []
    ids = [d.id for d in load_folder(folder, skipped=skipped)]
    assert "broken.pdf" not in ids
    assert sorted((s.path, s.reason) for s in skipped) == [
        (str(bad), "unreadable"), (str(folder / "image.png"), "binary")]
    assert sorted(ids) == ["guide.md", "notes.txt", "sub/page.html"]
    with pytest.raises(DocumentLoadError, match=r"broken\.pdf"):
        list(load_folder(folder))


def test_index_path_then_search(folder: Path, tmp_path: Path) -> None:
    with CorpusIndex(tmp_path / "idx", CountingEmbedder()) as idx:
        report = idx.index_path("mine", folder)
        assert report.documents == 3
        assert idx.search("spores", collection="mine", k=1)[0].chunk.doc_id == "sub/page.html"
        (folder / "notes.txt").unlink()
        report = idx.index_path("mine", folder)
        assert (report.documents, report.removed, report.unchanged) == (2, 1, 2)


def test_stdlib_corpus_is_deterministic_and_covers_key_modules() -> None:
    first = list(stdlib_documents())
    second = list(stdlib_documents())
    assert [d.content_hash() for d in first] == [d.content_hash() for d in second]
    ids = {d.id for d in first}
    assert {"asyncio", "json", "pathlib", "re", "collections", "itertools", "functools",
            "datetime", "sqlite3", "subprocess", "threading", "typing", "dataclasses",
            "logging", "argparse", "os", "shutil"} <= ids
    js = next(d for d in first if d.id == "json")
    assert "json.dumps" in js.text and js.url.endswith("/library/json.html")
    assert next(iter(stdlib_documents(["no_such_module_xyz", "json"]))).id == "json"


def test_stdlib_corpus_is_identical_in_another_process() -> None:
    # Reprs like <object object at 0x7f...> differ per process; they must not reach the
    # text, or every `make demo` would re-embed those modules.
    code = ("import json; from reactive_rag.index import stdlib_documents; "
            "print(json.dumps([d.content_hash() for d in stdlib_documents()]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[3])
    assert json.loads(out.stdout) == [d.content_hash() for d in stdlib_documents()]


def test_stdlib_corpus_answers_known_queries(tmp_path: Path) -> None:
    with CorpusIndex(tmp_path, CountingEmbedder()) as idx:
        idx.index_documents("stdlib", stdlib_documents(["json", "argparse", "sqlite3",
                                                        "shutil", "heapq"]))
        for query, gold in [
            ("serialize a Python object to a JSON formatted string", "json"),
            ("parse command-line options and arguments", "argparse"),
            ("copy a directory tree recursively", "shutil"),
            ("priority queue with a heap", "heapq"),
        ]:
            # A module's overview or one of its members (json, json.dumps).
            top = idx.search(query, collection="stdlib", k=1)[0].chunk.doc_id
            assert top == gold or top.startswith(f"{gold}."), query


def test_cli_index_and_search(folder: Path, tmp_path: Path, hashing_default: None,
                              capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "idx"
    assert run_index_cli(["index", str(folder), "--collection", "mine", "--root", str(root),
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["documents"] == 3 and report["generation"] == 1
    assert run_index_cli(["search", "paddle strokes", "--collection", "mine", "--root", str(root),
                 "-k", "2", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert results[0]["doc_id"] == "guide.md" and results[0]["rank"] == 1
    assert results[0]["url"].startswith("file://") and results[0]["score"] > 0
    assert run_index_cli(["search", "paddle strokes", "--collection", "mine",
                          "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "guide.md#0" in out and "Paddle" in out


def test_cli_reports_errors_with_exit_code(tmp_path: Path, hashing_default: None,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert run_index_cli(["search", "x", "--collection", "nope", "--root", str(tmp_path)]) == 2
    assert "collection 'nope'" in capsys.readouterr().err
    assert run_index_cli(["index", str(tmp_path / "missing"), "--collection", "c",
                 "--root", str(tmp_path)]) == 2
    assert "no such file" in capsys.readouterr().err
    assert run_index_cli(["search", "x", "--since", "soon", "--root", str(tmp_path)]) == 2


def test_chunking_config_is_part_of_the_reuse_key(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    docs = list(stdlib_documents(["heapq"]))
    CorpusIndex(tmp_path, emb).index_documents("c", docs)
    n = len(emb.passages)
    small = ChunkingConfig(target_words=60, overlap_ratio=0.1, max_words=100)
    report = CorpusIndex(tmp_path, emb, chunking=small).index_documents("c", docs)
    assert report.chunks > n and report.embedded_chunks == report.chunks


def _chunk_texts(idx: CorpusIndex, name: str) -> dict[str, str]:
    with idx.open(name) as coll:
        return {coll.chunk_at(r).doc_id: coll.text_at(r) for r in range(len(coll))}


def test_markup_is_cleaned_when_indexed_whatever_the_loader(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "guide.md").write_text(
        "<!-- YAML\nadded: v1\n-->\n# Kayak Guide\n\nPaddle **hard** with a [sweep](s.html) "
        "stroke.\n\n```python\nstroke = sweep(2)  # Turns. Slowly.\n```\n"
    )
    (root / "page.html").write_text(
        "<html><head><title>Ferns</title></head><body><h2>Spores</h2><!-- note -->"
        "<p>Ferns <em>reproduce</em> with spores.</p><pre>count = 3\nprint(count)</pre>"
        "</body></html>"
    )
    (root / "notes.txt").write_text("Plain *notes* about rye flour.\n\n* a bullet item here")
    docs = list(load_folder(root))
    docs.append(next(iter(stdlib_documents(["heapq"]))))
    with CorpusIndex(tmp_path / "idx", CountingEmbedder()) as idx:
        idx.index_documents("mine", docs)
        texts = _chunk_texts(idx, "mine")
    for text in texts.values():
        for marker in ("<!--", "**", "```", "<em>", "<pre>", "[sweep]", "# Kayak", "\n* "):
            assert marker not in text, (marker, text)
    assert "Paddle hard with a sweep stroke." in texts["guide.md"]
    assert "\n\n    stroke = sweep(2)  # Turns. Slowly." in texts["guide.md"]  # still code
    assert texts["page.html"].startswith("Spores:\n\nFerns reproduce with spores.")
    assert "    count = 3\n    print(count)" in texts["page.html"]
    assert "Plain notes about rye flour.\n\na bullet item here" in texts["notes.txt"]


def test_an_index_built_by_another_cleaner_is_rebuilt_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reactive_rag.index import _builder

    docs = list(stdlib_documents(["heapq"]))
    emb = CountingEmbedder()
    with monkeypatch.context() as m:
        m.setattr(_builder, "CLEAN_MARKUP_VERSION", "markup-0")  # text cleaned the old way
        CorpusIndex(tmp_path, emb).index_documents("c", docs)
    with CorpusIndex(tmp_path, emb) as idx:
        report = idx.ensure("c", docs)
        assert report is not None and report.updated == len(docs) and report.unchanged == 0
        assert idx.ensure("c", docs) is None  # and then it is current


def test_stdlib_members_are_titled_by_their_api_name_and_private_ones_skipped() -> None:
    docs = {d.id: d for d in stdlib_documents(["asyncio", "queue"])}
    assert not [i for i in docs if any(p.startswith("_") for p in i.split("."))]
    run = docs["asyncio.run"]
    assert run.title == "asyncio.run" and run.url.endswith("/library/asyncio.html#asyncio.run")
    assert run.text.startswith("asyncio.run(") and "\n\n" in run.text  # signature paragraph
    assert docs["asyncio.Task"].text.startswith("asyncio.Task(")  # every class is listed
    fifo = docs["queue.Queue"]  # a class holds its methods as sections
    assert "\n\nqueue.Queue.get(" in fifo.text and "queue.Queue.get" not in docs
    assert docs["asyncio"].title.startswith("asyncio (Python ")
