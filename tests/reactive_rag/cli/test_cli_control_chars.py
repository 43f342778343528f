"""Stored text never drives the operator's terminal: a question or a page carrying OSC
(``ESC ] ... BEL``), CSI (``ESC [``) or C1 (``U+009B``) sequences is shown with those
characters written as ``\\xNN`` by ``ask``'s live view and result, ``runs``, ``replay``
(plain, ``--timeline``), ``search`` and ``summarize``; the JSON views stay JSON that
parses back to the very text stored, with no raw control character on the wire.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reactive_rag.cli._main import main

from .._server_fixtures import open_store

OSC_TITLE = "\x1b]0;pwned\x07"
CSI_CLEAR = "\x1b[2J"
C1_CSI = "\x9b31m"
QUESTION = f"Who designed Raft?{OSC_TITLE} {CSI_CLEAR}{C1_CSI}"
PAGE = ("# Raft\n\nRaft is a consensus algorithm designed to be easy to understand. "
        f"Raft was designed by Diego Ongaro {OSC_TITLE}and John Ousterhout{CSI_CLEAR} at "
        f"Stanford {C1_CSI}.\n")

RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""What a terminal acts on: C0 but tab and newline, DEL, C1."""


def assert_inert(out: str) -> None:
    """No control character reaches the terminal; a stored sequence shows as ``\\xNN``."""
    assert RAW_CONTROL.findall(out) == []
    assert "\\x1b" in out  # the sequence is shown, not silently dropped


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A collection ``notes`` whose one page carries the sequences; its ``--root``."""
    folder = tmp_path_factory.mktemp("notes")
    (folder / "raft.md").write_text(PAGE)
    root = tmp_path_factory.mktemp("root")
    assert main(["index", str(folder), "--collection", "notes", "--root", str(root)]) == 0
    return root


@pytest.fixture(scope="module")
def kept(indexed: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store holding a run asked with the hostile question; (store, run id)."""
    store = tmp_path_factory.mktemp("store") / "runs.db"
    assert main(["ask", QUESTION, "-c", "notes", "--root", str(indexed), "--store", str(store),
                 "--json", "--quiet"]) == 0

    async def only_run() -> str:
        s = await open_store(store)
        try:
            page = await s.list_runs("default", limit=5)
        finally:
            await s.close()
        assert [r.question for r in page.runs] == [QUESTION]  # stored exactly as asked
        return page.runs[0].run_id

    import asyncio

    return store, asyncio.run(only_run())


def test_ask_live_view_and_answer_show_the_sequences_inert(
        indexed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["ask", "Who designed Raft?", "-c", "notes", "--root", str(indexed),
                 "--store", str(tmp_path / "runs.db")])
    out = capsys.readouterr().out
    assert code == 0
    assert_inert(out)
    assert "Diego Ongaro \\x1b]0;pwned\\x07and" in out.replace("\n", "")  # the quoted page


def test_ask_with_a_hostile_question_shows_it_inert(
        indexed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    main(["ask", QUESTION, "-c", "notes", "--root", str(indexed),
          "--store", str(tmp_path / "runs.db")])
    out = capsys.readouterr().out
    assert_inert(out)
    assert "Raft?\\x1b]0;" in out  # run.started shows the question, escaped


@pytest.mark.parametrize("view", [["runs"], ["replay", "RUN"], ["replay", "RUN", "--timeline"],
                                  ["replay", "RUN", "--progress"]])
def test_operator_views_of_a_stored_run_show_the_sequences_inert(
        kept: tuple[Path, str], view: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    store, run_id = kept
    capsys.readouterr()
    code = main([run_id if arg == "RUN" else arg for arg in view] + ["--store", str(store)])
    out = capsys.readouterr().out
    assert code == 0
    assert RAW_CONTROL.findall(out) == []
    if view != ["replay", "RUN", "--timeline"]:  # the timeline shows lanes, not text
        assert "\\x1b]0;" in out


@pytest.mark.parametrize("view", [["runs", "--json"], ["replay", "RUN", "--json"]])
def test_json_views_parse_back_to_the_stored_text_with_no_raw_control(
        kept: tuple[Path, str], view: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    store, run_id = kept
    capsys.readouterr()
    code = main([run_id if arg == "RUN" else arg for arg in view] + ["--store", str(store)])
    out = capsys.readouterr().out
    assert code == 0
    assert RAW_CONTROL.findall(out) == []
    lines = [json.loads(line) for line in out.splitlines()]
    questions = [line["question"] for line in lines if "question" in line]
    assert questions == [QUESTION]  # the exact stored text, C1 included


def test_summarize_shows_the_page_sequences_inert(
        indexed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["summarize", "raft.md", "--root", str(indexed),
                 "--store", str(tmp_path / "runs.db")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert_inert(captured.out)
    assert "Ongaro \\x1b]0;pwned\\x07and John Ousterhout\\x1b[2J at Stanford \\x9b31m" \
        in captured.out


def test_summarize_json_keeps_the_text_and_sends_no_raw_control(
        indexed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["summarize", "raft.md", "--root", str(indexed),
                 "--store", str(tmp_path / "runs.db"), "--json", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    assert RAW_CONTROL.findall(out) == []
    assert C1_CSI in json.dumps(json.loads(out), ensure_ascii=False)  # the value is intact


def test_search_results_show_the_page_sequences_inert(
        indexed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["search", "Ongaro", "-c", "notes", "--root", str(indexed)])
    out = capsys.readouterr().out
    assert code == 0
    assert_inert(out)
