"""What a research call tells its MCP client while the run goes: one line per meaningful event.

The line is built from the event's typed fields, never from another line; events a
client would not care about (budget ticks, requests answered a moment later) give
``None`` and send nothing.
"""

from __future__ import annotations

from streams import (
    AnswerDrafted,
    AnswerVerified,
    BudgetExhausted,
    Event,
    LoopDetected,
    PageScraped,
    PlanDecided,
    ReadCompleted,
    RunFallback,
    RunFinished,
    RunStarted,
    SearchCompleted,
    SearchFailed,
    VerifyFailed,
)

__all__ = ["progress_message"]


def progress_message(event: Event) -> str | None:
    """The progress line for ``event``, or ``None`` for one that is not worth a notification."""
    match event:
        case RunStarted():
            where = ", ".join(event.collections) or "no collection"
            return f"run {event.run_id} started over {where}"
        case PlanDecided():
            queries = [str(c.args.get("query", "")) for c in event.calls if c.args.get("query")]
            what = f": {'; '.join(queries)}" if queries else ""
            return f"plan: {event.action}{what}"
        case SearchCompleted():
            return f"search {event.query!r}: {len(event.hits)} hits"
        case SearchFailed():
            return f"search {event.query!r} failed: {event.error.message}"
        case PageScraped():
            return f"page scraped: {event.title or event.url} ({len(event.chunks)} chunks)"
        case ReadCompleted():
            return f"read on from {event.chunk_id}: {len(event.chunks)} chunks"
        case LoopDetected():
            return f"loop detected ({event.kind}){': ' + event.detail if event.detail else ''}"
        case BudgetExhausted():
            return f"budget exhausted: {event.resource} ({event.used:g} of {event.limit:g})"
        case AnswerDrafted():
            return f"answer drafted with {len(event.claims)} claims"
        case VerifyFailed():
            return f"verification failed ({len(event.errors)} claims), attempt {event.attempt}"
        case AnswerVerified():
            return f"answer verified: {len(event.claims)} claims kept, {event.dropped} dropped"
        case RunFallback():
            return f"fell back from {event.from_mode} to {event.to_mode}: {event.reason}"
        case RunFinished():
            return f"finished: {event.outcome}"
    return None
