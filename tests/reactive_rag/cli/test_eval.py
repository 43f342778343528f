"""``reactive-rag eval``: a user's question file asked on both modes, scored, and every run
kept so its answer replays; HotpotQA and SQuAD files read as they are; a bad file is one
line naming the place.

The commands run in-process through the CLI's ``main`` over a small collection indexed by
``reactive-rag index``, with their own run store (``--store``).
"""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from reactive_rag.cli._main import main
from reactive_rag.engine import ModelPrice, PriceTable, RunResult
from reactive_rag.evaluate import (
    CaseResult,
    QACase,
    QAFileError,
    contains_gold,
    mode_figures,
    read_cases,
)
from streams import AnswerDrafted, PlanDecided, RunFinished, RunStarted

REPO = Path(__file__).resolve().parents[3]
DATA = Path(os.environ.get("REACTIVE_RAG_DATA",
                           Path(__file__).resolve().parents[4] / "shared" / "data"))

NOTES = {
    "raft.md": "# Raft\n\nRaft is a consensus algorithm. It was designed by Diego Ongaro and "
               "John Ousterhout at Stanford University.\n",
    "aspirin.md": "# Aspirin\n\nAspirin is a medication used to reduce pain, fever, or "
                  "inflammation. Aspirin was first isolated by Felix Hoffmann, a chemist at "
                  "Bayer, in 1897.\n",
}
# answered with an expected answer; answered, but not with the (wrong) expected answer;
# off the corpus (abstained); a row naming its collection
QA = [
    {"id": "raft", "question": "Who designed Raft?", "answers": ["Diego Ongaro"]},
    {"id": "aspirin", "question": "Who first isolated aspirin?", "answers": ["Marie Curie"]},
    {"id": "mercury", "question": "What is the boiling point of mercury?", "answers": []},
    {"id": "named", "question": "Who designed Raft?", "answers": ["Ousterhout"],
     "collections": ["notes"]},
]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("notes")
    for name, text in NOTES.items():
        (folder / name).write_text(text, encoding="utf-8")
    index_root = tmp_path_factory.mktemp("root")
    assert main(["index", str(folder), "-c", "notes", "--root", str(index_root), "--quiet"]) == 0
    return index_root


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def run_eval(capsys: pytest.CaptureFixture[str], root: Path, store: Path, qa: Path,
             *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["eval", str(qa), "-c", "notes", "--root", str(root), "--store", str(store),
                 *extra])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def both(root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """``eval --mode both --json`` once, with a price per local search call; its report."""
    work = tmp_path_factory.mktemp("eval")
    prices = work / "prices.toml"
    prices.write_text('currency = "EUR"\n[providers]\nlocal = 0.01\n')
    store = work / "runs.db"
    with pytest.MonkeyPatch.context() as mp:
        out = _capture_main(mp, ["eval", str(write_jsonl(work / "qa.jsonl", QA)), "-c", "notes",
                                 "--root", str(root), "--store", str(store), "--mode", "both",
                                 "--json", "--prices", str(prices)])
    return json.loads(out), store


def _capture_main(mp: pytest.MonkeyPatch, argv: list[str]) -> str:
    out, err = io.StringIO(), io.StringIO()
    mp.setattr(sys, "stdout", out)
    mp.setattr(sys, "stderr", err)
    assert main(argv) == 0, err.getvalue()
    assert err.getvalue() == ""  # --json: nothing but the JSON object
    return out.getvalue()


def test_both_modes_answer_abstain_and_score_each_question(
        both: tuple[dict[str, Any], Path]) -> None:
    report, _ = both
    assert report["format"] == "jsonl" and set(report["modes"]) == {"agent", "rag"}
    for mode in ("agent", "rag"):
        rows = {r["id"]: r for r in report["rows"] if r["mode"] == mode}
        assert list(rows) == ["raft", "aspirin", "mercury", "named"]
        assert rows["raft"]["outcome"] == "answered" and rows["raft"]["contains_answer"] is True
        assert "Ongaro" in rows["raft"]["answer"] and rows["raft"]["citations"] >= 1
        assert rows["aspirin"]["outcome"] == "answered"
        assert rows["aspirin"]["contains_answer"] is False  # "Marie Curie" is not in it
        assert rows["mercury"]["outcome"] == "no_evidence"
        assert rows["mercury"]["contains_answer"] is None  # nothing expected
        assert rows["named"]["contains_answer"] is True


def test_the_figures_are_the_sums_of_the_rows(both: tuple[dict[str, Any], Path]) -> None:
    report, _ = both
    assert report["currency"] == "EUR"
    for mode, figures in report["modes"].items():
        rows = [r for r in report["rows"] if r["mode"] == mode]
        answered = [r for r in rows if r["outcome"] in ("answered", "answered_from_evidence")]
        expected = [r for r in rows if r["contains_answer"] is not None]
        seconds = sorted(r["seconds"] for r in rows)
        assert figures["questions"] == len(rows) == 4
        assert figures["answered"] == len(answered) == 3
        assert figures["abstained"] == sum(r["outcome"] == "no_evidence" for r in rows) == 1
        assert figures["expected"] == len(expected) == 3
        assert figures["contains_answer"] == sum(r["contains_answer"] for r in expected) == 2
        assert figures["contains_answer_rate"] == pytest.approx(2 / 3, abs=1e-4)
        assert figures["citations_per_answer"] == pytest.approx(
            sum(r["citations"] for r in answered) / len(answered), abs=0.01)
        assert figures["latency_p50_s"] == pytest.approx(seconds[1], abs=1e-3)  # nearest rank
        assert figures["latency_p95_s"] == pytest.approx(seconds[-1], abs=1e-3)
        assert figures["input_tokens"] == figures["output_tokens"] == 0  # offline: no model
        assert figures["cost"] == pytest.approx(sum(r["cost"] for r in rows))
        assert figures["cost"] > 0  # 0.01 EUR per local search call


def test_every_answer_replays_from_the_store(both: tuple[dict[str, Any], Path],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    report, store = both
    ids = [r["run_id"] for r in report["rows"]]
    assert len(set(ids)) == len(ids) == 8
    for row in report["rows"]:
        capsys.readouterr()
        assert main(["replay", row["run_id"], "--json", "--store", str(store)]) == 0
        events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        started, finished = events[0], events[-1]
        assert started["type"] == "run.started" and started["question"] == row["question"]
        assert started["mode"] == row["mode"]
        assert finished["type"] == "run.finished"
        assert (finished["outcome"], finished["answer"]) == (row["outcome"], row["answer"])


def test_the_table_names_each_figure_per_mode_and_no_bar_off_a_terminal(
        root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qa = write_jsonl(tmp_path / "qa.jsonl", QA)
    code, out, err = run_eval(capsys, root, tmp_path / "runs.db", qa, "--mode", "rag",
                              "--limit", "2")
    assert code == 0 and err == ""  # no progress bar: stderr is not a terminal
    assert "(jsonl, 2 questions)" in out
    lines = {line.split("│")[1].strip(): line for line in out.splitlines() if "│" in line}
    assert "2/2 (100%)" in lines["answered"]
    assert "1/2 (50%)" in lines["answer contains an expected one"]
    assert {"abstained (no evidence)", "citations per answer", "latency p50", "latency p95",
            "model tokens in / out", "est. cost (USD)"} <= set(lines)
    assert "reactive-rag replay RUN_ID" in out


def test_hotpotqa_and_squad_files_are_read_as_they_are(
        root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hotpot = write_jsonl(tmp_path / "hotpot.jsonl", [
        {"_id": "h1", "question": "Who designed Raft?", "answer": "John Ousterhout",
         "context": [["Raft", ["Raft is a consensus algorithm."]]],
         "supporting_facts": [["Raft", 0]]},
        {"_id": "h2", "question": "Who first isolated aspirin?", "answer": "Felix Hoffmann",
         "context": []}])
    ircot = write_jsonl(tmp_path / "ircot.jsonl", [
        {"question_id": "q1", "question_text": "Who designed Raft?",
         "answers_objects": [{"number": "", "spans": ["Diego Ongaro"]}], "contexts": []}])
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps({"version": "v1.0", "data": [{"title": "Raft", "paragraphs": [
        {"context": "Raft was designed by Diego Ongaro.", "qas": [
            {"id": "s1", "question": "Who designed Raft?",
             "answers": [{"text": "Diego Ongaro", "answer_start": 21},
                         {"text": "Diego Ongaro", "answer_start": 21}]},
            {"id": "s2", "question": "What is the boiling point of mercury?", "answers": [],
             "is_impossible": True},
            {"id": "s3", "question": " ", "answers": [{"text": "Raft"}]}]}]}]}),
        encoding="utf-8")
    seen = {}
    for path in (hotpot, ircot, squad):
        code, out, err = run_eval(capsys, root, tmp_path / "runs.db", path, "--json",
                                  "--mode", "rag")
        assert code == 0, err
        report = json.loads(out)
        seen[path.name] = (report["format"], report["skipped"],
                           [(r["id"], r["expected"], r["contains_answer"]) for r in report["rows"]])
    assert seen == {
        "hotpot.jsonl": ("hotpotqa", [], [("h1", ["John Ousterhout"], True),
                                          ("h2", ["Felix Hoffmann"], True)]),
        "ircot.jsonl": ("hotpotqa", [], [("q1", ["Diego Ongaro"], True)]),
        # a blank question (CMRC's trial set has two) is skipped and named
        "squad.json": ("squad", ["data[0].paragraphs[0].qas[2]"],
                       [("s1", ["Diego Ongaro"], True), ("s2", [], None)]),
    }


@pytest.mark.parametrize(("content", "place"), [
    ('{"question": "Who designed Raft?", "answers": ["Ongaro"]}\n{"question": "Who\n',
     "line 2: not JSON"),
    ('{"question": "Who designed Raft?", "answers": ["Ongaro"]}\n\n'
     '{"question": "Who designed Raft?", "answers": "Ongaro"}\n', "line 3: 'answers' must be"),
    ('{"question": "", "answers": []}\n', "line 1: 'question' must be a non-empty string"),
    ('{"query": "Who designed Raft?"}\n', "line 1: not a question row"),
    ('{"question": "Who?", "answers": ["x"], "collections": "notes"}\n',
     "line 1: 'collections' must be a list"),
    ('{"data": [{"paragraphs": [{"qas": [{"id": "a", "question": "Who?", "answers": "x"}]}]}]}',
     "data[0].paragraphs[0].qas[0]: 'answers' must be a list"),
    ("", "no questions in it"),
])
def test_a_malformed_file_is_one_line_naming_the_place(
        root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str,
        place: str) -> None:
    qa = tmp_path / "qa.jsonl"
    qa.write_text(content, encoding="utf-8")
    code, out, err = run_eval(capsys, root, tmp_path / "runs.db", qa)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ") and str(qa) in err and place in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "runs.db").exists()  # nothing was asked


def test_an_unknown_collection_or_a_missing_file_is_refused_before_any_run(
        root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qa = write_jsonl(tmp_path / "qa.jsonl", [
        {"question": "Who designed Raft?", "answers": ["Ongaro"], "collections": ["nope"]}])
    code, _, err = run_eval(capsys, root, tmp_path / "runs.db", qa)
    assert code == 2 and "unknown collection(s) ['nope']; indexed: notes" in err
    code, _, err = run_eval(capsys, root, tmp_path / "runs.db", tmp_path / "absent.jsonl")
    assert code == 2 and "absent.jsonl: cannot read it" in err
    assert not (tmp_path / "runs.db").exists()


def test_contains_gold_keeps_word_edges_except_in_scripts_without_spaces() -> None:
    assert contains_gold("It was designed by Diego  ONGARO.", ["diego ongaro"])
    assert not contains_gold("founded in 1897", ["189"])  # part of a longer number
    assert not contains_gold("sorted(items)", ["sort"])  # part of a longer word
    assert contains_gold("中国大陆由盛大游戏运营。", ["盛大游戏"])  # Chinese: no spaces to need
    assert not contains_gold("由盛大游戏运营", ["腾讯"])


def test_the_shared_hotpotqa_and_cmrc_files_read_as_their_formats() -> None:
    hotpot, cmrc = DATA / "hotpotqa_dev_300.jsonl", DATA / "cmrc2018_trial.json"
    if not (hotpot.exists() and cmrc.exists()):
        pytest.skip(f"no shared data at {DATA} (set REACTIVE_RAG_DATA)")
    qa = read_cases(hotpot)
    assert qa.format == "hotpotqa" and len(qa.cases) == 300 and not qa.skipped
    assert all(c.answers for c in qa.cases)
    qa = read_cases(cmrc)
    # two of CMRC's 1,002 trial questions have no text: skipped and named, not an error
    assert qa.format == "squad" and len(qa.cases) == 1000 and len(qa.skipped) == 2
    assert all(c.answers and c.question for c in qa.cases)
    assert len({c.id for c in qa.cases}) == len(qa.cases)


def test_read_cases_says_which_file_it_could_not_read(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"question": "caf\xe9", "answers": []}\n')  # Latin-1, not UTF-8
    with pytest.raises(QAFileError, match=r"bad\.jsonl: cannot read it"):
        read_cases(bad)


def test_a_runs_model_tokens_and_cost_are_its_usage_priced_by_the_table() -> None:
    events = [RunStarted(run_id="r1", seq=1, ts=10.0, question="Who designed Raft?"),
              PlanDecided(run_id="r1", seq=2, ts=10.5, action="answer", model="m",
                          input_tokens=40, output_tokens=6),
              AnswerDrafted(run_id="r1", seq=3, ts=11.0, text="Diego Ongaro.", claims=(),
                            model="m", input_tokens=55, output_tokens=9),
              RunFinished(run_id="r1", seq=4, ts=11.5, outcome="answered",
                          answer="Diego Ongaro designed it.")]
    result = RunResult.from_events(events)
    prices = PriceTable(currency="EUR",
                        models={"m": ModelPrice(input_per_1k=2.0, output_per_1k=8.0)})
    case = QACase("q", "Who designed Raft?", ("Diego Ongaro",))
    scored = CaseResult.of(case, "agent", result, 1.5, prices)
    assert (scored.input_tokens, scored.output_tokens) == (95, 15)
    assert scored.cost == pytest.approx((95 * 2.0 + 15 * 8.0) / 1000)
    assert scored.contains_answer is True and scored.unpriced == ()
    unpriced = CaseResult.of(case, "agent", result, 1.5, PriceTable())
    assert unpriced.cost == 0.0 and unpriced.unpriced == ("m",)  # named, not guessed
    figures = mode_figures("agent", [scored, unpriced])
    assert (figures.input_tokens, figures.output_tokens) == (190, 30)
    assert figures.cost == pytest.approx(scored.cost) and figures.unpriced == ("m",)


def _on_a_terminal(argv: list[str]) -> tuple[int, str, str]:
    """``reactive-rag *argv`` as a subprocess whose stderr is a terminal (a pty); its exit
    status, stdout and what the terminal showed."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REACTIVE_RAG_")}
    env.update(PYTHONPATH=str(REPO), TERM="xterm-256color", COLUMNS="120")
    shown: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the last holder of the terminal has gone
                return
            if not data:
                return
            shown.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    with subprocess.Popen([sys.executable, "-m", "reactive_rag", *argv], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=slave, text=True) as proc:
        os.close(slave)
        reader.start()
        out, _ = proc.communicate(timeout=120)
    reader.join(timeout=30)
    os.close(master)
    return proc.returncode, out, b"".join(shown).decode("utf-8", "replace")


@pytest.mark.slow
def test_a_progress_bar_shows_on_a_terminal_and_not_with_json(root: Path,
                                                              tmp_path: Path) -> None:
    qa = write_jsonl(tmp_path / "qa.jsonl", QA[:2])
    argv = ["eval", str(qa), "-c", "notes", "--root", str(root), "--no-store", "--mode", "both"]
    code, out, terminal = _on_a_terminal(argv)
    assert code == 0 and "answer contains an expected one" in out
    assert "eval agent" in terminal and "eval rag" in terminal and "/4" in terminal
    code, out, terminal = _on_a_terminal([*argv, "--json"])
    assert code == 0 and json.loads(out)["modes"]["rag"]["questions"] == 2
    assert terminal == ""  # --json: nothing but the JSON object, even at a terminal
