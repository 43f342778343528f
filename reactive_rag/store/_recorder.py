"""Makes every event of a run durable, in order, without ever blocking the run.

The recorder subscribes to a :class:`~streams.RunStream` with a plain
synchronous callback that only appends to an in-memory queue (a deque under a
lock: well under a microsecond). A writer task drains the queue in batches
(every ``flush_interval_s``, or at once when ``batch_size`` events are
waiting, or when ``run.finished`` arrives) and appends each batch to the store
in one transaction. Until an event is committed it stays visible through
:meth:`Recorder.unflushed`, which is how a live attacher fills the window
between the stored tail and the live stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from dataclasses import dataclass

from reactivex import abc

from streams import Event, RunFinished, RunStream

from ._base import StoreBase
from ._exceptions import StoreError, StoreUnavailable
from ._protocol import RunMeta, RunStore

__all__ = ["Recorder", "RecorderStats"]


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
        flush_interval_s: otherwise wait this long to gather a batch.
        retry_max_s: ceiling of the back-off while the store is unavailable.
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
    ) -> None:
        if meta is not None and meta.run_id != stream.run_id:
            raise ValueError(f"meta is for run {meta.run_id!r}, stream for {stream.run_id!r}")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.store = store
        self.stream = stream
        self.run_id = stream.run_id
        self._meta = meta
        self._batch_size = batch_size
        self._flush_interval_s = flush_interval_s
        self._retry_max_s = retry_max_s
        self._lock = threading.Lock()
        self._pending: deque[Event] = deque()
        self._inflight: list[Event] = []
        self._enqueued_seq = 0
        self._written_seq = 0
        self._written = 0
        self._batches = 0
        self._retries = 0
        self._wake = asyncio.Event()
        self._wake_scheduled = False
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._task: asyncio.Task[None] | None = None
        self._subscription: abc.DisposableBase | None = None
        self.error: BaseException | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> Recorder:
        """Create the run (if ``meta`` was given), subscribe, and start the writer."""
        if self._task is not None:
            raise RuntimeError(f"recorder of run {self.run_id!r} already started")
        if self._meta is not None:
            await self.store.create_run(self._meta)
        else:
            self._written_seq = (await self.store.get_run(self.run_id)).last_seq
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._enqueued_seq = self._written_seq
        if isinstance(self.store, StoreBase):
            self.store.register_writer(self.run_id, self)
        self._subscription = self.stream.subscribe(self._on_next, name=f"recorder:{self.run_id}")
        # Events delivered before we subscribed: take them from history (the
        # callback drops any seq it already has, so overlap is harmless).
        backlog = self.stream.history(self._written_seq)
        if backlog:
            with self._lock:
                merged = {event.seq: event for event in backlog}
                merged.update((event.seq, event) for event in self._pending)
                self._pending = deque(merged[seq] for seq in sorted(merged))
                self._enqueued_seq = max(self._enqueued_seq, self._pending[-1].seq)
        self._task = self._loop.create_task(self._writer(), name=f"recorder:{self.run_id}")
        if self._pending:
            self._wake.set()
        return self

    async def __aenter__(self) -> Recorder:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def flush(self) -> None:
        """Return once everything queued so far is committed (or the writer failed)."""
        target = self._enqueued_seq
        while self._written_seq < target and self.error is None:
            if self._task is None or self._task.done():
                break
            self._wake.set()
            await asyncio.sleep(self._flush_interval_s)
        self._raise_error()

    async def aclose(self, timeout_s: float = 10.0) -> None:
        """Write what is queued (retrying an unavailable store up to ``timeout_s``), then stop.

        Raises:
            StoreError: the writer failed, or events were still unwritten at the timeout.
        """
        if self._task is None:
            return
        self._closing = True
        self._wake.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout_s)
        except TimeoutError:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            if self.error is None:
                lost = len(self.unflushed())
                self.error = StoreUnavailable(
                    f"gave up after {timeout_s} s with {lost} event(s) not written"
                )
        finally:
            if self._subscription is not None:
                self._subscription.dispose()
            if isinstance(self.store, StoreBase):
                self.store.unregister_writer(self.run_id, self)
        self._raise_error()

    def _raise_error(self) -> None:
        if self.error is not None:
            raise StoreError(f"recorder of run {self.run_id!r} failed: {self.error}") from (
                self.error
            )

    def unflushed(self) -> list[Event]:
        """Events accepted but not yet committed, in ``seq`` order."""
        with self._lock:
            return [*self._inflight, *self._pending]

    def statistics(self) -> RecorderStats:
        """Queue depth and counters."""
        with self._lock:
            queued = len(self._pending) + len(self._inflight)
        return RecorderStats(
            run_id=self.run_id,
            queued=queued,
            written=self._written,
            batches=self._batches,
            retries=self._retries,
            last_written_seq=self._written_seq,
            error=None if self.error is None else str(self.error),
        )

    # --- the synchronous side (on the publishing thread) ----------------------------------------

    def _on_next(self, event: Event) -> None:
        with self._lock:
            if event.seq <= self._enqueued_seq or self.error is not None:
                return
            self._enqueued_seq = event.seq
            self._pending.append(event)
            urgent = len(self._pending) >= self._batch_size or isinstance(event, RunFinished)
            if self._wake_scheduled and not urgent:
                return
            self._wake_scheduled = True
        if threading.get_ident() == self._loop_thread:
            self._wake.set()
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake.set)

    # --- the writer task -------------------------------------------------------------------------

    async def _writer(self) -> None:
        try:
            while True:
                await self._wake.wait()
                with self._lock:
                    urgent = (
                        len(self._pending) >= self._batch_size
                        or (self._pending and isinstance(self._pending[-1], RunFinished))
                    )
                if not urgent and not self._closing:
                    await asyncio.sleep(self._flush_interval_s)
                with self._lock:
                    self._wake.clear()
                    self._wake_scheduled = False
                    while self._pending and len(self._inflight) < self._batch_size:
                        self._inflight.append(self._pending.popleft())
                    batch = list(self._inflight)
                if batch:
                    await self._write(batch)
                    if isinstance(batch[-1], RunFinished):
                        return
                with self._lock:  # events may have arrived during the write
                    more = bool(self._pending)
                if more:
                    self._wake.set()
                elif self._closing:
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the run goes on; the failure is reported on close
            self.error = exc

    async def _write(self, batch: list[Event]) -> None:
        delay = 0.01
        while True:
            try:
                await self.store.append(self.run_id, batch)
                break
            except StoreUnavailable:  # retried until it works or aclose() gives up
                self._retries += 1
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._retry_max_s)
        with self._lock:
            self._inflight.clear()
        self._written += len(batch)
        self._batches += 1
        self._written_seq = batch[-1].seq


