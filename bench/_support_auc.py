"""How well does the verifier's offline support score separate support from contradiction?

ROC AUC of :func:`reactive_rag.agent.support_score` on two claim/evidence sets,
beside a plain token-overlap baseline (share of the statement's tokens found in
the quote) measured in the same run:

* SciFact (``scifact_claim_evidence_nli.jsonl``): SUPPORT vs CONTRADICT; the
  statement is ``claim``, the quote the joined ``evidence`` sentences, the
  context the cited abstract's title (from ``scifact/corpus.jsonl`` when
  present). The weights were fitted on the ``train`` rows only (``--fit``);
  ``support_auc_scifact`` is the held-out ``test`` rows.
* Climate-FEVER (``climate-fever.jsonl``): each claim against each of its
  evidence sentences labelled SUPPORTS vs REFUTES (NOT_ENOUGH_INFO left out),
  with the Wikipedia article title as context. Nothing was tuned on it.

Usage::

    .venv/bin/python bench/_support_auc.py [--data DIR] [--json] [--fit] [--writer hashing|minilm]

``--fit`` also refits the weights on SciFact train (nonnegative logistic
regression on the score's parts; the printed weights are what
``SupportWeights`` defaults were derived from). ``--writer`` checks the
other side of the thresholds: how many of the extractive writer's claims on
correct (gold) HotpotQA evidence the verifier keeps. :func:`support_aucs` is what
``bench/answers.py`` imports. :func:`evaluate_entailment` measures any
:class:`~reactive_rag.agent.EntailmentModel` on the SciFact file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from actors.text import tokenize  # noqa: E402
from reactive_rag.agent import (  # noqa: E402
    DEFAULT_SUPPORT_WEIGHTS,
    EntailmentModel,
    SupportScore,
    SupportWeights,
    support_score,
)

__all__ = [
    "EntailmentReport",
    "Pair",
    "auc",
    "climate_pairs",
    "data_root",
    "evaluate_entailment",
    "extractive_claims_kept",
    "fit_weights",
    "scifact_pairs",
    "support_aucs",
    "token_overlap",
]

SCIFACT_FILE = "scifact_claim_evidence_nli.jsonl"
CLIMATE_FILE = "climate-fever.jsonl"


def data_root(arg: str | os.PathLike[str] | None = None) -> Path:
    """``arg``, else ``$REACTIVE_RAG_DATA``, else ``../shared/data`` beside the repo."""
    return Path(arg or os.environ.get("REACTIVE_RAG_DATA") or REPO.parent / "shared" / "data")


# --------------------------------------------------------------------------- data
@dataclass(frozen=True, slots=True)
class Pair:
    """One statement/quote pair with its label (``supports``) and the split it belongs to."""

    statement: str
    quote: str
    context: str
    supports: bool
    split: str


def _jsonl(path: Path) -> Iterable[dict[str, object]]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                if isinstance(row, dict):
                    yield row


def _scifact_titles(data_dir: Path) -> dict[str, str]:
    corpus = data_dir / "scifact" / "corpus.jsonl"
    if not corpus.is_file():
        return {}
    return {str(d.get("_id")): f"{d.get('title') or ''}\n{d.get('text') or ''}"
            for d in _jsonl(corpus)}


def scifact_pairs(data_dir: Path) -> list[Pair]:
    """SciFact SUPPORT/CONTRADICT pairs (statement = claim, quote = joined evidence)."""
    path = data_dir / SCIFACT_FILE
    if not path.is_file():
        raise FileNotFoundError(f"SciFact claim/evidence data not found: {path}")
    titles = _scifact_titles(data_dir)
    out: list[Pair] = []
    for row in _jsonl(path):
        label = str(row.get("label", "")).upper()
        if label not in ("SUPPORT", "CONTRADICT"):
            continue
        evidence = row.get("evidence") or []
        quote = " ".join(str(e) for e in evidence) if isinstance(evidence, list) else str(evidence)
        out.append(Pair(str(row["claim"]), quote, titles.get(str(row.get("doc_id")), ""),
                        label == "SUPPORT", str(row.get("split") or "all")))
    return out


def climate_pairs(data_dir: Path) -> list[Pair]:
    """Climate-FEVER claim x evidence-sentence pairs labelled SUPPORTS or REFUTES."""
    path = data_dir / CLIMATE_FILE
    if not path.is_file():
        raise FileNotFoundError(f"Climate-FEVER data not found: {path}")
    out: list[Pair] = []
    for row in _jsonl(path):
        evidences = row.get("evidences")
        if not isinstance(evidences, list):
            continue
        for ev in evidences:
            label = str(ev.get("evidence_label", "")).upper()
            if label in ("SUPPORTS", "REFUTES"):
                out.append(Pair(str(row["claim"]), str(ev.get("evidence", "")),
                                str(ev.get("article", "")), label == "SUPPORTS", "all"))
    return out


# --------------------------------------------------------------------------- metrics
def auc(pos: Sequence[float], neg: Sequence[float]) -> float:
    """ROC AUC (Mann-Whitney U, ties counted half) of positives over negatives."""
    if not pos or not neg:
        raise ValueError("AUC needs at least one positive and one negative")
    scored = sorted([(float(v), 1) for v in pos] + [(float(v), 0) for v in neg])
    rank_sum = 0.0
    i = 0
    while i < len(scored):
        j = i
        while j + 1 < len(scored) and scored[j + 1][0] == scored[i][0]:
            j += 1
        mid = (i + j) / 2 + 1  # average 1-based rank of the tie block
        rank_sum += mid * sum(label for _, label in scored[i : j + 1])
        i = j + 1
    n_pos, n_neg = len(pos), len(neg)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def token_overlap(statement: str, quote: str) -> float:
    """Baseline: share of the statement's tokens that occur in the quote."""
    words = tokenize(statement)
    have = set(tokenize(quote))
    return sum(w in have for w in words) / len(words) if words else 0.0


def _auc_of(pairs: Sequence[Pair], scores: Sequence[float]) -> float:
    return auc([s for p, s in zip(pairs, scores, strict=True) if p.supports],
               [s for p, s in zip(pairs, scores, strict=True) if not p.supports])


def _parts(pairs: Sequence[Pair]) -> list[SupportScore]:
    return [support_score(p.statement, p.quote, context=p.context) for p in pairs]


def support_aucs(data_dir: Path | None = None) -> dict[str, float]:
    """AUCs of the support score and the token-overlap baseline, overall and per split.

    Keys: ``support_auc_scifact`` (SciFact test split: held out from fitting),
    ``support_auc_scifact_train``, ``support_auc_scifact_all``,
    ``support_auc_climate``, the same with ``overlap_`` for the baseline, and
    ``n_scifact_train``, ``n_scifact_test``, ``n_scifact_all``, ``n_climate`` (pair counts).

    Raises:
        FileNotFoundError: a data file is missing.
    """
    root = data_root(data_dir)
    out: dict[str, float] = {}
    sci = scifact_pairs(root)
    sci_scores = [s.score for s in _parts(sci)]
    sci_overlap = [token_overlap(p.statement, p.quote) for p in sci]
    for split in sorted({p.split for p in sci}):
        idx = [i for i, p in enumerate(sci) if p.split == split]
        sub = [sci[i] for i in idx]
        out[f"support_auc_scifact_{split}"] = _auc_of(sub, [sci_scores[i] for i in idx])
        out[f"overlap_auc_scifact_{split}"] = _auc_of(sub, [sci_overlap[i] for i in idx])
        out[f"n_scifact_{split}"] = float(len(sub))
    out["n_scifact_all"] = float(len(sci))
    out["support_auc_scifact_all"] = _auc_of(sci, sci_scores)
    out["overlap_auc_scifact_all"] = _auc_of(sci, sci_overlap)
    held_out = "test" if "support_auc_scifact_test" in out else "all"
    out["support_auc_scifact"] = out[f"support_auc_scifact_{held_out}"]
    out["overlap_auc_scifact"] = out[f"overlap_auc_scifact_{held_out}"]
    cli = climate_pairs(root)
    out["support_auc_climate"] = _auc_of(cli, [s.score for s in _parts(cli)])
    out["overlap_auc_climate"] = _auc_of(cli, [token_overlap(p.statement, p.quote) for p in cli])
    out["n_climate"] = float(len(cli))
    return {k: round(v, 4) for k, v in out.items()}


# --------------------------------------------------------------------------- fitting
_FITTED = ("coverage", "number", "name", "added_negation", "dropped_negation", "conflict",
           "unbacked")


def _features(s: SupportScore, context_credit: float) -> list[float]:
    cov = (s.in_quote + context_credit * s.in_context) / s.terms if s.terms else 1.0
    return [-math.log(max(cov, 1e-3)), len(s.missing_numbers), len(s.missing_names),
            min(1, len(s.added_negations)), min(1, len(s.dropped_negations)), len(s.conflicts),
            min(2, len(s.unbacked))]


def fit_weights(pairs: Sequence[Pair], *, l2: float = 1.0, steps: int = 4000) -> SupportWeights:
    """Nonnegative logistic regression of "contradicts" on the score's parts.

    ``-log(score)`` is linear in the parts, so the fitted coefficients are the
    weights (the intercept only shifts every score alike and is dropped).
    """
    import numpy as np

    credit = DEFAULT_SUPPORT_WEIGHTS.context_credit
    x = np.array([_features(s, credit) for s in _parts(pairs)], dtype=float)
    y = np.array([0.0 if p.supports else 1.0 for p in pairs])  # 1 = contradicts
    w = np.zeros(x.shape[1])
    b = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(x @ w + b)))
        w = np.maximum(0.0, w - 0.5 * (x.T @ (p - y) / len(y) + l2 * w / len(y)))
        b -= 0.5 * float((p - y).mean())
    fitted = {name: round(float(v), 2) for name, v in zip(_FITTED, w, strict=True)}
    return dataclasses.replace(DEFAULT_SUPPORT_WEIGHTS, **fitted)


def _aucs_with(weights: SupportWeights, pairs: Sequence[Pair],
               parts: Sequence[SupportScore]) -> float:
    return _auc_of(pairs, [s.rescored(weights) for s in parts])


# --------------------------------------------------------------------------- calibration
def extractive_claims_kept(
    data_dir: Path | None = None, *, minilm: bool = False
) -> dict[str, float]:
    """How many of the extractive writer's claims on correct evidence the verifier keeps.

    For each HotpotQA question (``hotpotqa_dev_300.jsonl``) the writer answers from
    the two gold paragraphs; every claim is then checked with the question
    (support and relevance checks on). Correct evidence, correct claims: what
    is dropped here is what the thresholds cost.
    """
    import asyncio

    from actors.models import Embedder, HashingEmbedder, MiniLMEmbedder
    from reactive_rag.agent import ExtractiveWriter, verify
    from streams import EvidenceChunk

    path = data_root(data_dir) / "hotpotqa_dev_300.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"HotpotQA data not found: {path}")
    embedder: Embedder = MiniLMEmbedder() if minilm else HashingEmbedder()
    writer = ExtractiveWriter(embedder, max_claims=3, min_gain=0.15)  # as the engine builds it

    async def run() -> dict[str, float]:
        claims = kept = drafts = whole = 0
        for row in _jsonl(path):
            contexts = row.get("contexts")
            question = str(row.get("question_text", ""))
            if not isinstance(contexts, list):
                continue
            gold = [EvidenceChunk(id=str(i), text=str(c["paragraph_text"]), title=str(c["title"]),
                                  doc_id=str(c["title"]))
                    for i, c in enumerate(contexts) if c.get("is_supporting")]
            draft = await writer.write(question, gold, mode="answer")
            if not draft.claims:
                continue
            result = verify(draft.claims, {c.id: c for c in gold}, question=question)
            claims += len(draft.claims)
            kept += len(result.kept)
            drafts += 1
            whole += len(result.kept) == len(draft.claims)
        return {"writer_claims": float(claims), "writer_claims_kept": kept / max(1, claims),
                "writer_drafts_fully_kept": whole / max(1, drafts)}

    return asyncio.run(run())


# --------------------------------------------------------------------------- entailment
@dataclass(frozen=True, slots=True)
class EntailmentReport:
    """How well a model separates supporting from contradicting evidence (ROC AUC)."""

    n: int
    positives: int
    negatives: int
    auc: float
    path: str


def evaluate_entailment(
    model: EntailmentModel | Callable[[str, str], float],
    path: str | os.PathLike[str] | None = None,
    *,
    limit: int | None = None,
    split: str | None = None,
) -> EntailmentReport:
    """Measure an entailment model's AUC on SciFact claim/evidence pairs.

    Args:
        model: an :class:`EntailmentModel` (``score(premise, hypothesis)``) or a
            plain function of (premise, hypothesis).
        path: the ``scifact_claim_evidence_nli.jsonl`` file (default: in :func:`data_root`).
        limit: evaluate only the first ``limit`` pairs.
        split: only rows of this split (``"train"``, ``"test"``).

    Raises:
        FileNotFoundError: the data file is not there.
        ValueError: the rows lack either label.
    """
    file = Path(path) if path is not None else data_root() / SCIFACT_FILE
    if not file.is_file():
        raise FileNotFoundError(f"entailment evaluation data not found: {file}")
    score = model.score if isinstance(model, EntailmentModel) else model
    pos: list[float] = []
    neg: list[float] = []
    for row in _jsonl(file):
        label = str(row.get("label", "")).upper()
        if label not in ("SUPPORT", "CONTRADICT"):
            continue
        if split is not None and row.get("split") != split:
            continue
        evidence = row.get("evidence") or []
        premise = " ".join(str(e) for e in evidence) if isinstance(evidence, list) else ""
        (pos if label == "SUPPORT" else neg).append(float(score(premise, str(row["claim"]))))
        if limit is not None and len(pos) + len(neg) >= limit:
            break
    if not pos or not neg:
        raise ValueError(f"{file} needs both SUPPORT and CONTRADICT rows")
    return EntailmentReport(n=len(pos) + len(neg), positives=len(pos), negatives=len(neg),
                            auc=auc(pos, neg), path=str(file))


# --------------------------------------------------------------------------- main
def _table(figures: dict[str, float]) -> str:
    rows = [("SciFact train (fitted on)", "scifact_train"),
            ("SciFact test (held out)", "scifact_test"),
            ("SciFact all", "scifact_all"),
            ("Climate-FEVER (not tuned)", "climate")]
    lines = [f"{'set':<28}{'pairs':>7}{'support score':>15}{'token overlap':>15}{'ratio':>8}"]
    for label, key in rows:
        if f"support_auc_{key}" not in figures:
            continue
        ours, base = figures[f"support_auc_{key}"], figures[f"overlap_auc_{key}"]
        n = int(figures.get(f"n_{key}", 0))
        ratio = f"{ours / base:>7.2f}x" if base else f"{'-':>8}"
        lines.append(f"{label:<28}{n:>7}{ours:>15.3f}{base:>15.3f}{ratio}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", default=None, help="data folder (default: ../shared/data)")
    parser.add_argument("--json", action="store_true", help="end with one JSON object")
    parser.add_argument("--fit", action="store_true", help="refit the weights on SciFact train")
    parser.add_argument("--writer", choices=("hashing", "minilm"), default=None,
                        help="also: share of the extractive writer's claims on HotpotQA gold "
                             "paragraphs that the verifier keeps (embedder for the writer)")
    args = parser.parse_args(argv)
    root = data_root(args.data)
    started = time.perf_counter()
    figures = support_aucs(root)
    elapsed = time.perf_counter() - started
    print(_table(figures))
    print(f"(ROC AUC; support vs contradiction; {elapsed:.1f} s for both sets)")
    if args.fit:
        pairs = scifact_pairs(root)
        train = [p for p in pairs if p.split == "train"]
        test = [p for p in pairs if p.split == "test"]
        fitted = fit_weights(train)
        print("\nfitted on SciFact train:", dataclasses.asdict(fitted))
        print("defaults:               ", dataclasses.asdict(DEFAULT_SUPPORT_WEIGHTS))
        for name, ws in (("fitted", fitted), ("defaults", DEFAULT_SUPPORT_WEIGHTS)):
            tr = _aucs_with(ws, train, _parts(train))
            te = _aucs_with(ws, test, _parts(test)) if test else float("nan")
            print(f"  {name:<9} train {tr:.3f}  test {te:.3f}")
    if args.writer:
        kept = extractive_claims_kept(root, minilm=args.writer == "minilm")
        print(f"\nextractive writer on HotpotQA gold paragraphs ({args.writer}): "
              f"{kept['writer_claims_kept']:.1%} of {int(kept['writer_claims'])} claims kept, "
              f"{kept['writer_drafts_fully_kept']:.1%} of drafts kept whole")
        figures.update({k: round(v, 4) for k, v in kept.items()})
    if args.json:
        print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
