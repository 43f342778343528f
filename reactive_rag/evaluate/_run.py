"""Ask every question of a file on each mode, one run at a time, as ``reactive-rag eval`` does.

One at a time: a run's latency is its own, not its share of a crowded machine. Each
finished run is handed to the caller with its score before the next starts, so the
caller can keep it (the run store) and show progress.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from reactive_rag.engine import Engine, Mode, PriceTable, RunResult

from ._cases import QACase
from ._score import CaseResult

__all__ = ["ask_cases"]


async def ask_cases(engine: Engine, cases: Sequence[QACase], modes: Sequence[Mode], *,
                    collections: Sequence[str], budget: Mapping[str, Any] | None = None,
                    prices: PriceTable | None = None,
                    ) -> AsyncIterator[tuple[RunResult, CaseResult]]:
    """Each case asked on each mode (mode by mode), with its finished run and its score
    (its cost by ``prices``).

    A case naming no collections searches ``collections``.
    """
    for mode in modes:
        for case in cases:
            t0 = time.perf_counter()
            result = await engine.ask(case.question, mode=mode,
                                      collections=list(case.collections or collections),
                                      budget=dict(budget or {}))
            seconds = time.perf_counter() - t0
            engine.forget(result.run_id)
            yield result, CaseResult.of(case, mode, result, seconds, prices)
