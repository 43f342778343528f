"""When the client tries again, and how long it waits: one policy for every idempotent call."""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["RetryPolicy"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of idempotent reads (``get``, an event stream's connection and reconnections).

    A request that starts a run (``POST /v1/runs``) or cancels one is never retried:
    its error goes to the caller, who knows whether trying again is safe.

    Args:
        attempts: tries after a failure before giving up, counted from the last
            progress (a stream that delivers a new event starts counting again).
        first_delay_s: the wait before the first retry; it doubles each time
            (with jitter: a random 50-100% of it) up to ``max_delay_s``.
        max_delay_s: the longest wait between two tries.
        retry_busy: also retry a read the server answered 429 or 503 with
            ``Retry-After``, after that many seconds (off by default: the
            caller gets :class:`RateLimited` / :class:`Unavailable` at once).
        max_retry_after_s: a ``Retry-After`` longer than this is not waited
            for even with ``retry_busy``: the error is raised.
    """

    attempts: int = 6
    first_delay_s: float = 0.2
    max_delay_s: float = 5.0
    retry_busy: bool = False
    max_retry_after_s: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 0:
            raise ValueError(f"attempts must be >= 0, got {self.attempts}")
        if not 0 <= self.first_delay_s <= self.max_delay_s:
            raise ValueError("need 0 <= first_delay_s <= max_delay_s")

    def delay_s(self, failures: int) -> float:
        """The wait before retry number ``failures`` (1 for the first)."""
        full = min(self.max_delay_s, self.first_delay_s * 2.0 ** max(0, failures - 1))
        return full * random.uniform(0.5, 1.0)
