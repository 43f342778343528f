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

    .venv/bin/python bench/_support_auc.py [--data DIR] [--json] [--head] [--fit]
        [--write-head [PATH]] [--vector-cache FILE] [--writer hashing|minilm]

``--head`` also scores every pair with the embedding head the engine adds on
MiniLM (:class:`~reactive_rag.agent.EmbeddingSupport`, the shipped weights):
the ``head_auc_*`` figures, the score the verifier actually uses then.
``--fit`` also refits the weights on SciFact train (nonnegative logistic
regression on the score's parts; the printed weights are what
``SupportWeights`` defaults were derived from) and, with ``--head``, the head
(:func:`fit_head`); ``--write-head`` writes those head numbers to
``reactive_rag/judgement/offline/data/support_head.json`` (or PATH): the same data and code
give the same file. Embedding every pair takes minutes; ``--vector-cache``
keeps each pair's head features in a SQLite file for the next run. ``--writer`` checks the
other side of the thresholds: how many of the extractive writer's claims on
correct (gold) HotpotQA evidence the verifier keeps. :func:`support_aucs` is what
``bench/answers.py`` imports. :func:`evaluate_entailment` measures any
:class:`~reactive_rag.agent.EntailmentModel` on the SciFact file.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from actors.models import Embedder, TokenEmbedder

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from actors.text import tokenize  # noqa: E402
from reactive_rag.agent import EntailmentModel  # noqa: E402
from reactive_rag.judgement.offline import (  # noqa: E402
    DEFAULT_SUPPORT_HEAD_PATH,
    DEFAULT_SUPPORT_WEIGHTS,
    EmbeddingSupport,
    HeadFeatures,
    SupportHeadError,
    SupportHeadWeights,
    SupportScore,
    SupportWeights,
    load_support_head,
    support_score,
)

__all__ = [
    "CachedHead",
    "EntailmentReport",
    "Pair",
    "auc",
    "cached_head",
    "climate_pairs",
    "data_root",
    "evaluate_entailment",
    "extractive_claims_kept",
    "fit_head",
    "fit_weights",
    "head_scores",
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


def support_aucs(data_dir: Path | None = None, *,
                 head: EmbeddingSupport | None = None) -> dict[str, float]:
    """AUCs of the support score and the token-overlap baseline, overall and per split.

    Keys: ``support_auc_scifact`` (SciFact test split: held out from fitting),
    ``support_auc_scifact_train``, ``support_auc_scifact_all``,
    ``support_auc_climate``, the same with ``overlap_`` for the baseline, and
    ``n_scifact_train``, ``n_scifact_test``, ``n_scifact_all``, ``n_climate`` (pair counts).
    With ``head``, the same with ``head_`` for the score times the head's factor.

    Raises:
        FileNotFoundError: a data file is missing.
    """
    root = data_root(data_dir)
    out: dict[str, float] = {}
    sci = scifact_pairs(root)
    cli = climate_pairs(root)
    scorers: dict[str, Callable[[Sequence[Pair]], list[float]]] = {
        "support": lambda ps: [s.score for s in _parts(ps)],
        "overlap": lambda ps: [token_overlap(p.statement, p.quote) for p in ps],
    }
    if head is not None:
        scorers["head"] = lambda ps: head_scores(ps, head)
    for name, scorer in scorers.items():
        sci_scores = scorer(sci)
        for split in sorted({p.split for p in sci}):
            idx = [i for i, p in enumerate(sci) if p.split == split]
            sub = [sci[i] for i in idx]
            out[f"{name}_auc_scifact_{split}"] = _auc_of(sub, [sci_scores[i] for i in idx])
            out[f"n_scifact_{split}"] = float(len(sub))
        out[f"{name}_auc_scifact_all"] = _auc_of(sci, sci_scores)
        held_out = "test" if "support_auc_scifact_test" in out else "all"
        out[f"{name}_auc_scifact"] = out[f"{name}_auc_scifact_{held_out}"]
        out[f"{name}_auc_climate"] = _auc_of(cli, scorer(cli))
    out["n_scifact_all"] = float(len(sci))
    out["n_climate"] = float(len(cli))
    return {k: round(v, 4) for k, v in out.items()}


# --------------------------------------------------------------------------- the head
_BATCH = 128  # pairs embedded per call while measuring (token vectors: ~1.5 KB a piece)
_FEATURES_KEY = "support-head/2 features, min over 3 flips"  # bump when head_features changes


class CachedHead(EmbeddingSupport):
    """The head with its per-pair features kept in a SQLite file between bench runs.

    Embedding every pair's four texts takes minutes; the three features are
    what the AUCs and the fit need, so they are what is cached (keyed by
    model, feature version, statement and quote). Token vectors themselves
    are kept only for ``cache_size`` texts, as in the engine.
    """

    def __init__(self, embedder: TokenEmbedder | Embedder,
                 weights: SupportHeadWeights | None = None,
                 path: str | os.PathLike[str] | None = None, *, cache_size: int = 1024) -> None:
        super().__init__(embedder, weights, cache_size=cache_size)
        self._db: sqlite3.Connection | None = None
        self._known: dict[str, HeadFeatures] = {}
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, timeout=30)
            self._db.execute("CREATE TABLE IF NOT EXISTS head_features "
                             "(key TEXT PRIMARY KEY, s REAL, q REAL, f REAL)")
            self._known = {k: HeadFeatures(s, q, f) for k, s, q, f in
                           self._db.execute("SELECT key, s, q, f FROM head_features")}

    def _key(self, statement: str, quote: str) -> str:
        raw = "\x00".join((self.embedder.name, _FEATURES_KEY, statement, quote))
        return hashlib.sha256(raw.encode()).hexdigest()

    def prepare(self, pairs: Iterable[tuple[str, str]]) -> None:
        super().prepare(p for p in pairs if self._key(*p) not in self._known)

    def features(self, statement: str, quote: str) -> HeadFeatures:
        key = self._key(statement, quote)
        got = self._known.get(key)
        if got is None:
            got = self._known[key] = super().features(statement, quote)
            if self._db is not None:
                with self._db:
                    self._db.execute("INSERT OR REPLACE INTO head_features VALUES (?, ?, ?, ?)",
                                     (key, *got))
        return got


def _head_features(pairs: Sequence[Pair], head: EmbeddingSupport) -> list[HeadFeatures]:
    out: list[HeadFeatures] = []
    for start in range(0, len(pairs), _BATCH):
        batch = pairs[start : start + _BATCH]
        head.prepare((p.statement, p.quote) for p in batch)
        out += [head.features(p.statement, p.quote) for p in batch]
    return out


def head_scores(pairs: Sequence[Pair], head: EmbeddingSupport) -> list[float]:
    """The verifier's score with the head: lexical score times the head's factor."""
    return [s.score * head.factor_of(f)
            for s, f in zip(_parts(pairs), _head_features(pairs, head), strict=True)]


def _measuring_head(embedder: TokenEmbedder | Embedder, weights: SupportHeadWeights | None = None,
                    cache: str | os.PathLike[str] | None = None) -> CachedHead:
    w = weights or SupportHeadWeights(model=embedder.name, statement_align=0.0, quote_align=0.0,
                                      flip_agreement=0.0, reference=0.0)
    return CachedHead(embedder, w, cache)


def cached_head(cache: str | os.PathLike[str] | None = None) -> CachedHead:
    """The shipped MiniLM head, its per-pair features cached in ``cache`` (what
    ``bench/answers.py`` measures with)."""
    from actors.models import MiniLMEmbedder

    return CachedHead(MiniLMEmbedder(), load_support_head(), cache)


def fit_head(pairs: Sequence[Pair], embedder: TokenEmbedder | Embedder, *, l2: float = 0.1,
             steps: int = 2000, cache: str | os.PathLike[str] | None = None
             ) -> SupportHeadWeights:
    """Fit the head's numbers on ``pairs`` (SciFact train): see ``_support_head``'s docstring.

    Logistic regression of "supports" on ``-log(lexical score)`` and the three
    :class:`~reactive_rag.agent.HeadFeatures` (standardised; full-batch gradient
    descent from zeros: deterministic), then the feature coefficients in
    log-score units and the median over the supporting pairs as the reference.
    Chosen by 5-fold cross-validation on train grouped by claim (docs/benchmarks.md).
    """
    import numpy as np

    head = _measuring_head(embedder, cache=cache)
    lexical = [s.score for s in _parts(pairs)]
    x = np.array([[-math.log(max(lex, 1e-4)), *f]
                  for lex, f in zip(lexical, _head_features(pairs, head), strict=True)])
    y = np.array([1.0 if p.supports else 0.0 for p in pairs])
    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std == 0] = 1.0
    z = (x - mean) / std
    w = np.zeros(z.shape[1])
    b = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(z @ w + b)))
        w -= 0.5 * (z.T @ (p - y) / len(y) + l2 * w)
        b -= 0.5 * float((p - y).mean())
    raw = w / std
    if raw[0] >= 0:
        raise ValueError("the fit gives the lexical score no weight; refusing to write a head")
    coef = [round(float(-r / raw[0]), 3) for r in raw[1:]]
    t = x[y == 1, 1:] @ np.array(coef)
    return SupportHeadWeights(
        model=embedder.name, statement_align=coef[0], quote_align=coef[1],
        flip_agreement=coef[2], reference=round(float(np.median(t)), 4),
        fitted_on=f"SciFact train, {len(pairs)} SUPPORT/CONTRADICT pairs "
                  "(bench/_support_auc.py --fit --head --write-head)")


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
    data_dir: Path | None = None, *, minilm: bool = False, head: EmbeddingSupport | None = None
) -> dict[str, float]:
    """How many of the extractive writer's claims on correct evidence the verifier keeps.

    For each HotpotQA question (``hotpotqa_dev_300.jsonl``) the writer answers from
    the two gold paragraphs; every claim is then checked with the question
    (support and relevance checks on). Correct evidence, correct claims: what
    is dropped here is what the thresholds cost (and, with ``head``, the head).
    """
    import asyncio

    from actors.models import HashingEmbedder, MiniLMEmbedder
    from reactive_rag.agent import verify
    from reactive_rag.judgement.offline import ExtractiveWriter
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
            result = verify(draft.claims, {c.id: c for c in gold}, question=question,
                            support_model=head)
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
    has_head = "head_auc_scifact" in figures
    head_col = f"{'with head':>11}" if has_head else ""
    lines = [f"{'set':<28}{'pairs':>7}{'support score':>15}{head_col}{'token overlap':>15}"
             f"{'ratio':>8}"]
    for label, key in rows:
        if f"support_auc_{key}" not in figures:
            continue
        ours, base = figures[f"support_auc_{key}"], figures[f"overlap_auc_{key}"]
        best = figures.get(f"head_auc_{key}", ours)
        n = int(figures.get(f"n_{key}", 0))
        ratio = f"{best / base:>7.2f}x" if base else f"{'-':>8}"
        head = f"{best:>11.3f}" if has_head else ""
        lines.append(f"{label:<28}{n:>7}{ours:>15.3f}{head}{base:>15.3f}{ratio}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from actors.models import MiniLMEmbedder

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", default=None, help="data folder (default: ../shared/data)")
    parser.add_argument("--json", action="store_true", help="end with one JSON object")
    parser.add_argument("--fit", action="store_true", help="refit the weights on SciFact train")
    parser.add_argument("--head", action="store_true",
                        help="also measure (with --fit: refit) the MiniLM embedding head")
    parser.add_argument("--write-head", nargs="?", const=str(DEFAULT_SUPPORT_HEAD_PATH),
                        default=None, metavar="PATH",
                        help="with --fit --head: write the refitted head's numbers here "
                             "(default: the shipped file)")
    parser.add_argument("--vector-cache", default=None, metavar="FILE",
                        help="SQLite file caching the head's per-pair features between runs")
    parser.add_argument("--writer", choices=("hashing", "minilm"), default=None,
                        help="also: share of the extractive writer's claims on HotpotQA gold "
                             "paragraphs that the verifier keeps (embedder for the writer)")
    args = parser.parse_args(argv)
    if args.write_head and not (args.fit and args.head):
        parser.error("--write-head needs --fit and --head")
    root = data_root(args.data)
    embedder = MiniLMEmbedder() if args.head else None
    head: EmbeddingSupport | None = None
    if embedder is not None:
        try:
            head = CachedHead(embedder, load_support_head(), args.vector_cache)
        except SupportHeadError as exc:
            if not args.fit:
                raise
            print(f"(no shipped head to measure: {exc})")
    started = time.perf_counter()
    figures = support_aucs(root, head=head)
    elapsed = time.perf_counter() - started
    print(_table(figures))
    print(f"(ROC AUC; support vs contradiction; {elapsed:.1f} s for both sets)")
    if head is not None:
        print(f"head: {head.embedded} texts embedded (statement, quote and their flips for "
              f"each uncached pair, deduplicated); weights {dataclasses.asdict(head.weights)}")
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
        if embedder is not None:
            weights = fit_head(train, embedder, cache=args.vector_cache)
            print("\nhead fitted on SciFact train:", dataclasses.asdict(weights))
            refit = _measuring_head(embedder, weights, args.vector_cache)
            for label, ps in (("train", train), ("test", test),
                              ("climate", climate_pairs(root))):
                if ps:
                    print(f"  refitted head {label:<8}{_auc_of(ps, head_scores(ps, refit)):.3f}")
            if args.write_head:
                out = Path(args.write_head)
                out.write_text(json.dumps(weights.to_json(), indent=2) + "\n", encoding="utf-8")
                print(f"  written to {out}")
    if args.writer:
        kept = extractive_claims_kept(root, minilm=args.writer == "minilm", head=head)
        with_head = " + head" if head is not None else ""
        print(f"\nextractive writer on HotpotQA gold paragraphs ({args.writer}{with_head}): "
              f"{kept['writer_claims_kept']:.1%} of {int(kept['writer_claims'])} claims kept, "
              f"{kept['writer_drafts_fully_kept']:.1%} of drafts kept whole")
        figures.update({k: round(v, 4) for k, v in kept.items()})
    if args.json:
        print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
