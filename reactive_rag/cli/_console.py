"""Live terminal view of a run's event stream (rich), one line per event."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from streams import (
    ActorFailed,
    AnswerabilityJudged,
    AnswerDelta,
    AnswerDrafted,
    AnswerVerified,
    BudgetExhausted,
    BudgetExtended,
    BudgetExtensionRefused,
    BudgetExtensionRequested,
    BudgetTick,
    ConflictDetected,
    ConflictSide,
    Event,
    EvidenceRegistered,
    LoopDetected,
    PageScraped,
    PlanDecided,
    PointRecalled,
    ProviderHealth,
    QueriesExpanded,
    QueryRewritten,
    ReadCompleted,
    ReadRequested,
    RerankCompleted,
    RunFallback,
    RunFinished,
    RunResumed,
    RunStarted,
    ScrapeFailed,
    ScrapeRequested,
    SearchCompleted,
    SearchFailed,
    SearchRequested,
    SubscriberDetached,
    VerifyFailed,
)

from ._safe_text import SafeConsole, visible

__all__ = ["EventPrinter", "conflict_sides", "summarize"]

_STYLE = {
    "run": "bold cyan",
    "plan": "magenta",
    "queries": "magenta",
    "query": "bold magenta",
    "search": "blue",
    "scrape": "blue",
    "read": "blue",
    "rerank": "green",
    "evidence": "green",
    "answer": "bold yellow",
    "verify": "red",
    "budget": "dim",
    "conflict": "bold magenta",
    "loop": "yellow",
    "provider": "yellow",
    "actor": "bold red",
    "subscriber": "red",
}


def _short(text: str, width: int = 90) -> str:
    return textwrap.shorten(" ".join(text.split()), width=width, placeholder="…")


def conflict_sides(sides: Sequence[ConflictSide], preferred: int | None) -> str:
    """A conflict's sides on one line: ``1815 (A, credibility 1.3, preferred) vs 1816 (B, ...)``."""
    parts = []
    for i, side in enumerate(sides):
        mark = ", preferred" if i == preferred else ""
        parts.append(f"{side.value} ({side.title or side.chunk_id}, "
                     f"credibility {side.credibility:g}{mark})")
    return " vs ".join(parts)


def summarize(event: Event) -> str:
    """A one-line human summary of an event's payload."""
    match event:
        case RunStarted():
            return f"{event.mode}: {_short(event.question)}"
        case QueryRewritten():
            resolved = ", ".join(f"{k} = {v}" for k, v in event.resolved.items())
            return (f"follow-up read as: “{_short(event.standalone, 70)}”"
                    + (f" ({_short(resolved, 40)})" if resolved else ""))
        case PlanDecided():
            return f"{event.action} — {_short(event.reason, 70)}"
        case QueriesExpanded():
            return " | ".join(_short(q, 40) for q in event.queries)
        case SearchRequested():
            return f"“{_short(event.query, 60)}” k={event.k}"
        case SearchCompleted():
            return f"{len(event.hits)} hits for “{_short(event.query, 50)}”"
        case SearchFailed() | ScrapeFailed():
            return f"{event.error.kind}: {_short(event.error.message, 70)}"
        case ScrapeRequested():
            return event.url
        case PageScraped():
            return f"{len(event.chunks)} chunks from {event.url}"
        case ReadRequested():
            return f"{event.direction} of {event.chunk_id}"
        case ReadCompleted():
            return f"{len(event.chunks)} neighbour chunk(s) of {event.chunk_id}"
        case RerankCompleted():
            return f"kept {len(event.chunks)}, {event.below_floor} below the floor"
        case EvidenceRegistered():
            titles = ", ".join(sorted({c.title or c.doc_id for c in event.chunks}))
            return f"{len(event.chunks)} chunk(s): {_short(titles, 70)}"
        case AnswerabilityJudged():
            missing = f", missing: {_short(', '.join(event.missing), 50)}" if event.missing else ""
            searching = f" -> searching {len(event.searches)}" if event.searches else ""
            who = f" by {event.model or 'the model'}" if event.by == "model" else ""
            stood_in = (f" [offline rules stood in: {_short(event.fallback.describe(), 50)}]"
                        if event.fallback is not None else "")
            return f"{event.verdict} ({event.answer_type}){who}{missing}{searching}{stood_in}"
        case ConflictDetected():
            return _short(f"{event.attribute} of {event.subject}: "
                          + conflict_sides(event.sides, event.preferred), 90)
        case AnswerDelta():
            return _short(event.text, 80)
        case AnswerVerified():
            dropped = (" (dropped: " + ", ".join(e.kind for e in event.errors if e.index >= 0)
                       + ")") if event.errors else ""
            return f"{len(event.claims)} claim(s){dropped}: {_short(event.text, 60)}"
        case AnswerDrafted():
            by = f" [offline writer: {_short(event.fallback.describe(), 40)}]" \
                if event.fallback is not None else ""
            return f"{len(event.claims)} claim(s){by}: {_short(event.text, 60)}"
        case VerifyFailed():
            return "; ".join(f"{e.kind}: {_short(e.reason, 40)}" for e in event.errors)
        case BudgetTick():
            return (f"steps {event.steps}/{event.max_steps or '∞'}  tools "
                    f"{event.tool_calls}/{event.max_tool_calls or '∞'}  {event.elapsed_s:.1f}s")
        case BudgetExhausted():
            return f"{event.resource}: {event.used:g}/{event.limit:g}"
        case BudgetExtensionRequested():
            return (f"one more round asked at steps {event.steps}/{event.max_steps}, tools "
                    f"{event.tool_calls}/{event.max_tool_calls}, context "
                    f"{event.context_tokens}/{event.context_window_tokens} tokens")
        case BudgetExtended():
            return (f"+{event.added_steps} step(s), +{event.added_tool_calls} tool calls: "
                    f"now {event.max_steps} steps, {event.max_tool_calls} tool calls")
        case BudgetExtensionRefused():
            return f"{event.reason}: {_short(event.detail, 70)}"
        case PointRecalled():
            return f"{event.point} -> {', '.join(event.chunk_ids)}"
        case LoopDetected():
            return f"{event.kind}: {_short(event.detail, 70)}"
        case ProviderHealth():
            return f"{event.provider} is {event.state} {event.detail}"
        case ActorFailed():
            return f"{event.request_type}: {_short(event.error.describe(), 80)}"
        case SubscriberDetached():
            return f"{event.subscriber}: {event.reason}"
        case RunFallback():
            return f"{event.from_mode} -> {event.to_mode}: {event.reason}"
        case RunResumed():
            return _short(f"after seq {event.after_seq} (attempt {event.attempt}, "
                          f"{event.elapsed_s:.1f}s used before): {event.reason}", 90)
        case RunFinished():
            return f"{event.outcome.upper()} {_short(event.reason, 70)}"
    return ""


class EventPrinter:
    """Prints each event as ``seq  time  actor  type  summary`` (an async sink)."""

    def __init__(self, console: Console | None = None, *, show_progress: bool = False) -> None:
        self.console = console or SafeConsole(highlight=False)
        self.show_progress = show_progress
        self._t0: float | None = None

    async def __call__(self, event: Event) -> None:
        self.print(event)

    def print(self, event: Event) -> None:
        if isinstance(event, BudgetTick) and not self.show_progress:
            return
        if self._t0 is None:
            self._t0 = event.ts
        style = _STYLE.get(event.type.split(".", 1)[0], "")
        line = Text()
        line.append(f"{event.seq:>4} ", style="dim")
        line.append(f"{event.ts - self._t0:7.3f}s ", style="dim")
        line.append(f"{visible(event.actor or '-')[:10]:<10} ", style="italic")
        line.append(f"{event.type:<22}", style=style)
        line.append(visible(summarize(event)))  # visible before the line is cut to width
        self.console.print(line, overflow="ellipsis", no_wrap=True)
