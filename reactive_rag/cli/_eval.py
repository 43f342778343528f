"""``reactive-rag eval QA_FILE``: the engine measured on your own questions.

Each question of the file (our JSONL, HotpotQA or SQuAD: :mod:`reactive_rag.evaluate`)
is asked on each mode, one run at a time, with the engine ``ask`` sets up (the same
options), and every run is kept in the run store so ``reactive-rag replay RUN_ID``
shows any answer. Then a table of the figures per mode, or with ``--json`` one JSON
object: the figures and a row per run, with its id.

A progress bar goes to stderr on a terminal (not with ``--json`` or ``--quiet``).
Exit status: 0 once measured (whatever the answers), 2 for a file or option that
cannot be used (one line naming it), 130 after Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from reactive_rag.engine import Mode, PriceTable
from reactive_rag.evaluate import (
    CaseResult,
    ModeFigures,
    QACase,
    QAFile,
    QAFileError,
    QAFormat,
    ask_cases,
    mode_figures,
    read_cases,
)
from reactive_rag.run import Budget, RunConfigError

from ._ask import (
    EXIT_INTERRUPTED,
    add_run_setup_options,
    build_engine,
    ensure_default_corpus,
    live_setup,
    parse_budget,
)
from ._safe_text import SafeConsole, safe_json
from ._store import add_store_options, keep_result, warn_unstored

__all__ = ["add_eval_commands"]

MODES: dict[str, tuple[Mode, ...]] = {"agent": ("agent",), "rag": ("rag",),
                                      "both": ("agent", "rag")}


def add_eval_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``eval`` on the main CLI parser."""
    p = subparsers.add_parser(
        "eval", conflict_handler="resolve",  # --mode here also takes "both"
        help="measure the agent and/or RAG on a file of questions with expected answers",
        description="Asks every question of QA_FILE (JSONL of {question, answers, "
        "collections?}; HotpotQA and SQuAD files are read too) and reports, per mode: "
        "answered, abstained, answer contains an expected answer, citations per answer, "
        "latency p50/p95 and model tokens. Every run is kept in the run store, so "
        "`reactive-rag replay RUN_ID` shows any answer.")
    p.add_argument("qa_file", type=Path, metavar="QA_FILE")
    add_run_setup_options(p, one_run=False)
    add_store_options(p)
    p.add_argument("--mode", choices=tuple(MODES), default="agent",
                   help="the agent loop, one-shot RAG, or both (default: agent)")
    p.add_argument("--limit", type=int, default=0, metavar="N",
                   help="only the first N questions (default: all)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (the figures, and a row per run with its "
                        "run id) and nothing else")
    p.add_argument("--prices", type=Path, metavar="FILE",
                   default=os.environ.get("REACTIVE_RAG_PRICES") or None,
                   help="TOML price table the runs' cost is estimated with (default: "
                        "$REACTIVE_RAG_PRICES; none: tokens only, cost 0)")
    p.set_defaults(func=_cmd_eval)


def _cmd_eval(args: argparse.Namespace) -> int:
    err = SafeConsole(stderr=True, highlight=False, soft_wrap=True)
    try:
        if args.limit < 0:
            raise RunConfigError(f"--limit must be 0 (all) or more, got {args.limit}")
        qa = read_cases(args.qa_file)
        cases = qa.cases[:args.limit] if args.limit else qa.cases
        budget = parse_budget(args.budget)
        prices = PriceTable() if args.prices is None else PriceTable.load(args.prices)
        results, unstored = asyncio.run(_evaluate(args, cases, budget, prices, err))
    except (QAFileError, RunConfigError) as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    except KeyboardInterrupt:
        print("interrupted: no figures (the runs that finished are kept)", file=sys.stderr,
              flush=True)
        return EXIT_INTERRUPTED
    if unstored:
        warn_unstored(unstored[0] + (f" (and {len(unstored) - 1} more run(s) not stored)"
                                     if len(unstored) > 1 else ""))
    figures = [mode_figures(mode, results) for mode in MODES[args.mode]]
    if args.json:
        print(safe_json(json.dumps(_report(args.qa_file, qa, figures, results, prices),
                                   ensure_ascii=False)))
        return 0
    if qa.skipped:
        err.print(f"note: skipped {len(qa.skipped)} question(s) with no text: "
                  f"{escape(', '.join(qa.skipped))}")
    _print_table(args.qa_file, qa.format, figures, prices, kept=args.keep and not unstored)
    return 0


async def _evaluate(args: argparse.Namespace, cases: Sequence[QACase], budget: dict[str, Any],
                    prices: PriceTable, err: Console) -> tuple[list[CaseResult], list[str]]:
    """Every case on every mode; the results, and a line per run the store did not take."""
    try:  # refused now rather than at every question
        Budget().with_overrides(dict(budget))
    except (ValueError, TypeError) as exc:
        raise RunConfigError(str(exc)) from exc
    setup = live_setup(args, budget)
    engine = build_engine(args, setup)
    results: list[CaseResult] = []
    unstored: list[str] = []
    try:
        default = setup.start.collections
        used = {c for case in cases for c in case.collections or default}
        quiet = args.quiet or args.json
        await ensure_default_corpus(engine, err, sorted(used), quiet)
        missing = sorted(c for c in used if not engine.index.exists(c))
        if missing:
            known = ", ".join(engine.index.collections()) or "none"
            raise RunConfigError(f"unknown collection(s) {missing}; indexed: {known}")
        modes = MODES[args.mode]
        with _progress(err, total=len(cases) * len(modes), quiet=quiet) as advance:
            async for result, scored in ask_cases(engine, cases, modes, collections=default,
                                                  budget=budget, prices=prices):
                results.append(scored)
                if args.keep:
                    problem = await keep_result(result, args.store)
                    if problem is not None:
                        unstored.append(problem)
                advance(scored)
    finally:
        await engine.aclose()
        await setup.aclose()
    return results, unstored


class _progress:
    """A bar on stderr while the runs go (a terminal only, and not quiet); ``advance`` per run."""

    def __init__(self, console: Console, *, total: int, quiet: bool) -> None:
        self._bar: Progress | None = None
        if not quiet and console.is_terminal:
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(),
                                 TextColumn("{task.fields[last]}"), console=console,
                                 transient=True)
            self._task = self._bar.add_task("eval", total=total, last="")

    def __enter__(self) -> _progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def __call__(self, scored: CaseResult) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=f"eval {scored.mode}",
                             last=f"{scored.outcome} {scored.seconds:.1f}s")
            self._bar.refresh()  # each run's line is shown, not only the 10 Hz samples


def _report(path: Path, qa: QAFile, figures: Sequence[ModeFigures],
            results: Sequence[CaseResult], prices: PriceTable) -> dict[str, Any]:
    """What ``--json`` prints: the figures per mode and a row per run."""
    return {"file": str(path), "format": qa.format, "skipped": list(qa.skipped),
            "currency": prices.currency,
            "modes": {f.mode: f.to_json() for f in figures},
            "rows": [r.to_json() for r in results]}


def _print_table(path: Path, fmt: QAFormat, figures: Sequence[ModeFigures],
                 prices: PriceTable, *, kept: bool) -> None:
    table = Table(title=f"{path.name} ({fmt}, {figures[0].questions} questions)")
    table.add_column("measure")
    for f in figures:
        table.add_column(f.mode, justify="right")

    def pct(n: int, d: int) -> str:
        return f"{n}/{d} ({100 * n / d:.0f}%)" if d else "-"

    rows: list[tuple[str, Any]] = [
        ("answered", lambda f: pct(f.answered, f.questions)),
        ("abstained (no evidence)", lambda f: pct(f.abstained, f.questions)),
        ("answer contains an expected one", lambda f: pct(f.contains_answer, f.expected)),
        ("citations per answer", lambda f: f"{f.citations_per_answer:.2f}"),
        ("latency p50", lambda f: f"{f.latency_p50_s:.2f}s"),
        ("latency p95", lambda f: f"{f.latency_p95_s:.2f}s"),
        ("model tokens in / out", lambda f: f"{f.input_tokens} / {f.output_tokens}"),
        (f"est. cost ({prices.currency})", lambda f: f"{f.cost:g}"
         + (f" (no price: {', '.join(f.unpriced)})" if f.unpriced else "")),
    ]
    for name, value in rows:
        table.add_row(name, *(value(f) for f in figures))
    console = SafeConsole(highlight=False)
    console.print(table)
    if kept:
        console.print("[dim]every run is kept: `reactive-rag runs` lists them, "
                      "`reactive-rag replay RUN_ID` shows one; --json gives each run's id[/dim]")
