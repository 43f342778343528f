"""The public entry point: an :class:`Engine` that starts runs, and :func:`ask`.

An engine holds what is expensive and shared (the corpus index and its
embedder, the reranker, the searcher's providers); each run gets fresh actors
with per-run state. A run is a task owned by the engine, not by whoever
watches it: a subscriber (a terminal, a browser) can come and go, and the run
goes on until it finishes, is cancelled, or its budget ends it.

A run interrupted by a crash is resumed from its stored events
(:meth:`Engine.resume`): fresh actors rebuild their state from the log, the
pure machine is rebuilt by replaying it, and the run goes on to one terminal
event with what was left of its wall-clock budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
import uuid
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Coroutine,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import Any, Literal

from actors import Actor, ActorRun, ActorStats, EdgeOperator
from actors.models import CachedEmbedder, Embedder
from actors.providers import SearchProvider
from actors.rerank import Credibility, Reranker, RerankerActor
from actors.scrape import ScraperActor
from actors.search import Searcher, SearcherActor
from reactive_rag.agent import (
    EntailmentJudge,
    EntailmentModel,
    HandoffActor,
    PlannerActor,
    ReaderActor,
    SelectorActor,
    SufficiencyActor,
    TaskStarter,
    VerifierActor,
    WriterActor,
    index_catalogue,
    verify_async,
)
from reactive_rag.index import (
    STDLIB_COLLECTION,
    CorpusIndex,
    LocalCorpusProvider,
    Progress,
    search_text,
    stdlib_documents,
)
from reactive_rag.judgement import (
    AnswerabilityJudge,
    Judgement,
    ModelRewriter,
    PlannerPolicy,
    SufficiencyJudge,
    SupportJudge,
    WholeDocumentJudge,
    WriterPolicy,
)
from reactive_rag.judgement.offline import (
    EmbeddingSupport,
    ExtractiveWriter,
    LoopGuard,
    OfflinePlanner,
    judge_answerability,
    offline_judgement,
)
from reactive_rag.run import (
    Budget,
    NoRunningLoop,
    RunConfigError,
    RunContext,
    RunController,
    initial_state,
)
from reactive_rag.web_kb import CompressingProvider, PriorEvidenceProvider, WebKnowledgeBase
from streams import (
    Claim,
    Event,
    EvidenceChunk,
    EvidenceRegistered,
    Outcome,
    RunCancelRequested,
    RunFinished,
    RunResumed,
    RunStarted,
    RunStream,
    RunUsage,
    TaskLink,
    follow,
)

from ._config import (
    ConfigSource,
    EngineConfig,
    Taps,
    assemble,
    load_engine_config,
    research_from,
)
from ._placement import EnginePlacements, PlacementSpec
from ._usage import fold_usage, usage_of

__all__ = ["Citation", "Engine", "EngineSettings", "RunHandle", "RunObserver", "RunResult", "ask"]

Mode = Literal["agent", "rag"]

log = logging.getLogger("reactive_rag")


@dataclass(frozen=True, slots=True)
class Citation:
    """A verified claim with the passage its quote was found in.

    ``credibility`` is the source's weight (see :class:`~actors.rerank.Credibility`)
    in the table the run was weighed with; ``None`` without a chunk.
    """

    number: int
    claim: Claim
    chunk: EvidenceChunk | None
    credibility: float | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (the shape the CLI's ``--json`` and the HTTP API return)."""
        return {"number": self.number, "statement": self.claim.statement,
                "quote": self.claim.quote, "source_id": self.claim.source_id,
                "title": self.chunk.title if self.chunk else None,
                "url": self.chunk.url if self.chunk else None,
                "credibility": self.credibility}


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended, with its answer, citations and the whole event log."""

    run_id: str
    outcome: Outcome
    answer: str
    reason: str
    citations: tuple[Citation, ...]
    evidence: Mapping[str, EvidenceChunk]
    events: tuple[Event, ...]
    elapsed_s: float
    task: TaskLink | None = None
    """The background task a ``handed_off`` run passed its question to."""

    @classmethod
    def from_events(cls, events: Sequence[Event], *, elapsed_s: float | None = None,
                    credibility: Credibility | None = None) -> RunResult:
        """Rebuild a finished run's result from its events (live, stored or replayed).

        ``elapsed_s`` defaults to the time between the first and last event;
        citations are weighed with ``credibility`` (default: the built-in table).

        A resumed run's log holds the ``run.finished(interrupted)`` of each
        crash: the result is the last ``run.finished``'s, with the evidence of
        the whole log (before and after each resume).

        Raises:
            ValueError: the events hold no ``run.finished`` (the run is still going).
        """
        finished = next((e for e in reversed(events) if isinstance(e, RunFinished)), None)
        if finished is None:
            raise ValueError("these events hold no run.finished: the run has not ended")
        evidence: dict[str, EvidenceChunk] = {}
        for event in events:
            if isinstance(event, EvidenceRegistered):
                for chunk in event.chunks:
                    evidence.setdefault(chunk.id, chunk)
        table = credibility if credibility is not None else Credibility.defaults()
        citations = []
        for i, claim in enumerate(finished.claims, 1):
            source = evidence.get(claim.source_id)
            citations.append(Citation(i, claim, source,
                                      table.weight(source) if source is not None else None))
        if elapsed_s is None:
            elapsed_s = events[-1].ts - events[0].ts
        return cls(run_id=finished.run_id, outcome=finished.outcome, answer=finished.answer,
                   reason=finished.reason, citations=tuple(citations), evidence=evidence,
                   events=tuple(events), elapsed_s=elapsed_s, task=finished.task)

    @property
    def answered(self) -> bool:
        return self.outcome in ("answered", "answered_from_evidence")

    def count(self, event_type: str) -> int:
        """How many events of one type the run produced (e.g. ``"search.requested"``)."""
        return sum(1 for e in self.events if e.type == event_type)

    @property
    def usage(self) -> RunUsage:
        """What the run used: model calls and tokens by role, provider calls, pages."""
        return usage_of(self.events)


class RunHandle:
    """A started run: its stream to watch, and ways to wait for or cancel it.

    ``async for event in handle`` yields the run's events in ``seq`` order from
    the first through ``run.finished``, then stops, whenever the loop starts
    (the stream keeps its history); :meth:`events` starts after a given seq.
    """

    def __init__(self, run_id: str, stream: RunStream) -> None:
        self.run_id = run_id
        self.stream = stream
        self._run: ActorRun | None = None
        self._task: asyncio.Task[RunResult] | None = None
        self._cancel_reason: str | None = None

    def events(self, after: int = 0) -> AsyncIterator[Event]:
        """The run's events with ``seq > after``, in order, through its terminal event.

        Past events come from the stream's history, later ones as they are
        published, with no gap and no duplicate; a consumer slower than the run
        holds at most a bounded buffer (see :func:`streams.follow`). Leaving the
        loop early leaves the run alone. A resumed run's stored
        ``run.finished(interrupted)`` is passed through, not taken as its end.

        Raises:
            ValueError: ``after`` is negative.
        """
        if after < 0:
            raise ValueError(f"after must be >= 0, got {after}")
        stream = self.stream
        return follow(stream, after, until=lambda e: e is stream.finished)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self.events()

    async def wait(self) -> RunResult:
        """The result once the run has finished (cancelling the waiter leaves the run alone)."""
        assert self._task is not None
        return await asyncio.shield(self._task)

    def cancel(self, reason: str = "cancelled by the user") -> bool:
        """Ask the run to stop; a cancel before the run has started is kept, not lost."""
        if self.stream.finished is not None:
            return False
        if self._run is None:
            if self._cancel_reason is None:
                self._cancel_reason = reason
                return True
            return False
        return self._run.cancel(reason)

    def fail(self, reason: str) -> bool:
        """End the run ``failed`` with ``reason`` (e.g. its store stopped taking its events)."""
        if self.stream.finished is not None:
            return False
        if self._run is None:
            return self.cancel(reason)  # not started yet: nothing ran, nothing to fail
        return self._run.finish("failed", reason=reason)

    @property
    def done(self) -> bool:
        return self._task is not None and self._task.done()

    def statistics(self) -> list[ActorStats]:
        """Each actor's mailbox depth and counters (empty until the run's actors start)."""
        return [] if self._run is None else self._run.statistics()


RunObserver = Callable[[RunHandle], object]
"""Called with each run's handle as it starts, before its first event (e.g. a tracer).

An observer subscribes to ``handle.stream``; what it returns is ignored. One
that raises is logged and skipped: watching a run never stops it.
"""

PlannerFactory = Callable[[], PlannerPolicy]
WriterFactory = Callable[[], WriterPolicy]


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """What an engine runs with, as plain values: equal settings, equally built engines."""

    config: EngineConfig | None
    web_providers: tuple[str, ...]
    web_compression: str
    model_planner: bool
    model_writer: bool
    entailment: bool
    model_sufficiency: bool
    model_followups: bool
    credibility: Credibility
    judgement: tuple[str, ...]


def _families_on(judgement: Judgement) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(judgement)
                 if getattr(judgement, f.name) is not None)


class Engine:
    """Starts runs over a corpus index (and, if configured, web search providers).

    Args:
        index: the corpus index (default: the on-disk default index).
        planner: builds the planner policy for each run (default: offline).
        writer: builds the writer policy for each run (default: extractive).
        web: a tenant's web searcher (providers behind retries and circuit
            breakers, blacklist, fallback); runs then search the web next to the
            local corpus and may scrape pages (SSRF-guarded).
        web_compression: ``"rag"`` indexes each run's web hits into a temporary
            session knowledge base and answers every search from it (passages
            round-robin across URLs); the base is dropped when the run ends.
        embedder: model for reranking and loop detection (default: the one the run's
            collections were indexed with, :meth:`CorpusIndex.embedder_for`; the
            :attr:`embedder` property gives the index's default).
        credibility: source weights by collection and URL domain, used by the
            default reranker (default: the built-in table,
            :meth:`~actors.rerank.Credibility.defaults`; a given ``reranker``
            keeps its own).
        judge: decides, before the writer is asked, whether the chosen evidence
            answers every part of the question (default: the offline judge;
            ``None`` writes from whatever was found, as before).
        judgement_off: offline rule families to switch off (``"conflicts"``, ``"spam"``,
            ``"stale"``, ``"points"``, ``"sufficiency"``, ``"followups"``;
            :func:`~reactive_rag.judgement.offline.offline_judgement`).
        entailment: the support judge: a model that decides whether each claim's cited
            passage supports it, in one call per draft (e.g.
            :class:`~reactive_rag.judgement.model.ChatSupportJudge`), or a local
            :class:`~reactive_rag.agent.EntailmentModel`; the offline support rules
            stand in when it fails. The engine does not close it.
        sufficiency: a model that decides whether the chosen evidence answers the
            question (and lists disagreements) before the writer is asked (e.g.
            :class:`~reactive_rag.judgement.model.ChatSufficiency`); the offline
            verdict is its hint, and stands in when it fails.
        rewriter: a model that reads a conversation's follow-ups and folds its history
            (e.g. :class:`~reactive_rag.judgement.model.ChatRewriter`); conversations over
            this engine use it, the offline rules standing in when it fails.
        scraper: builds each web run's page scraper (default: ``ScraperActor()``,
            SSRF-guarded); a seam for other fetch settings and for recording or
            replaying the pages a run fetched (:mod:`reactive_rag.cassette`).
        observers: called with every run's handle before its first event (and
            every resumed run's): subscribers such as
            :class:`~reactive_rag.observability.RunTracer` (OpenTelemetry spans).
        placement: actors to run on Ray, e.g. ``{"reranker": "ray"}`` or
            ``{"reranker": {"on": "ray", "num_cpus": 1, "replicas": 2}}``
            (:class:`~actors.RayOptions`), or a started
            :class:`~actors.RayPlacement` (:mod:`reactive_rag.engine._placement`).
        tasks: starts background summary tasks (e.g.
            :func:`~reactive_rag.tasks.summary_starter`; or later, :meth:`hand_off_to`):
            a question asking for one whole document of the run's collections is handed
            to its summary task and the run ends ``handed_off`` with the task.
        whole_document: a chat model that decides that hand-off (e.g.
            :class:`~reactive_rag.judgement.model.ChatWholeDocument`); the offline rules
            (family ``whole_document``) are its hint and stand in when it fails.
    """

    def __init__(
        self,
        index: CorpusIndex | None = None,
        *,
        planner: PlannerFactory | None = None,
        writer: WriterFactory | None = None,
        web: Searcher | None = None,
        web_compression: Literal["none", "rag"] = "none",
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        credibility: Credibility | None = None,
        judge: AnswerabilityJudge | None = judge_answerability,
        judgement_off: Collection[str] = (),
        entailment: SupportJudge | EntailmentModel | None = None,
        sufficiency: SufficiencyJudge | None = None,
        rewriter: ModelRewriter | None = None,
        scraper: Callable[[], ScraperActor] | None = None,
        observers: Sequence[RunObserver] = (),
        placement: PlacementSpec | None = None,
        tasks: TaskStarter | None = None,
        whole_document: WholeDocumentJudge | None = None,
    ) -> None:
        self.index = index if index is not None else CorpusIndex()
        self._tasks = tasks
        self._whole_document = whole_document
        self._embedder = embedder
        self._given_embedder = embedder is not None
        self._reranker = reranker
        self._custom_reranker = reranker is not None
        self._rerankers: dict[str, Reranker] = {}  # per embedder name, when none was given
        self._support_heads: dict[str, EmbeddingSupport | None] = {}
        self.credibility = credibility if credibility is not None else Credibility.defaults()
        self._planner = planner
        self._writer = writer
        self._web = web
        self._compression = web_compression
        try:
            self._judgement = offline_judgement(sufficiency=judge, off=frozenset(judgement_off))
        except ValueError as exc:
            raise RunConfigError(str(exc)) from None
        self.assembled_from: EngineConfig | None = None
        """The config this engine was assembled from (:func:`.assemble`), if any."""
        self._entailment = entailment
        self._support_judge: SupportJudge | None = (
            EntailmentJudge(entailment) if isinstance(entailment, EntailmentModel)
            else entailment)
        self._sufficiency = sufficiency
        self._rewriter = rewriter
        self._scraper: Callable[[], ScraperActor] = scraper or ScraperActor
        self._runs: dict[str, RunHandle] = {}
        self._observers = tuple(observers)
        self._closers: list[Callable[[], Awaitable[None]]] = []  # what from_config built
        self._placement = EnginePlacements(placement, embedder=lambda: self.embedder,
                                           credibility=self.credibility,
                                           custom_reranker=reranker is not None)
        self._closers.append(self._placement.aclose)

    @classmethod
    def from_config(
        cls,
        config: ConfigSource = None,
        *,
        index: CorpusIndex | None = None,
        tenant: str = "default",
        env: Mapping[str, str] | None = None,
        taps: Taps | None = None,
        **options: Any,
    ) -> Engine:
        """An engine with the web search, chat model and judge a config describes.

        ``config`` is an :class:`EngineConfig`, a TOML file or a mapping with optional
        ``[search]`` (the ``search.toml`` schema of ``reactive-rag ask --web``),
        ``[chat]`` (a server tenant's chat table), ``[entailment]`` and ``[judgement]``
        tables, or a server config, whose ``[tenants.TENANT]`` is read; ``None`` reads
        what the CLI reads from the environment. API keys come from ``env`` (default
        ``os.environ``), never from the file. ``options`` go to the constructor; ``taps``
        wrap the built clients (a cassette). The engine closes what it built in
        :meth:`aclose`. Every face (CLI, server, MCP, replicas) builds engines this way.

        Raises:
            RunConfigError: a file or value the schemas refuse, an unknown
                provider, a provider missing its key, URL or options, or an
                unset ``api_key_env``: before any network call.
        """
        research = research_from(load_engine_config(config, tenant=tenant, env=env), env)
        return assemble(cls, research, index=index, taps=taps, **options)

    @property
    def judgement(self) -> Judgement:
        """The judgement this engine's runs (and conversations over it) consult."""
        return self._judgement

    @property
    def rewriter(self) -> ModelRewriter | None:
        """The model that reads conversations' follow-ups, if one was given or configured."""
        return self._rewriter

    @property
    def entailment(self) -> SupportJudge | EntailmentModel | None:
        """The model that also judges each claim's support, if one was given or configured."""
        return self._entailment

    def hand_off_to(self, tasks: TaskStarter | None) -> None:
        """Let runs started from now on hand whole-document questions to ``tasks``.

        For a face whose task manager starts after the engine (the server); ``None``
        stops hand-offs.
        """
        self._tasks = tasks

    def close_with(self, close: Callable[[], Awaitable[None]]) -> None:
        """Have :meth:`aclose` also await ``close`` (clients a config built for this engine)."""
        self._closers.append(close)

    def settings(self) -> EngineSettings:
        """What this engine runs with, as plain values (to compare engines built two ways)."""
        return EngineSettings(
            config=self.assembled_from,
            web_providers=tuple(self._web.providers) if self._web is not None else (),
            web_compression=self._compression,
            model_planner=self._planner is not None,
            model_writer=self._writer is not None,
            entailment=self._entailment is not None,
            model_sufficiency=self._sufficiency is not None,
            model_followups=self._rewriter is not None,
            credibility=self.credibility,
            judgement=_families_on(self._judgement),
        )

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self.index.embedder
        assert self._embedder is not None
        return self._embedder

    def run_embedder(self, collections: Sequence[str]) -> Embedder:
        """The embedder a run over ``collections`` reranks, guards loops and writes with:
        the one given to the engine, else the one those collections were indexed with."""
        if self._given_embedder:
            return self.embedder
        return self.index.embedder_for(collections)

    @property
    def support_head(self) -> EmbeddingSupport | None:
        """The verifier's embedding factor on the support score, built once per engine.

        None when the embedder is not the one the shipped weights were fitted
        for (then the lexical score alone). With a support judge it is the
        offline fallback's, used when the judge fails.
        """
        return self._support_head_for(self.embedder)

    def _support_head_for(self, embedder: Embedder) -> EmbeddingSupport | None:
        if embedder.name not in self._support_heads:
            # not through the disk cache: flipped texts are not corpus
            inner = embedder.inner if isinstance(embedder, CachedEmbedder) else embedder
            self._support_heads[embedder.name] = EmbeddingSupport.for_embedder(inner)
        return self._support_heads[embedder.name]

    @property
    def reranker(self) -> Reranker:
        if self._reranker is None:
            self._reranker = self._reranker_for(self.embedder)
        return self._reranker

    def _reranker_for(self, embedder: Embedder) -> Reranker:
        """The reranker a run with ``embedder`` uses: the given one, else one per embedder."""
        if self._custom_reranker and self._reranker is not None:
            return self._reranker
        reranker = self._rerankers.get(embedder.name)
        if reranker is None:
            # Embed a candidate exactly as the index did, so corpus chunks hit the
            # embedding cache instead of going through the model again.
            reranker = self._rerankers[embedder.name] = Reranker(
                embedder, passage_text=lambda c: search_text(c.title, c.text),
                credibility=self.credibility)
        return reranker

    @property
    def runs(self) -> Mapping[str, RunHandle]:
        """Runs started by this engine and still going."""
        return dict(self._runs)

    def warm_up(self) -> None:
        """Load the embedding model now (blocking; call it in a thread).

        Loading takes about a second the first time; doing it here keeps that
        off the event loop of whoever starts the first run.
        """
        self.embedder.embed_queries(["warm up"])
        _ = self.reranker
        self._placement.start_blocking()  # Ray replicas of placed actors (nothing if none)

    def ensure_stdlib_corpus(self, progress: Progress | None = None) -> bool:
        """Build the default collection (standard-library docs) unless it is current.

        An index built by an older version (other text cleaning, other
        documents) is rebuilt, not silently kept. Returns True if it had to be
        built (embeddings are cached on disk, so a rebuild re-uses them).
        """
        return self.index.ensure(STDLIB_COLLECTION, stdlib_documents(),
                                 progress=progress) is not None

    def start(
        self,
        question: str,
        *,
        mode: Mode = "agent",
        collections: Sequence[str] | None = None,
        budget: Budget | Mapping[str, Any] | None = None,
        run_id: str | None = None,
        edges: Mapping[str, Sequence[EdgeOperator]] | None = None,
        context: RunContext | None = None,
    ) -> RunHandle:
        """Start a run in the background and return its handle at once.

        ``collections``: which of the index's collections to search (default: every
        collection it has). ``context``: what a conversation's earlier turns bring
        (a :class:`~reactive_rag.conversation.Conversation` passes it): the rewrite
        of a follow-up is published right after ``run.started``, and earlier turns'
        evidence is searchable again.

        Raises:
            RunConfigError: an empty question, unknown mode, bad budget or
                unknown collection, or nothing indexed at all (nothing is started).
        """
        _require_loop()
        plan = self._plan(run_id or uuid.uuid4().hex[:12], question, mode, budget, collections,
                          prior=context.prior_evidence if context is not None else ())
        return self._launch(plan.handle, self._drive(
            plan.handle, plan.actors, plan.question, plan.mode, plan.budget, plan.collections,
            edges, plan.session_kbs, context=context))

    def _plan(self, run_id: str, question: str, mode: str,
              budget: Budget | Mapping[str, Any] | None, collections: Sequence[str] | None, *,
              log: Sequence[Event] | None = None,
              prior: Sequence[EvidenceChunk] = ()) -> _RunPlan:
        """Check a run's options, then build its stream, handle and actors (start and resume).

        ``log``: a resumed run's stored events, whose ``run.started`` gave the
        options: the stream goes on after them, every fresh actor rebuilds its
        state from them, and a refusal names the run.

        Raises:
            RunConfigError: an empty question, unknown mode, bad budget, unknown
                collection, a run id already going here, or a log whose seqs
                are not 1..n (nothing is built).
        """
        where = f"run {run_id!r}: " if log is not None else ""
        if not question.strip():
            raise RunConfigError(f"{where}the question is empty")
        if mode not in ("agent", "rag"):
            raise RunConfigError(f"{where}mode must be 'agent' or 'rag', got {mode!r}")
        checked: Mode = "rag" if mode == "rag" else "agent"
        try:
            limits = budget if isinstance(budget, Budget) else Budget().with_overrides(
                dict(budget or {}))
        except (ValueError, TypeError) as exc:
            raise RunConfigError(f"{where}{exc}") from exc
        if collections is None:  # every collection the index has
            collections = self.index.collections()
            if not collections:
                raise RunConfigError(
                    f"{where}nothing is indexed in {self.index.root}: index a folder first "
                    "(reactive-rag index PATH --collection NAME), or pass the collections "
                    "to search")
        names = tuple(collections)
        missing = [c for c in names if not self.index.exists(c)]
        if missing or not names:
            known = ", ".join(self.index.collections()) or "none"
            raise RunConfigError(f"{where}unknown collection(s) {missing or '(none given)'}, "
                                 f"not indexed here; indexed: {known}")
        if run_id in self._runs:
            raise RunConfigError(f"run {run_id!r} is already going here")
        try:
            stream = RunStream(run_id) if log is None else RunStream.continuing(run_id, log)
        except ValueError as exc:
            raise RunConfigError(f"{where}{exc}") from exc
        session_kbs: list[WebKnowledgeBase] = []
        actors = self._actors(run_id, question, checked, limits, names, session_kbs,
                              prior=prior)
        if log is not None:
            _restore(actors, log)
        return _RunPlan(RunHandle(run_id, stream), question, checked, limits, names, actors,
                        session_kbs)

    def _launch(self, handle: RunHandle,
                drive: Coroutine[Any, Any, RunResult]) -> RunHandle:
        """Run ``drive`` as the handle's task, listed in :attr:`runs` while it goes."""
        handle._task = asyncio.get_running_loop().create_task(drive,
                                                              name=f"run:{handle.run_id}")
        self._runs[handle.run_id] = handle
        for observe in self._observers:  # before the task's first step: no event is missed
            try:
                observe(handle)
            except Exception:
                log.exception("run %s: observer %r failed to attach", handle.run_id, observe)
        # A finished run leaves the engine's table by itself (its events stay in
        # the handle and in any store), so a long-lived engine does not grow.
        def leave(_task: asyncio.Task[RunResult]) -> None:
            self._runs.pop(handle.run_id, None)

        handle._task.add_done_callback(leave)
        return handle

    def resume(
        self,
        events: Sequence[Event],
        *,
        reason: str = "resumed from the stored events after a crash",
        edges: Mapping[str, Sequence[EdgeOperator]] | None = None,
    ) -> RunHandle:
        """Resume a run interrupted by a crash from its stored events; return its handle at once.

        ``events`` is the run's whole stored log (``seq`` 1..n), ending with the
        ``run.finished(interrupted)`` crash recovery wrote. Question, mode,
        collections and budget come from its ``run.started``. Fresh actors
        rebuild their per-run state from the log (the controller by folding it
        through the pure machine, the others in their ``on_restore`` hook); then
        ``run.resumed`` is published as the first new event (``seq`` after
        the stored ones), the commands still awaiting a reply are issued
        again, and the run goes on to exactly one new ``run.finished``. Time
        used before the crash counts against the wall-clock budget: a run
        with none left goes straight to its finalizer; one whose log holds a
        ``run.cancel_requested`` (the cancel had won, only its terminal was
        lost) ends ``cancelled``. ``edges`` apply to the events after the
        resume.

        Raises:
            RunConfigError: the log has no ``run.started``, does not end with
                an ``interrupted`` ``run.finished``, is not 1..n without a gap,
                names a collection that is not indexed or a budget this
                version does not know, or the run is already going here
                (nothing is started).
        """
        _require_loop("Engine.resume()")
        log = list(events)
        started = next((e for e in log if isinstance(e, RunStarted)), None)
        if started is None:
            raise RunConfigError("the log has no run.started: there is no run to resume")
        run_id = started.run_id
        last = log[-1]
        if not isinstance(last, RunFinished):
            raise RunConfigError(f"run {run_id!r} has not ended (its log does not end with "
                                 "run.finished): only an interrupted run can be resumed")
        if last.outcome != "interrupted":
            raise RunConfigError(f"run {run_id!r} ended {last.outcome}: only an interrupted "
                                 "run can be resumed")
        stored_budget = started.options.get("budget") or {}
        if not isinstance(stored_budget, dict):
            raise RunConfigError(f"run {run_id!r}: its stored budget is not a mapping")
        plan = self._plan(run_id, started.question, started.mode, stored_budget,
                          started.collections, log=log)
        controller = next(a for a in plan.actors if isinstance(a, RunController))
        # The time the run had used: up to its last event before the crash (the
        # interrupted terminal is written later, by recovery), on the machine's
        # clock, which an earlier resume moved past that crash's downtime.
        before = log[-2] if len(log) > 1 else started
        started_ts = controller.state.started_ts or started.ts
        elapsed = max(0.0, before.ts - started_ts) if before.ts and started_ts else 0.0
        attempt = 1 + sum(1 for e in log if isinstance(e, RunResumed))
        # A cancel asked before the crash had won the run's end; only its terminal was lost.
        asked = next((e for e in reversed(log) if isinstance(e, RunCancelRequested)), None)

        def begin(run: ActorRun) -> None:
            resumed = run.publish(RunResumed(after_seq=last.seq, reason=reason, attempt=attempt,
                                             elapsed_s=round(elapsed, 3)))
            if asked is not None:
                run.cancel(asked.reason or "cancelled before the crash")
            elif isinstance(resumed, RunResumed):
                controller.resume(run.context_for(controller), resumed)

        return self._launch(plan.handle, self._drive(
            plan.handle, plan.actors, plan.question, plan.mode, plan.budget, plan.collections,
            edges, plan.session_kbs, begin=begin, elapsed_s=elapsed))

    async def ask(self, question: str, **options: Any) -> RunResult:
        """Start a run and wait for its result."""
        return await self.start(question, **options).wait()

    def _actors(self, run_id: str, question: str, mode: Mode, budget: Budget,
                collections: tuple[str, ...],
                session_kbs: list[WebKnowledgeBase],
                prior: Sequence[EvidenceChunk] = ()) -> list[Actor]:
        provider = LocalCorpusProvider(self.index, collections, name="local")
        providers: list[SearchProvider] = [provider]
        if prior:  # a follow-up: earlier turns' evidence can be found again, and cited
            providers.append(PriorEvidenceProvider(prior))
        if self._web is not None:
            wrap: Callable[[SearchProvider], SearchProvider] | None = None
            if self._compression == "rag":
                kb = WebKnowledgeBase(run_id)
                session_kbs.append(kb)

                def wrap(web_provider: SearchProvider) -> SearchProvider:
                    return CompressingProvider(web_provider, kb)

            searcher = self._web.with_providers(providers, provider_timeout_s=budget.tool_call_s,
                                                wrap=wrap)
        else:
            searcher = Searcher(providers, provider_timeout_s=budget.tool_call_s)
        searcher_actor = SearcherActor(searcher)
        searcher_actor.timeout_s = budget.tool_call_s
        embedder = self.run_embedder(collections)
        reranker = (self._placement.actor("reranker")
                    or RerankerActor(self._reranker_for(embedder)))
        reranker.timeout_s = budget.tool_call_s
        planner = self._planner() if self._planner else OfflinePlanner()
        offline_writer = ExtractiveWriter(embedder, max_claims=3, min_gain=0.15)
        writer = self._writer() if self._writer else offline_writer
        planner_actor = PlannerActor(planner, loop_guard=LoopGuard(embedder),
                                     timeout_s=budget.model_call_s, web=self._web is not None)
        # a chat writer that fails or stalls: the offline writer answers from the same evidence
        writer_actor = WriterActor(writer, timeout_s=budget.model_call_s,
                                   fallback=offline_writer if self._writer else None)
        hands_off = self._tasks is not None and (self._judgement.whole_document is not None
                                                 or self._whole_document is not None)
        actors: list[Actor] = [
            RunController(initial_state(question, mode=mode, budget=budget,
                                        collections=collections, selects=True,
                                        judgement=self._judgement,
                                        credibility=self.credibility,
                                        model_judges=self._sufficiency is not None,
                                        hands_off=hands_off)),
            planner_actor,
            SelectorActor(),
            searcher_actor,
            ReaderActor(self.index, collections),
            reranker,
            writer_actor,
            VerifierActor(functools.partial(verify_async, judge=self._support_judge,
                                            support_model=self._support_head_for(embedder))),
        ]
        if self._sufficiency is not None:
            actors.append(SufficiencyActor(self._sufficiency, timeout_s=budget.model_call_s))
        if hands_off and self._tasks is not None:
            actors.append(HandoffActor(
                index_catalogue(self.index.document_titles), self._tasks,
                rule=self._judgement.whole_document, judge=self._whole_document,
                timeout_s=budget.model_call_s))
        if self._web is not None:
            scraper = self._scraper()
            scraper.timeout_s = budget.tool_call_s
            actors.append(scraper)
        return actors

    async def _drive(self, handle: RunHandle, actors: list[Actor], question: str, mode: Mode,
                     budget: Budget, collections: tuple[str, ...],
                     edges: Mapping[str, Sequence[EdgeOperator]] | None,
                     session_kbs: Sequence[WebKnowledgeBase] = (), *,
                     begin: Callable[[ActorRun], None] | None = None,
                     elapsed_s: float = 0.0,
                     context: RunContext | None = None) -> RunResult:
        t0 = time.perf_counter()
        run = ActorRun(handle.stream, actors, edges=edges, deadline_s=budget.wall_s,
                       grace_s=budget.finalize_s, elapsed_s=elapsed_s, usage=fold_usage)
        try:
            async with run:
                handle._run = run
                if begin is None:
                    run.publish(RunStarted(question=question, mode=mode,
                                           collections=collections,
                                           options={"budget": _budget_dict(budget)}))
                    if context is not None and context.rewritten is not None:
                        run.publish(context.rewritten)
                else:  # a resumed run: run.resumed and what it re-issues
                    begin(run)
                if handle._cancel_reason is not None:
                    run.cancel(handle._cancel_reason)
                await run.wait()
        except Exception as exc:  # the run already ended as failed; keep the result
            if handle.stream.finished is None:  # pragma: no cover - ActorRun always finishes
                raise
            del exc
        finally:
            for kb in session_kbs:  # the session's temporary index goes with the run
                await kb.close()
        return RunResult.from_events(handle.stream.history(),
                                     elapsed_s=time.perf_counter() - t0,
                                     credibility=self.credibility)

    def forget(self, run_id: str) -> None:
        """Drop a finished run from :attr:`runs` now (it also leaves by itself when done)."""
        handle = self._runs.get(run_id)
        if handle is not None and handle.done:
            del self._runs[run_id]

    async def aclose(self) -> None:
        """Cancel runs still going, wait for them, and release the index."""
        for handle in list(self._runs.values()):
            handle.cancel("engine shutting down")
        for handle in list(self._runs.values()):
            if handle._task is not None:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await handle._task
        self.index.close()
        closers, self._closers = self._closers, []
        for close in closers:
            with contextlib.suppress(Exception):
                await close()


def _require_loop(what: str = "Engine.start()") -> None:
    """Refuse, before anything is built, to start a run with no loop to run it on."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise NoRunningLoop(what) from None


def _budget_dict(budget: Budget) -> dict[str, Any]:
    return dataclasses.asdict(budget)


@dataclass(frozen=True, slots=True)
class _RunPlan:
    """A run's checked options and what was built for it (:meth:`Engine._plan`)."""

    handle: RunHandle
    question: str
    mode: Mode
    budget: Budget
    collections: tuple[str, ...]
    actors: list[Actor]
    session_kbs: list[WebKnowledgeBase]


def _restore(actors: Sequence[Actor], events: Sequence[Event]) -> None:
    """Give a resumed run's fresh actors the per-run state the stored events imply.

    Each actor's declared hook (:meth:`~actors.Actor.on_restore`) gets the
    whole log in ``seq`` order, before the run (and any mailbox) starts:
    planner, selector, writer and verifier rebuild their views, the searcher
    its seen URLs, the reader the pages the run opened; the others keep no
    per-run state. (The controller's machine is folded by
    :meth:`RunController.restore`, paired with its ``resume``.)
    """
    for actor in actors:
        actor.on_restore(events)




async def ask(
    question: str,
    *,
    mode: Mode = "agent",
    collections: Sequence[str] | None = None,
    budget: Budget | Mapping[str, Any] | None = None,
    engine: Engine | None = None,
    on_start: Callable[[RunHandle], None] | None = None,
) -> RunResult:
    """Answer ``question`` from the corpus with verified citations.

    ``on_start`` receives the run's handle before it begins, so a caller can
    subscribe to ``handle.stream`` (live view, custom operators) or cancel it.
    Without ``engine``, one over the default on-disk index is built for this call
    and closed after it (no state is kept between calls: keep an :class:`Engine`
    to ask many questions). ``collections`` defaults to every indexed collection.
    """
    if engine is None:
        own = Engine()
        try:
            return await ask(question, mode=mode, collections=collections, budget=budget,
                             engine=own, on_start=on_start)
        finally:
            await own.aclose()
    handle = engine.start(question, mode=mode, collections=collections, budget=budget)
    if on_start is not None:
        on_start(handle)
    return await handle.wait()
