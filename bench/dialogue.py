"""Two-turn dialogues from HotpotQA: is a follow-up answered better in a session than alone?

    python bench/dialogue.py [--data PATH] [--split tune|report|both] [--n N] [--json]

Dialogues are built in code from each row (no row, title or phrase is named
anywhere): of the row's two gold paragraphs, the one whose title (without a
parenthesised qualifier) occurs verbatim in the question is the bridge entity.
Turn 1 asks for that paragraph by its subject ("Tell me about <title>."); turn 2
is the original question with the title replaced by a pronoun ("it", or
"he"/"she" when the paragraph speaks of its subject so; "its"/"his"/"her" for
a possessive). Rows where neither or both titles occur are skipped (said in the
table). Each dialogue's turn 2 is asked

- in a session, after turn 1 (the follow-up is rewritten from the history and
  turn 1's evidence can be found again),
- alone (stateless: the pronoun question as is),

and, for the compression figures, in the session again with
``compress_context`` on (when the planner supports it). Reported per split:
both-gold recall of turn 2's final evidence (the writer's chunks),
``answer_contains_gold`` (HotpotQA's normalised gold answer in the answer text),
and mean planner context tokens per round with and without compression. Rows
0-74 are the tuning split, 75-149 the report split (rows 150-299 of the shared
file are comparison questions that name both titles; ``--split comparison``).

Pronoun follow-ups with a model configured: the same construction, but the
pronoun may also be "they" (the paragraph speaks of its subject so) and every
third "it" becomes "that"; the dialogues whose follow-up uses it/they/he/she/that
(not a possessive or object form) make the set. Turn 2 is read by
:class:`~reactive_rag.judgement.model.ChatRewriter` talking to
``bench/_scripted_rewriter.py``, a SCRIPTED OpenAI-compatible server on
loopback that knows each dialogue it was built from (synthetic: it measures the
path a model's reading takes, not a model's skill), and, for comparison, by the
offline rules on the same history. Reported: ``pronoun_followups``,
``pronoun_resolved_model`` / ``pronoun_resolved_offline`` (share of follow-ups
whose standalone question names the entity), the model's fallbacks, and
both-gold / ``answer_contains_gold`` of turn 2 run with either reading.
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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _scripted_rewriter import ScriptedLine, ScriptedRewriter
from answers import contains_gold, gold_answers
from hotpot import DEFAULT_DATA, documents, final_docs, gold_titles, load

from actors.models import OpenAIChatClient
from reactive_rag import Engine, RunResult
from reactive_rag.conversation import Conversation
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement.model import ChatRewriter
from reactive_rag.run import Budget
from streams import PlanDecided

COLLECTION = "hotpot"
SPLITS = {"tune": (0, 75), "report": (75, 75), "comparison": (150, 150)}
"""Rows of each split. The shared file's rows 150-299 are comparison questions
("Are both X and Y ...?"): they name both gold titles and make almost no dialogue,
so the bridge rows 0-149 are split in two (tune 0-74, report 75-149) and 150-299
are run for completeness."""
_QUALIFIER = re.compile(r"\s*\([^)]*\)\s*$")
_PERSON = re.compile(r"\b(he|his|him)\b", re.IGNORECASE)
_FEMALE = re.compile(r"\b(she|her|hers)\b", re.IGNORECASE)
_THING = re.compile(r"\b(it|its)\b", re.IGNORECASE)
_PLURAL = re.compile(r"\b(they|them|their)\b", re.IGNORECASE)
PRONOUNS = ("it", "they", "he", "she", "that")
"""The follow-up words of the pronoun set (subject or object forms, no possessives)."""
_PREPOSITIONS = "of|by|for|with|to|from|in|on|at|about|than|as"


@dataclass(frozen=True, slots=True)
class Dialogue:
    row: dict[str, Any]
    first: str
    second: str
    bridge: str
    pronoun: str = ""
    """The word that stands for ``bridge`` in ``second`` ("it", "his", "them", ...)."""


def dialogue(row: dict[str, Any], *, plural: bool = False,
             thing: str = "it") -> Dialogue | None:
    """The two turns of one row, or None when no single gold title is named by the question.

    ``plural``: "they" when the paragraph speaks of its subject so more than of
    "it"/"he"/"she"; ``thing``: the word for a thing ("it" or "that").
    """
    question = row["question_text"]
    named = []
    for ctx in row["contexts"]:
        if not ctx.get("is_supporting"):
            continue
        subject = _QUALIFIER.sub("", ctx["title"]).strip()
        if len(subject) > 2 and re.search(rf"(?<!\w){re.escape(subject)}(?!\w)", question):
            named.append((subject, ctx["paragraph_text"]))
    if len(named) != 1:
        return None
    subject, text = named[0]
    he, she, it, they = (len(p.findall(text)) for p in (_PERSON, _FEMALE, _THING, _PLURAL))
    pronoun, objective, possessive = ("she", "her", "her") if she > max(he, it) else \
        ("he", "him", "his") if he > it else ("it", "it", "its")
    if plural and they > max(he, she, it):
        pronoun, objective, possessive = "they", "them", "their"
    elif pronoun == "it":
        pronoun = objective = thing
    name = re.escape(subject)
    used = possessive
    second = re.sub(rf"(?:\b[Tt]he\s+)?(?<!\w){name}['\u2019]s\b", possessive, question, count=1)
    if second == question:
        used = objective
        second = re.sub(rf"\b({_PREPOSITIONS})\s+(?:the\s+)?{name}(?!\w)",
                        lambda m: f"{m.group(1)} {objective}", question, count=1)
    if second == question:
        used = pronoun
        second = re.sub(rf"(?:\b[Tt]he\s+)?(?<!\w){name}(?!\w)", pronoun, question, count=1)
    second = second[:1].upper() + second[1:]
    return Dialogue(row, f"Tell me about {subject}.", second, subject, used)


def pronoun_dialogues(rows: Sequence[dict[str, Any]]) -> list[Dialogue]:
    """The pronoun set: dialogues whose follow-up says it/they/he/she/that for the entity.

    Every third dialogue that would say "it" says "that" instead.
    """
    out: list[Dialogue] = []
    things = 0
    for row in rows:
        d = dialogue(row, plural=True)
        if d is not None and d.pronoun == "it":
            things += 1
            if things % 3 == 0:
                d = dialogue(row, plural=True, thing="that")
        if d is not None and d.pronoun in PRONOUNS:
            out.append(d)
    return out


def names(question: str, entity: str) -> bool:
    """Whether a standalone question names the entity (case and spacing aside)."""
    return " ".join(entity.split()).lower() in " ".join(question.split()).lower()


def context_tokens(result: RunResult) -> list[int]:
    """Planner context tokens per round, as the planner actor recorded them (if it does)."""
    return [int(t) for e in result.events if isinstance(e, PlanDecided)
            if (t := getattr(e, "context_tokens", None)) is not None]


def _supports_compression() -> bool:
    """Whether this build's budget takes ``compress_context`` (the planner's compression)."""
    try:
        Budget().with_overrides({"compress_context": True})
    except (TypeError, ValueError):
        return False
    return True


async def evaluate(dialogues: Sequence[Dialogue], engine: Engine, cap: int,
                   compression: bool) -> dict[str, Any]:
    budget: dict[str, Any] = {"final_evidence": cap}
    tallies: dict[str, list[float]] = {k: [] for k in (
        "both_gold_session", "both_gold_stateless", "both_gold_compressed",
        "answer_contains_gold_session", "answer_contains_gold_stateless",
        "answer_contains_gold_compressed", "rewritten")}
    tokens: dict[str, list[int]] = {"uncompressed": [], "compressed": []}
    times: list[float] = []
    for d in dialogues:
        gold, answers = gold_titles(d.row), gold_answers(d.row)
        t0 = time.perf_counter()
        variants = [("session", budget), ("compressed", {**budget, "compress_context": True})] \
            if compression else [("session", budget)]
        for name, opts in variants:
            chat = Conversation(engine)
            first = await chat.ask(d.first, collections=[COLLECTION], budget=opts)
            second = await chat.ask(d.second, collections=[COLLECTION], budget=opts)
            tallies[f"both_gold_{name}"].append(float(gold <= set(final_docs(second))))
            tallies[f"answer_contains_gold_{name}"].append(
                float(contains_gold(second.answer, answers)))
            tokens["compressed" if name == "compressed" else "uncompressed"] += \
                context_tokens(first) + context_tokens(second)
            if name == "session":
                tallies["rewritten"].append(float(any(e.type == "query.rewritten" and
                                                      getattr(e, "resolved", None)
                                                      for e in second.events)))
            for r in (first, second):
                engine.forget(r.run_id)
        alone = await engine.ask(d.second, collections=[COLLECTION], budget=budget)
        tallies["both_gold_stateless"].append(float(gold <= set(final_docs(alone))))
        tallies["answer_contains_gold_stateless"].append(
            float(contains_gold(alone.answer, answers)))
        engine.forget(alone.run_id)
        times.append(time.perf_counter() - t0)
    n = len(dialogues)
    out: dict[str, Any] = {"n": n}
    for key, values in tallies.items():
        out[key] = round(sum(values) / len(values), 4) if values else None
    mean = {k: (sum(v) / len(v) if v else None) for k, v in tokens.items()}
    out["context_tokens_uncompressed"] = round(mean["uncompressed"], 1) \
        if mean["uncompressed"] is not None else None
    out["context_tokens_compressed"] = round(mean["compressed"], 1) \
        if mean["compressed"] is not None else None
    out["context_tokens_ratio"] = round(mean["compressed"] / mean["uncompressed"], 4) \
        if mean["compressed"] is not None and mean["uncompressed"] else None
    out["both_gold_uncompressed"] = out["both_gold_session"]
    out["seconds_per_dialogue"] = round(sum(times) / n, 2) if n else None
    return out


async def evaluate_pronouns(dialogues: Sequence[Dialogue], engine: Engine,
                            cap: int) -> dict[str, Any]:
    """Turn 2 of each pronoun dialogue read by the model (scripted) and by the rules."""
    budget: dict[str, Any] = {"final_evidence": cap}
    script = {d.second: ScriptedLine(d.pronoun, d.bridge, d.row["question_text"])
              for d in dialogues}
    server = ScriptedRewriter(script)
    await server.start()
    client = OpenAIChatClient(server.base_url, model="scripted-rewriter", max_retries=0)
    rewriter = ChatRewriter(client)
    tallies: dict[str, list[float]] = {k: [] for k in (
        "resolved_model", "resolved_offline", "both_gold_model", "both_gold_offline",
        "answer_contains_gold_model", "answer_contains_gold_offline")}
    fallbacks = 0
    try:
        for d in dialogues:
            gold, answers = gold_titles(d.row), gold_answers(d.row)
            chat = Conversation(engine, rewriter=rewriter)
            first = await chat.ask(d.first, collections=[COLLECTION], budget=budget)
            after_first = chat.state
            by_model = await chat.ask(d.second, collections=[COLLECTION], budget=budget)
            prepared = chat.last_prepared
            assert prepared is not None
            fallbacks += prepared.fallback is not None
            tallies["resolved_model"].append(float(prepared.by == "model" and
                                                   names(prepared.standalone, d.bridge)))
            rules = Conversation(engine, state=after_first)
            by_rules = await rules.ask(d.second, collections=[COLLECTION], budget=budget)
            assert rules.last_prepared is not None
            tallies["resolved_offline"].append(float(names(rules.last_prepared.standalone,
                                                           d.bridge)))
            for name, result in (("model", by_model), ("offline", by_rules)):
                tallies[f"both_gold_{name}"].append(float(gold <= set(final_docs(result))))
                tallies[f"answer_contains_gold_{name}"].append(
                    float(contains_gold(result.answer, answers)))
            for r in (first, by_model, by_rules):
                engine.forget(r.run_id)
    finally:
        await client.aclose()
        await server.close()
    out: dict[str, Any] = {
        "pronoun_followups": len(dialogues),
        "pronoun_words": dict(Counter(d.pronoun for d in dialogues)),
        "pronoun_model_fallbacks": fallbacks,
        "pronoun_model_calls": server.calls["followup_rewrite"],
    }
    for key, values in tallies.items():
        out[f"pronoun_{key}"] = round(sum(values) / len(values), 4) if values else None
    return out


async def run_split(args: argparse.Namespace, split: str, compression: bool) -> dict[str, Any]:
    offset, n = SPLITS[split]
    rows = load(args.data, min(n, args.n) if args.n else n, offset)
    built = [dialogue(r) for r in rows]
    dialogues = [d for d in built if d is not None]
    pronouns = pronoun_dialogues(rows)
    root = args.root or Path(os.environ.get("REACTIVE_RAG_HOME", Path.home() / ".cache"
                                            / "reactive_rag")) / "bench-dialogue"
    index = CorpusIndex(root / f"{split}-o{offset}-n{len(rows)}")
    index.index_documents(COLLECTION, documents(rows))
    engine = Engine(index)
    try:
        out = await evaluate(dialogues, engine, args.cap, compression)
        out.update(await evaluate_pronouns(pronouns, engine, args.cap))
    finally:
        await engine.aclose()
    out.update(split=split, rows=f"{offset}-{offset + len(rows) - 1}", skipped=len(rows) - len(
        dialogues))
    return out


def print_table(report: dict[str, dict[str, Any]]) -> None:
    def fmt(value: Any) -> str:
        return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)

    splits = list(report)
    print("two-turn HotpotQA dialogues: turn 2 asked in a session vs alone")
    print(f"{'measure':<44}" + "".join(f"{s + ' ' + report[s]['rows']:>22}" for s in splits))
    for key, label in (
        ("n", "dialogues (rows with one named gold title)"), ("skipped", "rows skipped"),
        ("rewritten", "turn 2 rewritten in the session"),
        ("both_gold_stateless", "both-gold, turn 2 alone (baseline)"),
        ("both_gold_session", "both-gold, turn 2 in the session"),
        ("answer_contains_gold_stateless", "answer contains gold, alone"),
        ("answer_contains_gold_session", "answer contains gold, session"),
        ("both_gold_compressed", "both-gold, session + compression"),
        ("context_tokens_uncompressed", "planner context tokens/round"),
        ("context_tokens_compressed", "planner context tokens/round, compressed"),
        ("context_tokens_ratio", "context tokens ratio (compressed/not)"),
        ("seconds_per_dialogue", "seconds per dialogue (all variants)"),
        ("pronoun_followups", "pronoun follow-ups (it/they/he/she/that)"),
        ("pronoun_resolved_model", "  named the entity, model (scripted)"),
        ("pronoun_resolved_offline", "  named the entity, offline rules"),
        ("pronoun_model_fallbacks", "  model fallbacks to the rules"),
        ("pronoun_both_gold_model", "  both-gold, model reading"),
        ("pronoun_both_gold_offline", "  both-gold, rules reading"),
        ("pronoun_answer_contains_gold_model", "  answer contains gold, model reading"),
        ("pronoun_answer_contains_gold_offline", "  answer contains gold, rules reading"),
    ):
        print(f"{label:<44}" + "".join(f"{fmt(report[s].get(key)):>22}" for s in splits))
    print("pronoun follow-ups: the model is a SCRIPTED loopback server that knows each "
          "dialogue (synthetic; bench/_scripted_rewriter.py)")
    for s in splits:
        r = report[s]
        if r["both_gold_session"] is not None and r["both_gold_stateless"] is not None:
            gain = (r["both_gold_session"] - r["both_gold_stateless"]) * 100
            print(f"{s}: session - alone = {gain:+.1f} pt both-gold (target >= +20)")


async def main_async(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    splits = {"both": ["tune", "report"], "all": ["tune", "report", "comparison"]}.get(
        args.split, [args.split])
    compression = not args.no_compression and _supports_compression()
    return {s: await run_split(args, s, compression) for s in splits}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--split", choices=("tune", "report", "comparison", "both", "all"),
                        default="both", help="both: tune and report; all: the three")
    parser.add_argument("--n", type=int, default=0, help="rows per split (0: all of it)")
    parser.add_argument("--cap", type=int, default=5, help="evidence chunks given to the writer")
    parser.add_argument("--no-compression", action="store_true",
                        help="skip the compressed variant")
    parser.add_argument("--root", type=Path, default=None, help="index folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"no data at {args.data} (set --data or REACTIVE_RAG_DATA)", file=sys.stderr)
        return 2
    report = asyncio.run(main_async(args))
    print_table(report)
    if args.json:
        headline = report.get("report") or next(iter(report.values()))
        keys = ("n", "both_gold_session", "both_gold_stateless", "answer_contains_gold_session",
                "answer_contains_gold_stateless", "context_tokens_ratio", "both_gold_compressed",
                "both_gold_uncompressed", "pronoun_followups", "pronoun_resolved_model",
                "pronoun_resolved_offline", "pronoun_model_fallbacks",
                "pronoun_answer_contains_gold_model", "pronoun_answer_contains_gold_offline")
        print(json.dumps({**{k: headline.get(k) for k in keys}, "split": headline["split"],
                          "splits": report}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
