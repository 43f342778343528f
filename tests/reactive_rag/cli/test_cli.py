"""The command line as a user runs it: index a folder, ask with --json, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reactive_rag.cli._main import main


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("notes")
    (folder / "raft.md").write_text(
        "# Raft\n\nRaft is a consensus algorithm designed to be easy to understand. "
        "A Raft cluster elects a leader, and the leader replicates the log to followers. "
        "Raft was designed by Diego Ongaro and John Ousterhout at Stanford.\n")
    (folder / "paxos.txt").write_text(
        "Paxos is a family of protocols for solving consensus in a network of unreliable "
        "processors. Leslie Lamport first described Paxos in 1989.\n")
    root = tmp_path_factory.mktemp("root")
    assert main(["index", str(folder), "--collection", "notes", "--root", str(root)]) == 0
    return folder, root


def test_ask_json_answers_with_citations_from_the_indexed_folder(
        notes: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, root = notes
    capsys.readouterr()
    code = main(["ask", "Who designed Raft?", "--collection", "notes", "--root", str(root),
                 "--json", "--quiet"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and out["outcome"] == "answered"
    assert any("Ongaro" in c["quote"] for c in out["citations"])
    assert all(c["title"] for c in out["citations"])


def test_live_view_prints_the_stream_and_numbered_citations(
        notes: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, root = notes
    capsys.readouterr()
    code = main(["ask", "When did Lamport describe Paxos?", "--collection", "notes",
                 "--root", str(root), "--mode", "rag"])
    out = capsys.readouterr().out
    assert code == 0
    for expected in ("run.started", "search.requested", "evidence.registered", "run.finished",
                     "[1]"):
        assert expected in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--collection", "missing"], "unknown collection"),
    (["--budget", "max_tool_calls"], "NAME=VALUE"),
    (["--budget", "max_tool_calls=lots"], "not a number"),
    (["--budget", "tools=3"], "unknown budget field"),
])
def test_bad_input_is_a_clear_error_and_exit_2(
        notes: tuple[Path, Path], capsys: pytest.CaptureFixture[str], argv: list[str],
        message: str) -> None:
    _, root = notes
    code = main(["ask", "Who designed Raft?", "--root", str(root), "--collection", "notes",
                 *argv])
    assert code == 2 and message in capsys.readouterr().err


def test_web_without_configuration_refuses_before_any_network_call(
        notes: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _, root = notes
    monkeypatch.delenv("REACTIVE_RAG_SEARCH_CONFIG", raising=False)
    monkeypatch.delenv("REACTIVE_RAG_SEARXNG_URL", raising=False)
    code = main(["ask", "anything", "--root", str(root), "--collection", "notes", "--web"])
    assert code == 2 and "--web" in capsys.readouterr().err
