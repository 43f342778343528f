"""The machine announces disagreements in the writer's evidence once and keeps them for repairs."""

from __future__ import annotations

from dataclasses import replace

from reactive_rag.judgement.offline import offline_judgement
from reactive_rag.run import Phase, initial_state, step
from streams import (
    AnswerDrafted,
    AnswerRequested,
    Claim,
    ClaimError,
    ConflictDetected,
    EvidenceChunk,
    RerankCompleted,
    RunStarted,
    VerifyFailed,
)

QUESTION = "When was Mira Castellane born?"
OWN_PAGE = EvidenceChunk(id="a", title="Mira Castellane", doc_id="a",
                         text="Mira Castellane (born 4 March 1921) was a French painter.")
LIST_PAGE = EvidenceChunk(id="b", title="Ten painters", doc_id="b",
                          text="Mira Castellane was born in 1923 in Lyon.")


def of(commands: list, cls: type) -> list:  # type: ignore[type-arg]
    return [c for c in commands if isinstance(c, cls)]


def selecting(*chunks: EvidenceChunk):  # type: ignore[no-untyped-def]
    state, _ = step(initial_state(judgement=offline_judgement()),
                    RunStarted(question=QUESTION, ts=100.0))
    return replace(state, phase=Phase.SELECTING, evidence={c.id: c for c in chunks})


def test_conflicting_years_are_announced_and_handed_to_the_writer() -> None:
    state = selecting(OWN_PAGE, LIST_PAGE)
    state, cmds = step(state, RerankCompleted(call_id="final", query=QUESTION,
                                              chunks=(OWN_PAGE, LIST_PAGE), ts=101.0))
    detected = of(cmds, ConflictDetected)
    assert len(detected) == 1
    assert {s.value for s in detected[0].sides} == {"4 March 1921", "1923"}
    request = of(cmds, AnswerRequested)[0]
    assert cmds.index(detected[0]) < cmds.index(request), "announced before the writer is asked"
    assert request.conflicts and request.conflicts[0].subject == "Mira Castellane"
    # a repair of the same draft keeps the conflicts but does not announce them again
    state, _ = step(state, AnswerDrafted(text="x", claims=(Claim(statement="x", source_id="a",
                                                                 quote="x"),), ts=102.0))
    state, cmds = step(state, VerifyFailed(errors=(ClaimError(index=0, source_id="a",
                                                              reason="quote too short"),),
                                           ts=103.0))
    assert not of(cmds, ConflictDetected)
    assert of(cmds, AnswerRequested)[0].conflicts == request.conflicts


def test_agreeing_evidence_announces_nothing() -> None:
    same = LIST_PAGE.model_copy(update={"text": "Mira Castellane was born in 1921 in Lyon."})
    state = selecting(OWN_PAGE, same)
    _, cmds = step(state, RerankCompleted(call_id="final", query=QUESTION,
                                          chunks=(OWN_PAGE, same), ts=101.0))
    assert not of(cmds, ConflictDetected)
    assert of(cmds, AnswerRequested)[0].conflicts == ()
