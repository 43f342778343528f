"""Tenant caps and quotas: how big one run may be, and how much a tenant may run.

Two kinds of limit, one place that enforces them (:class:`~._runs.RunManager`,
which every face starts its runs through):

- a **cap** bounds one run's budget (``[tenants.NAME.caps]``, :class:`TenantCaps`,
  keys named as the budget fields they cap): a request over it is refused (422
  ``budget_over_cap``), a budget field the request leaves out gets its default
  clipped to the cap (:func:`capped_budget`);
- a **quota** bounds a tenant's runs over time: runs at once
  (``max_concurrent_runs``), runs started in the last minute, hour and day
  (``runs_per_minute``, ``caps.runs_per_hour``, ``caps.runs_per_day``) and the
  model tokens its runs used in the last day (``caps.tokens_per_day``): 429 with
  ``Retry-After``, the seconds until the window frees a slot (:class:`Quotas`).

Windows slide (the last 3600 s, not the clock hour). The ledger is this server
process's memory: a restart forgets it, and replicas of the API behind a load
balancer each count only the runs they started.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from reactive_rag.run import Budget
from streams import AnswerDrafted, Event, PlanDecided, RunStream

from ._exceptions import RateLimited
from ._models import _BUDGET_MAX
from ._problems import make_problem

BUDGET_LIMIT = _BUDGET_MAX
"""The most any budget field may ask for in a request (the API document says so too)."""


class TenantLimits(Protocol):
    """What :meth:`Quotas.admit` reads of a tenant's config (its ``TenantConfig``)."""

    @property
    def caps(self) -> TenantCaps: ...

    @property
    def max_concurrent_runs(self) -> int: ...

    @property
    def runs_per_minute(self) -> int: ...

__all__ = ["BUDGET_CAPS", "BUDGET_LIMIT", "METERED_EVENTS", "Quotas", "TenantCaps", "capped_budget"]

HOUR_S = 3600.0
DAY_S = 86400.0
_BUCKET_S = 60.0
"""Tokens are kept per minute: a day of them is at most 1440 entries per tenant."""

BUDGET_CAPS = ("wall_s", "finalize_s", "max_steps", "max_tool_calls", "max_pages",
               "max_tokens", "max_read_tokens")
"""The budget fields a tenant's caps bound (each cap has the field's name)."""

METERED_EVENTS = ("plan.decided", "answer.drafted")
"""The events whose ``tokens`` (what the model server reported) count against
``tokens_per_day``: the same count as the run's ``max_tokens`` budget."""


class TenantCaps(BaseModel):
    """``[tenants.NAME.caps]``: the most one run may ask for, and the tenant's quotas.

    The defaults sit above the default budget (a run that names no budget is
    not clipped) and well below the request limit of 1,000,000.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_s: float = Field(default=300.0, gt=0, le=_BUDGET_MAX)
    """Seconds of search phase (the budget's ``wall_s``)."""
    finalize_s: float = Field(default=60.0, gt=0, le=_BUDGET_MAX)
    """Extra seconds for the finalizer after the deadline (``finalize_s``)."""
    max_steps: int = Field(default=50, ge=1, le=_BUDGET_MAX)
    """Model turns of the planner."""
    max_tool_calls: int = Field(default=100, ge=1, le=_BUDGET_MAX)
    """Searches, reads and page opens."""
    max_pages: int = Field(default=30, ge=1, le=_BUDGET_MAX)
    """Web pages one run may open."""
    max_tokens: int = Field(default=500_000, ge=1, le=_BUDGET_MAX)
    """Tokens the run's model server reports."""
    max_read_tokens: int = Field(default=800_000, ge=1, le=_BUDGET_MAX)
    """Passage text shown to the run's models (estimated)."""
    runs_per_hour: int = Field(default=1_000, ge=1)
    """Runs started in the last 3600 s."""
    runs_per_day: int = Field(default=10_000, ge=1)
    """Runs started in the last 86400 s."""
    tokens_per_day: int = Field(default=10_000_000, ge=1)
    """Model tokens the tenant's runs used in the last 86400 s."""

    def cap_of(self, name: str) -> float:
        """The cap on budget field ``name`` (one of :data:`BUDGET_CAPS`)."""
        return float(self.model_dump(include={name})[name])


def _number(value: float) -> str:
    """``300`` for 300.0, ``2.5`` for 2.5: as an operator writes it in the config."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def capped_budget(caps: TenantCaps, requested: Mapping[str, Any]) -> dict[str, Any]:
    """The budget a run gets: the request's fields, each within its cap, plus the
    defaults over a cap clipped to it.

    Raises:
        Problem: 422 ``budget_over_cap`` naming the first field over its cap and the cap.
    """
    budget = dict(requested)
    defaults = Budget()
    for name in BUDGET_CAPS:
        cap = caps.cap_of(name)
        value = budget.get(name)
        if value is None:
            if getattr(defaults, name) > cap:
                budget[name] = cap
        elif not isinstance(value, bool) and value > cap:
            raise make_problem(422, "budget_over_cap",
                               f"{name} {_number(value)} is over this tenant's cap of "
                               f"{_number(cap)} (caps.{name})", field=f"budget.{name}")
    return budget


@dataclass(slots=True)
class _Tokens:
    """Tokens charged from ``first`` to ``last`` (within a minute); they leave the day
    with the last of them."""

    first: float
    last: float
    tokens: int


@dataclass(slots=True)
class _Ledger:
    """One tenant's runs going on here, run starts and token use in the last day."""

    running: int = 0
    started: deque[float] = field(default_factory=deque)
    tokens: deque[_Tokens] = field(default_factory=deque)


class Quotas:
    """The quota ledger of every tenant, in this process's memory.

    Args:
        clock: monotonic seconds (the run manager's, injectable in tests).
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._ledgers: dict[str, _Ledger] = {}

    def admit(self, tenant: str, config: TenantLimits) -> None:
        """Take a slot for a new run of ``tenant`` and count its start.

        Raises:
            RateLimited: a quota is used up; nothing is taken.
        """
        ledger = self._ledgers.setdefault(tenant, _Ledger())
        caps = config.caps
        if ledger.running >= config.max_concurrent_runs:
            raise RateLimited("too_many_concurrent_runs",
                              f"max_concurrent_runs: at most {config.max_concurrent_runs} "
                              "runs at a time", 1)
        now = self._clock()
        while ledger.started and ledger.started[0] <= now - DAY_S:
            ledger.started.popleft()
        for code, key, limit, window, per in (
                ("too_many_runs_per_minute", "runs_per_minute", config.runs_per_minute,
                 60.0, "minute"),
                ("too_many_runs_per_hour", "runs_per_hour", caps.runs_per_hour, HOUR_S, "hour"),
                ("too_many_runs_per_day", "runs_per_day", caps.runs_per_day, DAY_S, "day")):
            wait = _slot_wait(ledger.started, limit, window, now)
            if wait is not None:
                raise RateLimited(code, f"{key}: at most {limit} runs per {per}; "
                                        f"a slot frees in {wait} s", wait)
        used, wait = self._tokens(ledger, caps.tokens_per_day, now)
        if wait is not None:
            raise RateLimited("too_many_tokens_per_day",
                              f"tokens_per_day: this tenant's runs used {used} model tokens "
                              f"in the last 24 h, the quota is {caps.tokens_per_day}; "
                              f"retry in {wait} s", wait)
        ledger.running += 1
        ledger.started.append(now)

    def release(self, tenant: str) -> None:
        """A run of ``tenant`` ended (or never started): give its slot back."""
        ledger = self._ledgers.get(tenant)
        if ledger is not None and ledger.running > 0:
            ledger.running -= 1

    def charge(self, tenant: str, tokens: int) -> None:
        """Count ``tokens`` a run of ``tenant`` used now against its daily quota."""
        if tokens <= 0:
            return
        ledger = self._ledgers.setdefault(tenant, _Ledger())
        now = self._clock()
        last = ledger.tokens[-1] if ledger.tokens else None
        if last is not None and now < last.first + _BUCKET_S:
            last.last, last.tokens = now, last.tokens + tokens
        else:
            ledger.tokens.append(_Tokens(now, now, tokens))

    def meter(self, tenant: str, stream: RunStream) -> None:
        """Charge ``tenant`` with the tokens its run reports, as each event is published.

        Attached before the run's first event; a run going on counts at once,
        so concurrent runs cannot all start on yesterday's figure.
        """

        def count(event: Event) -> None:
            if isinstance(event, PlanDecided | AnswerDrafted):
                self.charge(tenant, event.tokens)

        stream.tap(METERED_EVENTS, count, name=f"quota-meter:{tenant}")

    @staticmethod
    def _tokens(ledger: _Ledger, quota: int, now: float) -> tuple[int, int | None]:
        """Tokens in the last day, and the seconds until they are under ``quota``
        (None: they are already)."""
        while ledger.tokens and ledger.tokens[0].last <= now - DAY_S:
            ledger.tokens.popleft()
        used = sum(entry.tokens for entry in ledger.tokens)
        if used < quota:
            return used, None
        left, frees = used, now
        for entry in ledger.tokens:  # oldest first: when enough have left the day
            left -= entry.tokens
            frees = entry.last + DAY_S
            if left < quota:
                break
        return used, max(1, math.ceil(frees - now))


def _slot_wait(started: deque[float], limit: int, window: float, now: float) -> int | None:
    """Seconds until fewer than ``limit`` of ``started`` (ascending) fall in the
    last ``window``; None if they already do."""
    if len(started) < limit or started[-limit] <= now - window:
        return None
    return max(1, math.ceil(started[-limit] + window - now))

