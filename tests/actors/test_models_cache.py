"""CachedEmbedder: a text reaches the model once, across calls, reopenings and processes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from actors.models import CachedEmbedder, Embedder, FloatMatrix, HashingEmbedder


class CountingEmbedder:
    """HashingEmbedder that records every batch the cache sends it."""

    def __init__(self) -> None:
        self._inner = HashingEmbedder(64)
        self.name = "counting"
        self.dim = 64
        self.batches: list[list[str]] = []

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        self.batches.append(["q:" + t for t in texts])
        return self._inner.embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> FloatMatrix:
        self.batches.append(list(texts))
        return self._inner.embed_passages(texts)


def test_only_uncached_texts_reach_the_model_in_one_batch(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    with CachedEmbedder(inner, tmp_path / "v.sqlite") as cache:
        assert isinstance(cache, Embedder)
        first = cache.embed_passages(["a b", "c d", "a b"])
        assert inner.batches == [["a b", "c d"]]  # duplicates in a batch embedded once
        second = cache.embed_passages(["c d", "e f", "a b"])
        assert inner.batches[1:] == [["e f"]]
        np.testing.assert_array_equal(second[0], first[1])
        np.testing.assert_array_equal(second[2], first[0])
        cache.embed_passages(["a b", "e f"])
        assert len(inner.batches) == 2  # nothing new: no model call at all
        assert (cache.model_calls, cache.misses, cache.hits) == (2, 3, 5)


def test_vectors_match_the_inner_model(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    with CachedEmbedder(inner, tmp_path / "v.sqlite") as cache:
        texts = ["alpha beta", "gamma delta", "beta gamma"]
        cache.embed_passages(texts[:1])
        np.testing.assert_allclose(
            cache.embed_passages(texts), HashingEmbedder(64).embed_passages(texts), atol=1e-7
        )
        assert cache.embed_passages([]).shape == (0, 64)


def test_cache_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "v.sqlite"
    inner = CountingEmbedder()
    with CachedEmbedder(inner, path) as cache:
        cache.embed_passages(["one", "two"])
    inner2 = CountingEmbedder()
    with CachedEmbedder(inner2, path) as cache:
        cache.embed_passages(["two", "one"])
    assert inner2.batches == []


def test_queries_and_passages_and_models_are_kept_apart(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    inner = CountingEmbedder()
    with CachedEmbedder(inner, path) as cache:
        cache.embed_passages(["same text"])
        cache.embed_queries(["same text"])
    assert inner.batches == [["same text"], ["q:same text"]]
    other = CountingEmbedder()
    other.name = "another-model"
    with CachedEmbedder(other, path) as cache:
        cache.embed_passages(["same text"])
    assert other.batches == [["same text"]]


def test_wrong_number_of_vectors_is_an_error(tmp_path: Path) -> None:
    class Broken(CountingEmbedder):
        def embed_passages(self, texts: Sequence[str]) -> FloatMatrix:
            return np.zeros((len(texts) + 1, 64), dtype=np.float32)

    with CachedEmbedder(Broken(), tmp_path / "v.sqlite") as cache, pytest.raises(
        ValueError, match="returned 3 vectors for 2 texts"
    ):
        cache.embed_passages(["x", "y"])


_WRITER = """
import sys
from actors.models import CachedEmbedder, HashingEmbedder
with CachedEmbedder(HashingEmbedder(64), sys.argv[1]) as c:
    for i in range(40):
        c.embed_passages([f"text {i}", f"shared {i % 5}", "common"])
"""


def test_two_processes_share_one_cache_file(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    root = Path(__file__).resolve().parents[2]
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], cwd=root,
                         stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err.decode()
    inner = CountingEmbedder()
    inner.name = "hashing-64"
    with CachedEmbedder(inner, path) as cache:
        v = cache.embed_passages([f"text {i}" for i in range(40)] + ["common"])
    assert inner.batches == []
    np.testing.assert_allclose(v[-1], HashingEmbedder(64).embed_passages(["common"])[0], atol=1e-7)
