"""Runs' spans sent to an OpenTelemetry collector over OTLP/HTTP: ``[observability]``.

The server's ``[observability]`` table (:class:`ObservabilityConfig`) names the
collector's traces URL; :class:`TraceExport` builds a tracer provider of its own (never
the process-wide one, so an embedding application's tracing is left alone), a bounded
batch processor and the JSON exporter, and hands out the :class:`RunTracer` that the
server attaches to every run. Export happens off the event loop; a collector that is
down or slow costs dropped spans (logged), never a run.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ._otel import RunTracer

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from ._otlp_http import OtlpJsonExporter

__all__ = ["ObservabilityConfig", "TraceExport"]

_HEADER = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP token (RFC 9110)
_ENV_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ObservabilityConfig(BaseModel):
    """``[observability]``: where the server sends its runs' traces (OTLP over HTTP, JSON).

    Secrets never live in the file: ``headers_env`` maps each header to the name of the
    environment variable holding its value, read when the server starts (unset: it
    refuses to start).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: str
    """The collector's traces URL, ``http(s)://host:4318/v1/traces``."""
    service_name: str = Field(default="reactive-rag", min_length=1, max_length=200)
    """The ``service.name`` resource attribute the traces are filed under."""
    headers_env: dict[str, str] = Field(default_factory=dict)
    """Request header -> environment variable holding its value (an API key)."""
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    """The longest one export may take; also how long shutdown waits for the last spans."""
    sample_ratio: float = Field(default=1.0, ge=0, le=1)
    """The share of runs traced (a run is traced whole or not at all)."""
    record_content: bool = False
    """Also record the question and search queries: user content, off by default."""
    batch_delay_s: float = Field(default=5.0, gt=0, le=300)
    """How long ended spans wait to go out together."""
    max_queue_size: int = Field(default=2048, ge=1, le=1_000_000)
    """Ended spans held for export; while the collector is behind, more are dropped."""

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        try:
            url = urlsplit(value.strip())
            _ = url.port  # raises ValueError for a port out of range
        except ValueError as exc:
            raise ValueError(f"endpoint {value!r} is not a URL: {exc}") from None
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"endpoint {value!r} must be an http:// or https:// URL "
                             "with a host, e.g. http://127.0.0.1:4318/v1/traces")
        if url.username is not None or url.password is not None:
            raise ValueError("endpoint must not carry credentials: name the variable "
                             "holding them in headers_env")
        return url.geturl()

    @field_validator("headers_env")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for header, var in value.items():
            if not _HEADER.match(header):
                raise ValueError(f"headers_env: {header!r} is not an HTTP header name")
            if not _ENV_VAR.match(var):
                raise ValueError(f"headers_env.{header}: {var!r} is not an environment "
                                 "variable name (the file names the variable, never the value)")
        return value

    @model_validator(mode="after")
    def _sdk_installed(self) -> ObservabilityConfig:
        if importlib.util.find_spec("opentelemetry.sdk") is None:
            raise ValueError("[observability] needs the otel extra: "
                             "pip install 'reactive-rag[otel]'")
        return self

    def headers(self, env: Mapping[str, str]) -> dict[str, str]:
        """The request headers, their values read from ``env``.

        Raises:
            ValueError: a variable named in ``headers_env`` is unset or empty.
        """
        missing = [var for var in self.headers_env.values() if not env.get(var)]
        if missing:
            raise ValueError(f"headers_env names unset environment variable(s): "
                             f"{', '.join(sorted(set(missing)))}")
        return {header: env[var] for header, var in self.headers_env.items()}


class TraceExport:
    """A tracer provider exporting to one collector; :meth:`open` it, then :meth:`aclose`.

    Built (and its headers read) before the server opens anything, so a missing
    variable stops ``serve`` at once; the batch processor's thread starts in :meth:`open`.
    """

    def __init__(self, config: ObservabilityConfig, headers: Mapping[str, str]) -> None:
        self.config = config
        self._headers = dict(headers)
        self._provider: TracerProvider | None = None
        self.exporter: OtlpJsonExporter | None = None
        """The exporter, once open (its ``exported`` and ``dropped`` counts)."""

    @classmethod
    def from_config(cls, config: ObservabilityConfig,
                    env: Mapping[str, str]) -> TraceExport:
        """Read the header variables from ``env``.

        Raises:
            ValueError: one is unset (see :meth:`ObservabilityConfig.headers`).
        """
        return cls(config, config.headers(env))

    def open(self, attributes: Callable[[str], Mapping[str, Any]] | None = None) -> RunTracer:
        """Start exporting; the tracer to attach to runs (``attributes``: see RunTracer)."""
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBasedTraceIdRatio

        from ._otlp_http import OtlpJsonExporter

        cfg = self.config
        self.exporter = OtlpJsonExporter(cfg.endpoint, headers=self._headers,
                                         timeout_s=cfg.timeout_s)
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: cfg.service_name}),
                                  sampler=ParentBasedTraceIdRatio(cfg.sample_ratio))
        provider.add_span_processor(BatchSpanProcessor(
            self.exporter, max_queue_size=cfg.max_queue_size,
            schedule_delay_millis=cfg.batch_delay_s * 1000,
            max_export_batch_size=min(512, cfg.max_queue_size)))
        self._provider = provider
        return RunTracer(provider, record_content=cfg.record_content, attributes=attributes)

    async def aclose(self) -> None:
        """Send the spans still queued, waiting at most ``timeout_s``; then stop."""
        provider, self._provider = self._provider, None
        if provider is None:
            return
        done = threading.Event()

        def shut() -> None:  # a daemon thread: an unreachable collector cannot hold exit
            try:
                provider.shutdown()
            finally:
                done.set()

        threading.Thread(target=shut, name="otlp-shutdown", daemon=True).start()
        await asyncio.to_thread(done.wait, self.config.timeout_s)
