"""``ask`` shows what the run used and its estimated cost: in --json and on its last line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reactive_rag.cli._main import main


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("notes")
    (folder / "raft.md").write_text(
        "# Raft\n\nRaft is a consensus algorithm designed to be easy to understand. "
        "Raft was designed by Diego Ongaro and John Ousterhout at Stanford.\n")
    index_root = tmp_path_factory.mktemp("root")
    assert main(["index", str(folder), "--collection", "notes", "--root", str(index_root)]) == 0
    return index_root


def test_ask_json_carries_the_runs_usage_and_its_cost_by_the_price_table(
        root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('currency = "EUR"\n[providers]\nlocal = 0.02\n')
    capsys.readouterr()
    code = main(["ask", "Who designed Raft?", "--collection", "notes", "--root", str(root),
                 "--json", "--quiet", "--prices", str(prices)])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and out["outcome"] == "answered"
    usage = out["usage"]
    assert usage["models"] == [] and usage["input_tokens"] == usage["output_tokens"] == 0
    assert usage["provider_calls"] == {"local": out["searches"]}  # one local call per search
    assert usage["cost"]["currency"] == "EUR"
    assert usage["cost"]["total"] == pytest.approx(0.02 * out["searches"])


def test_ask_ends_with_a_usage_line_and_a_bad_price_table_is_refused(
        root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["ask", "Who designed Raft?", "--collection", "notes", "--root", str(root),
                 "--quiet"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    assert lines[-1].startswith("usage: no model calls (offline: 0 tokens); provider calls: "
                                "local ")
    assert lines[-1].endswith("est. cost 0 USD")
    bad = tmp_path / "bad.toml"
    bad.write_text("[providers]\nlocal = -1\n")
    assert main(["ask", "Who designed Raft?", "--collection", "notes", "--root", str(root),
                 "--quiet", "--prices", str(bad)]) == 2
    assert "invalid price table" in capsys.readouterr().err
