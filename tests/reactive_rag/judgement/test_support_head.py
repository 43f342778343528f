"""The embedding head on the verifier's support score (judgement/offline/_support_head.py).

With the shipped MiniLM weights the head must order a supported paraphrase
above its contradiction, never rescue a claim the exact-fact checks drop, fall
back to the lexical score with any other embedder, and refuse a missing or
corrupt weights file with an error that names the file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest

from actors.models import (
    CachedEmbedder,
    Embedder,
    FloatMatrix,
    HashingEmbedder,
    MiniLMEmbedder,
    TokenVectors,
)
from reactive_rag.agent import verify, verify_async
from reactive_rag.engine._engine import Engine
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement.offline import (
    DEFAULT_SUPPORT_HEAD_PATH,
    EmbeddingSupport,
    SupportHeadError,
    SupportHeadWeights,
    flip_polarity,
    load_support_head,
    polarity_flips,
    support_score,
)
from streams import Claim, EvidenceChunk
from tests._bench import bench_module

REPO = Path(__file__).resolve().parents[3]

EIFFEL = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris."
DRUG = "The drug was well tolerated and improved survival in patients."
REGISTRY = {
    "e": EvidenceChunk(id="e", text=EIFFEL, title="Eiffel Tower", doc_id="eiffel"),
    "d": EvidenceChunk(id="d", text=DRUG, title="Trial", doc_id="trial"),
}


class _Counting:
    """A real embedder that counts the texts it is asked to embed."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.texts = 0

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        self.texts += len(texts)
        return self.inner.embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> FloatMatrix:
        self.texts += len(texts)
        return self.inner.embed_passages(texts)

    def embed_tokens(self, texts: Sequence[str]) -> list[TokenVectors]:
        self.texts += len(texts)
        return self.inner.embed_tokens(texts)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture
def head(minilm: MiniLMEmbedder) -> EmbeddingSupport:
    return EmbeddingSupport(minilm)


def _claim(statement: str, source_id: str = "e", quote: str = EIFFEL) -> Claim:
    return Claim(statement=statement, source_id=source_id, quote=quote)


# --- the head's behaviour ----------------------------------------------------------------


@pytest.mark.parametrize(("quote", "paraphrase", "contradiction"), [
    (EIFFEL, "The Eiffel Tower was finished in 1889 for the World's Fair.",
     "The Eiffel Tower was never completed for the World's Fair."),
    (DRUG, "Patients survived longer on the drug.", "Patients died sooner on the drug."),
])
def test_a_supported_paraphrase_scores_above_its_contradiction(
        head: EmbeddingSupport, quote: str, paraphrase: str, contradiction: str) -> None:
    assert head.factor(paraphrase, quote) > head.factor(contradiction, quote) + 0.5
    with_head = [head.rescore(support_score(s, quote), s, quote).score
                 for s in (paraphrase, contradiction)]
    assert with_head[0] > with_head[1]


def test_the_factor_never_raises_a_score(head: EmbeddingSupport) -> None:
    for statement in ("The Eiffel Tower was finished in 1889.", EIFFEL,
                      "Paris hosted the World's Fair.", "The tower was never completed."):
        lexical = support_score(statement, EIFFEL)
        rescored = head.rescore(lexical, statement, EIFFEL)
        assert rescored.embedding_factor is not None
        assert 0.0 <= rescored.score <= lexical.score


def test_a_quote_restated_verbatim_keeps_its_full_score(head: EmbeddingSupport) -> None:
    assert head.factor(EIFFEL, EIFFEL) == 1.0
    assert head.rescore(support_score(EIFFEL, EIFFEL), EIFFEL, EIFFEL).score == pytest.approx(1.0)


@pytest.mark.parametrize(("statement", "changed"), [
    ("The Eiffel Tower was completed in 1951 for the World's Fair in Paris.", "1951"),
    ("The Eiffel Tower was completed in 1889 for the World's Fair in Lyon.", "Lyon"),
    ("The Eiffel Tower was not completed in 1889 for the World's Fair in Paris.", "not"),
])
def test_with_the_head_an_added_year_swapped_name_or_added_not_still_fails(
        head: EmbeddingSupport, statement: str, changed: str) -> None:
    result = verify([_claim(statement), _claim(EIFFEL)], REGISTRY, support_model=head)
    assert result.kept_indices == (1,)  # the verbatim claim passes, the changed one does not
    assert changed in result.errors[0].reason


def test_with_the_head_a_dropped_not_still_fails(head: EmbeddingSupport) -> None:
    quote = "It was not the tallest structure in the world until 1930."
    chunk = EvidenceChunk(id="n", text=quote, title="Eiffel Tower", doc_id="eiffel")
    claim = Claim(statement="It was the tallest structure in the world until 1930.",
                  source_id="n", quote=quote)
    result = verify([claim], {"n": chunk}, support_model=head)
    assert not result.kept and "drops 'not'" in result.errors[0].reason


def test_a_claim_dropped_with_the_head_says_the_quote_reads_opposite(
        head: EmbeddingSupport) -> None:
    claims = [_claim("Patients died sooner on the drug.", "d", DRUG),
              _claim("Patients survived longer on the drug.", "d", DRUG)]
    result = verify(claims, REGISTRY, support_model=head)
    assert result.kept_indices == (1,)
    assert "reads closer to its opposite" in result.errors[0].reason


async def test_verify_async_embeds_in_a_thread_and_agrees_with_verify(
        head: EmbeddingSupport) -> None:
    claims = [_claim("Patients died sooner on the drug.", "d", DRUG),
              _claim("Patients survived longer on the drug.", "d", DRUG), _claim(EIFFEL)]
    sync = verify(claims, REGISTRY, support_model=head)
    async_ = await verify_async(claims, REGISTRY, support_model=head)
    assert async_.kept_indices == sync.kept_indices == (1, 2)
    assert [e.reason for e in async_.errors] == [e.reason for e in sync.errors]


def test_each_claim_is_embedded_once_in_one_batch(minilm: MiniLMEmbedder) -> None:
    counting = _Counting(minilm)
    head = EmbeddingSupport(counting)
    claims = [_claim("The Eiffel Tower was finished in 1889 for the World's Fair."),
              _claim("Patients survived longer on the drug.", "d", DRUG)]
    verify(claims, REGISTRY, support_model=head)
    # statement, quote and their distinct flips: 1 + 1 each for the Eiffel claim (no
    # direction word: one "not" flip), 1 + 3 each for "survived longer" / "improved survival"
    assert len(set(polarity_flips(claims[1].statement))) == 3
    assert counting.texts == head.embedded == 4 + 8
    verify(claims, REGISTRY, support_model=head)  # a repair citing the same quotes
    assert counting.texts == 12


def test_polarity_flips_also_flip_one_direction_word_alone() -> None:
    # flipping both words says the same thing again; one at a time says the opposite
    assert polarity_flips("Higher intake lowers the risk.") == (
        "decrease intake increase the risk.", "decrease intake lowers the risk.",
        "Higher intake increase the risk.")
    assert polarity_flips("Cats purr.") == ("It is not true that cats purr.",) * 3


def test_flip_polarity_swaps_directions_drops_negations_or_adds_a_not() -> None:
    assert flip_polarity("The drug increases pain.") == "The drug decrease pain."
    assert flip_polarity("Aspirin does not reduce fever.") == "Aspirin does increase fever."
    assert flip_polarity("The tower was built in Paris.") == "The tower was not built in Paris."
    assert flip_polarity("Cats purr.") == "It is not true that cats purr."


# --- no head: the lexical score -----------------------------------------------------------


def test_with_another_embedder_there_is_no_head_and_the_lexical_score_decides(
        tmp_path: Path) -> None:
    hashing = HashingEmbedder()
    assert EmbeddingSupport.for_embedder(hashing) is None
    with pytest.raises(SupportHeadError, match="not 'hashing"):
        EmbeddingSupport(hashing)
    engine = Engine(CorpusIndex(tmp_path / "h", hashing))
    assert engine.support_head is None
    statement = "Patients died sooner on the drug."
    result = verify([_claim(statement, "d", DRUG)], REGISTRY)
    lexical = support_score(statement, DRUG, context=f"Trial\n{DRUG}", title="Trial")
    assert f"support {lexical.score:.2f}" in result.errors[0].reason
    assert "reads closer" not in result.errors[0].reason


class _SentenceOnly:
    """MiniLM's name and sentence vectors, but no token vectors (a remote copy, say)."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        return self.inner.embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> FloatMatrix:
        return self.inner.embed_passages(texts)


def test_an_embedder_without_token_vectors_gets_no_head(minilm: MiniLMEmbedder) -> None:
    sentence_only = _SentenceOnly(minilm)
    assert EmbeddingSupport.for_embedder(sentence_only) is None
    with pytest.raises(SupportHeadError, match="needs token vectors"):
        EmbeddingSupport(sentence_only)


def test_the_engine_gives_its_verifier_the_head_on_minilm(
        tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    engine = Engine(CorpusIndex(tmp_path / "m", minilm))
    head = engine.support_head
    assert isinstance(head, EmbeddingSupport) and head.embedder is minilm
    assert engine.support_head is head  # built once

    class Always:
        def score(self, premise: str, hypothesis: str) -> float:
            return 1.0

    # with a judge the head stays: it is the offline fallback's, used when the judge fails
    assert Engine(CorpusIndex(tmp_path / "j", minilm), entailment=Always()).support_head is not None


def test_the_default_engine_head_embeds_past_the_index_cache(tmp_path: Path) -> None:
    engine = Engine(CorpusIndex(tmp_path / "default"))  # the default: MiniLM behind a disk cache
    assert isinstance(engine.embedder, CachedEmbedder)
    head = engine.support_head
    assert head is not None and isinstance(head.embedder, MiniLMEmbedder)
    cached = engine.embedder
    assert isinstance(cached, CachedEmbedder)
    verify([_claim("The Eiffel Tower was finished in 1889 for the World's Fair.")], REGISTRY,
           support_model=head)
    # statements and their flips are not corpus text: none of them went through the cache
    assert head.embedded == 4 and (cached.hits, cached.misses) == (0, 0)


class _Broken:
    """An embedder of the head's model that fails (a model file gone, a thread pool shut)."""

    def __init__(self, like: Embedder) -> None:
        self.name, self.dim = like.name, like.dim

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        raise RuntimeError("onnxruntime session is closed")

    def embed_passages(self, texts: Sequence[str]) -> FloatMatrix:
        raise RuntimeError("onnxruntime session is closed")

    def embed_tokens(self, texts: Sequence[str]) -> list[TokenVectors]:
        raise RuntimeError("onnxruntime session is closed")


async def test_a_failing_head_embedder_leaves_the_lexical_score_to_decide(
        minilm: MiniLMEmbedder, caplog: pytest.LogCaptureFixture) -> None:
    broken = EmbeddingSupport(_Broken(minilm))
    claims = [_claim("Patients died sooner on the drug.", "d", DRUG),
              _claim("Patients survived longer on the drug.", "d", DRUG), _claim(EIFFEL)]
    lexical = verify(claims, REGISTRY)
    with caplog.at_level("WARNING"):
        sync = verify(claims, REGISTRY, support_model=broken)
        async_ = await verify_async(claims, REGISTRY, support_model=broken)
    # judged as without the head (not failed, not kept unjudged), and the log says why
    assert sync.kept_indices == async_.kept_indices == lexical.kept_indices
    assert [e.reason for e in sync.errors] == [e.reason for e in lexical.errors]
    assert "support head skipped" in caplog.text and "session is closed" in caplog.text


# --- the weights file -------------------------------------------------------------------


def test_the_shipped_weights_are_numbers_for_minilm() -> None:
    w = load_support_head()
    assert w.model == MiniLMEmbedder.name
    numbers = (w.statement_align, w.quote_align, w.flip_agreement, w.reference)
    assert all(math.isfinite(x) for x in numbers)
    # closer to the flip, or flipping moves the two apart = less support
    assert w.statement_align > 0 and w.quote_align > 0 and w.flip_agreement > 0
    assert DEFAULT_SUPPORT_HEAD_PATH.stat().st_size < 1024


def test_a_missing_weights_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "absent.json"
    with pytest.raises(SupportHeadError, match=r"not readable at .*absent\.json"):
        load_support_head(missing)


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "are not JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"format": "something/else", "model": "m"}', "not a support-head file"),
    ('{"format": "reactive-rag/support-head/2", "model": "m", "statement_align": 1,'
     ' "quote_align": 1, "flip_agreement": 1}', "missing field 'reference'"),
    ('{"format": "reactive-rag/support-head/2", "model": "m", "statement_align": 1,'
     ' "quote_align": NaN, "flip_agreement": 1, "reference": 0}',
     "'quote_align' must be a finite number"),
    ('{"format": "reactive-rag/support-head/2", "model": "", "statement_align": 1,'
     ' "quote_align": 1, "flip_agreement": 1, "reference": 0}',
     "'model' must be a non-empty string"),
    # the previous head's file (sentence contrasts) is refused, with what to do
    ('{"format": "reactive-rag/support-head/1", "model": "all-MiniLM-L6-v2-int8",'
     ' "statement_flip": 28.3, "quote_flip": 21.5, "reference": 0.5}',
     r"an older head formula; refit it with `bench/_support_auc.py --fit --head"),
])
def test_a_corrupt_weights_file_is_a_clear_error(tmp_path: Path, content: str,
                                                 message: str) -> None:
    path = tmp_path / "head.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SupportHeadError, match=message) as info:
        load_support_head(path)
    assert "head.json" in str(info.value)


def test_weights_round_trip_through_their_json() -> None:
    w = SupportHeadWeights(model="m", statement_align=1.5, quote_align=2.0,
                           flip_agreement=0.5, reference=0.25, fitted_on="here")
    assert SupportHeadWeights.from_json(json.loads(json.dumps(w.to_json()))) == w


# --- regenerating the weights (bench/_support_auc.py --fit --head --write-head) ------------


def _bench() -> ModuleType:
    return bench_module("_support_auc")


def _write_jsonl(path: Path, rows: Sequence[dict[str, object]]) -> None:
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")


def _tiny_data(root: Path) -> None:
    sci = []
    for i, (quote, good, bad) in enumerate([
        (EIFFEL, "The Eiffel Tower was finished in 1889 for the World's Fair.",
         "The Eiffel Tower was never completed for the World's Fair."),
        (DRUG, "Patients survived longer on the drug.", "Patients died sooner on the drug."),
        ("Exercise lowers blood pressure in adults.", "Blood pressure drops with exercise.",
         "Exercise raises blood pressure in adults."),
    ]):
        for split in ("train", "test"):
            sci.append({"claim": good, "label": "SUPPORT", "split": split,
                        "evidence": [quote], "doc_id": str(i)})
            sci.append({"claim": bad, "label": "CONTRADICT", "split": split,
                        "evidence": [quote], "doc_id": str(i)})
    _write_jsonl(root / "scifact_claim_evidence_nli.jsonl", sci)
    _write_jsonl(root / "climate-fever.jsonl", [{"claim": "Ice sheets are shrinking.",
                                                 "evidences": [
        {"evidence_label": "SUPPORTS", "article": "Ice", "evidence": "Ice sheets shrink."},
        {"evidence_label": "REFUTES", "article": "Ice", "evidence": "Ice sheets grow."}]}])


def test_fit_head_is_reproducible_and_its_file_loads(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    _tiny_data(tmp_path)
    out = tmp_path / "head.json"
    args = ["--data", str(tmp_path), "--fit", "--head", "--write-head", str(out), "--json"]
    assert _bench().main(args) == 0
    first = out.read_bytes()
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"head_auc_scifact", "head_auc_scifact_train", "head_auc_climate"} <= set(figures)
    assert _bench().main(args) == 0
    assert out.read_bytes() == first  # same data, same code: same numbers
    w = load_support_head(out)
    assert w.model == MiniLMEmbedder.name and "SciFact train" in w.fitted_on


def test_the_bench_feature_cache_serves_a_second_run_without_embedding(
        tmp_path: Path) -> None:
    _tiny_data(tmp_path)
    bench = _bench()
    pairs = bench.scifact_pairs(tmp_path)
    cache = tmp_path / "features.sqlite"
    first = bench.cached_head(cache)
    scores = bench.head_scores(pairs, first)
    assert first.embedded > 0
    again = bench.cached_head(cache)
    assert bench.head_scores(pairs, again) == scores
    assert again.embedded == 0  # every pair's features came from the file


def test_write_head_needs_fit_and_head(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        _bench().main(["--data", str(tmp_path), "--write-head", str(tmp_path / "h.json")])
