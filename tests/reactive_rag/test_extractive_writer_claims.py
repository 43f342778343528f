"""The offline writer answers with evidence sentences whose citations always verify."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.models import HashingEmbedder
from reactive_rag.agent import ExtractiveWriter, verify
from streams import ClaimError, EvidenceChunk

DIAMOND = EvidenceChunk(
    id="d1",
    title="2015 Diamond Head Classic",
    text=(
        "The 2015 Diamond Head Classic was a college basketball tournament held in "
        "Honolulu, Hawaii. The tournament began on December 22, 2015.  Buddy Hield was "
        "named the tournament's MVP after leading Oklahoma to the title."
    ),
)
HIELD = EvidenceChunk(
    id="h1",
    title="Buddy Hield",
    text=(
        'Chavano Rainier "Buddy" Hield is a Bahamian professional basketball player. '
        "He plays for the Sacramento Kings of the National Basketball Association (NBA). "
        "He was born on December 17, 1992 in Freeport, Bahamas."
    ),
)
NOISE = EvidenceChunk(
    id="n1",
    title="Honolulu",
    text="Honolulu is the capital of Hawaii. It lies on the island of Oahu.",
)
EVIDENCE = [DIAMOND, HIELD, NOISE]
REGISTRY = {c.id: c for c in EVIDENCE}
QUESTION = "Which team does the player named 2015 Diamond Head Classic's MVP play for?"


async def test_claims_quote_their_chunks_exactly_and_verify() -> None:
    draft = await ExtractiveWriter().write(QUESTION, EVIDENCE, mode="answer")
    assert 1 <= len(draft.claims) <= 4
    for claim in draft.claims:
        assert claim.quote in REGISTRY[claim.source_id].text
    result = verify(draft.claims, REGISTRY, fuzzy_threshold=1.0)
    assert result.passed and not result.errors


async def test_multi_hop_answer_cites_both_hops_and_skips_noise() -> None:
    draft = await ExtractiveWriter().write(QUESTION, EVIDENCE, mode="answer")
    cited = {c.source_id for c in draft.claims}
    assert {"d1", "h1"} <= cited
    assert any("Sacramento Kings" in c.statement for c in draft.claims)
    assert any("MVP" in c.statement for c in draft.claims)


async def test_text_has_numbered_citations_and_is_streamed_claim_by_claim() -> None:
    pieces: list[tuple[str, int | None]] = []
    draft = await ExtractiveWriter().write(
        QUESTION, EVIDENCE, mode="answer", emit_delta=lambda t, i: pieces.append((t, i))
    )
    assert "".join(t for t, _ in pieces) == draft.text
    assert [i for _, i in pieces] == list(range(len(draft.claims)))
    assert re.findall(r"\[(\d+)\]", draft.text) == [str(i + 1) for i in range(len(draft.claims))]
    for claim in draft.claims:
        assert claim.statement in draft.text


async def test_answer_type_prefers_a_sentence_with_a_year() -> None:
    draft = await ExtractiveWriter(max_claims=1).write(
        "When was Buddy Hield born?", EVIDENCE, mode="answer"
    )
    assert len(draft.claims) == 1 and "1992" in draft.claims[0].quote


async def test_near_duplicate_sentences_are_not_repeated() -> None:
    twin = EvidenceChunk(
        id="h2", title="Buddy Hield", text=HIELD.text.replace("He plays", "He currently plays")
    )
    draft = await ExtractiveWriter().write(
        "Who does Buddy Hield play for?", [HIELD, twin], mode="answer"
    )
    statements = [c.statement for c in draft.claims]
    assert sum("Sacramento Kings" in s for s in statements) == 1


async def test_repair_avoids_the_claims_named_in_errors() -> None:
    writer = ExtractiveWriter()
    first = await writer.write(QUESTION, EVIDENCE, mode="answer")
    bad = first.claims[0]
    errors = [ClaimError(index=0, source_id=bad.source_id, reason="quote not found")]
    second = await writer.write(QUESTION, EVIDENCE, mode="repair", errors=errors)
    assert bad not in second.claims
    assert second.claims
    assert any("repair" in n for n in second.notes)


async def test_repair_without_a_remembered_draft_avoids_the_named_chunk() -> None:
    errors = [ClaimError(index=7, source_id="h1", reason="unknown source id")]
    draft = await ExtractiveWriter().write(QUESTION, EVIDENCE, mode="repair", errors=errors)
    assert draft.claims and all(c.source_id != "h1" for c in draft.claims)


async def test_finalize_uses_the_same_selection() -> None:
    writer = ExtractiveWriter()
    answer = await writer.write(QUESTION, EVIDENCE, mode="answer")
    final = await writer.write(QUESTION, EVIDENCE, mode="finalize")
    assert final.claims == answer.claims
    assert any("evidence only" in n for n in final.notes)


async def test_no_evidence_gives_no_claims() -> None:
    draft = await ExtractiveWriter().write(QUESTION, [], mode="answer")
    assert draft.claims == () and draft.text == ""
    assert draft.notes


async def test_embedder_is_used_when_given() -> None:
    draft = await ExtractiveWriter(HashingEmbedder()).write(QUESTION, EVIDENCE, mode="answer")
    assert verify(draft.claims, REGISTRY).passed
    assert {"d1", "h1"} <= {c.source_id for c in draft.claims}


def test_max_claims_is_validated() -> None:
    with pytest.raises(ValueError):
        ExtractiveWriter(max_claims=0)


_sentence = st.lists(
    st.sampled_from(
        [
            "the",
            "a",
            "tower",
            "river",
            "1889",
            "Paris",
            "built",
            "bridge",
            "old",
            "new",
            "ships",
            "city",
            "was",
            "is",
            "by",
            "of",
            "in",
            "“quoted”",
            "it's",
            "e.g.",
            "Dr.",
            "well-known",
            "3.5",
            "km",
        ]
    ),
    min_size=1,
    max_size=14,
).map(lambda ws: " ".join(ws).capitalize() + ".")


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.lists(_sentence, min_size=1, max_size=5), min_size=1, max_size=4),
    question=st.sampled_from(["When was the tower built?", "Which city has old ships?", "x"]),
)
async def test_every_quote_verifies_on_random_evidence(
    texts: list[list[str]], question: str
) -> None:
    evidence = [
        EvidenceChunk(id=f"c{i}", text="  ".join(sents), title="T") for i, sents in enumerate(texts)
    ]
    draft = await ExtractiveWriter().write(question, evidence, mode="answer")
    assert len(draft.claims) <= 4
    if draft.claims:
        result = verify(draft.claims, {c.id: c for c in evidence})
        assert not result.errors, result.errors


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=3),
    question=st.text(max_size=60),
)
async def test_arbitrary_unicode_evidence_still_verifies(texts: list[str], question: str) -> None:
    evidence = [EvidenceChunk(id=f"u{i}", text=t) for i, t in enumerate(texts)]
    draft = await ExtractiveWriter().write(question, evidence, mode="answer")
    for claim in draft.claims:
        assert claim.quote in next(c.text for c in evidence if c.id == claim.source_id)
    result = verify(draft.claims, {c.id: c for c in evidence})
    assert not result.errors, result.errors
