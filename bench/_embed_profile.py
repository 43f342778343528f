"""Embedding-throughput profile for ``bench/index.py --profile-embed N``.

Times MiniLM int8 on N real chunk texts (every k-th chunk of the benchmark's
corpus, so the SciFact/HotpotQA length mix is the build's) under different
batching, padding, ordering and onnxruntime settings. The first row is what a
build does today: ``MiniLMEmbedder()`` defaults (batch 8 since stop 21, texts sorted by
length, padded to the longest in the batch, 2 intra-op threads) called with the
builder's 64-text groups. Other rows run the same tokenizer and ONNX model
through a local copy of the forward pass (``actors/models`` is not changed) and
check their vectors against the baseline's (min cosine).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

BUILDER_GROUP = 64  # reactive_rag/index/_builder.py _EMBED_BATCH
REPEATS = 1  # best of; the current setting is timed again last to show the noise


def _session(model_path: Any, intra: int, inter: int = 1, arena: bool = True,
             sequential: bool = True) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = intra
    opts.inter_op_num_threads = inter
    opts.enable_cpu_mem_arena = arena
    opts.execution_mode = (ort.ExecutionMode.ORT_SEQUENTIAL if sequential
                           else ort.ExecutionMode.ORT_PARALLEL)
    return ort.InferenceSession(str(model_path), sess_options=opts,
                                providers=["CPUExecutionProvider"])


def _forward(sess: Any, inputs: set[str], rows: list[list[int]], width: int | None
             ) -> npt.NDArray[np.float32]:
    w = width or max(1, max(len(r) for r in rows))
    ids = np.zeros((len(rows), w), dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = r
        mask[i, :len(r)] = 1
    feeds = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in inputs:
        feeds["token_type_ids"] = np.zeros_like(ids)
    hidden = np.asarray(sess.run(None, feeds)[0], dtype=np.float32)
    m = mask[..., None].astype(np.float32)
    pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
    res: npt.NDArray[np.float32] = (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
                                    ).astype(np.float32)
    return res


def _embed(tok: Any, sess: Any, inputs: set[str], texts: Sequence[str], *, batch: int,
           group: int, sort: bool, width: int | None) -> npt.NDArray[np.float32]:
    out = np.zeros((len(texts), 384), dtype=np.float32)
    for g in range(0, len(texts), group):
        part = list(texts[g:g + group])
        ids = [e.ids for e in tok.encode_batch(part)]
        order = (sorted(range(len(part)), key=lambda i: len(ids[i])) if sort
                 else list(range(len(part))))
        for s in range(0, len(order), batch):
            b = order[s:s + batch]
            out[np.asarray(b) + g] = _forward(sess, inputs, [ids[i] for i in b], width)
    return out


def profile(texts: Sequence[str], log: Any) -> list[dict[str, Any]]:
    from actors.models import MiniLMEmbedder

    base_model = MiniLMEmbedder()
    tok, path = base_model._tok, base_model.model_path
    inputs = set(base_model._inputs)
    lengths = [len(e.ids) for e in tok.encode_batch(list(texts))]
    log(f"profile: {len(texts)} passages, tokens p50 {int(np.median(lengths))}, "
        f"max {max(lengths)} (truncated at 256), mean {np.mean(lengths):.0f}")
    base_model.embed_passages(list(texts[:8]))
    rows: list[dict[str, Any]] = []
    ref: npt.NDArray[np.float32] | None = None

    def timed(label: str, fn: Any) -> None:
        nonlocal ref
        fn(list(texts[:16]))  # warm-up (arena, kernels)
        best = float("inf")
        vecs = None
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            vecs = fn(list(texts))
            best = min(best, time.perf_counter() - t0)
        assert vecs is not None
        if ref is None:
            ref = vecs
        cos = float(np.min(np.sum(vecs * ref, axis=1)))
        row = {"setting": label, "chunks_per_s": len(texts) / best, "min_cos": cos}
        row["vs_current"] = row["chunks_per_s"] / rows[0]["chunks_per_s"] if rows else 1.0
        rows.append(row)
        log(f"  {label:<58} {row['chunks_per_s']:6.1f} chunks/s  {row['vs_current']:.2f}x "
            f"(min cos {cos:.4f})")

    def grouped(m: Any) -> Any:
        return lambda ts: np.concatenate([m.embed_passages(ts[g:g + BUILDER_GROUP])
                                          for g in range(0, len(ts), BUILDER_GROUP)])

    timed("current: MiniLMEmbedder() via builder's 64-text calls", grouped(base_model))
    timed("same model, one call for all texts (sort over all)",
          lambda ts: base_model.embed_passages(ts))
    s2 = _session(path, 2)
    for bs in (1, 8, 16, 64):
        timed(f"batch {bs}, sorted, pad to longest, 2 threads",
              lambda ts, bs=bs: _embed(tok, s2, inputs, ts, batch=bs, group=BUILDER_GROUP,
                                       sort=True, width=None))
    timed("batch 32, UNsorted, pad to longest, 2 threads",
          lambda ts: _embed(tok, s2, inputs, ts, batch=32, group=BUILDER_GROUP, sort=False,
                            width=None))
    timed("batch 32, sorted, FIXED pad to 256, 2 threads",
          lambda ts: _embed(tok, s2, inputs, ts, batch=32, group=BUILDER_GROUP, sort=True,
                            width=256))
    timed("batch 16, sorted over all texts, 2 threads",
          lambda ts: _embed(tok, s2, inputs, ts, batch=16, group=len(ts), sort=True,
                            width=None))
    s1 = _session(path, 1)
    timed("batch 32, sorted, 1 intra-op thread",
          lambda ts: _embed(tok, s1, inputs, ts, batch=32, group=BUILDER_GROUP, sort=True,
                            width=None))
    s4 = _session(path, 4)
    timed("batch 32, sorted, 4 intra-op threads (2 cores)",
          lambda ts: _embed(tok, s4, inputs, ts, batch=32, group=BUILDER_GROUP, sort=True,
                            width=None))
    sp = _session(path, 2, inter=2, sequential=False)
    timed("batch 32, sorted, 2 intra + 2 inter threads, ORT_PARALLEL",
          lambda ts: _embed(tok, sp, inputs, ts, batch=32, group=BUILDER_GROUP, sort=True,
                            width=None))
    sa = _session(path, 2, arena=False)
    timed("batch 32, sorted, 2 threads, cpu mem arena OFF",
          lambda ts: _embed(tok, sa, inputs, ts, batch=32, group=BUILDER_GROUP, sort=True,
                            width=None))
    timed("current again (noise check)", grouped(base_model))
    return rows


_RSS_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[3])
def hwm():  # own peak RSS (VmHWM; ru_maxrss can carry the parent's peak over exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
import numpy as np
from _embed_profile import _embed, _session
from actors.models import MiniLMEmbedder
texts = json.loads(open(sys.argv[2]).read())
m = MiniLMEmbedder()
arena = sys.argv[1] == "on"
sess = _session(m.model_path, 2, arena=arena)
before = hwm()
t0 = time.perf_counter()
_embed(m._tok, sess, set(m._inputs), texts, batch=32, group=64, sort=True, width=None)
dt = time.perf_counter() - t0
print(json.dumps({"arena": arena, "peak_rss_mb": hwm(), "rss_before_mb": before,
    "chunks_per_s": len(texts) / dt}))
"""


def arena_rss(texts: Sequence[str], log: Any) -> list[dict[str, Any]]:
    """Peak RSS of a fresh process embedding ``texts`` with onnxruntime's CPU arena on/off."""
    import json
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    here = Path(__file__).resolve().parent
    out = []
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(list(texts), fh)
    for mode in ("on", "off"):
        res = subprocess.run([sys.executable, "-c", _RSS_CHILD, mode, fh.name, str(here)],
                             capture_output=True, text=True, check=True,
                             cwd=str(here.parent))
        row = json.loads(res.stdout.strip().splitlines()[-1])
        log(f"  arena {mode}: peak RSS {row['peak_rss_mb']:.0f} MB "
            f"(after model load {row['rss_before_mb']:.0f} MB), {row['chunks_per_s']:.1f}/s")
        out.append(row)
    Path(fh.name).unlink()
    return out
