"""Indexing a real folder: binaries, legacy encodings, links, size caps, add vs sync, progress.

The folder is built in ``tmp_path`` from bytes a user's disk really holds: a
PNG, an ELF header renamed ``.txt``, Latin-1 and Windows-1252 notes, a blob no
encoding explains, a dangling symlink, an oversized file. In-process runs use
the hashing embedder; the subprocess runs (progress on a pipe, pure ``--json``)
are the real command with its real embedder.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reactive_rag.cli._index_progress import estimate_line, format_duration
from reactive_rag.index import (
    DEFAULT_EMBED_RATE,
    SKIP_REASONS,
    CorpusIndex,
    Document,
    NothingToIndex,
    SkippedFile,
    load_embed_rate,
    save_embed_rate,
)

from .._index_helpers import CountingEmbedder, run_index_cli

REPO = Path(__file__).resolve().parents[3]
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00"
ELF = b"\x7fELF\x02\x01\x01\x00" + bytes(8) + b"\x03\x00\x3e\x00\x01\x00\x00\x00" + bytes(40)
LATIN1 = "Le café était très chaud; la crème brûlée attendait à côté du pâté."
CP1252 = "She said \u201chello\u201d \u2014 and paid 5\u20ac for the soufflé\u2026 twice."


def _blob() -> bytes:
    """High bytes only: no NUL, no control bytes, and no encoding makes sense of them."""
    rng = random.Random(7)
    return bytes(rng.randrange(0x80, 0x100) for _ in range(900))


@pytest.fixture
def disk(tmp_path: Path) -> Path:
    root = tmp_path / "disk"
    (root / "sub").mkdir(parents=True)
    (root / "raft.md").write_text("# Raft\n\nRaft elects a leader that replicates the log.\n")
    (root / "sub" / "paxos.txt").write_text("Paxos reaches consensus among acceptors.\n")
    (root / "cafe.txt").write_bytes(LATIN1.encode("latin-1"))
    (root / "quotes.txt").write_bytes(CP1252.encode("cp1252"))
    (root / "logo.png").write_bytes(PNG)
    (root / "tool.txt").write_bytes(ELF)  # a binary that lies about its type
    (root / "blob.md").write_bytes(_blob())
    (root / "script.py").write_text("print('not prose')\n")
    (root / "gone.txt").symlink_to(root / "deleted.txt")
    (root / "big.txt").write_text("word " * 400)  # 2 kB: over a 0.001 MB cap
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return root


def _index(tmp_path: Path) -> CorpusIndex:
    return CorpusIndex(tmp_path / "idx", CountingEmbedder())


def _reasons(skipped: list[SkippedFile], root: Path) -> dict[str, str]:
    return {Path(s.path).relative_to(root).as_posix(): s.reason for s in skipped}


def test_every_file_is_indexed_or_skipped_with_a_typed_reason(disk: Path,
                                                               tmp_path: Path) -> None:
    skipped: list[SkippedFile] = []
    with _index(tmp_path) as idx:
        report = idx.index_path("disk", disk, skipped=skipped, max_bytes=1000)
        with idx.open("disk") as coll:
            ids = set(coll.document_ids())
    assert ids == {"raft.md", "sub/paxos.txt", "cafe.txt", "quotes.txt"}
    assert report.documents == 4
    assert _reasons(skipped, disk) == {
        "logo.png": "binary", "tool.txt": "binary", "blob.md": "undecodable",
        "script.py": "unsupported_type", "gone.txt": "dangling_link", "big.txt": "too_large",
    }
    assert all(s.reason in SKIP_REASONS and s.detail for s in skipped)
    assert ".git/HEAD" not in _reasons(skipped, disk)  # hidden: neither indexed nor listed


def test_legacy_encodings_are_decoded_and_searchable(disk: Path, tmp_path: Path) -> None:
    with _index(tmp_path) as idx:
        idx.index_path("disk", disk, max_bytes=1000)
        cafe = idx.search("crème brûlée café", collection="disk", k=1, mode="bm25")[0]
        quotes = idx.search("soufflé", collection="disk", k=1, mode="bm25")[0]
    assert cafe.chunk.doc_id == "cafe.txt" and LATIN1 in cafe.chunk.text
    assert quotes.chunk.doc_id == "quotes.txt" and CP1252 in quotes.chunk.text
    assert cafe.chunk.metadata["encoding"] == "cp1252"  # Latin-1 letters, read as cp1252


def test_empty_files_are_skipped_and_utf16_with_a_bom_is_text(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "blank.md").write_text("  \n\n")
    (folder / "zero.txt").write_bytes(b"")
    (folder / "wide.txt").write_bytes("Grüße aus Köln, the UTF-16 note.".encode("utf-16"))
    skipped: list[SkippedFile] = []
    with _index(tmp_path) as idx:
        idx.index_path("f", folder, skipped=skipped)
        hit = idx.search("Köln", collection="f", k=1, mode="bm25")[0]
    assert _reasons(skipped, folder) == {"blank.md": "empty", "zero.txt": "empty"}
    assert hit.chunk.doc_id == "wide.txt" and "Grüße aus Köln" in hit.chunk.text


def test_the_size_cap_skips_only_larger_files(disk: Path, tmp_path: Path) -> None:
    skipped: list[SkippedFile] = []
    with _index(tmp_path) as idx:
        idx.index_path("disk", disk, skipped=skipped, max_bytes=10_000)
        with idx.open("disk") as coll:
            assert "big.txt" in coll.document_ids()
    assert "too_large" not in {s.reason for s in skipped}


def test_one_file_into_a_folder_collection_updates_it_and_keeps_the_rest(
        disk: Path, tmp_path: Path) -> None:
    with _index(tmp_path) as idx:
        idx.index_path("disk", disk, max_bytes=1000)
        (disk / "sub" / "paxos.txt").write_text("Paxos was described by Leslie Lamport.\n")
        report = idx.index_path("disk", disk / "sub" / "paxos.txt", mode="add")
        with idx.open("disk") as coll:
            ids = coll.document_ids()
        hit = idx.search("Lamport", collection="disk", k=1, mode="bm25")[0]
    # the file kept its folder id ("sub/paxos.txt", not a second "paxos.txt")
    assert sorted(ids) == ["cafe.txt", "quotes.txt", "raft.md", "sub/paxos.txt"]
    assert (report.updated, report.added, report.removed, report.unchanged) == (1, 0, 0, 0)
    assert hit.chunk.doc_id == "sub/paxos.txt"


def test_a_same_named_file_of_another_folder_is_added_beside_its_namesake(
        tmp_path: Path) -> None:
    first, second = tmp_path / "team-a", tmp_path / "team-b"
    for folder, text in ((first, "Raft elects a leader by randomised timeouts."),
                         (second, "Paxos reaches consensus with proposers and acceptors.")):
        (folder / "guide").mkdir(parents=True)
        (folder / "guide" / "notes.md").write_text(f"# Notes\n\n{text}\n")
    with _index(tmp_path) as idx:
        idx.index_path("docs", first, mode="add")
        report = idx.index_path("docs", second, mode="add")
        again = idx.index_path("docs", second, mode="add")  # the same folder once more
        with idx.open("docs") as coll:
            ids = sorted(coll.document_ids())
        raft = idx.search("leader randomised timeouts", collection="docs", k=1, mode="bm25")
        paxos = idx.search("proposers acceptors", collection="docs", k=1, mode="bm25")
    # both files are there; the second is named by its folder, not put over the first
    assert ids == ["guide/notes.md", "team-b/guide/notes.md"]
    assert (report.added, report.updated) == (1, 0)
    assert (again.added, again.updated, again.unchanged) == (0, 0, 1)  # it keeps its new id
    assert raft[0].chunk.doc_id == "guide/notes.md"
    assert paxos[0].chunk.doc_id == "team-b/guide/notes.md"


def test_sync_from_another_folder_keeps_plain_ids(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "notes.md").write_text(f"Notes of folder {folder}.\n")
    with _index(tmp_path) as idx:
        idx.index_path("docs", tmp_path / "a", mode="add")
        idx.index_path("docs", tmp_path / "b", mode="sync")  # becomes exactly folder b
        with idx.open("docs") as coll:
            assert coll.document_ids() == ["notes.md"]
        hit = idx.search("folder", collection="docs", k=1, mode="bm25")[0]
    assert "folder b" in hit.chunk.text


def test_sync_makes_the_collection_exactly_the_source(disk: Path, tmp_path: Path) -> None:
    with _index(tmp_path) as idx:
        idx.index_path("disk", disk, max_bytes=1000)
        report = idx.index_path("disk", disk / "sub", mode="sync")
        with idx.open("disk") as coll:
            assert coll.document_ids() == ["sub/paxos.txt"]
    assert (report.removed, report.unchanged) == (3, 1)  # and paxos was not re-embedded


def test_an_empty_folder_writes_nothing_and_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    (empty / ".cache").mkdir(parents=True)
    (empty / ".cache" / "x.txt").write_text("hidden")
    with _index(tmp_path) as idx:
        with pytest.raises(NothingToIndex, match="no files"):
            idx.index_path("nothing", empty)
        assert not (idx.root / "nothing").exists() and idx.collections() == []


def test_a_folder_of_only_unindexable_files_writes_nothing(disk: Path, tmp_path: Path) -> None:
    for keep in ("raft.md", "sub/paxos.txt", "cafe.txt", "quotes.txt", "big.txt"):
        (disk / keep).unlink()
    with _index(tmp_path) as idx:
        with pytest.raises(NothingToIndex, match="none indexable") as err:
            idx.index_path("junk", disk)
        assert not (idx.root / "junk").exists()
    assert {s.reason for s in err.value.skipped} == {"binary", "undecodable",
                                                     "unsupported_type", "dangling_link"}


def test_nothing_indexable_keeps_an_existing_collection(disk: Path, tmp_path: Path) -> None:
    with _index(tmp_path) as idx:
        first = idx.index_path("disk", disk, max_bytes=1000)
        with pytest.raises(NothingToIndex):
            idx.index_path("disk", disk / "logo.png", mode="sync")
        assert idx.collection_info("disk").generation == first.generation


# --- the command ------------------------------------------------------------------------


def test_cli_default_adds_and_sync_removes(disk: Path, tmp_path: Path, hashing_default: None,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tmp_path / "idx")
    assert run_index_cli(["index", str(disk / "raft.md"), "-c", "c", "--root", root, "-q"]) == 0
    assert run_index_cli(["index", str(disk / "sub"), "-c", "c", "--root", root, "-q",
                          "--json"]) == 0
    added = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert (added["documents"], added["added"], added["removed"]) == (2, 1, 0)
    assert run_index_cli(["index", str(disk / "sub"), "-c", "c", "--root", root, "-q", "--json",
                 "--sync"]) == 0
    synced = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert (synced["documents"], synced["removed"]) == (1, 1)


def test_cli_lists_skipped_files_with_their_reason(disk: Path, tmp_path: Path,
                                                  hashing_default: None,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert run_index_cli(["index", str(disk), "-c", "c", "--root", str(tmp_path / "idx"), "-q",
                 "--max-file-mb", "0.001"]) == 0
    out = capsys.readouterr().out
    assert "skipped 6 file(s)" in out
    for reason, name in (("too_large", "big.txt"), ("binary", "logo.png"),
                         ("binary", "tool.txt"), ("undecodable", "blob.md"),
                         ("dangling_link", "gone.txt"), ("unsupported_type", "script.py")):
        assert re.search(rf"{reason}\s+\S*{re.escape(name)}", out), (reason, out)


def test_cli_empty_folder_exits_2_and_leaves_no_collection(
        tmp_path: Path, hashing_default: None, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    root = tmp_path / "idx"
    assert run_index_cli(["index", str(tmp_path / "empty"), "-c", "c", "--root", str(root)]) == 2
    assert "nothing to index" in capsys.readouterr().err
    assert not (root / "c").exists()


@pytest.mark.parametrize("bad", ["0", "-1", "lots"])
def test_cli_refuses_a_bad_size_cap(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run_index_cli(["index", ".", "-c", "c", "--max-file-mb", bad])
    assert exc.value.code == 2 and "--max-file-mb" in capsys.readouterr().err


def test_a_large_job_is_announced_with_an_estimate(disk: Path, tmp_path: Path,
                                                  hashing_default: None,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "idx"
    # as if this machine had measured a very slow embedder: 4 chunks take minutes
    save_embed_rate(root, CountingEmbedder().name, 0.01)
    assert run_index_cli(["index", str(disk), "-c", "c", "--root", str(root), "-q",
                 "--max-file-mb", "0.001"]) == 0
    err = capsys.readouterr().err
    assert "warning: about to embed 4 chunks" in err and "measured on this machine" in err
    assert "6 min 40 s" in err  # 4 / 0.01 per second


def test_with_json_the_warning_goes_into_the_report_not_to_stderr(
        disk: Path, tmp_path: Path, hashing_default: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "idx"
    save_embed_rate(root, CountingEmbedder().name, 0.01)
    assert run_index_cli(["index", str(disk), "-c", "c", "--root", str(root), "--json",
                 "--max-file-mb", "0.001"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    report = json.loads(out)
    assert [w for w in report["warnings"] if "about to embed 4 chunks" in w]


def test_a_build_remembers_the_rate_it_measured(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    with CorpusIndex(tmp_path / "idx", emb) as idx:
        assert idx.embed_rate() == (DEFAULT_EMBED_RATE, False)
        idx.index_documents("few", [Document(id="a", text="alpha")])
        assert idx.embed_rate() == (DEFAULT_EMBED_RATE, False)  # 1 passage: no measurement
        idx.index_documents("many", [Document(id=f"d{i}", text=f"document number {i}")
                                     for i in range(40)])
        rate, measured = idx.embed_rate()
    assert measured and rate > 0 and load_embed_rate(tmp_path / "idx", emb.name) == rate


def test_a_small_job_gets_no_warning_and_the_estimate_reads_well() -> None:
    assert estimate_line(100, 20.0, measured=False) is None
    line = estimate_line(90_000, 20.0, measured=False)
    assert line is not None and "90,000 chunks" in line and "1 h 15 min" in line
    assert "not yet measured" in line
    assert format_duration(42.4) == "42 s" and format_duration(200) == "3 min 20 s"


def _cli(args: list[str], root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "REACTIVE_RAG_HOME": str(root / "home")}
    return subprocess.run([sys.executable, "-m", "reactive_rag", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def piped(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str],
                                                             Path]:
    """The real command on a folder, stdout and stderr both pipes (not terminals)."""
    base = tmp_path_factory.mktemp("piped")
    folder = base / "notes"
    folder.mkdir()
    for i in range(3):
        (folder / f"note{i}.md").write_text(f"# Note {i}\n\nNote {i} is about topic {i}.\n")
    (folder / "logo.png").write_bytes(PNG)
    proc = _cli(["index", str(folder), "--collection", "notes", "--root", str(base / "idx"),
                 "--json", "--verbose"], base)  # --verbose: progress on stderr beside JSON
    return proc, base


def test_piped_progress_is_plain_lines_with_rate_and_eta_on_stderr(
        piped: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, _ = piped
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert "load 3/3 files" in proc.stderr
    embed = [ln for ln in lines if ln.startswith("embed ")]
    assert embed and re.fullmatch(r"embed 3/3 chunks, [0-9.]+ chunks/s, ETA \d+ s", embed[-1])
    assert "\x1b[" not in proc.stderr  # no terminal control codes in a log


def test_json_output_is_pure_json_with_typed_skips(
        piped: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, _ = piped
    report = json.loads(proc.stdout)  # the whole stdout, nothing before or after
    assert report["documents"] == 3 and report["generation"] == 1
    assert [(Path(s["path"]).name, s["reason"]) for s in report["skipped"]] == [
        ("logo.png", "binary")]


def test_on_a_terminal_progress_is_a_bar_with_rate_and_eta(tmp_path: Path) -> None:
    pty = pytest.importorskip("pty")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "raft.md").write_text("# Raft\n\nRaft elects a leader.\n")
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO), "REACTIVE_RAG_HOME": str(tmp_path / "home"),
           "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "reactive_rag", "index", str(folder), "-c", "notes",
         "--root", str(tmp_path / "idx")], cwd=REPO, env=env,
        stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    seen = bytearray()
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        seen.extend(data)
    os.close(master)
    assert proc.wait(timeout=120) == 0
    screen = seen.decode(errors="replace")
    assert "━" in screen and "chunks/s" in screen and "ETA" in screen
    assert not re.search(r"^embed 1/1 chunks,", screen, re.MULTILINE)  # not the plain lines
    assert "collection 'notes' generation 1" in screen
