"""What a run used (model calls and tokens by role, provider calls, pages, wall time) and
what it cost by an operator's price table.

:func:`fold_usage` is the one count: a pure fold over a run's events, used by the
runtime to fill ``run.finished.usage`` and by every reader of a stored run that
lacks it. Costs are an estimate made where they are shown, from the
:class:`PriceTable` in force there, so a price change never rewrites a stored
run; the event carries only what was measured.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reactive_rag.run import RunConfigError
from streams import (
    AnswerabilityJudged,
    AnswerDrafted,
    AnswerVerified,
    Event,
    ModelUsage,
    PageScraped,
    PlanDecided,
    QueryRewritten,
    RunFinished,
    RunResumed,
    RunStarted,
    RunUsage,
    SearchCompleted,
    SearchFailed,
)

from ._toml import read_toml

__all__ = [
    "CostEstimate",
    "ModelPrice",
    "ModelUsage",
    "PriceTable",
    "RunUsage",
    "UsageConfig",
    "add_usage",
    "fold_usage",
    "usage_json",
    "usage_line",
    "usage_of",
]

_STRICT = ConfigDict(extra="forbid", frozen=True)
_Key = tuple[str, str]  # (role, model)


def fold_usage(events: Iterable[Event]) -> RunUsage:
    """Count what the run of ``events`` (in seq order) used.

    Model calls are the decisions a model made: ``plan.decided`` (planner) and
    ``answer.drafted`` (writer) with their reported tokens, ``answerability.judged``
    and ``answer.verified`` judged by a model (judge), ``query.rewritten`` by a
    model (rewriter); offline decisions count nothing. Provider calls come from
    each search's ``provider_calls``; pages and bytes from ``page.scraped``. Wall
    time runs from ``run.started`` (or the last ``run.resumed``, plus the time
    used before it) to the last event.
    """
    models: dict[_Key, list[int]] = {}
    providers: dict[str, int] = {}
    pages = page_bytes = 0
    start: float | None = None
    before = 0.0
    last = 0.0

    def call(role: str, model: str, input_tokens: int = 0, output_tokens: int = 0) -> None:
        row = models.setdefault((role, model), [0, 0, 0])
        row[0] += 1
        row[1] += input_tokens
        row[2] += output_tokens

    for event in events:
        last = event.ts
        match event:
            case RunStarted() if start is None:
                start = event.ts
            case RunResumed():
                start, before = event.ts, event.elapsed_s
            case PlanDecided() | AnswerDrafted() if event.model:
                role = "planner" if isinstance(event, PlanDecided) else "writer"
                call(role, event.model, event.input_tokens, event.output_tokens)
            case AnswerabilityJudged(by="model"):
                call("judge", event.model)
            case AnswerVerified(judged_by="model"):
                call("judge", "")
            case QueryRewritten(by="model"):
                call("rewriter", "")
            case SearchCompleted() | SearchFailed():
                for pc in event.provider_calls:
                    providers[pc.provider] = providers.get(pc.provider, 0) + 1
            case PageScraped():
                pages += 1
                page_bytes += sum(len(c.text.encode()) for c in event.chunks)
            case _:
                pass
    wall = before + max(0.0, last - start) if start is not None else 0.0
    return RunUsage(
        models=tuple(ModelUsage(role=r, model=m, calls=c, input_tokens=i, output_tokens=o)
                     for (r, m), (c, i, o) in sorted(models.items())),
        provider_calls=dict(sorted(providers.items())),
        pages=pages, page_bytes=page_bytes, wall_s=round(wall, 3))


def usage_of(events: Iterable[Event]) -> RunUsage:
    """The usage the run's last ``run.finished`` carries, else :func:`fold_usage` of them.

    A run stored before usage was counted, or ended by store recovery, has no
    usage on its terminal: its events are counted instead.
    """
    log = list(events)
    finished = next((e for e in reversed(log) if isinstance(e, RunFinished)), None)
    if finished is not None and finished.usage is not None:
        return finished.usage
    return fold_usage(log)


def add_usage(usages: Iterable[RunUsage]) -> RunUsage:
    """The sum of several runs' usage (a tenant's, over a time range)."""
    models: dict[_Key, list[int]] = {}
    providers: dict[str, int] = {}
    pages = page_bytes = 0
    wall = 0.0
    for usage in usages:
        for m in usage.models:
            row = models.setdefault((m.role, m.model), [0, 0, 0])
            row[0] += m.calls
            row[1] += m.input_tokens
            row[2] += m.output_tokens
        for name, n in usage.provider_calls.items():
            providers[name] = providers.get(name, 0) + n
        pages += usage.pages
        page_bytes += usage.page_bytes
        wall += usage.wall_s
    return RunUsage(
        models=tuple(ModelUsage(role=r, model=m, calls=c, input_tokens=i, output_tokens=o)
                     for (r, m), (c, i, o) in sorted(models.items())),
        provider_calls=dict(sorted(providers.items())),
        pages=pages, page_bytes=page_bytes, wall_s=round(wall, 3))


class ModelPrice(BaseModel):
    """What one model costs per 1,000 tokens, read and written."""

    model_config = _STRICT

    input_per_1k: float = Field(default=0.0, ge=0)
    output_per_1k: float = Field(default=0.0, ge=0)


class CostEstimate(BaseModel):
    """A run's (or a sum's) estimated cost; ``unpriced``: models it used that have no price."""

    model_config = _STRICT

    currency: str
    total: float
    models: float
    providers: float
    unpriced: tuple[str, ...] = ()


class PriceTable(BaseModel):
    """Prices to estimate costs with: per model (per 1k input/output tokens) and per
    provider call. A provider not in the table costs nothing (the local corpus); a
    model not in it costs nothing and is named in the estimate's ``unpriced``."""

    model_config = _STRICT

    currency: str = Field(default="USD", min_length=1, max_length=8)
    models: dict[str, ModelPrice] = Field(default_factory=dict)
    providers: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)
    """Provider name -> price of one search call."""

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PriceTable:
        """A price table from a TOML file (the server's ``[usage.prices]`` schema, at top level).

        Raises:
            RunConfigError: the file cannot be read, is not TOML, or holds invalid prices.
        """
        try:
            return cls.model_validate(read_toml(path, RunConfigError))
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in err.get("loc", ()))
            raise RunConfigError(f"invalid price table {path} at {where or 'top level'}: "
                                 f"{err.get('msg', '')}") from None

    def estimate_cost(self, usage: RunUsage) -> CostEstimate:
        """The cost of ``usage`` by this table (an offline run costs 0)."""
        model_cost = 0.0
        unpriced: set[str] = set()
        for m in usage.models:
            price = self.models.get(m.model)
            if price is None:
                if m.model and (m.input_tokens or m.output_tokens):
                    unpriced.add(m.model)
                continue
            model_cost += (m.input_tokens * price.input_per_1k
                           + m.output_tokens * price.output_per_1k) / 1000
        provider_cost = sum(n * self.providers.get(name, 0.0)
                            for name, n in usage.provider_calls.items())
        return CostEstimate(currency=self.currency,
                            total=round(model_cost + provider_cost, 6),
                            models=round(model_cost, 6), providers=round(provider_cost, 6),
                            unpriced=tuple(sorted(unpriced)))


class UsageConfig(BaseModel):
    """``[usage]`` of the server config: the price table, and whether ``/metrics``
    labels the usage counters by tenant (off by default: tenant names stay out of
    a scrape unless the operator wants them there)."""

    model_config = _STRICT

    tenant_metrics: bool = False
    prices: PriceTable = Field(default_factory=PriceTable)


def usage_json(usage: RunUsage, prices: PriceTable) -> dict[str, Any]:
    """``usage`` with its totals and estimated cost, as every face shows it."""
    body = usage.model_dump(mode="json")
    body.update(model_calls=sum(m.calls for m in usage.models),
                input_tokens=sum(m.input_tokens for m in usage.models),
                output_tokens=sum(m.output_tokens for m in usage.models),
                cost=prices.estimate_cost(usage).model_dump(mode="json"))
    return body


def usage_line(usage: RunUsage, prices: PriceTable) -> str:
    """``usage`` and its estimated cost in one line (a terminal's last line)."""
    cost = prices.estimate_cost(usage)
    if usage.models:
        by_role: dict[str, list[int]] = {}
        for m in usage.models:
            row = by_role.setdefault(m.role, [0, 0, 0])
            row[0] += m.calls
            row[1] += m.input_tokens
            row[2] += m.output_tokens
        models = "model calls: " + ", ".join(f"{role} {c} ({i} in / {o} out tokens)"
                                             for role, (c, i, o) in by_role.items())
    else:
        models = "no model calls (offline: 0 tokens)"
    providers = ", ".join(f"{name} {n}" for name, n in usage.provider_calls.items()) or "none"
    unpriced = f" (no price for {', '.join(cost.unpriced)})" if cost.unpriced else ""
    return (f"usage: {models}; provider calls: {providers}; {usage.pages} pages "
            f"({usage.page_bytes} bytes); est. cost {cost.total:g} {cost.currency}{unpriced}")
