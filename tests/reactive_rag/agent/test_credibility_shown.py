"""Credibility and conflicts where people see them: citations, the CLI's answer, the live view."""

from __future__ import annotations

import dataclasses
import io
import json

from rich.console import Console

from actors.providers import CredibilitySettings
from actors.rerank import Credibility
from reactive_rag import Citation, RunResult
from reactive_rag import Credibility as Reexported
from reactive_rag.cli._ask import credibility_from, render_result, result_json
from reactive_rag.cli._console import summarize
from streams import (
    Claim,
    Conflict,
    ConflictDetected,
    ConflictSide,
    EvidenceChunk,
    EvidenceRegistered,
    RunFinished,
    RunStarted,
)

GOV = EvidenceChunk(id="g", text="The bridge opened in 1932 to traffic.", title="Bridge register",
                    url="https://roads.example.gov/bridge")
FARM = EvidenceChunk(id="f", text="The bridge opened in 1934 after delays.", title="Bridge facts",
                     url="https://www.ehow.com/bridge")
CONFLICT = Conflict(subject="Bridge", attribute="opened", preferred=0, sides=(
    ConflictSide(chunk_id="g", value="1932", quote="The bridge opened in 1932 to traffic.",
                 credibility=1.3, title="Bridge register"),
    ConflictSide(chunk_id="f", value="1934", quote="The bridge opened in 1934 after delays.",
                 credibility=0.5, title="Bridge facts")))


def _result() -> RunResult:
    claims = (Claim(statement="Bridge, opened: 1932", source_id="g", quote=GOV.text),
              Claim(statement="but 1934", source_id="f", quote=FARM.text))
    events = [RunStarted(question="When did the Bridge open?", ts=1.0),
              EvidenceRegistered(chunks=(GOV, FARM), ts=1.1),
              ConflictDetected.of(CONFLICT).model_copy(update={"ts": 1.2}),
              RunFinished(outcome="answered", answer="Bridge, opened: 1932 [1] but 1934 [2]",
                          claims=claims, ts=2.0)]
    return RunResult.from_events(events)


def test_citations_carry_the_sources_credibility() -> None:
    result = _result()
    assert [c.to_json()["credibility"] for c in result.citations] == [1.3, 0.5]  # defaults
    chosen = dataclasses.replace(result.citations[1], credibility=0.9)
    assert chosen.credibility == 0.9 and chosen.to_json()["credibility"] == 0.9
    assert Citation(1, result.citations[0].claim, None).to_json()["credibility"] is None
    assert Reexported is Credibility


def test_citations_are_weighed_with_the_table_the_run_used() -> None:
    events = list(_result().events)
    mine = Credibility.defaults().merged(domains={"ehow.com": 0.8}, collections={})
    weighed = RunResult.from_events(events, credibility=mine)
    assert [c.credibility for c in weighed.citations] == [1.3, 0.8]


def test_the_cli_answer_shows_credibility_and_the_disagreement() -> None:
    out = io.StringIO()
    render_result(_result(), Console(file=out, width=200, highlight=False, color_system=None))
    text = out.getvalue()
    assert "credibility 1.3" in text and "credibility 0.5" in text
    assert ("sources disagree on opened of Bridge: 1932 (Bridge register, credibility 1.3, "
            "preferred) vs 1934 (Bridge facts, credibility 0.5)") in text
    data = json.loads(json.dumps(result_json(_result())))
    assert data["conflicts"] == [CONFLICT.model_dump(mode="json")]
    assert data["citations"][0]["credibility"] == 1.3


def test_the_live_view_summarises_a_conflict_in_one_line() -> None:
    line = summarize(ConflictDetected.of(CONFLICT))
    assert line.startswith("opened of Bridge: 1932 (Bridge register, credibility 1.3, preferred)")
    assert "\n" not in line


def test_tenant_settings_make_the_table() -> None:
    mine = credibility_from(CredibilitySettings(domains={"ehow.com": 0.8}))
    assert mine.for_domain("ehow.com") == 0.8 and mine.for_domain("irs.gov") == 1.3
    only = credibility_from(CredibilitySettings(domains={"a.example": 2.0}, defaults=False))
    assert only.for_domain("irs.gov") is None and only.for_domain("a.example") == 2.0
