"""OpenTelemetry spans from a run's events: a subscriber, so tracing never touches the run.

One root span per run (``invoke_agent reactive_rag``), one span per planner
round (``plan round N``) holding that round's model call (``chat <model>``)
and tool calls (``execute_tool search``), plus the answering stages (rerank,
selection, writer's model call, verification). A reply is matched to its
request by ``cause`` (the request's ``seq``, which the runtime stamps on every
reply), so concurrent calls of one round each get their own span. Span times
are the events' own timestamps. Attribute names follow the OpenTelemetry GenAI
semantic conventions where they exist (``gen_ai.*``), else ``reactive_rag.*``.

The ``otel`` extra installs what this needs (``pip install 'reactive-rag[otel]'``);
without it the module imports, and :class:`RunTracer` says what is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from reactivex import abc

from streams import (
    AnswerDrafted,
    AnswerRequested,
    AnswerVerified,
    ErrorInfo,
    Event,
    EvidenceSelected,
    PageScraped,
    PlanDecided,
    PlanRequested,
    ReadCompleted,
    RequestInfo,
    RerankCompleted,
    RunFinished,
    RunResumed,
    RunStarted,
    RunStream,
    SearchCompleted,
    SearchRequested,
    VerifyFailed,
    request_info,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = ["RunTracer"]

# GenAI semantic-convention names (opentelemetry-semantic-conventions, gen_ai_attributes)
OPERATION = "gen_ai.operation.name"
AGENT_NAME = "gen_ai.agent.name"
REQUEST_MODEL = "gen_ai.request.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
QUERY_TEXT = "gen_ai.retrieval.query.text"
ERROR_TYPE = "error.type"

# Which requests get a span, their names and the replies that close them come from the
# event classes (streams.request_info): tool calls (search, read, scrape) are
# ``execute_tool <tool>`` spans, other requests a span named after what they ask for
# ("plan", "rerank", "select evidence", "write", "verify"). A handler may publish other
# facts with the request's seq as cause first (the planner's queries.expanded before
# plan.decided): only a declared reply, or actor.failed, closes the span.
# facts worth seeing on the timeline, as span events of the span they happen in
_NOTES = ("tool.rejected", "loop.detected", "budget.exhausted", "budget.extended",
          "run.fallback", "run.cancel_requested", "subscriber.detached", "results.flagged",
          "conflict.detected", "query.rewritten", "provider.health")


class _Traced(Protocol):
    """What a tracer needs of a run (a :class:`~reactive_rag.RunHandle` is one)."""

    @property
    def stream(self) -> RunStream: ...


class RunTracer:
    """Turns each run's event stream into OpenTelemetry spans.

    Use it as an engine observer, ``Engine(observers=[RunTracer(provider)])``,
    or on one stream with :meth:`trace`.

    Args:
        tracer_provider: where spans go (default: the global provider, which
            does nothing until the application installs an SDK).
        record_content: also record the question, search queries and the free-text
            reasons of notes (which may quote them); off by default: they are user
            content, as the GenAI conventions treat prompts.
        attributes: more attributes of a run's root span, from its run id (the
            server adds the run's tenant).

    Raises:
        ImportError: the ``otel`` extra (opentelemetry-api) is not installed.
    """

    def __init__(self, tracer_provider: TracerProvider | None = None, *,
                 record_content: bool = False,
                 attributes: Callable[[str], Mapping[str, Any]] | None = None) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:  # pragma: no cover - the dev install has it
            raise ImportError("tracing needs the 'otel' extra: "
                              "pip install 'reactive-rag[otel]'") from exc
        self._tracer = trace.get_tracer("reactive_rag", tracer_provider=tracer_provider)
        self.record_content = record_content
        self._attributes = attributes

    def __call__(self, run: _Traced) -> abc.DisposableBase:
        """Trace a starting run (the :data:`~reactive_rag.RunObserver` shape)."""
        return self.trace(run.stream)

    def trace(self, stream: RunStream) -> abc.DisposableBase:
        """Trace the events ``stream`` publishes from now on; dispose to stop."""
        extra = self._attributes(stream.run_id) if self._attributes is not None else {}
        spans = _RunSpans(self._tracer, stream.run_id, self.record_content, extra)
        return stream.subscribe(spans.on_event, name=f"otel:{stream.run_id}")


def _ns(event: Event) -> int:
    return int(event.ts * 1e9)


@dataclass(slots=True)
class _Open:
    """A span waiting for the reply to the request that opened it."""

    span: Span
    answers: tuple[str, ...]  # the reply types that close it (and actor.failed)


class _RunSpans:
    """The spans of one run, built event by event (all state lives here)."""

    def __init__(self, tracer: Tracer, run_id: str, record_content: bool,
                 extra: Mapping[str, Any]) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import StatusCode

        self._in_context = trace.set_span_in_context
        self._error = StatusCode.ERROR
        self._tracer = tracer
        self._run_id = run_id
        self._content = record_content
        self._extra = dict(extra)
        self._root: Span | None = None
        self._step: Span | None = None
        self._open: dict[int, _Open] = {}  # request seq -> its span

    def on_event(self, event: Event) -> None:
        if self._root is None:
            self._start_root(event)
        opened = self._open.get(event.cause) if event.cause is not None else None
        if opened is not None and (event.type in opened.answers
                                   or event.type == "actor.failed"):
            del self._open[event.cause]  # type: ignore[arg-type]
            self._reply(opened, event)
        kind = event.type
        if kind == "plan.requested":
            assert isinstance(event, PlanRequested)
            self._end_step(event)
            self._step = self._child(self._root, f"plan round {event.round}", event,
                                     {"reactive_rag.round": event.round})
        elif kind in ("answer.requested", "selection.requested"):
            self._end_step(event)
        info = request_info(type(event))
        if info is not None:
            self._request(event, info)
        if kind in _NOTES:
            self._note(event)
        if isinstance(event, RunFinished):
            self._finish(event)

    # --- spans -------------------------------------------------------------------------

    def _child(self, parent: Span | None, name: str, event: Event,
               attrs: Mapping[str, Any]) -> Span:
        context = self._in_context(parent) if parent is not None else None
        return self._tracer.start_span(name, context=context, start_time=_ns(event),
                                       attributes=dict(attrs))

    def _start_root(self, event: Event) -> None:
        attrs: dict[str, Any] = {OPERATION: "invoke_agent", AGENT_NAME: "reactive_rag",
                                 "reactive_rag.run_id": self._run_id, **self._extra}
        if isinstance(event, RunStarted):
            attrs["reactive_rag.mode"] = event.mode
            attrs["reactive_rag.collections"] = list(event.collections)
            if self._content:
                attrs["reactive_rag.question"] = event.question
        elif isinstance(event, RunResumed):
            attrs["reactive_rag.resumed_after_seq"] = event.after_seq
        self._root = self._child(None, "invoke_agent reactive_rag", event, attrs)

    def _request(self, event: Event, info: RequestInfo) -> None:
        """Open the span of a request, in the planner round it belongs to."""
        name = info.operation
        attrs: dict[str, Any] = {}
        if info.kind == "tool":
            name = f"execute_tool {info.operation}"
            attrs = {OPERATION: "execute_tool", TOOL_NAME: info.operation, TOOL_TYPE: "function"}
            call_id = getattr(event, "call_id", "")
            if call_id:
                attrs[TOOL_CALL_ID] = call_id
            if self._content and isinstance(event, SearchRequested):
                attrs[QUERY_TEXT] = event.query
        elif isinstance(event, AnswerRequested):
            attrs = {"reactive_rag.write_mode": event.mode}
        parent = self._step if self._step is not None else self._root
        self._open[event.seq] = _Open(self._child(parent, name, event, attrs), info.replies)

    def _end_step(self, event: Event) -> None:
        if self._step is not None:
            self._step.end(end_time=_ns(event))
            self._step = None

    def _note(self, event: Event) -> None:
        span = self._step if self._step is not None else self._root
        assert span is not None
        fields = {"call_id", "tool", "kind", "resource", "provider", "state", "subscriber",
                  "from_mode", "to_mode"}
        if self._content:  # free text that may quote the asker's queries ("search 'x' ...")
            fields |= {"reason", "detail"}
        attrs = {k: v for k, v in event.model_dump(include=fields).items()
                 if isinstance(v, str | int | float) and v != ""}
        span.add_event(event.type, attributes=attrs, timestamp=_ns(event))

    def _reply(self, opened: _Open, event: Event) -> None:
        """Close a request's span with what its reply says."""
        span = opened.span
        error = getattr(event, "error", None)
        if isinstance(error, ErrorInfo):  # actor.failed, and the *.failed replies of tool calls
            span.set_attribute(ERROR_TYPE, error.kind)
            span.set_status(self._error, error.message[:300])
        elif isinstance(event, PlanDecided | AnswerDrafted):
            self._model_usage(span, event)
            if isinstance(event, PlanDecided):
                span.set_attribute("reactive_rag.action", event.action)
                span.set_attribute("reactive_rag.calls", len(event.calls))
            else:
                span.set_attribute("reactive_rag.claims", len(event.claims))
        elif isinstance(event, SearchCompleted):
            span.set_attribute("reactive_rag.hits", len(event.hits))
            span.set_attribute("reactive_rag.providers", list(event.providers))
            for err in event.errors:  # one provider failed, others answered
                span.add_event("provider.error", {ERROR_TYPE: err.kind,
                                                  "message": err.message[:300]},
                               timestamp=_ns(event))
        elif isinstance(event, PageScraped | ReadCompleted | RerankCompleted):
            span.set_attribute("reactive_rag.chunks", len(event.chunks))
        elif isinstance(event, EvidenceSelected):
            span.set_attribute("reactive_rag.selected", len(event.ids))
        elif isinstance(event, VerifyFailed):
            span.set_attribute("reactive_rag.claim_errors", len(event.errors))
            span.set_attribute("reactive_rag.verified", False)
        elif isinstance(event, AnswerVerified):
            span.set_attribute("reactive_rag.verified", True)
            span.set_attribute("reactive_rag.dropped_claims", event.dropped)
        span.end(end_time=_ns(event))

    @staticmethod
    def _model_usage(span: Span, event: PlanDecided | AnswerDrafted) -> None:
        span.set_attribute("reactive_rag.tokens", event.tokens)
        if event.model:  # a model made this call (offline policies name none)
            span.update_name(f"chat {event.model}")
            span.set_attribute(OPERATION, "chat")
            span.set_attribute(REQUEST_MODEL, event.model)
            span.set_attribute(INPUT_TOKENS, event.input_tokens)
            span.set_attribute(OUTPUT_TOKENS, event.output_tokens)

    def _finish(self, event: RunFinished) -> None:
        end = _ns(event)
        for opened in self._open.values():  # requests the run ended before they were answered
            opened.span.set_status(self._error, "the run ended before this was answered")
            opened.span.end(end_time=end)
        self._open.clear()
        self._end_step(event)
        root = self._root
        assert root is not None
        root.set_attribute("reactive_rag.outcome", event.outcome)
        if event.outcome in ("failed", "interrupted"):
            root.set_status(self._error, event.reason[:300] or event.outcome)
        root.end(end_time=end)
