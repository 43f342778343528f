"""With a capable chat model, does the library keep what the model gives it? (issue 25)

    python bench/chatqa.py [--split tune|report] [--n 150] [--data PATH] [--json]
                           [--fault-rows 3] [--faults all|none|NAME,...] [--corpus split|rows]

About two minutes on 2 cores once the split's index is cached (building it
first takes a few minutes).

SYNTHETIC MODEL. The chat model is scripted (``bench/_scripted_model.py``): an
OpenAI-compatible server on loopback that plays a competent, honest model using
each row's GOLD answer and gold titles (it searches the question and names it
was shown, answers once both gold paragraphs were shown, quotes verbatim and
paraphrases its statements, judges honestly). The figures therefore say what
the library does with good model output, not how good any real model is.

Data: HotpotQA rows of ``hotpotqa_dev_300.jsonl`` (``--data``; default under
``$REACTIVE_RAG_DATA``). Rows 0-149 are the tuning split, rows 150-299 the
report split (``--split``, default ``report``, the figures reported); ``--n``
takes the split's first n rows (default: all 150). The corpus is every
paragraph of the whole split (``--corpus rows``: only of the rows run), indexed
once with the offline MiniLM embedder and cached under
``$REACTIVE_RAG_HOME/bench-chatqa``. Each row runs in agent mode
(collection ``hotpot``) through ``Engine.from_config`` with the scripted server
as ``[chat]``: once without and once with the support judge (``[entailment]``,
the same server). Then ``--fault-rows`` rows run once per fault mode
(``bench/_scripted_model.FAULTS``), with short model timeouts so stalls end fast.

Every figure is measured from the runs' events and the requests the server
recorded; nothing is sampled or estimated:

- ``answered_rate``, ``answer_contains_gold`` (HotpotQA-normalised gold in the
  answer text, ``bench/answers.py``), for runs without the judge; ``judge_*``
  the same with the judge;
- ``correct_claims_dropped_rate``: of the claims the scripted writer wrote
  correctly, the share the verifier dropped (a drafted claim missing from the
  next ``answer.verified`` / ``verify.failed`` kept claims, or named in its
  ``errors``);
- ``answered_with_answer_dropped``: runs ending ``answered`` whose last model
  draft marked an answer claim (``answers: true``) that the final answer lacks;
- ``degraded_with_evidence``: clean runs (both configs) whose registered
  evidence held both gold paragraphs and that ended ``no_evidence``/``degraded``;
- ``faults_without_reason``: fault runs that needed a reason (ended other than
  ``answered``, fell back, or saw a model call fail) whose reasons (the outcome's,
  every ``run.fallback``'s) are all empty, or any is a bare exception name
  ("TimeoutError", "()"); ``fallback_silent``: ``run.fallback`` events with an
  empty reason, over every run;
- ``model_calls_per_run``, ``prompt_tokens_per_run`` (as the server counted
  them; clean runs without the judge), ``judge_calls_per_draft`` (support-judge
  requests per ``answer.drafted`` in the judged runs);
- beside them: drops by ``ClaimError.kind``, ``answer_contains_gold`` of the
  yes/no rows and of the others, the share of correct claims whose statement
  differs from its quote (how much the model paraphrases), writer replies cut
  at ``max_tokens``, and per fault mode its outcomes and the reason shown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _scripted_model import FAULTS, CallRecord, Fault, Passage, Row, ScriptedModel, ScriptedServer
from answers import ANSWERED_WITH_TEXT, contains_gold, gold_answers
from hotpot import DEFAULT_DATA, documents, gold_titles, load

from reactive_rag import Engine, RunResult
from reactive_rag.index import CorpusIndex
from streams import AnswerDrafted, AnswerVerified, Event, RunFallback, VerifyFailed

COLLECTION = "hotpot"
SPLITS = {"tune": (0, 150), "report": (150, 300)}
DEFAULT_N = 150
FAULT_TIMEOUT_S = 4.0
"""Model-call timeout of the fault runs: shorter than the scripted stalls (30 s)."""
JUDGE_ROLES = ("support", "entailment")
NO_EVIDENCE = ("no_evidence", "degraded")


@dataclass
class RunStats:
    """What one run did, read from its events and the server's records."""

    config: str
    row: int
    outcome: str
    reason: str
    fallback_reasons: tuple[str, ...]
    contains_gold: bool
    correct_written: int
    correct_dropped: int
    paraphrased: int
    answer_dropped: bool
    both_gold_held: bool
    calls: int
    prompt_tokens: int
    judge_calls: int
    drafts: int
    failed_calls: int
    writer_cut: int
    yes_no: bool
    dropped_kinds: Counter[str] = field(default_factory=Counter)
    dropped_examples: list[dict[str, str]] = field(default_factory=list)


def _claim_key(claim: Mapping[str, Any]) -> tuple[str, str]:
    return (str(claim.get("statement", "")).strip(), str(claim.get("source_id", "")).strip())


def dropped_indices(drafted: AnswerDrafted, verdict: AnswerVerified | VerifyFailed) -> set[int]:
    """Indices of the draft's claims the verifier did not keep.

    Read from the verdict's ``errors`` (``verify.failed``; ``answer.verified``
    once it carries them) and from its kept claims, through ``model_dump`` so a
    field this version lacks reads as empty.
    """
    data = verdict.model_dump()
    out = {int(e["index"]) for e in data.get("errors") or ()
           if isinstance(e, Mapping) and isinstance(e.get("index"), int) and e["index"] >= 0}
    kept = data.get("claims") if isinstance(verdict, AnswerVerified) else data.get("kept")
    kept_keys = {_claim_key(c) for c in kept or () if isinstance(c, Mapping)}
    for i, claim in enumerate(drafted.claims):
        if _claim_key(claim.model_dump()) not in kept_keys:
            out.add(i)
    return {i for i in out if i < len(drafted.claims)}


_BARE = re.compile(r"[\w.]*(\(\))?")


def bare(reason: str) -> bool:
    """Empty, or a bare exception name ("TimeoutError", "()") after its last colon."""
    parts = [p for p in reason.split(";")] or [""]
    return any(_BARE.fullmatch(p.rsplit(":", 1)[-1].strip()) is not None for p in parts)


def measure(result: RunResult, model: ScriptedModel, calls: Sequence[CallRecord], row: Row,
            config: str, index: int) -> RunStats:
    """One run's figures from its events (claims, outcome, evidence) and its model calls."""
    written = model.written
    correct_written = correct_dropped = paraphrased = 0
    examples: list[dict[str, str]] = []
    kinds: Counter[str] = Counter()
    drafted: AnswerDrafted | None = None
    last_model_draft: AnswerDrafted | None = None
    drafts = 0
    for event in result.events:
        if isinstance(event, AnswerDrafted):
            drafted = event
            drafts += 1
            if any(_key3(c) in written for c in event.claims):
                last_model_draft = event
        elif isinstance(event, AnswerVerified | VerifyFailed) and drafted is not None:
            dropped = dropped_indices(drafted, event)
            for i, claim in enumerate(drafted.claims):
                mine = written.get(_key3(claim))
                if mine is None or not mine.correct:
                    continue
                correct_written += 1
                paraphrased += mine.statement != mine.quote
                if i in dropped:
                    correct_dropped += 1
                    kind, why = _why(event, i)
                    kinds[kind] += 1
                    if len(examples) < 3:
                        examples.append({"statement": claim.statement, "quote": claim.quote,
                                         "why": why})
            drafted = None
    answer_dropped = False
    if result.outcome == "answered" and last_model_draft is not None:
        lead = [c for c in last_model_draft.claims
                if (w := written.get(_key3(c))) is not None and w.answers]
        final = {_claim_key(c.claim.model_dump()) for c in result.citations}
        answer_dropped = bool(lead) and all(_claim_key(c.model_dump()) not in final
                                            for c in lead)
    held = {c.doc_id or c.title for c in result.evidence.values()}
    fallbacks = tuple(e.reason for e in result.events if isinstance(e, RunFallback))
    return RunStats(
        config=config, row=index, outcome=result.outcome, reason=result.reason,
        fallback_reasons=fallbacks,
        contains_gold=result.outcome in ANSWERED_WITH_TEXT
        and contains_gold(result.answer, list(row.answers)),
        correct_written=correct_written, correct_dropped=correct_dropped,
        paraphrased=paraphrased,
        answer_dropped=answer_dropped,
        both_gold_held=bool(row.gold_titles) and set(row.gold_titles) <= held,
        calls=len(calls), prompt_tokens=sum(c.prompt_tokens for c in calls),
        judge_calls=sum(c.role in JUDGE_ROLES for c in calls), drafts=drafts,
        failed_calls=sum(c.status != 200 for c in calls),
        writer_cut=sum(c.role == "writer" and c.finish_reason == "length" for c in calls),
        yes_no=row.yes_no, dropped_kinds=kinds, dropped_examples=examples)


def _key3(claim: Any) -> tuple[str, str, str]:
    return (claim.statement.strip(), claim.source_id.strip(), claim.quote.strip())


def _why(event: Event, index: int) -> tuple[str, str]:
    """The typed kind and the reason the verifier gave for dropping claim ``index``."""
    for err in event.model_dump().get("errors") or ():
        if isinstance(err, Mapping) and err.get("index") == index:
            return str(err.get("kind") or "other"), str(err.get("reason", ""))
    return "no error given", "not kept (no error given)"


def needs_reason(s: RunStats) -> bool:
    """A fault the user can notice: not a clean ``answered``, a fallback, a failed call."""
    return s.outcome != "answered" or bool(s.fallback_reasons) or s.failed_calls > 0


def without_reason(s: RunStats) -> bool:
    reasons = [s.reason, *s.fallback_reasons]
    given = [r for r in reasons if r.strip()]
    return (not given and needs_reason(s)) or any(bare(r) for r in given) or any(
        not r.strip() for r in s.fallback_reasons)


# --- running ---------------------------------------------------------------------------------


def bench_root(given: Path | None) -> Path:
    return given or Path(os.environ.get("REACTIVE_RAG_HOME", Path.home() / ".cache"
                                        / "reactive_rag")) / "bench-chatqa"


def corpus(index: CorpusIndex) -> list[Passage]:
    """Every chunk of the collection, with the id a run shows (what the model knows)."""
    with index.open(COLLECTION) as coll:
        chunks = [coll.chunk_at(i) for i in range(len(coll))]
    return [Passage(c.id, c.title, c.text) for c in chunks]


def known_rows(rows: Sequence[dict[str, Any]]) -> list[Row]:
    return [Row(r["question_text"], tuple(gold_answers(r)), tuple(sorted(gold_titles(r))))
            for r in rows]


async def run_config(label: str, rows: Sequence[Row], first_row: int, model: ScriptedModel,
                     index: CorpusIndex, *, judge: bool, timeout_s: float | None = None
                     ) -> list[RunStats]:
    """Every row once through an engine whose chat model (and judge) is the scripted server."""
    out: list[RunStats] = []
    async with ScriptedServer(model) as server:
        chat: dict[str, Any] = {"url": server.url, "model": "scripted"}
        config: dict[str, Any] = {"chat": chat}
        if timeout_s is not None:
            chat["timeout_s"] = timeout_s
        if judge:
            config["entailment"] = {"url": server.url, "model": "scripted-judge",
                                    **({"timeout_s": timeout_s} if timeout_s else {})}
        engine = Engine.from_config(config, index=index, env={})
        try:
            for i, row in enumerate(rows):
                model.reset()
                before = len(model.calls)
                result = await engine.ask(row.question, mode="agent", collections=[COLLECTION])
                out.append(measure(result, model, model.calls[before:], row, label,
                                   first_row + i))
                engine.forget(result.run_id)
        finally:
            await engine.aclose()
    return out


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def _share(hits: Sequence[bool]) -> float | None:
    """The share of ``hits`` that are true; ``None`` for no rows (not a zero)."""
    return round(sum(hits) / len(hits), 4) if hits else None


def summary(runs: Sequence[RunStats]) -> dict[str, Any]:
    n = len(runs)
    written = sum(r.correct_written for r in runs)
    drafts = sum(r.drafts for r in runs)
    return {
        "n": n,
        "answered_rate": _rate(sum(r.outcome in ("answered", "answered_from_evidence")
                                   for r in runs), n),
        "answer_contains_gold": _rate(sum(r.contains_gold for r in runs), n),
        "correct_claims_written": written,
        "correct_claims_dropped": sum(r.correct_dropped for r in runs),
        "correct_claims_dropped_rate": _rate(sum(r.correct_dropped for r in runs), written),
        "paraphrased_claims_rate": _rate(sum(r.paraphrased for r in runs), written),
        "writer_replies_cut": sum(r.writer_cut for r in runs),
        "answered_with_answer_dropped": sum(r.answer_dropped for r in runs),
        "degraded_with_evidence": sum(r.both_gold_held and r.outcome in NO_EVIDENCE
                                      for r in runs),
        "both_gold_held": sum(r.both_gold_held for r in runs),
        "model_calls_per_run": _rate(sum(r.calls for r in runs), n),
        "prompt_tokens_per_run": round(sum(r.prompt_tokens for r in runs) / n, 1) if n else 0.0,
        "judge_calls_per_draft": _rate(sum(r.judge_calls for r in runs), drafts),
        "outcomes": dict(Counter(r.outcome for r in runs)),
        "fallback_silent": sum(not f.strip() for r in runs for f in r.fallback_reasons),
        "dropped_by_kind": dict(sum((r.dropped_kinds for r in runs), Counter[str]())),
        "answer_contains_gold_yes_no": _share([r.contains_gold for r in runs if r.yes_no]),
        "answer_contains_gold_other": _share([r.contains_gold for r in runs if not r.yes_no]),
        "evidence_lost": [{"row": r.row, "outcome": r.outcome, "reason": r.reason[:300]}
                          for r in runs if r.both_gold_held and r.outcome in NO_EVIDENCE],
    }


def fault_summary(fault: Fault, runs: Sequence[RunStats]) -> dict[str, Any]:
    shown = next((r for r in runs if needs_reason(r)), None)
    said = "(none needed: every run ended answered, no fallback, no failed call)"
    if shown is not None:
        said = " | ".join(dict.fromkeys(x for x in (*shown.fallback_reasons, shown.reason)
                                        if x)) or "(empty)"
    return {
        "fault": fault, "n": len(runs), "outcomes": dict(Counter(r.outcome for r in runs)),
        "answer_contains_gold": sum(r.contains_gold for r in runs),
        "without_reason": sum(without_reason(r) for r in runs),
        "fallback_silent": sum(not f.strip() for r in runs for f in r.fallback_reasons),
        "reason": said,
    }


def _fault_judged(fault: Fault) -> bool:
    return fault.startswith("judge_")


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    lo, hi = SPLITS[args.split]
    split_rows = load(args.data, hi - lo, lo)
    rows = split_rows[: args.n]
    corpus_rows = split_rows if args.corpus == "split" else rows
    root = bench_root(args.root) / (f"{args.split}" if args.corpus == "split"
                                    else f"{args.split}-n{len(rows)}")
    base = CorpusIndex(root)
    t0 = time.perf_counter()
    report = base.index_documents(COLLECTION, documents(corpus_rows))
    build_s = time.perf_counter() - t0
    passages = corpus(base)
    known = known_rows(rows)
    embedder = base.embedder

    def fresh_index() -> CorpusIndex:  # an engine closes its index; the embedder is shared
        return CorpusIndex(root, embedder)

    out: dict[str, Any] = {"split": args.split, "rows": f"{lo}-{lo + len(rows) - 1}",
                           "docs": report.documents, "chunks": report.chunks,
                           "index_build_s": round(build_s, 1)}
    try:
        timings: dict[str, float] = {}
        configs: dict[str, list[RunStats]] = {}
        for label, judge in (("clean", False), ("judge", True)):
            t1 = time.perf_counter()
            model = ScriptedModel(passages, known)
            configs[label] = await run_config(label, known, lo, model, fresh_index(), judge=judge)
            timings[label] = round(time.perf_counter() - t1, 1)
        faults: list[dict[str, Any]] = []
        fault_runs: list[RunStats] = []
        for fault in args.faults:
            t1 = time.perf_counter()
            model = ScriptedModel(passages, known, fault=fault)
            runs = await run_config(fault, known[: args.fault_rows], lo, model, fresh_index(),
                                    judge=_fault_judged(fault), timeout_s=FAULT_TIMEOUT_S)
            fault_runs += runs
            faults.append(fault_summary(fault, runs) | {"s": round(time.perf_counter() - t1, 1)})
    finally:
        base.close()
    out |= {"clean": summary(configs["clean"]), "judge": summary(configs["judge"]),
            "faults": faults, "timings_s": timings,
            "faults_without_reason": sum(without_reason(r) for r in fault_runs),
            "fault_runs": len(fault_runs),
            "fallback_silent": sum(not f.strip() for r in (*configs["clean"], *configs["judge"],
                                                            *fault_runs)
                                   for f in r.fallback_reasons),
            "dropped_examples": {label: [x for r in runs for x in r.dropped_examples][:4]
                                 for label, runs in configs.items()}}
    return out


def figures(out: Mapping[str, Any]) -> dict[str, Any]:
    """The one JSON object ``--json`` ends with."""
    clean, judged = out["clean"], out["judge"]
    return {
        "split": out["split"],
        "rows": out["rows"],
        "n": clean["n"],
        "answered_rate": clean["answered_rate"],
        "answer_contains_gold": clean["answer_contains_gold"],
        "correct_claims_dropped_rate": clean["correct_claims_dropped_rate"],
        "answered_with_answer_dropped": clean["answered_with_answer_dropped"],
        "judge_answered_rate": judged["answered_rate"],
        "judge_answer_contains_gold": judged["answer_contains_gold"],
        "judge_correct_claims_dropped_rate": judged["correct_claims_dropped_rate"],
        "judge_answered_with_answer_dropped": judged["answered_with_answer_dropped"],
        "degraded_with_evidence": clean["degraded_with_evidence"]
        + judged["degraded_with_evidence"],
        "faults_without_reason": out["faults_without_reason"],
        "fault_runs": out["fault_runs"],
        "fallback_silent": out["fallback_silent"],
        "model_calls_per_run": clean["model_calls_per_run"],
        "prompt_tokens_per_run": clean["prompt_tokens_per_run"],
        "judge_model_calls_per_run": judged["model_calls_per_run"],
        "judge_prompt_tokens_per_run": judged["prompt_tokens_per_run"],
        "judge_calls_per_draft": judged["judge_calls_per_draft"],
        "outcomes": clean["outcomes"],
        "judge_outcomes": judged["outcomes"],
        "dropped_by_kind": clean["dropped_by_kind"],
        "judge_dropped_by_kind": judged["dropped_by_kind"],
        "answer_contains_gold_yes_no": clean["answer_contains_gold_yes_no"],
        "judge_answer_contains_gold_yes_no": judged["answer_contains_gold_yes_no"],
        "faults": {f["fault"]: {"outcomes": f["outcomes"], "reason": f["reason"],
                                "answer_contains_gold": f["answer_contains_gold"],
                                "without_reason": f["without_reason"]}
                   for f in out["faults"]},
    }


def print_table(out: Mapping[str, Any]) -> None:
    clean, judged = out["clean"], out["judge"]
    print(f"Scripted competent model (synthetic: scripted from the gold answers), split "
          f"{out['split']} rows {out['rows']}; corpus {out['docs']} paragraphs / "
          f"{out['chunks']} chunks (index built/opened in {out['index_build_s']}s)")
    print(f"{'measure':<34}{'no judge':>12}{'with judge':>12}")
    for key in ("n", "answered_rate", "answer_contains_gold", "correct_claims_written",
                "paraphrased_claims_rate", "correct_claims_dropped", "correct_claims_dropped_rate",
                "answered_with_answer_dropped", "both_gold_held", "degraded_with_evidence",
                "model_calls_per_run", "prompt_tokens_per_run", "judge_calls_per_draft",
                "writer_replies_cut", "fallback_silent"):
        print(f"{key:<34}{clean[key]!s:>12}{judged[key]!s:>12}")
    for key in ("answer_contains_gold_yes_no", "answer_contains_gold_other"):
        print(f"{key:<34}{clean[key]!s:>12}{judged[key]!s:>12}")
    print(f"{'outcomes':<34}{clean['outcomes']!s}  |  {judged['outcomes']!s}")
    print(f"{'dropped_by_kind':<34}{clean['dropped_by_kind']!s}  |  {judged['dropped_by_kind']!s}")
    for label, examples in out["dropped_examples"].items():
        for ex in examples:
            print(f"  dropped ({label}): {ex['statement']!r} (quote {ex['quote'][:80]!r}): "
                  f"{ex['why']}")
    for label, summary in (("no judge", clean), ("with judge", judged)):
        for lost in summary["evidence_lost"]:
            print(f"  both gold held, ended {lost['outcome']} ({label}, row {lost['row']}): "
                  f"{lost['reason']}")
    if out["faults"]:
        print(f"\nFaults ({out['fault_runs']} runs; model timeout {FAULT_TIMEOUT_S:.0f} s): "
              f"{out['faults_without_reason']} without a reason")
        print(f"{'fault':<20}{'outcomes':<36}{'gold':>5}{'no reason':>10}{'s':>6}  "
              "reason the user sees (first run that needed one)")
        for f in out["faults"]:
            print(f"{f['fault']:<20}{json.dumps(f['outcomes']):<36}{f['answer_contains_gold']:>5}"
                  f"{f['without_reason']:>10}{f['s']:>6}  {f['reason'][:400]}")
    print(f"timings (s): {out['timings_s']}")


def parse_faults(text: str) -> list[Fault]:
    if text == "all":
        return list(FAULTS)
    if text in ("none", ""):
        return []
    wanted = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in wanted if t not in FAULTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown faults {unknown}; known: {list(FAULTS)}")
    return [f for f in FAULTS if f in wanted]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--split", choices=tuple(SPLITS), default="report",
                        help="tune: rows 0-149; report: rows 150-299 (the reported figures)")
    parser.add_argument("--n", type=int, default=DEFAULT_N, help="first n rows of the split")
    parser.add_argument("--fault-rows", type=int, default=3, help="rows run per fault mode")
    parser.add_argument("--faults", type=parse_faults, default=list(FAULTS),
                        help="all, none, or fault names separated by commas")
    parser.add_argument("--corpus", choices=("split", "rows"), default="split",
                        help="paragraphs of the whole split (default) or of the rows run only")
    parser.add_argument("--root", type=Path, default=None, help="index folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"no data at {args.data} (set --data or REACTIVE_RAG_DATA)", file=sys.stderr)
        return 2
    out = asyncio.run(main_async(args))
    print_table(out)
    if args.json:
        print(json.dumps(figures(out), ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
