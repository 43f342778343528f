"""The engine's reranker on Ray: the same answer as local; placement specs refused clearly."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from actors.models import CachedEmbedder, FloatMatrix, HashingEmbedder, MiniLMEmbedder
from actors.rerank import Credibility
from reactive_rag.engine._engine import Engine
from reactive_rag.engine._placement import (
    MiniLMRecipe,
    build_placements,
    parse_placement,
    portable_embedder,
)
from reactive_rag.index import CorpusIndex
from reactive_rag.run import RunConfigError
from streams import RerankCompleted

QUESTION = "Who founded Bayer and when?"


@pytest.mark.slow
async def test_a_run_with_the_reranker_on_ray_gives_the_local_answer(
    ray: Any, index: CorpusIndex,
) -> None:
    local = await Engine(index).ask(QUESTION, collections=["demo"])
    engine = Engine(index, placement={"reranker": {"on": "ray", "num_cpus": 0.1}})
    try:
        remote = await engine.ask(QUESTION, collections=["demo"])
    finally:
        await engine.aclose()
    assert remote.outcome == local.outcome == "answered", remote.reason
    assert remote.answer == local.answer
    assert [c.claim for c in remote.citations] == [c.claim for c in local.citations]
    reranked = [e for e in remote.events if isinstance(e, RerankCompleted)]
    assert reranked and all(e.actor == "reranker" for e in reranked)
    # the same events; their interleaving differs (a remote rerank takes longer)
    assert sorted(e.type for e in remote.events) == sorted(e.type for e in local.events)


def _spec_error(spec: Any) -> str:
    with pytest.raises(ValueError) as info:
        build_placements(spec, embedder=HashingEmbedder, credibility=Credibility())
    return str(info.value)


@pytest.mark.parametrize(("spec", "says"), [
    ({"writer": "ray"}, "'writer' cannot run on Ray"),
    ({"reranker": "gpu"}, "unknown target 'gpu'"),
    ({"reranker": {"on": "ray", "num_gpu": 1}}, "unknown Ray placement options ['num_gpu']"),
    ({"reranker": {"replicas": 0}}, "replicas"),
    ({"reranker": 3}, "expected 'local', 'ray' or a table"),
])
def test_a_bad_placement_is_refused_before_any_run(spec: Any, says: str) -> None:
    assert says in _spec_error(spec)


def test_local_placement_places_nothing() -> None:
    assert build_placements({"reranker": "local"}, embedder=HashingEmbedder,
                            credibility=Credibility()) == {}


class _LockedEmbedder(HashingEmbedder):
    """An embedder holding something that does not pickle (a lock, a client, a session)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        with self._lock:
            return super().embed_queries(texts)


def test_an_embedder_that_cannot_reach_a_worker_is_refused_with_the_way_out() -> None:
    with pytest.raises(ValueError, match=r"cannot be sent to a Ray worker.*RayPlacement"):
        build_placements({"reranker": "ray"}, embedder=_LockedEmbedder,
                         credibility=Credibility())


def test_minilm_travels_as_a_recipe_with_its_cache_path(tmp_path: Path) -> None:
    model = MiniLMEmbedder()
    cached = CachedEmbedder(model, tmp_path / "embeddings.sqlite")
    recipe = portable_embedder(cached)
    assert recipe == MiniLMRecipe(str(model.model_path), str(model.tokenizer_path),
                                  str(tmp_path / "embeddings.sqlite"))
    assert isinstance(recipe, MiniLMRecipe)
    rebuilt = recipe.build()
    assert isinstance(rebuilt, CachedEmbedder)
    try:
        assert rebuilt.path == cached.path
        assert (rebuilt.embed_queries(["aspirin"]) == model.embed_queries(["aspirin"])).all()
    finally:
        rebuilt.close()
        cached.close()
    hashing = HashingEmbedder()
    assert portable_embedder(hashing) is hashing


@pytest.mark.slow
def test_a_recipe_built_on_a_worker_uses_the_cpus_ray_reserved_for_it(ray: Any) -> None:
    model = MiniLMEmbedder()
    recipe = portable_embedder(model)
    assert isinstance(recipe, MiniLMRecipe)

    @ray.remote(num_cpus=1)
    def threads_on_worker(r: MiniLMRecipe) -> int:
        built = r.build()
        assert isinstance(built, MiniLMEmbedder)
        return built.intra_op_threads

    # two one-CPU workers on two cores must not run two threads each
    assert ray.get(threads_on_worker.remote(recipe), timeout=120) == 1
    assert model.intra_op_threads == 2  # outside a worker: the default


def test_a_custom_reranker_cannot_be_placed_by_name() -> None:
    with pytest.raises(ValueError, match="not a `reranker=` of your own"):
        parse_placement({"reranker": "ray"}, custom_reranker=True)
    assert parse_placement({"reranker": "local"}, custom_reranker=True) == {}


@pytest.mark.slow
async def test_a_config_file_places_the_reranker_on_ray(
    ray: Any, index: CorpusIndex, tmp_path: Path,
) -> None:
    config = tmp_path / "engine.toml"
    config.write_text('[placement.reranker]\non = "ray"\nnum_cpus = 0.1\nmax_restarts = 1\n')
    engine = Engine.from_config(config, index=index)
    try:
        result = await engine.ask(QUESTION, collections=["demo"])
        placement = engine._placement.get("reranker")
        assert placement is not None and placement.started
        assert placement.options.max_restarts == 1
    finally:
        await engine.aclose()
    assert result.outcome == "answered", result.reason
    assert not placement.started  # the engine shut down what it built


def test_a_bad_placement_table_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "engine.toml"
    config.write_text('[placement.reranker]\non = "ray"\nnum_gpu = 1\n')
    with pytest.raises(RunConfigError, match=r"\[placement\].*num_gpu"):
        Engine.from_config(config)
