"""How fast this machine embeds passages, remembered per embedder to estimate big jobs.

Each index build that embedded enough passages records its rate in
``ROOT/embed_rates.json``; a later build's estimate uses it, or
:data:`DEFAULT_EMBED_RATE` (MiniLM int8 on two busy cores) before any was
measured. The file is a hint: unreadable or odd content is ignored.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["DEFAULT_EMBED_RATE", "MIN_MEASURED", "load_embed_rate", "save_embed_rate"]

#: Passages per second assumed before a rate was measured here.
DEFAULT_EMBED_RATE = 20.0
#: A build must embed at least this many passages for its rate to be remembered.
MIN_MEASURED = 32
_FILE = "embed_rates.json"


def _read(root: Path) -> dict[str, float]:
    try:
        data = json.loads((root / _FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items()
            if isinstance(k, str) and isinstance(v, int | float) and v > 0}


def load_embed_rate(root: Path, embedder: str) -> float | None:
    """The passages/s last measured for ``embedder`` under ``root``, if any."""
    return _read(root).get(embedder)


def save_embed_rate(root: Path, embedder: str, passages_per_s: float) -> None:
    """Remember a measured rate (atomically; a failure to write is not an error)."""
    if not passages_per_s > 0:
        return
    rates = _read(root)
    rates[embedder] = float(passages_per_s)
    tmp = root / f".{_FILE}.{os.getpid()}.tmp"
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(rates, sort_keys=True), encoding="utf-8")
        os.replace(tmp, root / _FILE)
    except OSError:
        tmp.unlink(missing_ok=True)
