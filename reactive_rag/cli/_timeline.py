"""A run's event log as swimlanes: one lane per actor, one bar per request and its reply.

:func:`build_timeline` is pure (events in, a :class:`Timeline` out) so the
terminal view (``reactive-rag replay RUN_ID --timeline``, :func:`render_timeline`)
and the web page's swimlane panel (``web/timeline.js``, a port of the same rules
that reads the same request -> reply table from the server) draw the same
picture of a run: parallel fan-out as stacked bars, slow providers as long
ones, failures and retries marked, and the budget beside it.

The rules:

* A request event opens a bar in the lane of the actor that answers it, as the
  event class declares (:func:`streams.reply_table`: ``search.requested`` ->
  ``searcher``, ``answer.requested`` -> ``writer``, or ``finalizer`` when the
  budget's last answer is asked for, ``answer.drafted`` -> ``verifier``...).
* One of its declared replies closes it: the reply's ``cause`` is the request's
  ``seq`` (or, when a reply carries no cause, the oldest open request of that
  type with its ``call_id``). ``*.failed`` replies (``verify.failed`` too) and
  ``actor.failed`` mark the bar ``failed``.
* A request for a ``call_id`` already seen (a re-issued call, e.g. after a
  resume) and a repair answer (``attempt`` > 1) are retries: the bar records
  its attempt, and an earlier attempt that failed or never got a reply becomes
  ``retried``.
* A search reply's ``provider_calls`` add one bar per provider in lanes
  ``search:<provider>`` (start of the search to that provider's answer).
* A bar still waiting when the events stop is ``open`` (``end`` is ``None``),
  or ``cancelled`` when the run finished as cancelled.
* Within a lane, overlapping bars go to separate rows (first free row).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from rich.console import Console
from rich.text import Text

from streams import (
    AnswerRequested,
    BudgetTick,
    Event,
    PlanRequested,
    ProviderCall,
    RunFinished,
    SearchCompleted,
    SearchFailed,
    reply_table,
)

__all__ = [
    "Bar",
    "BarStatus",
    "Gauge",
    "Lane",
    "Timeline",
    "build_timeline",
    "render_timeline",
    "terminal_width",
]

BarStatus = Literal["ok", "failed", "retried", "cancelled", "open"]
"""How a bar ended: answered, failed, failed (or lost) and asked again, cancelled, or not yet."""

_LANE_ORDER = ("planner", "searcher", "search:", "scraper", "reader", "reranker", "selector",
               "writer", "verifier", "finalizer")
_ANY_FAILURE = "actor.failed"


@dataclass(frozen=True, slots=True)
class Bar:
    """One request and its reply; times are seconds since the run's first event."""

    lane: str
    label: str
    start: float
    end: float | None  # None: no reply yet when the events stop
    status: BarStatus
    request_seq: int
    reply_seq: int | None = None
    attempt: int = 1
    row: int = 0  # within the lane, so overlapping bars do not hide each other
    detail: str = ""  # the error, for failed bars

    @property
    def is_retry(self) -> bool:
        """This bar asks again for something an earlier bar asked."""
        return self.attempt > 1


@dataclass(frozen=True, slots=True)
class Lane:
    """An actor's lane: its name and how many rows its overlapping bars need."""

    name: str
    rows: int


@dataclass(frozen=True, slots=True)
class Gauge:
    """One budget: how much is used against its limit (``None``: unlimited)."""

    name: str
    used: float
    limit: float | None
    unit: str = ""


@dataclass(frozen=True, slots=True)
class Timeline:
    """The swimlane picture of a run (see the module docstring for the rules)."""

    lanes: tuple[Lane, ...]
    bars: tuple[Bar, ...]
    gauges: tuple[Gauge, ...]
    duration: float
    outcome: str | None = None
    reason: str = ""
    marks: tuple[tuple[float, str], ...] = field(default=())  # (time, what): exhausted budgets

    def lane_bars(self, lane: str) -> tuple[Bar, ...]:
        """The bars of one lane, in start order."""
        return tuple(b for b in self.bars if b.lane == lane)


@dataclass(slots=True)
class _Open:
    bar: Bar
    failures: tuple[str, ...]
    replies: tuple[str, ...]
    key: str  # what a retry of this call would share ("" when calls cannot be told apart)


def build_timeline(events: Iterable[Event]) -> Timeline:
    """Lanes, bars and budget gauges of a run from its events (in seq order)."""
    evs = list(events)
    if not evs:
        return Timeline(lanes=(), bars=(), gauges=(), duration=0.0)
    t0 = evs[0].ts
    requests = reply_table()
    bars: list[Bar] = []
    open_by_seq: dict[int, tuple[int, _Open]] = {}
    last_by_key: dict[str, int] = {}
    attempts: dict[str, int] = {}
    marks: list[tuple[float, str]] = []
    finished: RunFinished | None = None
    for ev in evs:
        at = ev.ts - t0
        if isinstance(ev, RunFinished):
            finished = ev
        elif ev.type == "run.resumed":
            finished = None
        elif ev.type == "budget.exhausted":
            marks.append((at, f"{getattr(ev, 'resource', 'budget')} exhausted"))
        _close(ev, at, bars, open_by_seq)
        info = requests.get(ev.type)
        if info is None:
            continue
        lane = info.handled_by
        if isinstance(ev, AnswerRequested) and ev.mode == "finalize":
            lane = "finalizer"
        key = _retry_key(ev)
        attempt = getattr(ev, "attempt", 1) if ev.type == "answer.requested" else 1
        if key:
            attempt = max(attempt, attempts.get(key, 0) + 1)
            attempts[key] = attempt
            earlier = last_by_key.get(key)
            if earlier is not None and bars[earlier].status in ("failed", "open"):
                bars[earlier] = replace(bars[earlier], status="retried")
                open_by_seq.pop(bars[earlier].request_seq, None)
        bar = Bar(lane=lane, label=_label(ev), start=at, end=None, status="open",
                  request_seq=ev.seq, attempt=attempt)
        bars.append(bar)
        if key:
            last_by_key[key] = len(bars) - 1
        open_by_seq[ev.seq] = (len(bars) - 1, _Open(bar, info.failures, info.replies, key))
    end_status: BarStatus = ("cancelled" if finished is not None and finished.outcome == "cancelled"
                             else "open")
    if end_status == "cancelled":
        for index, _ in open_by_seq.values():
            bars[index] = replace(bars[index], status="cancelled")
    laid = _rows(bars)
    names = sorted({b.lane for b in laid}, key=_lane_rank)
    lanes = tuple(Lane(n, 1 + max(b.row for b in laid if b.lane == n)) for n in names)
    return Timeline(
        lanes=lanes, bars=tuple(laid), gauges=_gauges(evs), duration=max(0.0, evs[-1].ts - t0),
        outcome=finished.outcome if finished is not None else None,
        reason=finished.reason if finished is not None else "", marks=tuple(marks))


def _close(ev: Event, at: float, bars: list[Bar], open_by_seq: dict[int, tuple[int, _Open]],
           ) -> None:
    """If ``ev`` answers an open request, end its bar (and add per-provider bars)."""
    found = open_by_seq.get(ev.cause) if ev.cause is not None else None
    if found is not None and ev.type not in found[1].replies and ev.type != _ANY_FAILURE:
        found = None
    if found is None and ev.cause is None:
        call_id = getattr(ev, "call_id", "")
        found = next((o for o in open_by_seq.values()
                      if ev.type in o[1].replies and call_id
                      and o[1].key.endswith(f"#{call_id}")), None)
    if found is None:
        return
    index, pending = found
    open_by_seq.pop(pending.bar.request_seq, None)
    failed = ev.type == _ANY_FAILURE or ev.type in pending.failures
    bars[index] = replace(pending.bar, end=max(at, pending.bar.start),
                          status="failed" if failed else "ok", reply_seq=ev.seq,
                          detail=_error_text(ev) if failed else "")
    if isinstance(ev, SearchCompleted | SearchFailed):
        bars.extend(_provider_bar(pending.bar, call) for call in ev.provider_calls)


def _provider_bar(search: Bar, call: ProviderCall) -> Bar:
    return Bar(lane=f"search:{call.provider}", label=search.label, start=search.start,
               end=search.start + max(0.0, call.elapsed_s),
               status="failed" if call.error else "ok", request_seq=search.request_seq,
               reply_seq=search.reply_seq, attempt=search.attempt, detail=call.error)


def _retry_key(ev: Event) -> str:
    call_id = getattr(ev, "call_id", "")
    return f"{ev.type}#{call_id}" if call_id else ""


def _label(ev: Event) -> str:
    for name in ("query", "url", "chunk_id"):
        value = getattr(ev, name, "")
        if value:
            return str(value)
    if isinstance(ev, PlanRequested):
        return f"round {ev.round}"
    if isinstance(ev, AnswerRequested):
        return f"{ev.mode} #{ev.attempt}"
    return ev.type.split(".")[0]


def _error_text(ev: Event) -> str:
    error = getattr(ev, "error", None)
    if error is not None:
        return f"{error.kind}: {error.message}"
    errors = getattr(ev, "errors", ())
    return f"{len(errors)} claims rejected" if errors else ev.type


def _rows(bars: Sequence[Bar]) -> list[Bar]:
    """Give each bar the first row of its lane free at its start (bars in start order)."""
    ordered = sorted(range(len(bars)), key=lambda i: (bars[i].start, bars[i].request_seq))
    ends: dict[str, list[float]] = {}
    laid: list[Bar] = list(bars)
    for i in ordered:
        bar = bars[i]
        rows = ends.setdefault(bar.lane, [])
        stop = float("inf") if bar.end is None else bar.end
        row = next((r for r, busy in enumerate(rows) if busy <= bar.start), len(rows))
        if row == len(rows):
            rows.append(stop)
        else:
            rows[row] = stop
        laid[i] = replace(bar, row=row)
    return sorted(laid, key=lambda b: (b.start, b.request_seq, b.lane))


def _lane_rank(name: str) -> tuple[int, str]:
    for rank, prefix in enumerate(_LANE_ORDER):
        if name == prefix or (prefix.endswith(":") and name.startswith(prefix)):
            return rank, name
    return len(_LANE_ORDER), name


def _gauges(evs: Sequence[Event]) -> tuple[Gauge, ...]:
    """The last budget tick, and pages opened against the run's page limit."""
    tick = next((e for e in reversed(evs) if isinstance(e, BudgetTick)), None)
    out: list[Gauge] = []
    if tick is not None:
        out += [Gauge("model steps", tick.steps, tick.max_steps),
                Gauge("tool calls", tick.tool_calls, tick.max_tool_calls)]
        if tick.max_tokens is not None:
            out.append(Gauge("tokens", tick.tokens, tick.max_tokens))
        out.append(Gauge("time", round(tick.elapsed_s, 3), tick.deadline_s, "s"))
    pages = 0
    limit: int | None = None
    for ev in evs:
        if ev.type == "scrape.requested":
            pages += 1
        elif isinstance(ev, PlanRequested) and ev.remaining_pages is not None:
            limit = pages + ev.remaining_pages
    if limit is not None or pages:
        out.append(Gauge("pages", pages, limit))
    return tuple(out)


# --- the terminal view ---------------------------------------------------------------------

_CELL: dict[BarStatus, tuple[str, str]] = {
    "ok": ("█", "green"), "failed": ("▓", "bold red"), "retried": ("▒", "yellow"),
    "cancelled": ("░", "dim"), "open": ("┄", "cyan"),
}
_NAME_W = 18
_NOTE_W = 20  # room after a lane for " 12 calls, 3 failed"


def terminal_width() -> int:
    """The terminal's width, or 100 columns when there is no terminal (a pipe, a test)."""
    return shutil.get_terminal_size((100, 24)).columns


def render_timeline(timeline: Timeline, console: Console, width: int | None = None) -> None:
    """Draw the lanes as text bars on a time axis (works without a TTY; colour when there is one).

    ``width``: total columns (default: the console's).
    """
    total = width or console.width
    cols = max(20, total - _NAME_W - 2 - _NOTE_W)
    span = timeline.duration or 1e-9
    if not timeline.bars:
        console.print("no request/reply pairs in this run's events")
    else:
        console.print(Text(" " * _NAME_W + "│" + _axis(span, cols), style="dim"))
        for lane in timeline.lanes:
            cells: list[list[tuple[str, str]]] = [[(" ", "")] * cols for _ in range(lane.rows)]
            bars = timeline.lane_bars(lane.name)
            for bar in bars:
                _paint(cells[bar.row], bar, span, cols)
            failed = sum(b.status in ("failed", "retried") for b in bars)
            note = f" {len(bars)} call{'s' * (len(bars) != 1)}" + (f", {failed} failed"
                                                                  if failed else "")
            for r, row in enumerate(cells):
                line = Text((lane.name if r == 0 else "")[:_NAME_W - 1].ljust(_NAME_W) + "│")
                for char, style in row:
                    line.append(char, style=style)
                line.append("│" + (note if r == 0 else ""), style="dim")
                console.print(line, no_wrap=True, overflow="crop", crop=False)
        console.print(Text(" " * _NAME_W + "legend: █ ok  ▓ failed  ▒ failed, retried  "
                           "↻ a retry  ░ cancelled  ┄ no reply yet", style="dim"))
    for at, what in timeline.marks:
        console.print(Text(f"{at:8.2f} s  {what}", style="yellow"))
    if timeline.gauges:
        console.print(Text("budget: " + " · ".join(_gauge_text(g) for g in timeline.gauges)))
    if timeline.outcome is not None:
        console.print(Text(f"outcome: {timeline.outcome}"
                           + (f" ({timeline.reason})" if timeline.reason else "")
                           + f" after {timeline.duration:.2f} s"))
    else:
        console.print(Text(f"no run.finished yet ({timeline.duration:.2f} s so far)", style="dim"))


def _paint(row: list[tuple[str, str]], bar: Bar, span: float, cols: int) -> None:
    char, style = _CELL[bar.status]
    first = min(cols - 1, int(bar.start / span * cols))
    stop = span if bar.end is None else bar.end
    last = max(first, min(cols - 1, int(stop / span * cols - 1e-9)))
    for c in range(first, last + 1):
        row[c] = (char, style)
    if bar.is_retry:
        row[first] = ("↻", "bold yellow")


def _axis(span: float, cols: int) -> str:
    ticks = [" "] * cols
    step = max(10, cols // 5)
    for c in range(0, cols - 6, step):
        label = f"{c / cols * span:.2f}s"
        ticks[c:c + len(label)] = list(label)
    return "".join(ticks[:cols])


def _gauge_text(g: Gauge) -> str:
    used = f"{g.used:g}{g.unit and ' ' + g.unit}" if g.limit is None else (
        f"{g.used:g}/{g.limit:g}{g.unit and ' ' + g.unit}")
    return f"{g.name} {used}"
