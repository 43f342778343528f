"""Host actors for the planner, writer and verifier policies.

Each keeps its own view of the run, built from the stream (the question from
``run.started``, the evidence registry from ``evidence.registered``), so the
commands it receives stay small and every input is visible in the run's events.

A run resumed after a crash gets fresh actors: each rebuilds what it held from
the stored events in :meth:`~actors.Actor.on_restore` before the run goes on, and
hands its policy the policy's declared hooks (:class:`PlannerHooks`,
:class:`WriterHooks`).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import inspect
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Literal, Protocol

from actors import Actor, ActorContext
from reactive_rag.judgement import (
    Answerability,
    Decision,
    ModelBacked,
    PlannerBase,
    PlannerHooks,
    PlannerPolicy,
    PlannerView,
    SufficiencyJudge,
    WriterBase,
    WriterHooks,
    WriterPolicy,
    planner_context_tokens,
)
from reactive_rag.judgement.offline import conflict_claims, named_hops, select_evidence
from streams import (
    ActorFailed,
    AnswerabilityJudged,
    AnswerabilityRequested,
    AnswerDelta,
    AnswerDrafted,
    AnswerRequested,
    AnswerVerified,
    Claim,
    ClaimError,
    ErrorInfo,
    Event,
    EvidenceChunk,
    EvidenceRegistered,
    EvidenceSelected,
    KeyPoint,
    LoopDetected,
    PlanDecided,
    PlanRequested,
    QueriesExpanded,
    QueryStat,
    ReadRequested,
    RunStarted,
    ScrapeRequested,
    SelectionRequested,
    ToolCall,
    ToolRejected,
    VerifyFailed,
)

from ._failures import model_failure
from ._verifier import lead_is_backed

FALLBACK_WRITER_S = 10.0
"""Time kept back for the offline writer when the chat writer fails or stalls."""

__all__ = [
    "LoopCheck",
    "LoopVerdictLike",
    "PlannerActor",
    "SelectorActor",
    "SufficiencyActor",
    "VerificationLike",
    "VerifierActor",
    "VerifyFunction",
    "WriterActor",
    "render_answer",
]


class LoopVerdictLike(Protocol):
    @property
    def ok(self) -> bool: ...

    @property
    def reason(self) -> str: ...


class LoopCheck(Protocol):
    """What the planner host needs from a semantic loop guard (see ``LoopGuard``)."""

    def sync(self, records: Iterable[QueryStat]) -> None:
        """Learn the run's query log (what each search brought)."""
        ...

    def check(self, query: str) -> LoopVerdictLike:
        """May ``query`` run? A refusal says why."""
        ...

    @property
    def should_stop_searching(self) -> bool:
        """True once the planner keeps proposing loops."""
        ...

    async def prepare(self, queries: Iterable[str]) -> None:
        """Do off the event loop the slow part of checking ``queries`` (e.g. embed them).

        Called after :meth:`sync`, before the :meth:`check` calls of a turn; a
        guard with nothing slow to do returns at once.
        """
        ...


class _RunView:
    """Question and evidence registry of one run, built from the stream."""

    def __init__(self) -> None:
        self.question = ""
        self.collections: tuple[str, ...] = ()
        self.evidence: dict[str, EvidenceChunk] = {}

    def absorb(self, msg: Event) -> bool:
        """Update from a fact; True if the message was only a fact."""
        if isinstance(msg, RunStarted):
            self.question = msg.question
            self.collections = msg.collections
            return True
        if isinstance(msg, EvidenceRegistered):
            for chunk in msg.chunks:
                self.evidence.setdefault(chunk.id, chunk)
            return True
        return False

    def restore(self, events: Iterable[Event]) -> None:
        """Rebuild the view from a run's stored events."""
        for event in events:
            self.absorb(event)


def _model_of(policy: PlannerPolicy | WriterPolicy) -> str:
    """The chat model behind a policy, if one is (named in its failures)."""
    return policy.model_name if isinstance(policy, ModelBacked) else ""


def _planner_hooks(policy: PlannerPolicy) -> PlannerHooks:
    """The policy's resume hooks; no-op ones for a policy that declares none."""
    return policy if isinstance(policy, PlannerHooks) else PlannerBase()


def _writer_hooks(policy: WriterPolicy) -> WriterHooks:
    """The policy's resume hook; a no-op one for a policy that declares none."""
    return policy if isinstance(policy, WriterHooks) else WriterBase()


class PlannerActor(Actor):
    """Asks a :class:`PlannerPolicy` for the next move and vets its queries for loops."""

    name = "planner"
    handles = ("run.started", "evidence.registered", "read.requested", "scrape.requested",
               "plan.requested")

    def __init__(self, policy: PlannerPolicy, *, loop_guard: LoopCheck | None = None,
                 timeout_s: float = 30.0, web: bool = False) -> None:
        self.policy = policy
        self.loop_guard = loop_guard
        self.timeout_s = timeout_s
        self.web = web  # the run searches the web: its policy may open pages and filter
        self.view = _RunView()
        self.reads: list[str] = []
        self.pages: list[str] = []
        self._requested: set[str] = set()  # call ids of the reads and page opens noted
        self.points: dict[str, KeyPoint] = {}  # key points of the run (compressed context)

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        if self.view.absorb(msg):
            return None
        if isinstance(msg, ReadRequested | ScrapeRequested):
            self._note(msg)
            return None
        assert isinstance(msg, PlanRequested)
        view, history = self._view_for(msg)
        decision = await self.policy.decide(view)
        guard = self.loop_guard
        if guard is not None:  # embed off the loop what _vet compares
            guard.sync(history)
            await guard.prepare([str(c.args["query"]) for c in decision.calls
                                 if c.tool == "search" and isinstance(c.args.get("query"), str)])
        # calls the policy refused in code (a chat model's bad calls): never run, but seen
        rejected: list[Event] = [
            ToolRejected(call_id=r.call_id, tool=r.tool, reason=r.reason)
            for r in decision.rejected
        ]
        return rejected + self._reply(msg, decision, history, planner_context_tokens(view))

    def on_failure(self, msg: Event, exc: BaseException) -> Event | None:
        """A planner failure names the model, its HTTP status or the time it was given."""
        return ActorFailed(request_type=msg.type, error=model_failure(
            exc, role="planner", model=_model_of(self.policy), timeout_s=self.timeout_s))

    def _note(self, msg: ReadRequested | ScrapeRequested) -> None:
        if msg.call_id:
            if msg.call_id in self._requested:
                return  # the same call issued again (a resumed run): read or opened once
            self._requested.add(msg.call_id)
        if isinstance(msg, ReadRequested):
            self.reads.append(msg.chunk_id)
        else:
            self.pages.append(msg.url)

    def _view_for(self, msg: PlanRequested) -> tuple[PlannerView, list[QueryStat]]:
        history = list(msg.queries)
        for point in msg.points:
            self.points.setdefault(point.id, point)
        evidence = list(self.view.evidence.values())
        if msg.compressed:
            full = set(msg.expanded)
            evidence = [c if c.id in full else _compact(c) for c in evidence]
        view = PlannerView(
            question=self.view.question, round=msg.round,
            evidence=evidence, queries=history,
            feedback=msg.feedback, reads=tuple(self.reads),
            remaining_steps=msg.remaining_steps, remaining_tool_calls=msg.remaining_tool_calls,
            remaining_s=msg.remaining_s, collections=self.view.collections,
            pages=tuple(self.pages), remaining_pages=msg.remaining_pages,
            today=_date_of(msg.ts),
            points=tuple(self.points.values()) if msg.compressed else (),
            compressed=msg.compressed, expanded=msg.expanded, can_extend=msg.can_extend,
            covered=msg.covered, newly_covered=msg.newly_covered, missing=msg.missing,
            web=self.web, remaining_tokens=msg.remaining_tokens,
        )
        return view, history

    def on_restore(self, events: Sequence[Event]) -> None:
        """Rebuild this planner's view of a run from its stored events (crash resume).

        The question, evidence, reads and opened pages come from the facts. For
        every plan request this planner answered in the log, the loop guard
        learns that round again: a policy whose :meth:`PlannerHooks.replay`
        makes the same move once more (deterministic, no I/O, like
        :class:`OfflinePlanner`) rebuilds its own state, and the move is vetted
        as before; otherwise (``None``, or a policy without hooks) the guard
        re-checks the round's refused queries (its ``loop.detected``), then the
        searches it let through. :meth:`PlannerHooks.restore` then rebuilds
        whatever else the policy keeps.
        """
        replies: dict[int, list[Event]] = {}
        for event in events:
            if event.actor == self.name and event.cause is not None:
                replies.setdefault(event.cause, []).append(event)
        hooks = _planner_hooks(self.policy)
        for event in events:
            if self.view.absorb(event):
                continue
            if isinstance(event, ReadRequested | ScrapeRequested):
                self._note(event)
                continue
            if not isinstance(event, PlanRequested) or event.actor == self.name:
                continue
            for point in event.points:  # asked again after the resume or not: points stay
                self.points.setdefault(point.id, point)
            reply = replies.get(event.seq, [])
            if not any(isinstance(e, PlanDecided) for e in reply):
                continue  # not answered: it is asked again after the resume
            view, history = self._view_for(event)
            replayed = hooks.replay(view)
            if replayed is not None:
                self._reply(event, replayed, history, planner_context_tokens(view))
            elif self.loop_guard is not None:
                self.loop_guard.sync(history)
                refused = [e.query for e in reply
                           if isinstance(e, LoopDetected) and e.kind == "semantic"]
                passed = [str(c.args["query"]) for e in reply if isinstance(e, PlanDecided)
                          for c in e.calls
                          if c.tool == "search" and isinstance(c.args.get("query"), str)]
                for query in (*refused, *passed):
                    self.loop_guard.check(query)
        hooks.restore(events)

    def _reply(self, msg: PlanRequested, decision: Decision,
               history: Sequence[QueryStat], context_tokens: int = 0) -> list[Event]:
        out: list[Event] = []
        calls = self._vet(decision, history, out)
        searches = [str(c.args["query"]) for c in calls
                    if c.tool == "search" and isinstance(c.args.get("query"), str)]
        if msg.round == 1 and len(searches) > 1:
            out.append(QueriesExpanded(original=self.view.question, queries=tuple(searches)))
        if decision.action != "answer" and not calls:
            reason = (decision.reason + "; " if decision.reason else "") + \
                "every proposed query repeats earlier work; answering"
            out.append(PlanDecided(action="answer", reason=reason, tokens=decision.tokens,
                                   context_tokens=context_tokens, model=decision.model,
                                   input_tokens=decision.input_tokens,
                                   output_tokens=decision.output_tokens))
            return out
        out.append(PlanDecided(action=decision.action, calls=calls, reason=decision.reason,
                               tokens=decision.tokens, context_tokens=context_tokens,
                               extend=decision.extend, model=decision.model,
                               input_tokens=decision.input_tokens,
                               output_tokens=decision.output_tokens))
        return out

    def _vet(self, decision: Decision, history: Sequence[QueryStat],
             out: list[Event]) -> tuple[ToolCall, ...]:
        guard = self.loop_guard
        if guard is None:
            return tuple(decision.calls)
        guard.sync(history)
        kept: list[ToolCall] = []
        for call in decision.calls:
            query = call.args.get("query")
            if call.tool == "search" and isinstance(query, str):
                verdict = guard.check(query)
                if not verdict.ok:
                    out.append(LoopDetected(kind="semantic", detail=verdict.reason, query=query))
                    if guard.should_stop_searching:
                        return ()
                    continue
            kept.append(call)
        return tuple(kept)


SNIPPET_WORDS = 25  # words of a web result's snippet a compressed view keeps


def _compact(chunk: EvidenceChunk) -> EvidenceChunk:
    """A chunk as a compressed view shows it: ids, title, URL and neighbours, no bulk text.

    A web result whose page was not opened keeps the first words of its
    snippet (what a results page shows); the text of everything else comes
    to the planner through the key points.
    """
    text = " ".join(chunk.text.split()[:SNIPPET_WORDS]) if chunk.snippet else ""
    return chunk.model_copy(update={"text": text})


def _date_of(ts: float) -> str:
    """The ISO date (UTC) of an event's timestamp; empty for an unstamped event."""
    if not ts:
        return ""
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).date().isoformat()


class _ViewingActor(Actor):
    """An actor that needs only the run's question and evidence registry, from the stream
    (and, on a resumed run, from its stored events)."""

    def __init__(self) -> None:
        self.view = _RunView()

    def on_restore(self, events: Sequence[Event]) -> None:
        """Rebuild the question and evidence registry from a run's stored events."""
        self.view.restore(events)


class SelectorActor(_ViewingActor):
    """Chooses the writer's evidence from the final rerank's shortlist (agent runs).

    The rerank orders passages by the question alone, which drops the second
    hop of a multi-hop question; :func:`select_evidence` keeps it, and a passage
    the rerank left out that a shortlisted one names (:func:`named_hops`) is
    weighed too. Its choice is an event (``evidence.selected``), one explicit
    stage of the run.
    """

    name = "selector"
    handles = ("run.started", "evidence.registered", "selection.requested")
    finalizes = True

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        if self.view.absorb(msg):
            return None
        assert isinstance(msg, SelectionRequested)
        ranked = [self.view.evidence[i] for i in msg.candidate_ids if i in self.view.evidence]
        left_out = [self.view.evidence[i] for i in msg.left_out if i in self.view.evidence]
        pool = [*ranked, *named_hops(ranked, left_out)]
        chosen = select_evidence(self.view.question, pool, msg.queries, k=msg.k,
                                 ranked=len(ranked))
        return [EvidenceSelected(ids=tuple(c.id for c in chosen))]


class WriterActor(Actor):
    """Asks a :class:`WriterPolicy` for a draft from the selected evidence.

    Nothing is streamed from here: a draft is not yet verified, so its text reaches a
    viewer only through the verifier (``answer.delta`` per kept claim). With a
    ``fallback`` (the offline writer behind a chat writer), a policy that fails or
    stalls past ``timeout_s`` is replaced for that draft by the fallback, from the
    same evidence, and the draft carries the failure (``answer.drafted`` ``fallback``);
    ``fallback_s`` more is kept for it.

    When the request carries conflicts (the evidence disagrees on what was
    asked), one claim per side (:func:`~reactive_rag.run.conflict_claims`) is
    appended after the policy's claims, whichever policy wrote them, so the
    answer shows both sides, each cited and verified like any claim. A
    conflict whose claims the verifier refused is left out of the repair, and
    the policy sees only the errors about its own claims.

    A policy with :class:`WriterHooks` (``restore_draft(question, claims)``)
    is given its drafts' claims on a resumed run, so a repair knows which
    claims the verifier's errors name.
    """

    name = "writer"
    handles = ("run.started", "evidence.registered", "answer.requested")
    finalizes = True

    def __init__(self, policy: WriterPolicy, *, timeout_s: float = 30.0,
                 fallback: WriterPolicy | None = None,
                 fallback_s: float = FALLBACK_WRITER_S) -> None:
        self.policy = policy
        self.fallback = fallback
        self.fallback_s = fallback_s if fallback is not None else 0.0
        self.policy_timeout_s = timeout_s
        self.timeout_s = timeout_s + self.fallback_s
        self.view = _RunView()
        self._own = 0  # the policy's claims in the last draft (conflict claims follow)
        self._appended: tuple[int, ...] = ()  # conflict index of each appended claim
        self._refused: set[int] = set()  # conflicts the verifier refused a claim of

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        if self.view.absorb(msg):
            return None
        assert isinstance(msg, AnswerRequested)
        evidence = [self.view.evidence[i] for i in msg.evidence_ids if i in self.view.evidence]
        errors = self._policy_errors(msg)
        sides = self._conflict_claims(msg)
        failed: ErrorInfo | None = None
        try:
            async with asyncio.timeout(self.policy_timeout_s if self.fallback else None):
                draft = await self.policy.write(self.view.question, evidence, mode=msg.mode,
                                                errors=errors)
        except Exception as exc:  # the chat writer failed: the offline one writes instead
            if self.fallback is None:
                raise
            failed = model_failure(exc, role="writer", model=_model_of(self.policy),
                                   timeout_s=self.policy_timeout_s)
            draft = await self.fallback.write(self.view.question, evidence, mode=msg.mode,
                                              errors=())
        claims = list(draft.claims)
        text = draft.text
        self._own = len(claims)
        for _, claim in sides:
            text += f"{' ' if text else ''}{claim.statement.strip()} [{len(claims) + 1}]"
            claims.append(claim)
        self._appended = tuple(n for n, _ in sides)
        return [AnswerDrafted(text=text, claims=tuple(claims), attempt=msg.attempt,
                              mode=msg.mode, tokens=draft.tokens, lead=draft.lead,
                              model=draft.model, input_tokens=draft.input_tokens,
                              output_tokens=draft.output_tokens,
                              answer_index=draft.answer_index, fallback=failed,
                              notes=tuple(draft.notes))]

    def on_failure(self, msg: Event, exc: BaseException) -> Event | None:
        """A writer failure names the model and, for a stall, the time it was given."""
        return ActorFailed(request_type=msg.type, error=model_failure(
            exc, role="writer", model=_model_of(self.policy), timeout_s=self.timeout_s))

    def _policy_errors(self, msg: AnswerRequested) -> tuple[ClaimError, ...]:
        """The errors about the policy's own claims; refused conflict claims are noted."""
        errors = msg.errors
        if msg.mode == "repair" and self._appended:
            ours = range(self._own, self._own + len(self._appended))
            self._refused |= {self._appended[e.index - self._own] for e in errors
                              if e.index in ours}
            errors = tuple(e for e in errors if e.index not in ours)
        return errors

    def _conflict_claims(self, msg: AnswerRequested) -> list[tuple[int, Claim]]:
        """One claim per side of each conflict to show, with the conflict's index."""
        out: list[tuple[int, Claim]] = []
        for n, conflict in enumerate(msg.conflicts):
            sides = conflict_claims([conflict])
            if n in self._refused or any(c.source_id not in self.view.evidence for c in sides):
                continue
            out.extend((n, claim) for claim in sides)
        return out

    def on_restore(self, events: Sequence[Event]) -> None:
        """Rebuild this writer's view of a run from its stored events (crash resume).

        Each answer request is taken as the writer took it (the conflicts a
        repair refused are noted) and each draft of this writer sets which of
        its claims were the policy's and which showed a conflict; the policy's
        :meth:`WriterHooks.restore_draft` gets each draft's own claims in order.
        """
        hooks = _writer_hooks(self.policy)
        planned: dict[int, tuple[int, ...]] = {}
        for event in events:
            if self.view.absorb(event):
                continue
            if isinstance(event, AnswerRequested):
                self._policy_errors(event)
                planned[event.seq] = tuple(n for n, _ in self._conflict_claims(event))
            elif (isinstance(event, AnswerDrafted) and event.actor == self.name
                  and event.cause in planned):
                self._appended = planned[event.cause]
                self._own = max(0, len(event.claims) - len(self._appended))
                hooks.restore_draft(self.view.question, event.claims[: self._own])


class VerificationLike(Protocol):
    """The verifier's verdict on a draft (see :class:`~._verifier.Verification`)."""

    @property
    def kept(self) -> Sequence[Claim]: ...

    @property
    def errors(self) -> Sequence[ClaimError]: ...

    @property
    def passed(self) -> bool: ...

    @property
    def kept_answer_index(self) -> int | None: ...

    @property
    def judged_by(self) -> Literal["model", "offline"]: ...

    @property
    def judge_failure(self) -> ErrorInfo | None: ...


class VerifyFunction(Protocol):
    """Checks a draft's claims against the registry and the run's question.

    May be synchronous (``verify``) or return an awaitable (``verify_async``,
    for an entailment model that has to wait for a server).
    """

    def __call__(
        self, claims: Sequence[Claim], registry: Mapping[str, EvidenceChunk], /, *,
        question: str, answer_index: int | None,
    ) -> VerificationLike | Awaitable[VerificationLike]: ...


class VerifierActor(_ViewingActor):
    """Checks every claim of a draft against this run's evidence and question, in code.

    Only verified text reaches a viewer: the answer's deltas (``answer.delta``) are
    published here, one per kept claim, just before ``answer.verified``; a draft
    that fails shows nothing, and every dropped claim is in the verdict's errors.
    """

    name = "verifier"
    handles = ("run.started", "evidence.registered", "answer.drafted")
    finalizes = True

    def __init__(self, verify: VerifyFunction) -> None:
        super().__init__()
        self.verify = verify

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        if self.view.absorb(msg):
            return None
        assert isinstance(msg, AnswerDrafted)
        outcome = self.verify(msg.claims, self.view.evidence, question=self.view.question,
                              answer_index=msg.answer_index)
        result: VerificationLike = await outcome if inspect.isawaitable(outcome) else outcome
        if result.passed:
            kept = tuple(result.kept)
            lead = msg.lead if msg.lead and lead_is_backed(msg.lead, kept,
                                                           self.view.evidence) else ""
            deltas: list[Event] = [AnswerDelta(text=lead.strip(), claim_index=None)] \
                if lead.strip() else []
            for n, claim in enumerate(kept):
                gap = " " if n or lead.strip() else ""
                deltas.append(AnswerDelta(text=f"{gap}{claim.statement.strip()} [{n + 1}]",
                                          claim_index=n))
            return [*deltas, AnswerVerified(
                text=render_answer(kept, lead), claims=kept, lead=lead,
                dropped=len(msg.claims) - len(kept), attempt=msg.attempt,
                errors=tuple(result.errors), answer_index=result.kept_answer_index,
                judged_by=result.judged_by, judge_fallback=result.judge_failure)]
        errors = tuple(result.errors)
        if not errors:  # nothing was dropped: the draft had no claim at all
            said = "; ".join(msg.notes) or "the writer found nothing in the evidence to cite"
            errors = (ClaimError(index=-1, source_id="", kind="empty",
                                 reason=f"the draft has no claims ({said})"),)
        return [VerifyFailed(errors=errors, attempt=msg.attempt,
                             kept=tuple(result.kept), judge_fallback=result.judge_failure)]


class SufficiencyActor(_ViewingActor):
    """Asks a model judge whether the chosen evidence answers the question (the model decides).

    The offline rules' verdict rides along as a hint the model may overrule; a
    judge that fails answers with ``actor.failed`` naming the model and what went
    wrong, and the run then lets the offline verdict stand in (saying so).
    """

    name = "judge"
    handles = ("run.started", "evidence.registered", "answerability.requested")
    finalizes = True

    def __init__(self, judge: SufficiencyJudge, *, timeout_s: float = 30.0) -> None:
        super().__init__()
        self.judge = judge
        self.timeout_s = timeout_s

    async def on_receive(self, msg: Event, ctx: ActorContext) -> Sequence[Event] | None:
        if self.view.absorb(msg):
            return None
        assert isinstance(msg, AnswerabilityRequested)
        held = self.view.evidence
        passages = [held[i] for i in msg.evidence_ids if i in held]
        others = [held[i] for i in msg.other_ids if i in held]
        hint = (Answerability(verdict=msg.hint_verdict, missing=msg.hint_missing)
                if msg.hint_verdict else None)
        found = await self.judge.judge(self.view.question, passages, hint, others)
        judged = found.judged
        return [AnswerabilityJudged(
            verdict=judged.verdict, answer_type=judged.answer_type, covered=judged.covered,
            missing=judged.missing, reason=judged.reason, searches=judged.searches,
            by="model", model=self.judge.name, conflicts=found.conflicts,
            added=tuple(i for i in judged.extra_ids if i in msg.other_ids))]

    def on_failure(self, msg: Event, exc: BaseException) -> Event | None:
        """A judge failure names the model and, for a stall, the time it was given."""
        return ActorFailed(request_type=msg.type, error=model_failure(
            exc, role="sufficiency judge", model=self.judge.name, timeout_s=self.timeout_s))


def render_answer(claims: Sequence[Claim], lead: str = "") -> str:
    """The answer text from verified claims, with numbered citations (after the lead, if any)."""
    cited = " ".join(f"{c.statement.strip()} [{i}]" for i, c in enumerate(claims, 1))
    return f"{lead.strip()} {cited}".strip() if lead.strip() else cited
