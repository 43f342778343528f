"""Prometheus metrics of every run a process starts, fed by subscribing to the runs.

:class:`RunMetrics` owns its own ``CollectorRegistry`` (not the process-global
one, so two servers in one process, as in tests, do not collide). Counters and
histograms are updated from the events as they are published (a few
microseconds per event, on the publisher's thread); mailbox depths are read
from the live runs' actor statistics when the registry is scraped.

Labels are bounded and carry no tenant data: outcomes, tool and actor names,
provider names, request types, and a subscriber's kind (its name up to the
first ``:``, so no run id becomes a label). The one exception is opt-in: given
``tenant_of`` (the server's ``[usage] tenant_metrics``), the ``reactive_rag_usage_*``
counters, read from each ``run.finished``'s usage, carry a ``tenant`` label.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from reactivex import abc

from actors import ActorStats
from streams import (
    ActorFailed,
    AnswerDrafted,
    Event,
    PlanDecided,
    ProviderHealth,
    RequestInfo,
    RequestKind,
    RunFinished,
    RunResumed,
    RunStream,
    RunUsage,
    SubscriberDetached,
    request_info,
)

__all__ = ["RunMetrics"]

# the requests timed as tool calls, by what the event classes declare (streams.request_info):
# the planner's tools (search, read, scrape) and the services the run calls (rerank)
_TIMED: tuple[RequestKind, ...] = ("tool", "service")
# seconds: tool calls take milliseconds (local corpus) to tens of seconds (web, scrape)
_TOOL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_RUN_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class _Measured(Protocol):
    """What the metrics need of a run (a :class:`~reactive_rag.RunHandle` is one)."""

    @property
    def run_id(self) -> str: ...

    @property
    def stream(self) -> RunStream: ...

    def statistics(self) -> list[ActorStats]: ...


class RunMetrics:
    """The process's run metrics in Prometheus form; attach each run with :meth:`observe`.

    Args:
        registry: where the metrics live (default: a registry of their own).
        tenant_of: run id -> its tenant; given, the usage counters are labelled by
            tenant (an operator's choice: tenant names then appear in every scrape).
        cost: a run's estimated cost by the operator's price table (default: none counted).
    """

    def __init__(self, registry: CollectorRegistry | None = None, *,
                 tenant_of: Callable[[str], str] | None = None,
                 cost: Callable[[RunUsage], float] | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        reg = self.registry
        self.tenant_of = tenant_of
        self.cost = cost
        by = ["tenant"] if tenant_of is not None else []
        self.usage_model_calls = Counter("reactive_rag_usage_model_calls",
                                         "Model calls of finished runs", [*by, "role"],
                                         registry=reg)
        self.usage_tokens = Counter("reactive_rag_usage_tokens",
                                    "Tokens model servers reported for finished runs",
                                    [*by, "role", "type"], registry=reg)
        self.usage_provider_calls = Counter("reactive_rag_usage_provider_calls",
                                            "Search provider calls of finished runs",
                                            [*by, "provider"], registry=reg)
        self.usage_pages = Counter("reactive_rag_usage_pages", "Pages scraped by finished runs",
                                   by, registry=reg)
        self.usage_page_bytes = Counter("reactive_rag_usage_page_bytes",
                                        "UTF-8 bytes of the pages finished runs scraped", by,
                                        registry=reg)
        self.usage_cost = Counter("reactive_rag_usage_estimated_cost",
                                  "Estimated cost of finished runs by the price table "
                                  "(its currency)", by, registry=reg)
        self.runs_started = Counter("reactive_rag_runs_started", "Runs started (or resumed)",
                                    ["kind"], registry=reg)
        self.runs = Counter("reactive_rag_runs", "Runs finished, by outcome", ["outcome"],
                            registry=reg)
        self.runs_active = Gauge("reactive_rag_runs_active", "Runs going on in this process",
                                 registry=reg)
        self.run_duration = Histogram(
            "reactive_rag_run_duration_seconds",
            "Wall-clock time of finished runs (from run.started, or run.resumed plus the "
            "time used before the crash)", ["outcome"], buckets=_RUN_BUCKETS, registry=reg)
        self.tool_duration = Histogram(
            "reactive_rag_tool_call_duration_seconds",
            "Time from a tool request to its reply", ["tool", "status"],
            buckets=_TOOL_BUCKETS, registry=reg)
        self.model_tokens = Counter("reactive_rag_model_tokens",
                                    "Tokens of model calls (planner and writer)",
                                    ["role", "type"], registry=reg)
        self.provider_healthy = Gauge(
            "reactive_rag_provider_healthy",
            "1 while a search provider's circuit is up, 0 when degraded, down or probing "
            "(only providers whose circuit has changed state appear)",
            ["provider"], registry=reg)
        self.provider_changes = Counter("reactive_rag_provider_health_changes",
                                        "Circuit state changes of search providers",
                                        ["provider", "state"], registry=reg)
        self.actor_failures = Counter("reactive_rag_actor_failures",
                                      "Requests a handler failed (actor.failed)",
                                      ["request_type"], registry=reg)
        self.detaches = Counter("reactive_rag_subscriber_detaches",
                                "Subscribers cut off from a run (raised, or fell behind)",
                                ["subscriber"], registry=reg)
        self._live: dict[str, _Measured] = {}
        reg.register(_MailboxCollector(self._live))

    def __call__(self, run: _Measured) -> abc.DisposableBase:
        """:meth:`observe` (the :data:`~reactive_rag.RunObserver` shape)."""
        return self.observe(run)

    def observe(self, run: _Measured) -> abc.DisposableBase:
        """Count a starting run's events from now on (call before its first event)."""
        self._live[run.run_id] = run
        feed = _RunFeed(self, run)
        return run.stream.subscribe(feed.on_event, name=f"metrics:{run.run_id}")

    def exposition(self) -> tuple[bytes, str]:
        """The registry in the Prometheus text format, and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def _forget(self, run_id: str) -> None:
        self._live.pop(run_id, None)


class _RunFeed:
    """One run's subscription: per-run state (open tool calls, start time)."""

    def __init__(self, metrics: RunMetrics, run: _Measured) -> None:
        self._m = metrics
        self._run_id = run.run_id
        self._by = () if metrics.tenant_of is None else (metrics.tenant_of(run.run_id),)
        self._started: float | None = None
        self._used_before = 0.0  # a resumed run's time before its crash
        self._calls: dict[int, tuple[RequestInfo, float]] = {}  # request seq -> (what, ts)
        metrics.runs_active.inc()
        self._active = True

    def on_event(self, event: Event) -> None:
        try:
            self._count(event)
        except Exception:  # the stream detaches this feed: leave the live-run gauges right
            self._close()
            raise

    def _close(self) -> None:
        self._calls.clear()
        if self._active:
            self._active = False
            self._m.runs_active.dec()
        self._m._forget(self._run_id)

    def _count(self, event: Event) -> None:
        m = self._m
        kind = event.type
        if self._started is None:
            self._started = event.ts
            if isinstance(event, RunResumed):
                self._used_before = event.elapsed_s
            m.runs_started.labels("resumed" if isinstance(event, RunResumed) else "new").inc()
        info = request_info(type(event))
        if info is not None and info.kind in _TIMED:
            self._calls[event.seq] = (info, event.ts)
        elif event.cause is not None and event.cause in self._calls:
            asked, ts = self._calls[event.cause]
            failed = kind == "actor.failed" or kind in asked.failures
            if failed or kind in asked.replies:
                del self._calls[event.cause]
                m.tool_duration.labels(asked.operation, "error" if failed else "ok").observe(
                    max(0.0, event.ts - ts))
        if isinstance(event, PlanDecided | AnswerDrafted):
            role = "planner" if isinstance(event, PlanDecided) else "writer"
            if event.input_tokens or event.output_tokens:
                m.model_tokens.labels(role, "input").inc(event.input_tokens)
                m.model_tokens.labels(role, "output").inc(event.output_tokens)
        elif isinstance(event, ActorFailed):
            m.actor_failures.labels(event.request_type).inc()
        elif isinstance(event, ProviderHealth):
            m.provider_healthy.labels(event.provider).set(1 if event.state == "up" else 0)
            m.provider_changes.labels(event.provider, event.state).inc()
        elif isinstance(event, SubscriberDetached):
            m.detaches.labels(event.subscriber.partition(":")[0]).inc()
        elif isinstance(event, RunFinished):
            if event.usage is not None:
                self._count_usage(event.usage)
            m.runs.labels(event.outcome).inc()
            elapsed = self._used_before + max(0.0, event.ts - self._started)
            m.run_duration.labels(event.outcome).observe(elapsed)
            self._close()


    def _count_usage(self, usage: RunUsage) -> None:
        m, by = self._m, self._by
        for mu in usage.models:
            m.usage_model_calls.labels(*by, mu.role).inc(mu.calls)
            m.usage_tokens.labels(*by, mu.role, "input").inc(mu.input_tokens)
            m.usage_tokens.labels(*by, mu.role, "output").inc(mu.output_tokens)
        for provider, n in usage.provider_calls.items():
            m.usage_provider_calls.labels(*by, provider).inc(n)
        if by:  # (a counter without labels is a child of its own: .labels() refuses)
            m.usage_pages.labels(*by).inc(usage.pages)
            m.usage_page_bytes.labels(*by).inc(usage.page_bytes)
        else:
            m.usage_pages.inc(usage.pages)
            m.usage_page_bytes.inc(usage.page_bytes)
        if m.cost is not None:
            cost = m.cost(usage)
            (m.usage_cost.labels(*by) if by else m.usage_cost).inc(cost)


class _MailboxCollector:
    """Mailbox depth and in-flight requests per actor, summed over the live runs."""

    def __init__(self, live: dict[str, _Measured]) -> None:
        self._live = live

    def collect(self) -> Iterable[Metric]:
        depth = GaugeMetricFamily("reactive_rag_mailbox_depth",
                                  "Requests waiting in actors' mailboxes (all live runs)",
                                  labels=["actor"])
        in_flight = GaugeMetricFamily("reactive_rag_mailbox_in_flight",
                                      "Requests actors are handling now (all live runs)",
                                      labels=["actor"])
        waiting: dict[str, int] = {}
        busy: dict[str, int] = {}
        for run in list(self._live.values()):
            stats: Sequence[ActorStats] = run.statistics()
            for s in stats:
                waiting[s.name] = waiting.get(s.name, 0) + s.depth
                busy[s.name] = busy.get(s.name, 0) + s.in_flight
        for name in sorted(waiting):
            depth.add_metric([name], waiting[name])
            in_flight.add_metric([name], busy[name])
        return [depth, in_flight]
