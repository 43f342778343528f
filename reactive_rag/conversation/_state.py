"""A conversation as data: its turns, rolling history and the evidence it may reuse.

Pure functions over a frozen :class:`SessionState`, so the Python API, the CLI
and the HTTP server (which persists the state in the run store) share one
mechanism: :func:`prepare_turn` reads a follow-up against the history and
builds the run's :class:`~reactive_rag.run.RunContext`; :func:`record_turn`
adds the finished run. :func:`aprepare_turn` and :func:`arecord_turn` do the
same with a model (:class:`~._history.ModelRewriter`) reading the follow-up and
folding the history; when the model fails, the offline rules do it and the
prepared turn (``fallback``) or the summary says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import JsonValue

from actors import error_info
from reactive_rag.judgement import FollowupRewriter, Rewrite
from reactive_rag.judgement.model import RewriteError
from reactive_rag.run import RunContext
from streams import ErrorInfo, EvidenceChunk, QueryRewritten

from ._history import HistorySummary, ModelRewriter, Turn, afold, fold, history_text

if TYPE_CHECKING:
    from reactive_rag.engine import RunResult

__all__ = ["EVIDENCE_PER_TURN", "PreparedTurn", "SessionState", "aprepare_turn", "arecord_turn",
           "prepare_turn", "record_turn"]

EVIDENCE_PER_TURN = 8
"""Chunks a turn keeps for reuse: those its answer cited, then its best others."""
REUSED_TURNS = 4
"""How many recent turns' evidence a follow-up can find again."""
STATE_VERSION = 1


@dataclass(frozen=True, slots=True)
class SessionState:
    """Everything a conversation keeps between its runs (JSON-serialisable)."""

    session_id: str
    tenant: str
    turns: tuple[Turn, ...] = ()
    summary: HistorySummary = field(default_factory=HistorySummary)
    seen_urls: tuple[str, ...] = ()

    @classmethod
    def new(cls, session_id: str, tenant: str) -> SessionState:
        if not session_id:
            raise ValueError("session_id must be a non-empty string")
        return cls(session_id, tenant)

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "v": STATE_VERSION, "session_id": self.session_id, "tenant": self.tenant,
            "turns": [{"run_id": t.run_id, "question": t.question, "standalone": t.standalone,
                       "outcome": t.outcome, "answer": t.answer,
                       "evidence": [c.model_dump(mode="json") for c in t.evidence]}
                      for t in self.turns],
            "summary": {"text": self.summary.text, "run_ids": list(self.summary.run_ids),
                        "folded": self.summary.folded, "by": self.summary.by,
                        "fallback": self.summary.fallback},
            "seen_urls": list(self.seen_urls),
        }

    @classmethod
    def from_json(cls, data: Any) -> SessionState:
        """Raises ValueError for anything :meth:`to_json` did not write."""
        try:
            if data["v"] != STATE_VERSION:
                raise ValueError(f"unknown session state version {data['v']!r}")
            turns = tuple(
                Turn(run_id=str(t["run_id"]), question=str(t["question"]),
                     standalone=str(t["standalone"]), outcome=str(t["outcome"]),
                     answer=str(t["answer"]),
                     evidence=tuple(EvidenceChunk.model_validate(c) for c in t["evidence"]))
                for t in data["turns"])
            summary = data["summary"]
            by = summary.get("by", "rules")  # states saved before model summaries lack it
            if by not in ("rules", "model"):
                raise ValueError(f"unknown summary author {by!r}")
            return cls(str(data["session_id"]), str(data["tenant"]), turns,
                       HistorySummary(str(summary["text"]),
                                      tuple(str(r) for r in summary["run_ids"]),
                                      int(summary["folded"]), by,
                                      str(summary.get("fallback", ""))),
                       tuple(str(u) for u in data["seen_urls"]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a stored session state: {exc}") from exc

    @property
    def history(self) -> str:
        """The rolling history a run of this conversation is told."""
        return history_text(self.summary, self.turns)


@dataclass(frozen=True, slots=True)
class PreparedTurn:
    """A question about to be asked in a conversation, and the context its run gets."""

    question: str
    standalone: str
    rewrite: Rewrite
    context: RunContext
    by: Literal["model", "rules", "as_asked"] = "rules"
    """Who read the question: the model, the offline rules, or nobody (run as asked)."""
    fallback: ErrorInfo | None = None
    """Set when a model is configured but the rules read the question (or nobody did):
    what failed, and that the rules stood in."""


def prepare_turn(state: SessionState, question: str,
                 rewriter: FollowupRewriter | None) -> PreparedTurn:
    """Read ``question`` against the conversation and build its run's context.

    ``rewriter`` is the engine's follow-up judgement (``None``: switched off, the
    question is run as asked).
    """
    rewrite = (rewriter(question, state.turns) if rewriter is not None
               else Rewrite(original=question, standalone=question))
    return _prepared(state, rewrite, "rules" if rewriter is not None else "as_asked")


async def aprepare_turn(state: SessionState, question: str, rewriter: FollowupRewriter | None,
                        model: ModelRewriter | None) -> PreparedTurn:
    """:func:`prepare_turn`, the ``model`` reading the follow-up when one is given.

    The first question of a conversation is not sent to the model (nothing to
    resolve). When the model fails (:class:`RewriteError`), ``rewriter`` reads it
    (or, switched off, it runs as asked) and ``fallback`` says why.
    """
    if model is None or not state.turns:
        return prepare_turn(state, question, rewriter)
    try:
        rewrite = await model.rewrite(question, state.turns)
    except Exception as exc:  # any model failure: the rules read it, and it is said
        info = exc.info() if isinstance(exc, RewriteError) else error_info(exc).model_copy(
            update={"role": "followups"})
        stood_in = "read by the offline rules" if rewriter is not None else "run as asked"
        fallback = info.model_copy(update={"message": f"{exc}; the follow-up was {stood_in}"})
        rewrite = (rewriter(question, state.turns) if rewriter is not None
                   else Rewrite(original=question, standalone=question))
        return _prepared(state, rewrite, "rules" if rewriter is not None else "as_asked",
                         fallback)
    return _prepared(state, rewrite, "model")


def _prepared(state: SessionState, rewrite: Rewrite,
              by: Literal["model", "rules", "as_asked"],
              fallback: ErrorInfo | None = None) -> PreparedTurn:
    prior = tuple({c.id: c for turn in state.turns[-REUSED_TURNS:]
                   for c in turn.evidence}.values())
    event = None if not state.turns else QueryRewritten(
        original=rewrite.original, standalone=rewrite.standalone,
        resolved=dict(rewrite.resolved), turns=rewrite.turns,
        by="model" if by == "model" else "rules", fallback=fallback)
    return PreparedTurn(rewrite.original, rewrite.standalone, rewrite,
                        RunContext(rewritten=event, prior_evidence=prior,
                                   history=state.history), by, fallback)


def record_turn(state: SessionState, prepared: PreparedTurn, run_id: str,
                result: RunResult) -> SessionState:
    """``state`` with the finished run added as a turn (history folded when due)."""
    turns, seen = _added(state, prepared, run_id, result)
    return replace(state, turns=turns, summary=fold(state.summary, turns), seen_urls=seen)


async def arecord_turn(state: SessionState, prepared: PreparedTurn, run_id: str,
                       result: RunResult, model: ModelRewriter | None) -> SessionState:
    """:func:`record_turn`, the ``model`` folding the history when one is given (the rule
    fold when it fails, the summary's ``fallback`` saying why)."""
    turns, seen = _added(state, prepared, run_id, result)
    summary = await afold(state.summary, turns, model)
    return replace(state, turns=turns, summary=summary, seen_urls=seen)


def _added(state: SessionState, prepared: PreparedTurn, run_id: str,
           result: RunResult) -> tuple[tuple[Turn, ...], tuple[str, ...]]:
    """The turns and the seen URLs with the finished run added."""
    cited = [c.chunk for c in result.citations if c.chunk is not None]
    rest = sorted((c for c in result.evidence.values() if not c.snippet),
                  key=lambda c: -(c.score or 0.0))
    keep = tuple({c.id: c for c in (*cited, *rest)}.values())[:EVIDENCE_PER_TURN]
    turn = Turn(run_id=run_id, question=prepared.question, standalone=prepared.standalone,
                outcome=result.outcome, answer=result.answer, evidence=keep)
    turns = (*state.turns, turn)
    seen = tuple(dict.fromkeys((*state.seen_urls, *(c.url for c in result.evidence.values()
                                                    if c.url))))
    return turns, seen
