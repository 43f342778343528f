"""Measured end-to-end index builds on real text (used by ``bench/index.py``).

Each build runs in a child process of its own (``python bench/_index_build.py
build|reindex CONFIG.json``), so its peak RSS (``VmHWM``, the kernel's high-water
mark for this process) is that build's own peak, model load included. Nothing is
cached: every chunk is embedded by the real MiniLM int8 model inside the timed
region.

Corpus: the SciFact abstracts in file order, then (only if they give fewer chunks
than asked) HotpotQA paragraphs (``hotpotqa_dev_300.jsonl``, unique by title and
text), each document cut with the index's own chunker (``ChunkingConfig``
defaults), until the requested number of chunks is reached.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from actors.text import chunk_text  # noqa: E402
from reactive_rag.index import ChunkingConfig, Document  # noqa: E402
from reactive_rag.index._builder import document_text  # noqa: E402

CHANGE_EVERY = 20  # 5% of the documents change for the re-index


def _chunks_of(doc: Document, cfg: ChunkingConfig) -> int:
    pieces = chunk_text(document_text(doc), target_words=cfg.target_words,
                        overlap_ratio=cfg.overlap_ratio, max_words=cfg.max_words)
    return len(pieces) or (1 if doc.title else 0)


def real_documents(data_root: Path, scifact: Path, want_chunks: int
                   ) -> tuple[list[Document], dict[str, int]]:
    """Documents giving about ``want_chunks`` chunks, and where they came from."""
    cfg = ChunkingConfig()
    docs: list[Document] = []
    counts = {"scifact_docs": 0, "scifact_chunks": 0, "hotpot_docs": 0, "hotpot_chunks": 0}
    total = 0
    with open(scifact / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if total >= want_chunks:
                break
            row = json.loads(line)
            d = Document(id=f"scifact:{row['_id']}", text=row.get("text", ""),
                         title=row.get("title", ""), doc_type="abstract")
            c = _chunks_of(d, cfg)
            if c == 0:
                continue
            docs.append(d)
            total += c
            counts["scifact_docs"] += 1
            counts["scifact_chunks"] += c
    hp = data_root / "hotpotqa_dev_300.jsonl"
    if not hp.is_file():  # --data pointed at the SciFact folder itself
        hp = scifact.parent / "hotpotqa_dev_300.jsonl"
    if total < want_chunks and hp.is_file():
        seen: set[tuple[str, str]] = set()
        with open(hp, encoding="utf-8") as fh:
            for line in fh:
                if total >= want_chunks:
                    break
                for ctx in json.loads(line).get("contexts", []):
                    if total >= want_chunks:
                        break
                    key = (ctx.get("title", ""), ctx.get("paragraph_text", ""))
                    if key in seen or not key[1].strip():
                        continue
                    seen.add(key)
                    d = Document(id=f"hotpot:{len(seen)}", text=key[1], title=key[0],
                                 doc_type="paragraph")
                    c = _chunks_of(d, cfg)
                    docs.append(d)
                    total += c
                    counts["hotpot_docs"] += 1
                    counts["hotpot_chunks"] += c
    counts["chunks_planned"] = total
    return docs, counts


def chunk_texts(docs: list[Document]) -> list[str]:
    """The texts the builder embeds (title + chunk), in build order."""
    from reactive_rag.index import search_text

    cfg = ChunkingConfig()
    out: list[str] = []
    for d in docs:
        for c in chunk_text(document_text(d), target_words=cfg.target_words,
                            overlap_ratio=cfg.overlap_ratio, max_words=cfg.max_words):
            out.append(search_text(d.title, c.text))
    return out


def edited(docs: list[Document]) -> tuple[list[Document], int]:
    """Every 20th document with its text edited (deterministic), and how many changed."""
    out: list[Document] = []
    changed = 0
    for i, d in enumerate(docs):
        if i % CHANGE_EVERY == 0:
            words = d.text.split()
            # Revised text: a new lead sentence, and the first and last halves swapped.
            half = len(words) // 2
            text = (f"Revision {i}: this record was updated. "
                    + " ".join(words[half:] + words[:half]))
            d = Document(id=d.id, text=text, title=d.title, doc_type=d.doc_type)
            changed += 1
        out.append(d)
    return out, changed


def _peak_rss_mb() -> float:
    """This process's own peak RSS: ``VmHWM`` (reset at exec, unlike ``ru_maxrss``, which
    a child can inherit from a larger parent), falling back to ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _child(mode: str, cfg_path: str) -> None:
    cfg = json.loads(Path(cfg_path).read_text())
    from actors.models import HashingEmbedder, MiniLMEmbedder
    from reactive_rag.index import CorpusIndex

    docs, counts = real_documents(Path(cfg["data_root"]), Path(cfg["scifact"]), cfg["chunks"])
    changed = 0
    if mode == "reindex":
        docs, changed = edited(docs)
    model: Any = HashingEmbedder(384) if cfg.get("embedder") == "hashing" else MiniLMEmbedder()
    model.embed_passages(["warm up the session"])
    rss_ready = _peak_rss_mb()
    embed = {"done": 0, "total": 0, "t": 0.0}
    t0 = time.perf_counter()
    last = [t0]
    log = Path(cfg["log"]) if cfg.get("log") else None

    def progress(done: int, total: int, stage: str) -> None:
        now = time.perf_counter()
        if stage == "embed":
            embed.update(done=done, total=total, t=now - t0)
            if log is not None and (now - last[0] > 20 or done == total):
                last[0] = now
                with open(log, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"mode": mode, "embedded": done, "of": total,
                                         "elapsed_s": round(now - t0, 1),
                                         "chunks_per_s": round(done / (now - t0), 2)}) + "\n")

    idx = CorpusIndex(Path(cfg["root"]), model)
    report = idx.index_documents("real", docs, progress=progress)
    wall = time.perf_counter() - t0
    idx.close()
    print(json.dumps({
        "mode": mode, "embedder": getattr(model, "name", "?"), "seconds": wall,
        "chunks": report.chunks, "documents": report.documents,
        "embedded": embed["total"], "embed_s": embed["t"], "added": report.added,
        "updated": report.updated, "unchanged": report.unchanged, "changed_docs": changed,
        "peak_rss_mb": _peak_rss_mb(), "rss_after_model_load_mb": rss_ready, **counts,
    }))


def run_child(mode: str, cfg: dict[str, Any], cfg_path: Path) -> dict[str, Any]:
    cfg_path.write_text(json.dumps(cfg))
    out = subprocess.run([sys.executable, __file__, mode, str(cfg_path)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{mode} child failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
