"""How ``reactive-rag index`` shows its progress: a rich bar on a terminal, plain lines elsewhere.

Both go to stderr, so ``--json`` output on stdout stays pure. Plain lines (a
pipe, a log file, CI) come at most every ``interval_s`` per stage plus one when
a stage ends, each with its rate and the time left::

    embed 128/900 chunks, 21.3 chunks/s, ETA 36 s

Before the embedding starts, a job estimated to take longer than
:data:`LARGE_JOB_S` (at the rate measured on this machine, or the default)
gets a warning line; nothing waits for an answer.

:func:`build_progress` is the one progress callback of every build the CLI
starts (``reactive-rag index``, the first run of ``demo``/``ask``/``chat``): the
reporter, that warning, and a stop: once its event is set (Ctrl-C), the build
raises :class:`BuildStopped` at its next batch, before it has written anything.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, Protocol, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

__all__ = [
    "LARGE_JOB_S",
    "STOPPABLE_STAGES",
    "BuildStopped",
    "ProgressMode",
    "ProgressReporter",
    "build_progress",
    "estimate_line",
    "format_duration",
    "open_reporter",
    "progress_mode",
    "stop_on_sigint",
    "stopped_line",
]

#: A job estimated to embed for longer than this (seconds) is announced with a warning.
LARGE_JOB_S = 300.0

ProgressMode = Literal["bar", "lines", "none"]

_UNITS = {"load": "files", "chunk": "documents", "embed": "chunks"}

#: The stages a build can stop in with nothing written: the new generation's folder is
#: only made after the last batch is embedded (what was embedded stays in the cache).
STOPPABLE_STAGES = frozenset({"load", "chunk", "embed"})


class BuildStopped(Exception):
    """A build asked to stop (Ctrl-C) did, at its next batch, before writing anything."""


def progress_mode(*, quiet: bool, stdout: TextIO | None = None,
                  stderr: TextIO | None = None) -> ProgressMode:
    """A bar only when both streams are terminals; plain lines otherwise; none if quiet."""
    if quiet:
        return "none"
    out, err = stdout or sys.stdout, stderr or sys.stderr
    return "bar" if out.isatty() and err.isatty() else "lines"


def format_duration(seconds: float) -> str:
    """``"42 s"``, ``"3 min 20 s"``, ``"2 h 5 min"``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {(s % 3600) // 60} min"


def estimate_line(chunks: int, rate: float, *, measured: bool) -> str | None:
    """The warning for embedding ``chunks`` at ``rate`` passages/s, or None if not large."""
    seconds = chunks / rate
    if seconds <= LARGE_JOB_S:
        return None
    source = "measured on this machine" if measured else "a typical CPU rate, not yet measured"
    return (f"warning: about to embed {chunks:,} chunks; at {rate:.1f} chunks/s ({source}) "
            f"that takes about {format_duration(seconds)}. Unchanged files are never "
            "re-embedded, so a later re-index is quick; Ctrl-C leaves the collection as it was.")


class ProgressReporter(Protocol):
    """A ``progress(done, total, stage)`` callback that can also print a warning."""

    def __call__(self, done: int, total: int, stage: str) -> None:
        """One progress report."""
        ...

    def warn(self, text: str) -> None:
        """A line for the user, kept apart from the bar."""
        ...

    def __enter__(self) -> ProgressReporter:
        ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        ...


@dataclass(slots=True)
class _Stage:
    start: float
    last_line: float
    ended: bool = False


class _Lines:
    """Plain progress lines for a stream that is not a terminal."""

    def __init__(self, stream: TextIO, *, interval_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._stream = stream
        self._interval = interval_s
        self._clock = clock
        self._stages: dict[str, _Stage] = {}

    def __call__(self, done: int, total: int, stage: str) -> None:
        now = self._clock()
        st = self._stages.setdefault(stage, _Stage(start=now, last_line=now))
        finished = total > 0 and done >= total
        if st.ended or (done == 0 and not finished):
            return
        if not finished and now - st.last_line < self._interval:
            return
        st.last_line, st.ended = now, finished
        elapsed = now - st.start
        unit = _UNITS.get(stage)
        if unit is None:  # a one-step stage (bm25, hnsw, write)
            if finished:
                self._print(f"{stage} done in {elapsed:.1f} s")
            return
        rate = done / max(elapsed, 1e-3)
        eta = (total - done) / rate
        self._print(f"{stage} {done}/{total} {unit}, {rate:.1f} {unit}/s, "
                    f"ETA {format_duration(eta)}")

    def warn(self, text: str) -> None:
        self._print(text)

    def _print(self, line: str) -> None:
        print(line, file=self._stream, flush=True)

    def __enter__(self) -> _Lines:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None


class _Rate(ProgressColumn):
    """Items per second in the stage's own unit ("35.1 chunks/s")."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        if not speed and task.completed and task.elapsed:  # one update gives rich no sample
            speed = task.completed / task.elapsed
        unit = str(task.fields.get("unit", ""))
        shown = f"{speed:.1f} {unit}/s" if speed else f"- {unit}/s"
        return Text(shown, style="progress.data.speed")


class _Bar:
    """A rich progress bar per stage, with rate and ETA, on stderr."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("{task.description:<6}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"), _Rate(), TextColumn("ETA"),
            TimeRemainingColumn(), TimeElapsedColumn(), console=console, transient=True)
        self._tasks: dict[str, TaskID] = {}

    def __call__(self, done: int, total: int, stage: str) -> None:
        if stage not in self._tasks:
            self._tasks[stage] = self._progress.add_task(
                stage, total=total, unit=_UNITS.get(stage, "steps"))
        self._progress.update(self._tasks[stage], completed=done, total=total)

    def warn(self, text: str) -> None:
        self._progress.console.print(text, style="yellow", markup=False, highlight=False)

    def __enter__(self) -> _Bar:
        self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._progress.stop()


class _Silent:
    def __call__(self, done: int, total: int, stage: str) -> None:
        return None

    def warn(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)  # a warning is not progress: still said

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None


def stopped_line(collection: str) -> str:
    """The one line a build stopped by Ctrl-C ends with (its exit status is 130)."""
    return (f"cancelled: nothing written, collection {collection!r} left as it was "
            "(what was embedded is cached: indexing again goes on from there)")


def build_progress(reporter: ProgressReporter, *,
                   embed_rate: Callable[[], tuple[float, bool]] | None = None,
                   warnings: list[str] | None = None, show_warnings: bool = True,
                   stop: threading.Event | None = None) -> Callable[[int, int, str], None]:
    """The ``progress(done, total, stage)`` callback a build is given.

    Args:
        reporter: shows each report (see :func:`open_reporter`).
        embed_rate: ``(passages/s, measured)`` (``CorpusIndex.embed_rate``): a job
            estimated longer than :data:`LARGE_JOB_S` gets :func:`estimate_line`.
        warnings: collects that warning (for a ``--json`` report).
        show_warnings: also tell it through ``reporter.warn``.
        stop: once set, the build raises :class:`BuildStopped` at its next report
            in one of :data:`STOPPABLE_STAGES`; once it writes, it finishes.
    """
    def progress(done: int, total: int, stage: str) -> None:
        if stop is not None and stop.is_set() and stage in STOPPABLE_STAGES:
            raise BuildStopped("stopped before writing anything")
        if embed_rate is not None and stage == "embed" and done == 0:
            rate, measured = embed_rate()
            warning = estimate_line(total, rate, measured=measured)
            if warning is not None:
                if warnings is not None:
                    warnings.append(warning)
                if show_warnings:
                    reporter.warn(warning)
        reporter(done, total, stage)

    return progress


@contextmanager
def stop_on_sigint() -> Iterator[threading.Event]:
    """Ctrl-C sets the event it yields instead of raising ``KeyboardInterrupt``.

    For a build in this (main) thread: :func:`build_progress` with that event
    stops it at its next batch. A second Ctrl-C raises ``KeyboardInterrupt`` as
    usual. Outside the main thread the event is never set.
    """
    stop = threading.Event()

    def interrupted(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    try:
        previous = signal.signal(signal.SIGINT, interrupted)
    except ValueError:  # not the main thread
        yield stop
        return
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def open_reporter(mode: ProgressMode, *, stream: TextIO | None = None,
                  interval_s: float = 2.0) -> ProgressReporter:
    """The reporter for ``mode`` writing to ``stream`` (default: stderr)."""
    out = stream or sys.stderr
    if mode == "bar":
        return _Bar(Console(file=out))
    if mode == "lines":
        return _Lines(out, interval_s=interval_s)
    return _Silent()
