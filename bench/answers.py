"""Does "answered (verified)" mean the question was answered? Answerable, unanswerable, support.

    python bench/answers.py [--data PATH] [--split tune|report|both] [--modes agent,rag] [--json]

HotpotQA-format data (``--data``, default ``hotpotqa_dev_300.jsonl``): rows 0-149
are the tuning rows, rows 150-299 the report rows (``--split``). For each split
one collection holds every paragraph of its questions, and a second holds the
same paragraphs minus every question's two gold ones, so none of those
questions is answerable there. NQ-open questions (``--nq``; rows 0-59 tune,
60-119 report) are asked over the split's full HotpotQA collection: general
knowledge the corpus does not hold. Each question runs on the agent path and
the one-shot path with the same evidence cap (``final_evidence=5``), and, as
the baseline measured in the same run, on the agent path with no answerability
judge (``agent-nojudge``: it writes from whatever it found).

Reported, per path and split:
- ``answered_rate``: share of answerable questions ending ``answered``;
- ``answer_contains_gold``: share whose answer text contains a normalised gold
  answer (official HotpotQA normalisation; yes/no questions: the answer says
  yes/no, see :func:`contains_gold`);
- ``false_answer_rate_nogold`` / ``_offcorpus``: share of unanswerable questions
  still ending ``answered``;
- outcome counts, and fabricated quotes (claims of any run whose quote is not
  in its cited chunk, re-checked here outside the run's own verifier);
- support AUCs of the verifier's offline statement-support score on SciFact and
  Climate-FEVER, beside a plain token-overlap baseline (``bench/_support_auc.py``).

Every figure is measured on every row of its split; nothing is sampled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import string
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hotpot import fabricated, writer_evidence  # bench/ sibling (the script's folder)

from reactive_rag import Engine, RunResult
from reactive_rag.index import CorpusIndex, Document

DATA_DIR = Path(os.environ.get("REACTIVE_RAG_DATA", Path(__file__).resolve().parents[1].parent
                                / "shared" / "data"))
SPLITS = {"tune": (0, 150), "report": (150, 300)}
NQ_SPLITS = {"tune": (0, 60), "report": (60, 120)}
ANSWERED_WITH_TEXT = ("answered", "answered_from_evidence", "partial")
BASELINE = "agent-nojudge"


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def documents(rows: Sequence[dict[str, Any]], *, drop_gold: bool) -> list[Document]:
    """Every paragraph once (by title); with ``drop_gold`` every row's gold paragraphs left out."""
    gold = {c["title"] for r in rows for c in r["contexts"] if c.get("is_supporting")}
    docs: dict[str, Document] = {}
    for row in rows:
        for ctx in row["contexts"]:
            title = ctx["title"]
            if title in docs or (drop_gold and title in gold):
                continue
            docs[title] = Document(id=title, title=title, text=ctx["paragraph_text"])
    return list(docs.values())


# --- official HotpotQA answer normalisation ------------------------------------------------


def normalize_answer(s: str) -> str:
    """Lower case, drop punctuation, articles and extra whitespace (HotpotQA's evaluate script)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def gold_answers(row: dict[str, Any]) -> list[str]:
    return [str(span) for obj in row.get("answers_objects", []) for span in obj.get("spans", [])]


def contains_gold(answer: str, golds: Sequence[str]) -> bool:
    """The normalised gold answer occurs in the normalised answer text (as whole words).

    For yes/no gold answers the text must say that word (the extractive writer
    quotes evidence and rarely says yes or no: such rows count as misses).
    """
    text = f" {normalize_answer(answer)} "
    for gold in golds:
        g = normalize_answer(gold)
        if g and f" {g} " in text:
            return True
    return False


@dataclass
class Tally:
    """Outcomes of one set of runs."""

    n: int = 0
    answered: int = 0
    contains_gold: int = 0
    fabricated: int = 0
    seconds: float = 0.0
    outcomes: Counter[str] | None = None

    def add(self, result: RunResult, golds: Sequence[str] | None, seconds: float) -> None:
        self.outcomes = self.outcomes or Counter()
        self.n += 1
        self.outcomes[result.outcome] += 1
        self.answered += result.outcome in ("answered", "answered_from_evidence")
        if golds is not None and result.outcome in ANSWERED_WITH_TEXT:
            self.contains_gold += contains_gold(result.answer, golds)
        self.fabricated += fabricated(result)[1]  # plain-substring failures (the headline test)
        self.seconds += seconds

    def rate(self, count: int) -> float:
        return round(count / self.n, 4) if self.n else 0.0


async def run_all(engine: Engine, questions: Sequence[tuple[str, list[str] | None]],
                  collection: str, mode: str, budget: dict[str, Any],
                  dump: list[dict[str, Any]] | None = None) -> Tally:
    tally = Tally()
    for question, golds in questions:
        t0 = time.perf_counter()
        result = await engine.ask(question, mode=mode, collections=[collection], budget=budget)
        tally.add(result, golds, time.perf_counter() - t0)
        if dump is not None:
            dump.append({"collection": collection, "mode": mode, "question": question,
                         "golds": golds, "outcome": result.outcome, "reason": result.reason,
                         "answer": result.answer,
                         "contains_gold": bool(golds) and contains_gold(result.answer,
                                                                         golds or []),
                         "gold_in_evidence": bool(golds) and contains_gold(
                             " ".join(c.text for c in writer_evidence(result)), golds or [])})
        engine.forget(result.run_id)
    return tally


async def evaluate_split(args: argparse.Namespace, split: str, rows: list[dict[str, Any]],
                         nq: list[dict[str, Any]], index: CorpusIndex) -> dict[str, Any]:
    lo, hi = SPLITS[split]
    part = rows[lo:hi]
    nlo, nhi = NQ_SPLITS[split]
    nq_part = nq[nlo:nhi]
    full, nogold = f"hotpot-{split}", f"hotpot-{split}-nogold"
    index.index_documents(full, documents(part, drop_gold=False))
    index.index_documents(nogold, documents(part, drop_gold=True))
    engine = Engine(index)
    # The baseline, measured in the same run: the same agent writing from whatever it
    # found, with no answerability judge (what every run did before).
    unjudged = Engine(index, judge=None)
    budget = {"final_evidence": args.cap}
    answerable = [(r["question_text"], gold_answers(r)) for r in part]
    unanswerable: list[tuple[str, list[str] | None]] = [(r["question_text"], None) for r in part]
    offcorpus: list[tuple[str, list[str] | None]] = [(str(r["question"]), None) for r in nq_part]
    out: dict[str, Any] = {"rows": f"{lo}-{hi - 1}", "n": len(part), "n_offcorpus": len(nq_part)}
    try:
        for mode in args.modes:
            eng, path = (unjudged, "agent") if mode == BASELINE else (engine, mode)
            a = await run_all(eng, answerable, full, path, budget, args.dump_rows)
            g = await run_all(eng, unanswerable, nogold, path, budget, args.dump_rows)
            o = await run_all(eng, offcorpus, full, path, budget, args.dump_rows)
            out[mode] = {
                "answered_rate": a.rate(a.answered),
                "answer_contains_gold": a.rate(a.contains_gold),
                "false_answer_rate_nogold": g.rate(g.answered),
                "false_answer_rate_offcorpus": o.rate(o.answered),
                "fabricated_quotes": a.fabricated + g.fabricated + o.fabricated,
                "mean_s": round((a.seconds + g.seconds + o.seconds) / max(1, a.n + g.n + o.n), 3),
                "outcomes_answerable": dict(a.outcomes or {}),
                "outcomes_nogold": dict(g.outcomes or {}),
                "outcomes_offcorpus": dict(o.outcomes or {}),
            }
    finally:
        await engine.aclose()  # closes the shared index too; the baseline engine holds no runs
    return out


def bench_root(given: Path | None) -> Path:
    """Where the bench keeps its indexes and vector caches."""
    return given or Path(os.environ.get("REACTIVE_RAG_HOME", Path.home() / ".cache"
                                        / "reactive_rag")) / "bench-answers"


def support_figures(data_dir: Path, cache_dir: Path, *, lexical_only: bool = False
                    ) -> dict[str, float]:
    """Support AUCs of the score the verifier uses by default.

    That is the lexical score times the MiniLM head (``support_auc_*``); the
    lexical score alone is ``lexical_auc_*``, the token-overlap baseline
    ``overlap_auc_*``. The head's per-pair features are cached in ``cache_dir``
    (the first run embeds ~9k texts, minutes). ``lexical_only``: no head.
    """
    from _support_auc import cached_head, support_aucs  # bench/ sibling module

    head = None
    if not lexical_only:
        cache_dir.mkdir(parents=True, exist_ok=True)
        head = cached_head(cache_dir / "support-features.sqlite")
    raw = support_aucs(data_dir, head=head)
    out: dict[str, float] = {}
    for key, value in raw.items():
        if key.startswith("support_auc_"):
            out["lexical_auc_" + key.removeprefix("support_auc_")] = value
            if head is None:
                out[key] = value
        elif key.startswith("head_auc_"):
            out["support_auc_" + key.removeprefix("head_auc_")] = value
        else:
            out[key] = value
    return out


def print_table(report: dict[str, Any], modes: Sequence[str]) -> None:
    splits = [s for s in ("tune", "report") if s in report["splits"]]
    cols = [(s, m) for s in splits for m in modes]
    head = "".join(f"{s + ' ' + m:>22}" for s, m in cols)
    print(f"{'measure':<30}{head}")
    for key in ("answered_rate", "answer_contains_gold", "false_answer_rate_nogold",
                "false_answer_rate_offcorpus", "fabricated_quotes", "mean_s"):
        cells = "".join(f"{report['splits'][s][m][key]:>22}" for s, m in cols)
        print(f"{key:<30}{cells}")
    for key in ("outcomes_answerable", "outcomes_nogold", "outcomes_offcorpus"):
        for s, m in cols:
            print(f"{key} [{s} {m}]: {report['splits'][s][m][key]}")
    if BASELINE in modes and "agent" in modes:
        for s in splits:
            ours, base = report["splits"][s]["agent"], report["splits"][s][BASELINE]
            for key in ("false_answer_rate_nogold", "false_answer_rate_offcorpus",
                        "answered_rate", "answer_contains_gold"):
                ratio = ours[key] / base[key] if base[key] else float("nan")
                print(f"{s}: agent / {BASELINE} {key}: {ratio:.2f}x")
    sup = report.get("support", {})
    if sup:
        print(f"{'support AUC':<30}{'verifier score':>16}{'lexical alone':>16}"
              f"{'token overlap':>16}")
        for name in ("scifact", "climate"):
            print(f"{name:<30}{sup.get(f'support_auc_{name}', float('nan')):>16.3f}"
                  f"{sup.get(f'lexical_auc_{name}', float('nan')):>16.3f}"
                  f"{sup.get(f'overlap_auc_{name}', float('nan')):>16.3f}")


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    rows = load_jsonl(args.data)
    nq = load_jsonl(args.nq)
    root = bench_root(args.root)
    splits = ["tune", "report"] if args.split == "both" else [args.split]
    report: dict[str, Any] = {"splits": {}}
    for split in splits:  # the engine closes its index when it is done with a split
        report["splits"][split] = await evaluate_split(args, split, rows, nq, CorpusIndex(root))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA_DIR / "hotpotqa_dev_300.jsonl",
                        help="HotpotQA-format file")
    parser.add_argument("--nq", type=Path, default=DATA_DIR / "NQ-open.dev.jsonl")
    parser.add_argument("--support-data", type=Path, default=DATA_DIR,
                        help="folder with scifact_claim_evidence_nli.jsonl, climate-fever.jsonl")
    parser.add_argument("--split", choices=("tune", "report", "both"), default="both")
    parser.add_argument("--modes", default=f"agent,rag,{BASELINE}",
                        help=f"paths to run; {BASELINE} is the agent without the "
                             "answerability judge (the baseline)")
    parser.add_argument("--cap", type=int, default=5, help="evidence chunks given to the writer")
    parser.add_argument("--root", type=Path, default=None, help="index folder")
    parser.add_argument("--no-support", action="store_true", help="skip the support AUCs")
    parser.add_argument("--support-lexical", action="store_true",
                        help="support AUCs of the lexical score only (no MiniLM head: fast)")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write every run's question, outcome and answer to this JSONL file")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    args.dump_rows = [] if args.dump else None
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for path in (args.data, args.nq):
        if not path.exists():
            print(f"no data at {path} (set --data/--nq or REACTIVE_RAG_DATA)", file=sys.stderr)
            return 2
    report = asyncio.run(main_async(args))
    if args.dump:
        with args.dump.open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in args.dump_rows)
    if not args.no_support:
        report["support"] = support_figures(args.support_data, bench_root(args.root),
                                            lexical_only=args.support_lexical)
    print_table(report, args.modes)
    if args.json:
        head_split = "report" if "report" in report["splits"] else "tune"
        head = report["splits"][head_split]
        agent = head.get("agent") or head[args.modes[0]]
        figures: dict[str, Any] = {
            "split": head_split,
            "n": head["n"],
            "answered_rate": agent["answered_rate"],
            "answer_contains_gold": agent["answer_contains_gold"],
            "false_answer_rate_nogold": agent["false_answer_rate_nogold"],
            "false_answer_rate_offcorpus": agent["false_answer_rate_offcorpus"],
            "fabricated_quotes": sum(report["splits"][s][m]["fabricated_quotes"]
                                     for s in report["splits"] for m in args.modes),
        }
        figures.update(report.get("support", {}))
        for split, body in report["splits"].items():
            for mode in args.modes:
                for key in ("answered_rate", "answer_contains_gold", "false_answer_rate_nogold",
                            "false_answer_rate_offcorpus"):
                    figures[f"{key}_{mode}_{split}"] = body[mode][key]
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
