"""Makes every event of a run durable, in order, without ever blocking the run.

The recorder subscribes to a :class:`~streams.RunStream` with a synchronous
callback that only pushes into a bounded :class:`~streams.EventBridge`. A writer
task drains it in batches (every ``flush_interval_s``, at once when
``batch_size`` events wait or ``run.finished`` arrives) and appends each batch
in one transaction. Only then are the events handed to live attachers
(:meth:`Recorder.subscribe_committed`): a client is never shown an event the
store does not hold (commit-before-deliver), so no ``seq`` a client saw can be
given to another event after a crash.

A store that cannot write is retried with back-off for ``retry_window_s``. If it
stays down, or the bridge fills (``max_buffer`` events), the recorder gives up:
it tells the run's owner (``on_give_up``, which fails the run), hands attachers
a terminal ``run.finished(failed)`` at the next seq with a plain reason, and
keeps trying to store exactly that terminal until the store takes it, so the
run is never left ``running``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from reactivex import abc
from reactivex.disposable import Disposable

from streams import Event, EventBridge, RunFinished, RunStream

from ._base import StoreBase
from ._exceptions import RunAlreadyFinished, StoreError, StoreUnavailable
from ._protocol import AppendsNow, RunMeta, RunStore

__all__ = ["Recorder", "RecorderStats"]

log = logging.getLogger("reactive_rag.store")


@dataclass(frozen=True, slots=True)
class RecorderStats:
    """Counters of one recorder (for monitors and the benchmark)."""

    run_id: str
    queued: int
    written: int
    batches: int
    retries: int
    last_written_seq: int
    error: str | None


_ADDRESS = re.compile(
    r"\[[0-9A-Fa-f:.]+\](?::\d+)?"  # [ipv6]:port
    r"|\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b"  # ipv4[:port]
    r"|\b[\w.-]+:\d{2,5}\b"  # host:port
    r"|(?:(?<=\s)|(?<=^)|(?<=['\"(]))/[^\s'\")]+"  # /an/absolute/path
)


def public_reason(reason: str) -> str:
    """A store failure as every tenant's client may read it: no host, port or path.

    The full text goes to the server log; the run's reason (shown to clients,
    stored for good) keeps what happened ("unavailable for 15 s", "database or
    disk is full") but not where the store lives.
    """
    cleaned = _ADDRESS.sub("<address>", reason)
    return re.sub(r"\(\s*'<address>',\s*\d+\s*\)", "<address>", cleaned)  # ('ip', port)


class _GiveUp(Exception):
    """The store cannot take the run's events any more (reason in the message)."""


class Recorder:
    """Stream subscriber that appends every event of one run to a store.

    Use as ``async with Recorder(store, stream, meta): ...`` or call
    :meth:`start` / :meth:`aclose`. Start it before the run publishes; events
    the stream already delivered are taken from its history when it keeps one.

    Args:
        store: where events go.
        stream: the run's stream.
        meta: if given, the run is created in the store on :meth:`start`.
        batch_size: write at once when this many events are waiting.
        flush_interval_s: otherwise gather a batch until this long after its first
            event was published.
        retry_max_s: ceiling of the back-off while the store is unavailable.
        retry_window_s: how long one batch is retried before the recorder gives up.
        max_buffer: events held while the store is slow or down; one more and
            the recorder gives up.
        on_give_up: called once (on the event loop) with the reason when the
            recorder gives up; the server fails the run with it.
    """

    def __init__(
        self,
        store: RunStore,
        stream: RunStream,
        meta: RunMeta | None = None,
        *,
        batch_size: int = 256,
        flush_interval_s: float = 0.005,
        retry_max_s: float = 1.0,
        retry_window_s: float = 15.0,
        max_buffer: int = 65_536,
        on_give_up: Callable[[str], None] | None = None,
    ) -> None:
        if meta is not None and meta.run_id != stream.run_id:
            raise ValueError(f"meta is for run {meta.run_id!r}, stream for {stream.run_id!r}")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if max_buffer < 1 or retry_window_s <= 0:
            raise ValueError("max_buffer must be >= 1 and retry_window_s > 0")
        self.store = store
        self.stream = stream
        self.run_id = stream.run_id
        self._meta = meta
        self._batch_size = batch_size
        self._flush_interval_s = flush_interval_s
        self._retry_max_s = retry_max_s
        self._retry_window_s = retry_window_s
        self._max_buffer = max_buffer
        self._on_give_up = on_give_up
        self._bridge: EventBridge[Event] | None = None
        self._inflight: list[Event] = []
        self._enqueued_seq = 0
        self._written_seq = 0
        self._written = 0
        self._batches = 0
        self._retries = 0
        self._sinks: list[EventBridge[Event]] = []
        self._drained = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._subscription: abc.DisposableBase | None = None
        self._aborted = False
        self._order = threading.Lock()
        self._holding = False
        self._declined = False
        self._loop_thread: int | None = None
        self._append_now = store.append_now if isinstance(store, AppendsNow) else None
        self.error: BaseException | None = None
        self.given_up: str | None = None
        """Why the recorder gave up (None while it records)."""
        self.terminal: RunFinished | None = None
        """The ``run.finished(failed)`` handed to attachers on giving up, until it is stored."""

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> Recorder:
        """Create the run (if ``meta`` was given), subscribe, and start the writer."""
        if self._task is not None:
            raise RuntimeError(f"recorder of run {self.run_id!r} already started")
        if self._meta is not None:
            await self.store.create_run(self._meta)
        else:
            self._written_seq = (await self.store.get_run(self.run_id)).last_seq
        self._enqueued_seq = self._written_seq
        self._bridge = EventBridge(self._max_buffer)
        self._loop_thread = threading.get_ident()
        if isinstance(self.store, StoreBase):
            self.store.register_writer(self.run_id, self)
        # The run may be publishing on another thread meanwhile (a stream takes
        # events from any thread): the lock keeps its callback out while the
        # backlog is merged, so the queue stays in seq order.
        with self._order:
            self._subscription = self.stream.subscribe(self._on_next,
                                                       name=f"recorder:{self.run_id}")
            # Events delivered before we subscribed: take them from history first.
            # The callback already queued anything newer; re-queue in seq order.
            backlog = self.stream.history(self._written_seq)
            if backlog:
                newer = self._bridge.take(self._max_buffer)
                for event in sorted({e.seq: e for e in (*backlog, *newer)}.values(),
                                    key=lambda e: e.seq):
                    self._bridge.push(event)
                self._enqueued_seq = max(self._enqueued_seq, backlog[-1].seq)
        self._task = asyncio.get_running_loop().create_task(
            self._writer(), name=f"recorder:{self.run_id}")
        self._task.add_done_callback(self._ended)
        return self

    async def __aenter__(self) -> Recorder:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def flush(self) -> None:
        """Return once everything queued so far is committed (or the recorder gave up)."""
        target = self._enqueued_seq
        while self._written_seq < target and self.error is None:
            if self._task is None or self._task.done():
                break
            await asyncio.sleep(self._flush_interval_s)
        self._raise_error()

    async def aclose(self, timeout_s: float | None = None) -> None:
        """Write what is queued, then stop taking events.

        Waits until every queued event is committed or the recorder gave up
        (at most ``retry_window_s`` of retries); ``timeout_s`` caps the wait.
        A given-up recorder keeps storing its terminal event in the background
        until the store takes it (:meth:`abort` stops that).

        Raises:
            StoreError: the recorder gave up, or events were unwritten at the timeout.
        """
        if self._task is None:
            return
        if self.stream.finished is None or self._enqueued_seq < self.stream.finished.seq:
            self._stop_taking()  # the run goes on without us: write what we have
        elif self._bridge is not None:
            self._bridge.close()
        try:
            async with asyncio.timeout(timeout_s):
                await self._drained.wait()
        except TimeoutError:
            await self.abort()
            if self.error is None:
                lost = len(self._inflight) + (len(self._bridge) if self._bridge else 0)
                self.error = StoreUnavailable(
                    f"gave up after {timeout_s} s with {max(lost, 1)} event(s) not written")
        self._raise_error()

    async def abort(self) -> None:
        """Stop at once, also a background repair (the run may stay ``running`` in the store
        until crash recovery ends it)."""
        self._stop_taking()
        self._aborted = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            # A client library may swallow a cancel mid-call (seen with redis-py);
            # the repair loop also stops on ``_aborted``, so do not wait for ever.
            await asyncio.wait({task}, timeout=5.0)

    @property
    def repaired(self) -> bool:
        """True once nothing is left to store (everything, or the give-up terminal, is)."""
        return self._task is not None and self._task.done()

    def _raise_error(self) -> None:
        if self.error is not None:
            raise StoreError(f"recorder of run {self.run_id!r} failed: {self.error}") from (
                self.error
            )

    def statistics(self) -> RecorderStats:
        """Queue depth and counters."""
        queued = len(self._inflight) + (len(self._bridge) if self._bridge is not None else 0)
        return RecorderStats(
            run_id=self.run_id,
            queued=queued,
            written=self._written,
            batches=self._batches,
            retries=self._retries,
            last_written_seq=self._written_seq,
            error=None if self.error is None else str(self.error),
        )

    @property
    def written_seq(self) -> int:
        """``seq`` of the last committed event."""
        return self._written_seq

    # --- attachers ---------------------------------------------------------------------------

    def subscribe_committed(self, sink: EventBridge[Event]) -> abc.DisposableBase:
        """Push every event committed from now on into ``sink``, then close it.

        If the recorder gives up, ``sink`` gets the give-up terminal
        (:attr:`terminal`) last. A recorder that already ended closes ``sink``
        at once (after pushing :attr:`terminal`, if it is still unstored).
        """
        if self._task is None or self._task.done() or self.given_up is not None:
            if self.terminal is not None and not self.repaired:
                sink.push(self.terminal)
            sink.close()
            return Disposable()
        self._sinks.append(sink)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._sinks.remove(sink)

        return Disposable(remove)

    def _deliver(self, events: list[Event]) -> None:
        for sink in tuple(self._sinks):
            for event in events:
                if not sink.push(event):  # overflowed (so closed): it reads the store instead
                    self._sinks.remove(sink)
                    break

    def _close_sinks(self) -> None:
        sinks, self._sinks = self._sinks, []
        for sink in sinks:
            sink.close()

    # --- the synchronous side (on the publishing thread) ----------------------------------------

    def _on_next(self, event: Event) -> None:
        with self._order:
            bridge = self._bridge
            if bridge is None or event.seq <= self._enqueued_seq:
                return
            if bridge.push(event):
                self._enqueued_seq = event.seq
        if self._append_now is not None and threading.get_ident() == self._loop_thread:
            self._flush_now(event)

    def _flush_now(self, newest: Event) -> None:
        """Commit and hand out the waiting batch right here, when its window is over.

        A store that can commit at once (:class:`~._protocol.AppendsNow`) saves
        the batch the writer task's loop turn: on a loop busy with runs, that turn
        is most of an event's way to its clients. Only while the writer task
        holds no events (so the order stays), and only if the store takes it at
        once; otherwise the writer task, woken by the same push, writes it.
        """
        bridge = self._bridge
        if bridge is None or self._holding or self._declined or self._task is None \
                or self._task.done():
            return
        batch = bridge.peek(self._batch_size)
        if not batch:
            return
        if not isinstance(newest, RunFinished) and len(batch) < self._batch_size and \
                batch[0].ts + self._flush_interval_s > time.time():
            return  # still gathering
        assert self._append_now is not None
        try:
            done = self._append_now(self.run_id, batch)
        except Exception:  # the writer task retries it, or gives up, as for any write
            done = None
        if done is None:  # not again until the writer task has written
            self._declined = True
            return
        bridge.drop(len(batch))
        self._committed(batch)
        self._deliver(batch)
        if isinstance(batch[-1], RunFinished):
            bridge.close()  # the writer task ends with nothing left to write

    def _stop_taking(self) -> None:
        if self._subscription is not None:
            self._subscription.dispose()
        if self._bridge is not None:
            self._bridge.close()

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._drained.set()
        self._close_sinks()
        if self._subscription is not None:
            self._subscription.dispose()
        if isinstance(self.store, StoreBase):
            self.store.unregister_writer(self.run_id, self)
        if not task.cancelled() and task.exception() is not None:  # pragma: no cover - caught
            self.error = task.exception()

    # --- the writer task -------------------------------------------------------------------------

    async def _writer(self) -> None:
        bridge = self._bridge
        assert bridge is not None
        try:
            while True:
                first = await bridge.get()
                self._holding = first is not None  # (until written: see _flush_now)
                if first is None:
                    if bridge.overflowed:
                        raise _GiveUp(f"{self._max_buffer} events waited for the run store")
                    return
                if not isinstance(first, RunFinished) and not bridge.closed and \
                        len(bridge) < self._batch_size - 1:
                    # Gather a batch for the window after the first event was published:
                    # on a busy loop waking this task took that long already, and a
                    # second wait would hold every event one more loop turn.
                    wait = first.ts + self._flush_interval_s - time.time()
                    if wait > 0:
                        await asyncio.sleep(min(wait, self._flush_interval_s))
                batch = [first, *bridge.take(self._batch_size - 1)]
                self._inflight = batch
                await self._write(batch)
                self._inflight = []
                self._holding = False
                self._deliver(batch)
                if isinstance(batch[-1], RunFinished):
                    return
        except _GiveUp as exc:
            await self._give_up(str(exc))
        except RunAlreadyFinished as exc:  # someone else ended it (e.g. crash recovery)
            await self._give_up(f"{exc}", ended_elsewhere=True)
        except asyncio.CancelledError:
            raise
        except StoreError as exc:
            await self._give_up(f"the run store refused this run's events: {exc}", cause=exc)

    async def _write(self, batch: list[Event]) -> None:
        delay = 0.01
        loop = asyncio.get_running_loop()
        first_failure: float | None = None
        while True:
            if self._bridge is not None and self._bridge.overflowed:
                raise _GiveUp(f"{self._max_buffer} events waited for the run store")
            try:
                await self.store.append(self.run_id, batch)
                break
            except StoreUnavailable as exc:
                now = loop.time()
                first_failure = now if first_failure is None else first_failure
                if now - first_failure >= self._retry_window_s:
                    raise _GiveUp(f"the run store was unavailable for "
                                  f"{self._retry_window_s:g} s: {exc}") from exc
                self._retries += 1
                await asyncio.sleep(min(delay, self._retry_window_s - (now - first_failure)))
                delay = min(delay * 2, self._retry_max_s)
        self._committed(batch)

    def _committed(self, batch: list[Event]) -> None:
        self._declined = False
        self._written += len(batch)
        self._batches += 1
        self._written_seq = batch[-1].seq

    async def _give_up(self, reason: str, *, ended_elsewhere: bool = False,
                       cause: BaseException | None = None) -> None:
        """Stop recording, end the run for its clients, then store the ending."""
        self.given_up = reason
        self.error = cause if cause is not None else StoreUnavailable(reason)
        self._stop_taking()
        self._inflight = []
        log.warning("run %s: recording stopped at seq %d: %s", self.run_id,
                    self._written_seq, reason)
        if self._on_give_up is not None:
            try:
                self._on_give_up(reason)
            except Exception:  # pragma: no cover - the owner's callback must not stop us
                log.exception("run %s: on_give_up failed", self.run_id)
        if ended_elsewhere:
            # The stored log has its own end: attachers get exactly what is stored.
            with contextlib.suppress(StoreError):
                stored = self.store.events(self.run_id, self._written_seq)
                async with contextlib.aclosing(stored) as events:  # type: ignore[type-var]
                    self._deliver([event async for event in events])
            return
        self.terminal = RunFinished(
            outcome="failed", run_id=self.run_id, seq=self._written_seq + 1, ts=time.time(),
            actor="recorder",
            reason=f"the run store stopped taking this run's events: {public_reason(reason)}")
        self._deliver([self.terminal])
        self._close_sinks()
        self._drained.set()  # aclose() need not wait for the repair
        await self._repair(self.terminal)

    async def _repair(self, terminal: RunFinished) -> None:
        """Store ``terminal`` once the store takes writes again (never leave it ``running``)."""
        delay = 0.05
        while not self._aborted:
            try:
                await self.store.append(self.run_id, [terminal])
                log.info("run %s: stored its failed ending at seq %d", self.run_id, terminal.seq)
                return
            except RunAlreadyFinished:
                return  # ended elsewhere meanwhile (crash recovery by another server)
            except StoreError:
                self._retries += 1
                await asyncio.sleep(delay)
                delay = min(delay * 2, max(self._retry_max_s, 1.0))
