"""The Python API of a conversation: ``Conversation(engine)`` -> ``conversation.ask(...)``."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from ._history import ModelRewriter, Turn
from ._state import PreparedTurn, SessionState, aprepare_turn, arecord_turn, prepare_turn

if TYPE_CHECKING:
    from reactive_rag.engine import Engine, RunHandle, RunResult

__all__ = ["Conversation"]


class Conversation:
    """Questions asked one after another, each read against the ones before.

    Follow-ups are rewritten into standalone questions (``query.rewritten`` on
    the run's stream), earlier turns' evidence can be found again (and is
    registered, hence citable, only when the new run's search returns it), and
    the history rolls (last turns verbatim, older ones folded). One run at a
    time. The state is plain data (:attr:`state`); the HTTP server keeps it in
    the run store, this object keeps it in memory.

    With a ``rewriter`` (a model, e.g. :class:`~reactive_rag.judgement.model.ChatRewriter`)
    the model reads each follow-up and folds the history; when it fails, the
    engine's offline rules do, and :attr:`last_prepared` ``.fallback`` (or the
    summary's ``fallback``) says why. Without one the offline rules do it all.

    Args:
        engine: runs the questions.
        session_id: names the conversation (default: a new random id).
        tenant: whose conversation it is (for the store).
        state: carry on an existing conversation.
        rewriter: the model that reads follow-ups and folds the history (default: the
            engine's, :attr:`Engine.rewriter`, from a ``[chat]`` with the ``followups``
            role; ``None`` there too: the offline rules). Ask with :meth:`ask` or
            :meth:`astart`.
    """

    def __init__(self, engine: Engine, *, session_id: str | None = None,
                 tenant: str = "local", state: SessionState | None = None,
                 rewriter: ModelRewriter | None = None) -> None:
        self.engine = engine
        self.state = state or SessionState.new(session_id or uuid.uuid4().hex[:16], tenant)
        self.rewriter = rewriter if rewriter is not None else engine.rewriter
        self.last_prepared: PreparedTurn | None = None
        self._running: RunHandle | None = None
        self._reading = False

    @property
    def session_id(self) -> str:
        return self.state.session_id

    @property
    def turns(self) -> tuple[Turn, ...]:
        return self.state.turns

    @property
    def summary(self) -> str:
        """The folded older turns ("" until there are enough)."""
        return self.state.summary.text

    def new(self) -> None:
        """Forget the conversation: the next question starts a new one."""
        if self._busy():
            raise RuntimeError("a run of this conversation is still going")
        self.state = SessionState.new(uuid.uuid4().hex[:16], self.state.tenant)
        self.last_prepared = None

    def start(self, question: str, **options: Any) -> RunHandle:
        """Start the next turn's run (options as :meth:`Engine.start`); see :meth:`finish`.

        Reads the follow-up with the offline rules only; with a model ``rewriter``
        use :meth:`astart` (this raises, rather than skip the model unsaid).
        """
        if self.rewriter is not None:
            raise RuntimeError("this conversation reads follow-ups with a model: "
                               "use `await conversation.astart(...)`")
        self._check_idle()
        prepared = prepare_turn(self.state, question, self.engine.judgement.followups)
        return self._launch(prepared, options)

    async def astart(self, question: str, **options: Any) -> RunHandle:
        """:meth:`start`, the model ``rewriter`` (if any) reading the follow-up first."""
        self._check_idle()
        self._reading = True
        try:
            prepared = await aprepare_turn(self.state, question,
                                           self.engine.judgement.followups, self.rewriter)
        finally:
            self._reading = False
        return self._launch(prepared, options)

    async def finish(self, handle: RunHandle) -> RunResult:
        """Wait for the turn's run and add it to the conversation."""
        if handle is not self._running or self.last_prepared is None:
            raise ValueError("not the run this conversation started last")
        result = await handle.wait()
        self.state = await arecord_turn(self.state, self.last_prepared, handle.run_id, result,
                                        self.rewriter)
        return result

    async def ask(self, question: str, **options: Any) -> RunResult:
        """Ask the next question and wait for its answer."""
        return await self.finish(await self.astart(question, **options))

    def _launch(self, prepared: PreparedTurn, options: dict[str, Any]) -> RunHandle:
        handle = self.engine.start(prepared.standalone, context=prepared.context, **options)
        self.last_prepared = prepared
        self._running = handle
        return handle

    def _busy(self) -> bool:
        return self._reading or (self._running is not None and not self._running.done)

    def _check_idle(self) -> None:
        if self._busy():
            raise RuntimeError("a run of this conversation is still going: one at a time")
