"""Observability as subscribers: OpenTelemetry spans and Prometheus metrics of runs.

Both watch a run's event stream like any other subscriber (a terminal, a
browser); neither can slow or stop the run. :class:`RunTracer` needs the
``otel`` extra; :class:`RunMetrics` is what the server's ``GET /metrics`` serves;
:class:`TraceExport` sends the server's traces to a collector (``[observability]``,
:class:`ObservabilityConfig`).
"""

from ._metrics import RunMetrics
from ._otel import RunTracer
from ._otlp import ObservabilityConfig, TraceExport

__all__ = ["ObservabilityConfig", "RunMetrics", "RunTracer", "TraceExport"]
