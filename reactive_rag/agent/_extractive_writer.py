"""The offline writer: an answer made of sentences copied from the evidence.

With no model to write prose, the honest answer is extractive: pick the few
sentences of the registered evidence that best answer the question and cite
each one. Because every quote is an exact slice of its chunk, verification is
exact by construction; what this module has to get right is *which* sentences.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from actors.models import Embedder
from actors.text import STOPWORDS, content_terms, split_sentences, stem, tokenize
from streams import Claim, ClaimError, EvidenceChunk

from ._policy import Draft, WriteMode

__all__ = ["ExtractiveWriter"]

_SPACE = re.compile(r"\s+")
_LEAD = re.compile(r"^[\s\-*\u2022>#\d.)]*(?=\w)")
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_NUMBER = re.compile(r"\b\d[\d,.]*\b")
_NAME = re.compile(r"\b[A-Z][\w'\-]+(?:\s+(?:of|the|de|van|von|and|&)?\s*[A-Z][\w'\-]+)*")


@dataclass(slots=True)
class _Sentence:
    chunk: EvidenceChunk
    chunk_rank: int
    start: int
    end: int
    terms: frozenset[str]
    words: frozenset[str]
    order: int

    @property
    def quote(self) -> str:
        return self.chunk.text[self.start : self.end]


def _clean(sentence: str) -> str:
    text = _SPACE.sub(" ", sentence).strip()
    m = _LEAD.match(text)
    if m and m.end() < len(text) and not text[: m.end()].strip().isdigit():
        text = text[m.end() :]
    return text


def _answer_type_bonus(question: str, sentence: str, q_words: set[str]) -> float:
    """Small bonus when a sentence holds the kind of thing the question asks for."""
    q = question.lower()
    if q.startswith(("when", "what year", "in what year", "which year")) or "what year" in q:
        return 0.25 if _YEAR.search(sentence) else 0.0
    if q.startswith(("how many", "how much", "how long", "how old", "how tall", "how far")):
        return 0.2 if _NUMBER.search(sentence) else 0.0
    if q.startswith(("who", "whom", "whose")):
        names = (m.group(0) for m in _NAME.finditer(sentence))
        return 0.1 if any(not (set(tokenize(n)) <= q_words) for n in names) else 0.0
    return 0.0


class ExtractiveWriter:
    """Offline :class:`~reactive_rag.agent.WriterPolicy`: 1-4 cited sentences from the evidence.

    Sentences are scored by stemmed keyword coverage of the question (and
    embedding similarity when an ``embedder`` is given), the rank of their
    chunk, their position in the chunk and the kind of answer the question
    asks for; they are then chosen greedily so each new claim covers question
    terms the previous ones did not, preferring other chunks and skipping
    near-duplicates.

    Args:
        embedder: optional sentence embedder for semantic similarity.
        max_claims: at most this many claims (1..4 is sensible).
        min_gain: a further claim must add at least this much score.
        dedup_jaccard: word-set Jaccard at or above which two sentences are duplicates.
        min_quote_words: shorter sentences are not quoted (unless one is a whole chunk).
        embed_top: how many lexically best sentences the embedder re-scores.
    """

    name = "extractive"

    def __init__(
        self,
        embedder: Embedder | None = None,
        *,
        max_claims: int = 4,
        min_gain: float = 0.08,
        dedup_jaccard: float = 0.6,
        min_quote_words: int = 4,
        embed_top: int = 24,
    ) -> None:
        if max_claims < 1:
            raise ValueError("max_claims must be >= 1")
        self._embedder = embedder
        self.max_claims = max_claims
        self.min_gain = min_gain
        self.dedup_jaccard = dedup_jaccard
        self.min_quote_words = min_quote_words
        self.embed_top = embed_top
        # Last draft per question, so a repair knows which claims the errors name.
        self._last: OrderedDict[str, tuple[Claim, ...]] = OrderedDict()

    async def write(
        self,
        question: str,
        evidence: Sequence[EvidenceChunk],
        *,
        mode: WriteMode = "answer",
        errors: Sequence[ClaimError] = (),
        emit_delta: Callable[[str, int | None], None] | None = None,
    ) -> Draft:
        """Select sentences and stream them as cited claims (see the class docstring)."""
        banned_quotes: set[tuple[str, str]] = set()
        banned_chunks: set[str] = set()
        notes: list[str] = []
        if mode == "repair" and errors:
            previous = self._last.get(question, ())
            for err in errors:
                if 0 <= err.index < len(previous):
                    c = previous[err.index]
                    banned_quotes.add((c.source_id, _SPACE.sub(" ", c.quote).strip()))
                else:
                    banned_chunks.add(err.source_id)
            notes.append(f"repair: avoided {len(errors)} rejected claim(s)")
        claims = self.select(
            question, evidence, banned_quotes=banned_quotes, banned_chunks=banned_chunks
        )
        parts: list[str] = []
        for i, claim in enumerate(claims):
            piece = f"{claim.statement} [{i + 1}]"
            if i:
                piece = " " + piece
            parts.append(piece)
            if emit_delta is not None:
                emit_delta(piece, i)
        if not claims:
            notes.append("no usable sentence in the evidence")
        if mode == "finalize":
            notes.append("finalized from registered evidence only")
        self._last[question] = tuple(claims)
        self._last.move_to_end(question)
        while len(self._last) > 64:
            self._last.popitem(last=False)
        return Draft(text="".join(parts), claims=tuple(claims), notes=tuple(notes))

    def _sentences(
        self,
        evidence: Sequence[EvidenceChunk],
        banned_quotes: set[tuple[str, str]],
        banned_chunks: set[str],
    ) -> list[_Sentence]:
        out: list[_Sentence] = []
        for rank, chunk in enumerate(evidence):
            if chunk.id in banned_chunks:
                continue
            spans = split_sentences(chunk.text)
            for order, (s, e) in enumerate(spans):
                text = chunk.text[s:e]
                words = tokenize(text)
                if not words:
                    continue
                if len(words) < self.min_quote_words and text != chunk.text.strip():
                    continue  # too short to verify, unless it is the whole chunk
                if (chunk.id, _SPACE.sub(" ", text).strip()) in banned_quotes:
                    continue
                out.append(
                    _Sentence(
                        chunk=chunk,
                        chunk_rank=rank,
                        start=s,
                        end=e,
                        terms=frozenset(content_terms(text)),
                        words=frozenset(words),
                        order=order,
                    )
                )
        return out

    def select(
        self,
        question: str,
        evidence: Sequence[EvidenceChunk],
        *,
        banned_quotes: set[tuple[str, str]] | None = None,
        banned_chunks: set[str] | None = None,
    ) -> list[Claim]:
        """The claims this writer would write for ``question`` (no streaming)."""
        sentences = self._sentences(evidence, banned_quotes or set(), banned_chunks or set())
        if not sentences:
            return []
        q_terms = set(content_terms(question))
        q_words = set(tokenize(question))
        q_pairs = _pairs(question)
        base: list[float] = []
        reach: list[set[str]] = []  # question terms a sentence covers, with its title
        for s in sentences:
            # Titles count as context: "He was born in 1950" answers a question
            # about the person the chunk is titled after.
            title_terms = set(content_terms(s.chunk.title)) if s.chunk.title else set()
            reach.append(q_terms & (s.terms | title_terms))
            cov = len(q_terms & s.terms) / len(q_terms) if q_terms else 0.0
            ctx = len(q_terms & (s.terms | title_terms)) / len(q_terms) if q_terms else 0.0
            score = 0.45 * cov + 0.35 * ctx
            score += 0.12 / (1.0 + s.chunk_rank) + (0.05 if s.order == 0 else 0.0)
            score += _answer_type_bonus(question, s.quote, q_words)
            score += 0.1 * min(3, len(q_pairs & _pairs(s.quote)))  # shared phrases
            base.append(score)
        if self._embedder is not None:
            # Embedding every sentence of every chunk is too slow for a CPU model;
            # the lexical shortlist decides which sentences get a semantic score.
            shortlist = sorted(range(len(sentences)), key=lambda i: -base[i])[: self.embed_top]
            qv = self._embedder.embed_queries([question])[0]
            pv = self._embedder.embed_passages([sentences[i].quote for i in shortlist])
            for i, sim in zip(shortlist, np.clip(pv @ qv, 0.0, 1.0), strict=True):
                base[i] += 0.5 * float(sim)
        chosen: list[int] = []
        covered: set[str] = set()
        used_chunks: dict[str, int] = {}
        # Multi-hop: a chunk *about* something a chosen sentence names is the next hop.
        title_keys = {s.chunk.id: _title_key(s.chunk.title) for s in sentences}
        linked: set[str] = set()
        while len(chosen) < self.max_claims:
            best, best_gain = -1, float("-inf")
            for i, s in enumerate(sentences):
                if i in chosen or any(
                    _jaccard(s.words, sentences[j].words) >= self.dedup_jaccard for j in chosen
                ):
                    continue
                new_terms = len(reach[i] - covered) / len(q_terms) if q_terms else 0.0
                gain = base[i] + 0.5 * new_terms - 0.15 * used_chunks.get(s.chunk.id, 0)
                if s.chunk.id in linked and new_terms > 0:
                    gain += 0.3
                if chosen:
                    gain -= 0.25  # every extra claim must earn its place
                if gain > best_gain:
                    best, best_gain = i, gain
            if best < 0 or (chosen and best_gain < self.min_gain):
                break
            chosen.append(best)
            covered |= reach[best]
            cid = sentences[best].chunk.id
            used_chunks[cid] = used_chunks.get(cid, 0) + 1
            said = f" {' '.join(tokenize(sentences[best].quote))} "
            linked |= {
                other
                for other, key in title_keys.items()
                if other != cid and key and f" {key} " in said
            }
        return [
            Claim(
                statement=_clean(sentences[i].quote),
                source_id=sentences[i].chunk.id,
                quote=sentences[i].quote,
            )
            for i in chosen
        ]


def _pairs(text: str) -> set[tuple[str, str]]:
    """Stemmed adjacent word pairs, not both stopwords ("plays for" ~ "play for")."""
    words = tokenize(text)
    stems = stem(words)
    return {
        (stems[i], stems[i + 1])
        for i in range(len(words) - 1)
        if not (words[i] in STOPWORDS and words[i + 1] in STOPWORDS)
    }


def _title_key(title: str) -> str:
    """A title as text would mention it: "Winner (band)" -> "winner"."""
    return " ".join(tokenize(re.sub(r"\s*\([^)]*\)\s*$", "", title)))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 1.0
