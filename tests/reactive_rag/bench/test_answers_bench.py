"""``bench/answers.py`` runs end to end and reports its figures (synthetic rows, not the data).

The bench is the evidence behind the trust figures in the closing notes; a
helper it imports changing shape once broke it silently, so its whole path
runs here on three made-up questions.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "answers.py"

ROWS: list[dict[str, Any]] = [
    {"question_text": "Who founded the Qantel company?",
     "answers_objects": [{"spans": ["Ann Lee"]}],
     "contexts": [
         {"title": "Qantel", "is_supporting": True,
          "paragraph_text": "Qantel is a maker of tide clocks. Qantel was founded by Ann Lee "
                            "in 1931 in the harbour town of Moresk."},
         {"title": "Moresk", "is_supporting": False,
          "paragraph_text": "Moresk is a harbour town known for its slate roofs."}]},
    {"question_text": "In what year was the Brellin bridge opened?",
     "answers_objects": [{"spans": ["1908"]}],
     "contexts": [
         {"title": "Brellin bridge", "is_supporting": True,
          "paragraph_text": "The Brellin bridge crosses the river Aske. The Brellin bridge "
                            "was opened in 1908 after six years of work."},
         {"title": "Aske", "is_supporting": False,
          "paragraph_text": "The Aske is a slow river with many mills along its banks."}]},
]
NQ = [{"question": "how many moons does the planet neptune have", "answer": ["14"]}]


@pytest.mark.slow
def test_the_bench_runs_and_ends_with_its_json_figures(tmp_path: Path) -> None:
    data, nq = tmp_path / "rows.jsonl", tmp_path / "nq.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    nq.write_text("".join(json.dumps(r) + "\n" for r in NQ), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(BENCH), "--data", str(data), "--nq", str(nq), "--split", "tune",
         "--modes", "agent", "--no-support", "--root", str(tmp_path / "index"), "--json"],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    for key in ("n", "answered_rate", "answer_contains_gold", "false_answer_rate_nogold",
                "false_answer_rate_offcorpus", "fabricated_quotes"):
        assert key in figures, key
    assert figures["n"] == len(ROWS)
    assert figures["fabricated_quotes"] == 0
    # with their gold paragraphs gone, neither question may end answered
    assert figures["false_answer_rate_nogold"] == 0.0
