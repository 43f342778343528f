"""An OTLP/HTTP span exporter speaking the protocol's JSON encoding, on the standard library.

OTLP/HTTP accepts ``application/json`` as well as protobuf (the OTLP specification,
"OTLP/HTTP"), so spans reach any collector without the protobuf exporter package. The
encoding follows the spec's JSON mapping: trace and span ids as hex, enums as integers,
64-bit integers as decimal strings.

It runs in the SDK batch processor's worker thread, so a blocking POST never touches the
event loop; a batch the collector does not take is dropped, counted and logged (once per
outage, not per batch), and the runs it came from go on.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.util.types import AnyValue

__all__ = ["OtlpJsonExporter", "encode_spans"]

log = logging.getLogger(__name__)


class OtlpJsonExporter(SpanExporter):
    """POSTs each batch of spans to an OTLP/HTTP traces endpoint as JSON.

    Args:
        endpoint: the full traces URL (``http://collector:4318/v1/traces``).
        headers: extra request headers (an API key read from the environment).
        timeout_s: the longest one POST may take.
    """

    def __init__(self, endpoint: str, *, headers: Mapping[str, str] | None = None,
                 timeout_s: float = 10.0) -> None:
        self.endpoint = endpoint
        self._headers = {**dict(headers or {}), "Content-Type": "application/json"}
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._failing = False
        self._closed = False
        self.exported = 0
        """Spans the collector took."""
        self.dropped = 0
        """Spans lost to a collector that was down or refused them."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        body = json.dumps(encode_spans(spans), separators=(",", ":")).encode()
        request = urllib.request.Request(self.endpoint, data=body, headers=self._headers,
                                         method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as resp:
                resp.read()
        except (OSError, ValueError, http.client.HTTPException) as exc:  # refused, timed out,
            # an HTTP error status (HTTPError), a bad URL or a broken response
            self._failed(len(spans), exc)
            return SpanExportResult.FAILURE
        with self._lock:
            self.exported += len(spans)
            if self._failing:
                self._failing = False
                log.info("OTLP export to %s works again", self.endpoint)
        return SpanExportResult.SUCCESS

    def _failed(self, count: int, exc: Exception) -> None:
        with self._lock:
            self.dropped += count
            first = not self._failing
            self._failing = True
        reason = f"HTTP {exc.code}" if isinstance(exc, urllib.error.HTTPError) else str(exc)
        log.log(logging.WARNING if first else logging.DEBUG,
                "OTLP export to %s failed (%s): %d span(s) dropped, %d so far",
                self.endpoint, reason, count, self.dropped)

    def shutdown(self) -> None:
        self._closed = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # nothing is held here: the batch processor holds the queue


def encode_spans(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` in OTLP's JSON mapping: spans by resource, then scope."""
    grouped: dict[int, tuple[dict[str, Any], dict[tuple[str, str], dict[str, Any]]]] = {}
    for span in spans:
        resource = span.resource
        _, scopes = grouped.setdefault(id(resource), (
            {"attributes": _attributes(resource.attributes)}, {}))
        scope = span.instrumentation_scope
        name, version = (scope.name, scope.version or "") if scope is not None else ("", "")
        entry = scopes.setdefault((name, version), {
            "scope": {"name": name, "version": version}, "spans": []})
        entry["spans"].append(_span(span))
    return {"resourceSpans": [{"resource": resource, "scopeSpans": list(scopes.values())}
                              for resource, scopes in grouped.values()]}


def _span(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None  # an SDK span always has one
    out: dict[str, Any] = {
        "traceId": f"{context.trace_id:032x}",
        "spanId": f"{context.span_id:016x}",
        "name": span.name,
        "kind": span.kind.value + 1,  # the SDK counts from INTERNAL = 0, OTLP from UNSPECIFIED
        "startTimeUnixNano": str(span.start_time or 0),
        "endTimeUnixNano": str(span.end_time or 0),
        "attributes": _attributes(span.attributes),
        "events": [{"timeUnixNano": str(e.timestamp), "name": e.name,
                    "attributes": _attributes(e.attributes)} for e in span.events],
        "status": {"code": span.status.status_code.value,
                   "message": span.status.description or ""},
    }
    if span.parent is not None:
        out["parentSpanId"] = f"{span.parent.span_id:016x}"
    return out


def _attributes(attributes: Mapping[str, AnyValue] | None) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in (attributes or {}).items()]


def _value(value: AnyValue) -> dict[str, Any]:
    if value is None:
        return {}  # an empty AnyValue
    if isinstance(value, bool):  # before int: a bool is an int
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bytes):
        return {"bytesValue": base64.b64encode(value).decode()}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": _attributes(value)}}
    return {"arrayValue": {"values": [_value(v) for v in value]}}
