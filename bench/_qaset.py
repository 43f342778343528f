"""Question sets written by hand over one corpus: loading, gold checks, runs and scores.

Shared by the benches whose questions are a JSONL file of rows
``{id, question, answers: [gold strings], answerable: bool}`` (``id``: a non-empty
string, unique in the file; optional ``doc``: the id of the document that answers
it), ``bench/stdlibqa.py`` and ``bench/docsqa.py``, so that every such bench
validates, splits, runs and scores the same way.

- Rows alternate between halves: even rows (0, 2, 4, ...) are the tune half,
  odd rows the report half (:func:`split_rows`).
- A gold string must occur in the corpus as indexed (:func:`check_gold`), else
  the set is rejected: a question whose answer is not in the corpus measures nothing.
- A text contains a gold string when it holds it as whole words: not as part of a
  longer number or word (``10`` is not in ``100``, ``sort`` not in ``sorted``, but
  ``%20`` is in ``%20Ni`` and ``Enum(`` in ``Enum(value``), compared case- and
  width-folded with runs of whitespace made one space (:func:`contains_gold`, the
  library's rule, :mod:`reactive_rag.evaluate`, which ``reactive-rag eval`` uses too); an
  answer is correct when its text contains one.

``tune_cases(source)`` serves ``bench/fit_sufficiency.py``: a source names a bench
module (:data:`SOURCES`) with ``QUESTIONS`` (its question file), ``bench_root(None)``
(its index folder) and ``build_collection(index) -> collection name``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hotpot import writer_evidence  # bench/ sibling (the script's folder)

from reactive_rag import Citation, Engine
from reactive_rag.evaluate import (
    ANSWERED,
    WITH_TEXT,
    contains_gold,
    fold,
    gold_pattern,
    holds_gold,
)
from reactive_rag.index import CorpusIndex
from streams import EvidenceChunk

Split = Literal["tune", "report", "both"]
#: Source name -> bench module (in bench/) that owns the question set and its corpus.
SOURCES = {"stdlib": "stdlibqa", "docsqa": "docsqa"}


class QuestionSetError(ValueError):
    """A question file is malformed, or its gold strings are not in the corpus."""


def load_questions(path: Path) -> list[dict[str, Any]]:
    """The rows of a question file, validated (all problems reported at once).

    Raises:
        QuestionSetError: a row lacks a field, has a wrong type, repeats an id,
            or is answerable without gold strings.
    """
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"line {line_no}: not JSON ({exc})")
                continue
            rid, question = row.get("id"), row.get("question")
            answers, answerable = row.get("answers"), row.get("answerable")
            if not isinstance(rid, str) or not rid or rid in seen:
                problems.append(f"line {line_no}: id missing or repeated ({rid!r})")
            if not isinstance(question, str) or not question.strip():
                problems.append(f"line {line_no}: empty question")
            if not isinstance(answerable, bool):
                problems.append(f"line {line_no}: answerable must be true or false")
            if not isinstance(answers, list) or not all(isinstance(a, str) and a.strip()
                                                        for a in answers):
                problems.append(f"line {line_no}: answers must be a list of strings")
            elif answerable is True and not answers:
                problems.append(f"line {line_no}: answerable without gold strings")
            if "doc" in row and not isinstance(row["doc"], str):
                problems.append(f"line {line_no}: doc must be a document id")
            seen.add(str(rid))
            rows.append(row)
    if problems:
        raise QuestionSetError(f"{path}: " + "; ".join(problems))
    return rows


def split_rows(rows: Sequence[dict[str, Any]], split: Split) -> list[dict[str, Any]]:
    """The tune half (even rows), the report half (odd rows), or both (every row)."""
    if split == "both":
        return list(rows)
    return list(rows[0 if split == "tune" else 1::2])


def check_gold(rows: Iterable[dict[str, Any]], texts: Mapping[str, str]) -> None:
    """Every gold string of every answerable row occurs in the corpus.

    ``texts``: document id -> its text as indexed (titles included where answers
    show them). A row naming its ``doc`` must also have a gold string in that
    document (the answer comes from where the question author says it does).

    Raises:
        QuestionSetError: listing every row whose gold strings are not there.
    """
    folded = {doc: fold(text) for doc, text in texts.items()}
    everything = "\n".join(folded.values())
    problems: list[str] = []
    for row in rows:
        if not row.get("answerable"):
            continue
        patterns = [gold_pattern(g) for g in row["answers"]]
        missing = [g for g, p in zip(row["answers"], patterns, strict=True)
                   if not holds_gold(everything, [p])]
        if missing:
            problems.append(f"{row['id']}: not in the corpus: {missing}")
        doc = row.get("doc")
        if doc is not None:
            if doc not in folded:
                problems.append(f"{row['id']}: no document {doc!r} in the corpus")
            elif not holds_gold(folded[doc], patterns):
                problems.append(f"{row['id']}: no gold string in its document {doc!r}")
    if problems:
        raise QuestionSetError(f"{len(problems)} question(s) with gold strings the corpus "
                               "lacks: " + "; ".join(problems))


@dataclass(frozen=True, slots=True)
class QAResult:
    """One question asked on one path.

    ``citations``: the run's verified claims, each with the chunk its quote was
    found in; ``writer_evidence``: the chunks handed to the writer (its last
    answer request), whatever it did with them.
    """

    row: dict[str, Any]
    mode: str
    outcome: str
    answer: str
    reason: str
    seconds: float
    citations: tuple[Citation, ...] = ()
    writer_evidence: tuple[EvidenceChunk, ...] = ()

    @property
    def correct(self) -> bool:
        """An answerable question answered (fully or in part) with a gold string."""
        return (bool(self.row["answerable"]) and self.outcome in WITH_TEXT
                and contains_gold(self.answer, self.row["answers"]))

    @property
    def gold_in_writer_evidence(self) -> bool:
        """An answerable question with a gold string in a chunk handed to the writer."""
        return bool(self.row["answerable"]) and any(
            contains_gold(c.text, self.row["answers"]) for c in self.writer_evidence)

    def to_json(self) -> dict[str, Any]:
        """A row of a ``--dump`` file."""
        return {"id": self.row["id"], "mode": self.mode, "question": self.row["question"],
                "answerable": self.row["answerable"], "golds": self.row["answers"],
                "outcome": self.outcome, "correct": self.correct, "answer": self.answer,
                "reason": self.reason, "seconds": round(self.seconds, 3),
                "gold_in_writer_evidence": self.gold_in_writer_evidence,
                "writer_evidence": [c.text for c in self.writer_evidence]}


async def run_questions(engine: Engine, rows: Sequence[dict[str, Any]], collection: str,
                        mode: str, budget: Mapping[str, Any] | None = None) -> list[QAResult]:
    """Ask every row on ``mode`` over ``collection``, one at a time (latency is per question)."""
    out: list[QAResult] = []
    for row in rows:
        t0 = time.perf_counter()
        result = await engine.ask(row["question"], mode=mode, collections=[collection],
                                  budget=budget)
        out.append(QAResult(row, mode, result.outcome, result.answer or "",
                            result.reason or "", time.perf_counter() - t0,
                            result.citations, tuple(writer_evidence(result))))
        engine.forget(result.run_id)
    return out


def score(results: Sequence[QAResult],
          unanswerable_key: str = "unanswerable_answered_rate") -> dict[str, Any]:
    """Figures of one path over one half.

    ``answer_correct_rate``: answerable questions ending answered/partial whose answer
    holds a gold string; ``answered_rate``: answerable questions ending answered;
    ``unanswerable_key``: unanswerable questions ending answered (a false answer);
    outcome counts of each kind; ``p50_s``: median seconds per question.
    """
    pos = [r for r in results if r.row["answerable"]]
    neg = [r for r in results if not r.row["answerable"]]

    def rate(n: int, d: int) -> float:
        return round(n / d, 4) if d else 0.0

    return {
        "n_answerable": len(pos),
        "n_unanswerable": len(neg),
        "answer_correct_rate": rate(sum(r.correct for r in pos), len(pos)),
        "answered_rate": rate(sum(r.outcome in ANSWERED for r in pos), len(pos)),
        unanswerable_key: rate(sum(r.outcome in ANSWERED for r in neg), len(neg)),
        "outcomes_answerable": dict(Counter(r.outcome for r in pos)),
        "outcomes_unanswerable": dict(Counter(r.outcome for r in neg)),
        "p50_s": round(statistics.median(r.seconds for r in results), 3) if results else 0.0,
    }


def print_table(report: Mapping[str, Mapping[str, Mapping[str, Any]]],
                keys: Sequence[str]) -> None:
    """``report[split][mode]`` figures as one column per (split, mode), then outcome counts."""
    cols = [(s, m) for s in report for m in report[s]]
    print(f"{'measure':<30}" + "".join(f"{s + ' ' + m:>18}" for s, m in cols))
    for key in keys:
        print(f"{key:<30}" + "".join(f"{report[s][m][key]!s:>18}" for s, m in cols))
    for key in ("outcomes_answerable", "outcomes_unanswerable"):
        for s, m in cols:
            print(f"{key} [{s} {m}]: {report[s][m][key]}")


def add_run_arguments(parser: argparse.ArgumentParser, *, limit_help: str) -> None:
    """The flags every question-set bench takes: which half, which paths, how many rows,
    where its index lives, a dump of every run, and ``--json``."""
    parser.add_argument("--split", choices=("tune", "report", "both"), default="both")
    parser.add_argument("--modes", default="agent,rag", help="paths to run")
    parser.add_argument("--limit", type=int, default=0, help=limit_help)
    parser.add_argument("--root", type=Path, default=None, help="index folder")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write every run's question, outcome, answer and evidence (JSONL)")
    parser.add_argument("--json", action="store_true")


def tune_cases(source: str) -> tuple[list[dict[str, Any]], CorpusIndex, str]:
    """The tune half of ``source``'s question set, its bench's own index and its collection.

    The index is the one the bench itself keeps (``bench_root(None)``), so a corpus
    the bench has embedded before is reused, not embedded again. The caller closes it.
    """
    sys.path.insert(0, str(Path(__file__).parent))
    module = importlib.import_module(SOURCES[source])
    rows = load_questions(Path(module.QUESTIONS))
    index = CorpusIndex(Path(module.bench_root(None)))
    try:
        collection = str(module.build_collection(index))
    except BaseException:
        index.close()
        raise
    return split_rows(rows, "tune"), index, collection
