"""A cassette: record a run's outside interactions, or serve them back in their order.

Recording appends each interaction to ``FILE.partial`` as it completes and
renames the file when the cassette is closed, so a run that never started (bad
options) cannot clobber an earlier recording.

Replaying answers each request from the recorded ones with the same key, first
in first out, and never touches the network. An answer waits (at most
``order_wait_s``) until the answers recorded before it have been served, so
concurrent calls complete in the order they did when recorded. What thread
timing decides in a run is taped too: the order the run's controller took its
facts in (see ``_schedule``) and which web pages each search found already
seen (see ``_search``), so parallel local work cannot make the replay differ.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal, Self, TypeVar

from pydantic import ValidationError

from actors.models import ChatModel
from actors.providers import HealthChange
from actors.scrape import Fetcher, ScraperActor
from actors.search import Searcher
from reactive_rag.run import RunController

from ._chat import RecordingChatModel, ReplayChatModel
from ._exceptions import CassetteError, CassetteFormatError, CassetteMiss
from ._format import (
    CASSETTE_FORMAT,
    CASSETTE_VERSION,
    CassetteHeader,
    Interaction,
    InteractionKind,
    RecordedHealth,
    canonical,
    decode_error,
    describe_key,
    encode_error,
)
from ._pages import RecordingFetcher, ReplayFetcher
from ._schedule import EdgeOperator, Turn, recording_gate, replay_gate
from ._search import recording_searcher, replay_searcher

__all__ = ["Cassette"]

_T = TypeVar("_T")


class Cassette:
    """A run's recorded search responses, pages and chat completions.

    Build one with :meth:`record` or :meth:`load`, then put its wrappers at the
    run's boundaries: :meth:`searcher` (web providers), :meth:`scraper` (page
    fetches) and :meth:`chat` (chat models); :meth:`start_options` are the
    recorded run's ``Engine.start`` arguments.
    """

    def __init__(self, path: Path, header: CassetteHeader, *,
                 mode: Literal["record", "replay"],
                 interactions: Sequence[Interaction] = (), schedule: Sequence[Turn] = (),
                 order_wait_s: float = 1.0) -> None:
        self.path = path
        self.header = header
        self.mode = mode
        self.order_wait_s = order_wait_s
        self.interactions: list[Interaction] = list(interactions)
        self.schedule: list[Turn] = list(schedule)  # the controller's inputs, in order
        self._file: IO[str] | None = None
        self._next_order = 0
        # replay state: answers by (kind, key), and how far the recorded order was served
        self._queues: dict[tuple[str, str], deque[tuple[int, Interaction]]] = {}
        self._recorded: dict[tuple[str, str], int] = {}
        ranked = sorted(self.interactions, key=lambda i: i.order)
        for rank, interaction in enumerate(ranked):
            slot = (interaction.kind, canonical(interaction.key))
            self._queues.setdefault(slot, deque()).append((rank, interaction))
            self._recorded[slot] = self._recorded.get(slot, 0) + 1
        self._done: set[int] = set()
        self._floor = 0
        self._advanced: asyncio.Event | None = None
        self._unused: dict[int, Interaction] = dict(enumerate(ranked))

    # --- opening -------------------------------------------------------------------------

    @classmethod
    def record(cls, path: str | os.PathLike[str], header: CassetteHeader) -> Cassette:
        """Start recording to ``path`` (written as ``path.partial`` until :meth:`close`).

        Raises:
            CassetteError: the file cannot be written.
        """
        target = Path(path)
        if not header.recorded_at:
            header = header.model_copy(update={"recorded_at": dt.datetime.now(dt.UTC)
                                               .isoformat(timespec="seconds")})
        cassette = cls(target, header, mode="record")
        try:
            cassette._file = cassette._partial.open("w", encoding="utf-8")
        except OSError as exc:
            raise CassetteError(f"cannot record to {target}: {exc}") from exc
        cassette._write(header.model_dump(mode="json"))
        return cassette

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, order_wait_s: float = 1.0) -> Cassette:
        """Open a recording to replay.

        Raises:
            CassetteFormatError: the file is missing, unreadable, corrupt, or of
                another format version.
        """
        source = Path(path)
        try:
            lines = source.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise CassetteFormatError(f"cannot read cassette {source}: {exc}") from exc
        if not lines or not lines[0].strip():
            raise CassetteFormatError(f"{source} is empty, not a cassette")
        try:
            first = json.loads(lines[0])
        except ValueError as exc:
            raise CassetteFormatError(f"{source}:1: not JSON ({exc})") from exc
        if not isinstance(first, dict) or first.get("format") != CASSETTE_FORMAT:
            raise CassetteFormatError(f"{source}:1: not a reactive-rag cassette header")
        if first.get("version") != CASSETTE_VERSION:
            raise CassetteFormatError(
                f"{source}: cassette version {first.get('version')!r}; this reactive-rag "
                f"replays version {CASSETTE_VERSION} (record it again)")
        try:
            header = CassetteHeader.model_validate(first)
        except ValidationError as exc:
            raise CassetteFormatError(f"{source}:1: bad header: {_first_error(exc)}") from exc
        interactions: list[Interaction] = []
        schedule: list[Turn] | None = None
        orders: set[int] = set()
        for number, line in enumerate(lines[1:], 2):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise CassetteFormatError(
                    f"{source}:{number}: bad interaction: not JSON ({exc})") from exc
            if isinstance(data, dict) and "schedule" in data:
                if schedule is not None:
                    raise CassetteFormatError(f"{source}:{number}: a second schedule")
                schedule = _schedule(data["schedule"], f"{source}:{number}")
                continue
            try:
                interaction = Interaction.model_validate(data)
            except ValidationError as exc:
                raise CassetteFormatError(
                    f"{source}:{number}: bad interaction: {_first_error(exc)}") from exc
            if interaction.order in orders:
                raise CassetteFormatError(
                    f"{source}:{number}: order {interaction.order} appears twice")
            orders.add(interaction.order)
            interactions.append(interaction)
        return cls(source, header, mode="replay", interactions=interactions,
                   schedule=schedule or (), order_wait_s=order_wait_s)

    # --- closing -------------------------------------------------------------------------

    def close(self) -> None:
        """Finish a recording: the file gets its name (nothing to do for a replay)."""
        if self._file is not None:
            if self.schedule:
                self._write({"schedule": [list(turn) for turn in self.schedule]})
            handle, self._file = self._file, None
            handle.close()
            os.replace(self._partial, self.path)

    def discard(self) -> None:
        """Drop a recording that should not be kept (its run never started)."""
        if self._file is not None:
            handle, self._file = self._file, None
            handle.close()
            with contextlib.suppress(OSError):
                self._partial.unlink()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def _partial(self) -> Path:
        return self.path.with_name(self.path.name + ".partial")

    # --- what a run needs ------------------------------------------------------------------

    def start_options(self) -> dict[str, Any]:
        """``Engine.start``/``ask`` keyword arguments of the recorded run (question included).

        They include :meth:`edges`, so a run started with them is recorded or
        replayed in full; one cassette is for one run.
        """
        h = self.header
        return {"question": h.question, "mode": h.mode, "collections": tuple(h.collections),
                "budget": dict(h.budget), "run_id": h.run_id, "edges": self.edges()}

    def edges(self) -> dict[str, list[EdgeOperator]]:
        """``Engine.start(edges=...)``: note (record) or enforce (replay) the controller's order."""
        if self.mode == "record":
            return {RunController.name: [recording_gate(self.schedule)]}
        if not self.schedule:
            return {}
        return {RunController.name: [replay_gate(self.schedule, self.order_wait_s)]}

    def searcher(self, web: Searcher | None = None) -> Searcher:
        """Recording: ``web`` with each provider recorded. Replay: the recorded searcher.

        The replayed providers stand in for the recorded ones by name, with the
        recorded merge settings; no provider configuration or key is needed.
        """
        if self.mode == "replay":
            if self.header.setup.web is None:
                raise CassetteError(f"{self.path} recorded no web search")
            return replay_searcher(self, self.header.setup.web)
        if web is None:
            raise CassetteError("recording a searcher needs the searcher to record")
        return recording_searcher(self, web)

    def scraper(self, base: Callable[[], ScraperActor] = ScraperActor
                ) -> Callable[[], ScraperActor]:
        """A scraper-actor factory (``Engine(scraper=...)``) whose page fetches are taped."""
        def build() -> ScraperActor:
            actor = base()
            actor.scraper.fetcher = self.fetcher(actor.scraper.fetcher)
            return actor

        return build

    def fetcher(self, inner: Fetcher) -> Fetcher:
        """``inner`` recorded, or (replay) a fetcher answering from the cassette only."""
        if self.mode == "replay":
            return ReplayFetcher(self, inner.config)
        return RecordingFetcher(inner, self)

    def chat(self, model: ChatModel | None = None, *, role: str = "chat") -> ChatModel:
        """``model`` recorded, or (replay) the recorded model of ``role`` (``model`` unused).

        ``role`` keeps two clients of one run apart (the planner/writer model and
        the entailment judge may be the same model on different servers).
        """
        if self.mode == "replay":
            setup = self.header.setup.entailment if role == "entailment" else self.header.setup.chat
            name = setup.model if setup is not None else (model.model if model else "default")
            return ReplayChatModel(self, model=name, role=role)
        if model is None:
            raise CassetteError("recording a chat model needs the model to record")
        return RecordingChatModel(model, self, role=role)

    def unused(self) -> list[Interaction]:
        """Recorded interactions a replay has not (yet) been asked for, in recorded order."""
        return [self._unused[rank] for rank in sorted(self._unused)]

    # --- recording -------------------------------------------------------------------------

    def add(self, kind: InteractionKind, key: Mapping[str, Any], *,
            response: Mapping[str, Any] | None = None, error: BaseException | None = None,
            cancelled: bool = False, health: Sequence[HealthChange] = (),
            deltas: Sequence[str] = (), elapsed_s: float = 0.0) -> Interaction:
        """Append one finished interaction (its order is the order it finished in)."""
        interaction = Interaction(
            order=self._next_order, kind=kind, key=dict(key),
            response=dict(response) if response is not None else None,
            error=encode_error(error) if error is not None else None, cancelled=cancelled,
            health=tuple(RecordedHealth(provider=c.provider, state=c.state,
                                        breaker=c.breaker.value, detail=c.detail)
                         for c in health),
            deltas=tuple(deltas), elapsed_s=round(elapsed_s, 4))
        self._next_order += 1
        self.interactions.append(interaction)
        self._write(interaction.model_dump(mode="json", exclude_defaults=True))
        return interaction

    def _write(self, data: Mapping[str, Any]) -> None:
        if self._file is None:  # a call that settles after the recording was closed
            return
        self._file.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._file.flush()

    # --- replaying -------------------------------------------------------------------------

    async def take(self, kind: InteractionKind, key: Mapping[str, Any], *,
                   provider: str = "") -> Interaction:
        """The next recorded answer to this request, once the answers before it were served.

        Raises:
            CassetteMiss: nothing (more) was recorded for this request.
        """
        slot = (kind, canonical(key))
        queue = self._queues.get(slot)
        if not queue:
            recorded = self._recorded.get(slot, 0)
            more = f" (recorded {recorded} time(s), all used)" if recorded else ""
            raise CassetteMiss(f"{kind} request not in the cassette {self.path.name}{more}: "
                               f"{describe_key(kind, key)}", kind=kind, key=dict(key),
                               provider=provider)
        rank, interaction = queue.popleft()
        self._unused.pop(rank, None)
        try:
            await self._turn(rank)
        finally:
            self._serve(rank)
        return interaction

    def recall(self, kind: InteractionKind, key: Mapping[str, Any]) -> Interaction | None:
        """The next recorded answer to this request now, regardless of order (``None``: none).

        For what the run consults rather than waits for (the seen URLs a
        search found), which must not hold up the answers recorded after it.
        """
        queue = self._queues.get((kind, canonical(key)))
        if not queue:
            return None
        rank, interaction = queue.popleft()
        self._unused.pop(rank, None)
        self._serve(rank)
        return interaction

    async def tape(self, kind: InteractionKind, key: Mapping[str, Any], call: Awaitable[_T],
                   encode: Callable[[_T], Mapping[str, Any]], *,
                   deltas: Sequence[str] = ()) -> _T:
        """Await ``call`` and record how it ended: its encoded result, its error, or a cut.

        ``deltas`` may be filled while the call runs (streamed pieces); they are
        recorded as they stand when it ends.
        """
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            result = await call
        except asyncio.CancelledError:
            self.add(kind, key, cancelled=True, deltas=deltas, elapsed_s=loop.time() - started)
            raise
        except Exception as exc:
            self.add(kind, key, error=exc, deltas=deltas, elapsed_s=loop.time() - started)
            raise
        self.add(kind, key, response=encode(result), deltas=deltas,
                 elapsed_s=loop.time() - started)
        return result

    async def outcome(self, interaction: Interaction,
                      error_root: type[Exception]) -> Mapping[str, Any]:
        """A replayed interaction's response; a recorded cut or error is raised again."""
        if interaction.cancelled:
            await self.linger(interaction)
            raise TimeoutError
        if interaction.error is not None:
            raise decode_error(interaction.error, error_root)
        assert interaction.response is not None
        return interaction.response

    async def linger(self, interaction: Interaction) -> None:
        """Replay a call the run gave up on: wait (bounded) for the caller to give up again."""
        await asyncio.sleep(min(interaction.elapsed_s, self.order_wait_s))

    async def _turn(self, rank: int) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + self.order_wait_s
        while self._floor < rank:
            if self._advanced is None:
                self._advanced = asyncio.Event()
            event = self._advanced
            left = until - loop.time()
            if left <= 0:
                # an earlier answer was never asked for (the run went another way):
                # stop waiting for it, and let later answers stop waiting too
                self._done.update(range(self._floor, rank))
                self._advance()
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), left)

    def _serve(self, rank: int) -> None:
        self._done.add(rank)
        self._advance()

    def _advance(self) -> None:
        moved = False
        while self._floor in self._done:
            self._floor += 1
            moved = True
        if moved and self._advanced is not None:
            event, self._advanced = self._advanced, None
            event.set()


def _schedule(raw: Any, where: str) -> list[Turn]:
    if not isinstance(raw, list) or not all(
            isinstance(t, list) and len(t) == 2 and all(isinstance(x, str) for x in t)
            for t in raw):
        raise CassetteFormatError(f"{where}: bad schedule (a list of [type, call_id] pairs)")
    return [(t, c) for t, c in raw]


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "(line)"
    return f"{where}: {err.get('msg', 'invalid')}"
