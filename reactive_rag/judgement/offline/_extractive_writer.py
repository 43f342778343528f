"""The offline writer: an answer made of sentences copied from the evidence.

With no model to write prose, the honest answer is extractive: pick the few
sentences of the registered evidence that best answer the question and cite
each one. Because every quote is an exact slice of its chunk, verification is
exact by construction; what this module has to get right is *which* sentences,
and that each reads as an answer: prose only (never code, a signature, a
heading or markup), no private internals the question did not ask about, no
repeats, and with its subject. A sentence that relies on its chunk's title for
its subject ("Least-recently-used cache decorator.", "He was born in 1992.")
gets the title in front of its statement; the quote stays the exact sentence.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from actors.models import Embedder
from actors.text import (
    CJK,
    STOPWORDS,
    content_terms,
    jaccard,
    looks_like_code,
    split_sentences,
    stem,
    tokenize,
)
from streams import Claim, ClaimError, EvidenceChunk, WriteMode

from .._policy import Draft, WriterBase
from ._choice import Choice, answer_choice
from ._question import desubjectivize
from ._sufficiency import analyse_question, holds_new_value, term_weight
from ._yes_no import YesNo, answer_yes_no

__all__ = ["ExtractiveWriter"]

_SPACE = re.compile(r"\s+")
# List markers and bullets in front of a sentence ("- ", "2) ", "> "), not "3.5" or "-1".
_LEAD = re.compile(r"^(?:\s+|[-*\u2022>#]+(?=\s)|\d{1,3}[.)](?=\s))+(?=\S)")
# Answer kinds whose answer is a value a sentence can hold (see :func:`holds_new_value`).
_VALUE_KINDS = frozenset(["when", "how_many", "who", "where", "what"])
# How much holding a new value of the asked kind adds to a sentence's score.
_VALUE_BONUS = {"when": 0.25, "how_many": 0.2, "who": 0.1, "where": 0.1, "what": 0.05}
# "How do I ...", "how to ...", "what is the best way to ...": the answer is a thing to use.
_HOW_TO = re.compile(
    r"^\s*(?:how\s+(?:do|can|could|should|would|might)\s+(?:i|you|we|one)\b|how\s+to\b"
    r"|(?:what(?:'s|\s+is)\s+(?:the\s+)?(?:best|right|easiest|simplest)\s+way\s+to)"
    r"|(?:which|what)\s+(?:function|method|class|module|api|library|tool|command)s?\b)",
    re.IGNORECASE,
)
# An API name: a dotted or snake_case identifier path ("functools.lru_cache", "os.path").
_API_NAME = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?:\(\))?$")
_PRIVATE_IDENT = re.compile(r"(?<![\w.])(?:[A-Za-z]\w*\.)*_[A-Za-z]\w*|\b\w+\._[A-Za-z]\w*")
# A sentence leaning on its context for its subject.
_PRONOUN_LEAD = re.compile(
    r"^(?:he|she|it|they|his|her|its|their|this|these|those|that|such)\b(?!-)", re.IGNORECASE
)
# Arg-clinic docstrings: "string, format -> new datetime parsed from a string".
_ARROW_LEAD = re.compile(r"^[\w\s,.*/\[\]=]{0,60}?\s->\s+(?=\w)")
# A section header: a paragraph that is an API name or its signature ("pkg.mod.fn(x, y)").
_HEADER = re.compile(
    r"^(?:(?:async\s+)?def\s+|class\s+)?([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\s*"
    r"(?:\((?:[^()]|\([^()]*\))*\))?\s*(?:->\s*\S.*)?:?$"
)
# A row of a "term  description" table: "fullmatch Match a ...", "PIPE: Special value ...".
_TERM_LEAD = re.compile(
    r"^(?:[\w.]*[(_%][^\s:]*|[A-Z][A-Z0-9_]{2,}|[a-z][\w.]*|\"[^\"\s]{1,6}\")\s*(?::|--)?"
    r"\s+[A-Z\"(]"
)
# Prose that opens with an acronym's name ("ACME Radio Hour is an American ..."),
# not a table row ("PIPE Special value that ...").
_NAME_IS = re.compile(r"^[A-Z][A-Z0-9]{1,}(?:\s+[A-Z][\w'&.-]*){1,5}\s+(?:is|was|are|were)\s")
_POSSESSIVE = re.compile(r"(?:'s|\u2019s|'|\u2019)$")
_MAX_CLAIM_WORDS = 80
# Score lost by a sentence from a chunk about nothing the question names (see :func:`_astray`).
_ASTRAY_PENALTY = 0.3
# Where a value question names what it counts or dates (see :func:`_focus`).
_FOCUS = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"\bwhat(?:'s|\s+(?:is|are|was|were))\s+the\s+(?:\w+\s+)?(\w+)\s+of\b",
    r"\b([a-z]+)\s+(?:in\s+)?(?:how\s+(?:many|much)|(?:what|which)\s+year)\b",
    r"\bhow\s+(?:many|much)\s+(\w+)",
    r"^\s*(?:when|(?:in\s+)?(?:what|which)\s+year)\b.*?\b([a-z]+)\s*\??\s*$",
))
_ASKING_WORDS = frozenset(["is", "are", "was", "were", "did", "does", "do", "the", "of", "in",
                           "it", "they", "he", "she", "that", "which", "first", "last"])
# Score lost by a sentence all of whose words are the question's own.
_ECHO_PENALTY = 0.3
_HOPS = 2  # a bridge question's answer may sit two links away from what it names
_ANSWER_CAP = 4  # an answer sentence may be a claim beyond max_claims, up to this many
_PARA_BEFORE = re.compile(r"(?:^|\n[ \t]*\n)[ \t]*$")
_PARA_AFTER = re.compile(r"[ \t]*(?:\n[ \t]*\n|$)")
_MARKUP = re.compile(
    r"<!--|-->|</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>|\]\(|```|^#{1,6}\s|\s\|\s|^\s*\||"
    r"^\s*(?:={3,}|-{3,}|\*{3,})\s*$",
    re.MULTILINE,
)


@dataclass(slots=True)
class _Sentence:
    chunk: EvidenceChunk
    chunk_rank: int
    start: int
    end: int
    terms: frozenset[str]
    words: frozenset[str]
    order: int  # among its section's usable sentences: 0 is the lead (a docstring summary)
    statement: str
    subject: str  # what it is about: its section's API name or its chunk's title

    @property
    def quote(self) -> str:
        return self.chunk.text[self.start : self.end]


def _clean(sentence: str) -> str:
    text = _SPACE.sub(" ", sentence).strip()
    m = _LEAD.match(text)
    if m and m.end() < len(text):
        text = text[m.end() :]
    return text


def _subject(title: str) -> str:
    """What a chunk is about, from its title: "Winner (band)" -> "Winner"."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", title).strip()


def _is_api_name(subject: str) -> bool:
    """``functools.lru_cache``, ``os.path``, ``lru_cache``: a name to call, not a page title."""
    return bool(_API_NAME.match(subject)) and ("." in subject or "_" in subject)


def _private(subject: str) -> str | None:
    """The private part of an API name (``_get_running_loop`` in ``asyncio._get_running_loop``)."""
    if not _API_NAME.match(subject):
        return None
    for part in subject.removesuffix("()").split("."):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            return part
    return None


def _asks_not_for(private: str | None, question_lower: str) -> bool:
    """A private name the question does not mention."""
    return private is not None and private.lower() not in question_lower


def _section_name(text: str, start: int, end: int) -> str | None:
    """The API name a header paragraph introduces, if ``text[start:end]`` is one."""
    if not (_PARA_BEFORE.search(text, 0, start) and _PARA_AFTER.match(text, end)):
        return None
    m = _HEADER.match(_SPACE.sub(" ", text[start:end]).strip())
    return m.group(1) if m else None


def _not_a_claim(chunk: EvidenceChunk, start: int, end: int, subject: str) -> bool:
    """Code, a signature, a heading/label, a question, markup, or the title again."""
    text = chunk.text[start:end]
    line_start = chunk.text.rfind("\n", 0, start) + 1
    lead = chunk.text[line_start:start]
    if not lead.strip() and len(lead.replace("\t", "    ")) >= 4:
        return True  # a line of an indented code block
    if looks_like_code(text):
        return True
    flat = _SPACE.sub(" ", text).strip()
    if flat.endswith((":", "?")):
        return True  # a heading or the label of what follows; a question is no answer
    table_row = bool(_TERM_LEAD.match(flat)) and not _NAME_IS.match(flat)
    if _MARKUP.search(text) or table_row or len(flat.split()) > _MAX_CLAIM_WORDS:
        return True  # markup, a table row, or a run-on too long to read as one claim
    _, colon, tail = flat.partition(": ")
    if colon and looks_like_code(tail):
        return True  # "Equivalent to: sorted(...)": the point is the code
    terms = set(content_terms(flat))
    return bool(terms) and bool(subject) and terms <= set(content_terms(subject))


def _statement(quote: str, subject: str) -> str:
    """The quote as a claim, with its subject in front when the sentence lacks it.

    Only words of the quote and of the chunk title ever appear: the subject is
    the title, and nothing else is added.
    """
    text = _clean(quote)
    arrow = _ARROW_LEAD.match(text)
    if arrow and len(text) > arrow.end():
        text = text[arrow.end() :]
        text = text[:1].upper() + text[1:]
    if not subject:
        return text
    low = text.lower()
    if _is_api_name(subject):
        if subject.lower() in low:
            return text
        return f"{subject}: {text}"
    if CJK.search(subject) and subject in text:  # a Chinese subject, named as written
        return text
    wanted = {w for w in tokenize(subject) if w not in STOPWORDS and not w.isdigit()}
    if _PRONOUN_LEAD.match(text) or (wanted and not wanted & set(tokenize(text))):
        return f"{subject}: {text}"
    return text


class ExtractiveWriter(WriterBase):
    """Offline :class:`~reactive_rag.agent.WriterPolicy`: 1-4 cited sentences from the evidence.

    Sentences are scored by stemmed keyword coverage of the question (and
    embedding similarity when an ``embedder`` is given), the rank of their
    chunk, their position in the chunk and the kind of answer the question
    asks for; they are then chosen greedily so each new claim covers question
    terms the previous ones did not, preferring other chunks and skipping
    near-duplicates.

    Only prose is quoted: code (blocks, lines, signatures), headings and labels
    (a sentence ending in ``:``), questions, markup, "term  description" table
    rows, run-ons and a sentence that only repeats its chunk's title are never
    claims, and neither is anything about a private name (``_x``, ``a._b``)
    the question does not mention. A sentence's subject is the API name of the
    section it sits in (a header paragraph such as ``pkg.mod.fn(x, y)``) or
    its chunk's title; when the sentence does not name it (or leans on a
    pronoun), the statement is ``"subject: sentence"``. A how-to question
    leads with what an API is for (the first sentence of its section), a
    question naming an API with that API's own summary; later claims must add
    to the lead (its subject, or question terms it left open) and, with an
    embedder, stay close to what the question asks.

    A question asking for a value (a year or date for "when", a number for
    "how many", a name for "who" / "where" / "what") is answered by a sentence
    holding one the question does not give; on a multi-hop question it is in
    the next hop, a chunk a chosen claim names that the question does not. The
    claims include such a sentence as the first or second claim, and for "who"
    / "what" a sentence giving the new name beside the question's relation
    ("hosted by ...") and the first sentence of the chunk about the answer
    (its full name); each of these may be a claim beyond ``max_claims`` (never
    more than four in all). "What is X?" leads with X's own first sentence.
    The claim holding the value then leads (one from the next hop first), a
    "how many N" / "the N of" / "founded in what year" question quotes a
    sentence saying N or "founded", and the relation words are weighted by
    how rare they are. A sentence from a chunk about nothing the question
    names (not mentioning a named thing, not one or two links from one)
    scores lower and its values are no answer, as does a sentence that only
    restates the question. "Which is older, A or B?" leads with the verdict
    of :func:`~reactive_rag.judgement.offline._choice.answer_choice`.

    Args:
        embedder: optional sentence embedder for semantic similarity.
        max_claims: at most this many claims (1..4 is sensible), plus one answer
            sentence when the others lack it (at most four in all).
        min_gain: a further claim must add at least this much score.
        dedup_jaccard: word-set Jaccard at or above which two sentences are duplicates.
        min_quote_words: shorter sentences are not quoted (unless one is a whole chunk).
        embed_top: how many lexically best sentences the embedder re-scores.
        support_similarity: with an embedder, a claim after the first needs at least
            this share of the first claim's similarity to the question (a passage
            that the lead's subject links to, the next hop, is exempt).
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
        support_similarity: float = 0.5,
    ) -> None:
        if max_claims < 1:
            raise ValueError("max_claims must be >= 1")
        self._embedder = embedder
        self.max_claims = max_claims
        self.min_gain = min_gain
        self.dedup_jaccard = dedup_jaccard
        self.min_quote_words = min_quote_words
        self.embed_top = embed_top
        self.support_similarity = support_similarity
        # Last draft per question, so a repair knows which claims the errors name.
        self._last: OrderedDict[str, tuple[Claim, ...]] = OrderedDict()

    def restore_draft(self, question: str, claims: Sequence[Claim]) -> None:
        """Remember a draft written before a crash (a resumed run's repair names its claims)."""
        self._last[question] = tuple(claims)
        self._last.move_to_end(question)
        while len(self._last) > 64:
            self._last.popitem(last=False)

    async def write(
        self,
        question: str,
        evidence: Sequence[EvidenceChunk],
        *,
        mode: WriteMode = "answer",
        errors: Sequence[ClaimError] = (),
    ) -> Draft:
        """Select sentences as cited claims (see the class docstring)."""
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
        # Selection embeds sentences (CPU-bound with a local model): a worker thread,
        # as the reranker does, so the loop keeps serving the other actors meanwhile.
        claims = await asyncio.to_thread(
            self.select, question, evidence, banned_quotes=banned_quotes,
            banned_chunks=banned_chunks,
        )
        lead = ""
        needs = analyse_question(question)
        if needs.answer_type in ("yes_no", "choice") and not banned_quotes and not banned_chunks:
            # A yes/no question is answered by a word, "A or B: which is older?" by a
            # name, each inferred from one description of each named thing; those
            # descriptions come first, then the other claims.
            verdict: YesNo | Choice | None = (
                answer_yes_no(question, needs.entities, evidence)
                if needs.answer_type == "yes_no" else answer_choice(question, needs.names, evidence)
            )
            if verdict is not None:
                lead = verdict.lead
                quoted = {(c.source_id, c.quote) for c in verdict.claims}
                rest = [c for c in claims if (c.source_id, c.quote) not in quoted]
                claims = [*verdict.claims, *rest][: max(self.max_claims, len(verdict.claims))]
        parts: list[str] = [lead] if lead else []
        for i, claim in enumerate(claims):
            piece = f"{claim.statement} [{i + 1}]"
            if parts:
                piece = " " + piece
            parts.append(piece)
        if not claims:
            notes.append("no usable sentence in the evidence")
        if mode == "finalize":
            notes.append("finalized from registered evidence only")
        self._last[question] = tuple(claims)
        self._last.move_to_end(question)
        while len(self._last) > 64:
            self._last.popitem(last=False)
        return Draft(text="".join(parts), claims=tuple(claims), notes=tuple(notes), lead=lead)

    def _sentences(
        self,
        question: str,
        evidence: Sequence[EvidenceChunk],
        banned_quotes: set[tuple[str, str]],
        banned_chunks: set[str],
    ) -> list[_Sentence]:
        out: list[_Sentence] = []
        q_low = question.lower()
        for rank, chunk in enumerate(evidence):
            if chunk.id in banned_chunks:
                continue
            # What a sentence is about: its section's API name, else the chunk's title.
            title_subject = _subject(chunk.title) if chunk.title else ""
            subject = title_subject
            if _asks_not_for(_private(title_subject), q_low):
                continue  # internals are not answers unless asked about by name
            order = 0
            for s, e in split_sentences(chunk.text):
                text = chunk.text[s:e]
                section = _section_name(chunk.text, s, e)
                if section is not None:
                    subject, order = section, 0
                    continue
                words = tokenize(text)
                if not words:
                    continue
                if len(words) < self.min_quote_words and text != chunk.text.strip():
                    continue  # too short to verify, unless it is the whole chunk
                if _asks_not_for(_private(subject), q_low):
                    continue
                if _not_a_claim(chunk, s, e, subject):
                    continue
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
                        statement=_statement(text, subject),
                        subject=subject,
                    )
                )
                order += 1
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
        sentences = self._sentences(
            question, evidence, banned_quotes or set(), banned_chunks or set()
        )
        if not sentences:
            return []
        q_terms = set(content_terms(question))
        q_pairs = _pairs(question)
        needs = analyse_question(question)
        kind = needs.answer_type
        wants_value = kind in _VALUE_KINDS
        q_mention = f" {' '.join(_mention_words(question))} "
        # A passage neither about a named thing of the question nor a hop from one
        # is about something else, however many of the question's words it shares;
        # a value it holds is not the one asked for.
        astray = _astray(sentences, needs.names)
        value = [wants_value and s.chunk.id not in astray
                 and holds_new_value(kind, s.quote, question) for s in sentences]
        q_low = question.lower()
        asked = desubjectivize(question) or question
        how = _HOW_TO.match(asked)
        # "How do I cache ...": the action asked about, which the thing to use must do.
        action = next(iter(content_terms(asked[how.end() :])), None) if how else None
        # What each API section says as a whole: its lead sentence stands for it.
        section_terms: dict[tuple[str, str], set[str]] = {}
        for s in sentences:
            section_terms.setdefault((s.chunk.id, s.subject), set()).update(s.terms)
        q_names = {m.group(0).lower() for m in re.finditer(r"[A-Za-z_][\w.]*", question)}

        def named_api(subject: str) -> bool:
            """The question names this API: all of it, or its last part as an identifier."""
            if not _is_api_name(subject):
                return False
            low = subject.lower()
            last = low.rsplit(".", 1)[-1]
            return low in q_names or (("_" in last or f"{last}(" in q_low) and last in q_names)

        base: list[float] = []
        does: list[bool] = []  # the sentence, its title or subject names the asked action
        reach: list[set[str]] = []  # question terms a sentence covers, with its title
        lead_reach: list[set[str]] = []  # ... and, leading a how-to answer, with its section
        for idx, s in enumerate(sentences):
            # Titles count as context: "He was born in 1950" answers a question
            # about the person the chunk is titled after.
            title_terms = set(content_terms(s.chunk.title)) if s.chunk.title else set()
            title_terms |= set(content_terms(s.subject))
            context = s.terms | title_terms
            if how and s.order == 0 and _is_api_name(s.subject):
                # "How do I ...": what the API's docs cover is what its summary answers.
                context = context | section_terms[(s.chunk.id, s.subject)]
            reach.append(q_terms & (s.terms | title_terms))
            lead_reach.append(q_terms & context)
            cov = len(q_terms & s.terms) / len(q_terms) if q_terms else 0.0
            ctx = len(q_terms & context) / len(q_terms) if q_terms else 0.0
            score = 0.45 * cov + 0.35 * ctx
            score += 0.12 / (1.0 + s.chunk_rank) + (0.05 if s.order == 0 else 0.0)
            score += _VALUE_BONUS.get(kind, 0.0) if value[idx] else 0.0
            score += 0.1 * min(3, len(q_pairs & _pairs(s.quote)))  # shared phrases
            if how and s.order == 0 and _is_api_name(s.subject):
                score += 0.25  # what the API is for: the direct answer to "how do I"
            if s.order == 0 and named_api(s.subject):
                score += 0.4  # "What does x.y do?": what x.y's docs say first
            does.append(bool(action) and action in (s.terms | title_terms
                                                    | set(content_terms(s.subject))))
            if does[-1]:
                score += 0.2
            if any(m.group(0).lower() not in q_low for m in _PRIVATE_IDENT.finditer(s.quote)):
                score -= 0.3  # leans on internals the question did not name
            if s.chunk.id in astray:
                score -= _ASTRAY_PENALTY
            if q_terms and s.terms and s.terms <= q_terms:
                score -= _ECHO_PENALTY  # says only what the question says: no answer in it
            base.append(score)
        sims: dict[int, float] = {}  # semantic similarity to the question, where measured
        if self._embedder is not None:
            # Embedding every sentence of every chunk is too slow for a CPU model;
            # the lexical shortlist decides which sentences get a semantic score.
            shortlist = sorted(range(len(sentences)), key=lambda i: -base[i])[: self.embed_top]
            qv = self._embedder.embed_queries([question])[0]
            pv = self._embedder.embed_passages([sentences[i].quote for i in shortlist])
            for i, sim in zip(shortlist, np.clip(pv @ qv, 0.0, 1.0), strict=True):
                base[i] += 0.5 * float(sim)
                sims[i] = float(sim)
        chosen: list[int] = []
        covered: set[str] = set()
        used_chunks: dict[str, int] = {}
        # Multi-hop: a chunk *about* something a chosen sentence names is the next hop.
        title_keys = {s.chunk.id: _title_key(s.chunk.title) for s in sentences}
        linked: set[str] = set()
        while len(chosen) < self.max_claims:
            best, best_gain = -1, float("-inf")
            for i, s in enumerate(sentences):
                if i in chosen or any(self._repeats(s, sentences[j]) for j in chosen):
                    continue
                reaches = reach[i] if chosen else lead_reach[i]
                new_terms = len(reaches - covered) / len(q_terms) if q_terms else 0.0
                gain = base[i] + 0.5 * new_terms - 0.15 * used_chunks.get(s.chunk.id, 0)
                if s.chunk.id in linked and (new_terms > 0 or value[i]):
                    gain += 0.3  # the next hop: new words, or the value asked for
                if chosen:
                    if (action and not does[i] and len(reach[i]) < 2
                            and s.subject != sentences[chosen[0]].subject):
                        continue  # "How do I cache ...": a claim about something else
                    lead_sim = sims.get(chosen[0])
                    if (lead_sim is not None and i in sims and s.chunk.id not in linked
                            and sims[i] < self.support_similarity * lead_sim):
                        continue  # shares the question's words, not what it asks
                    gain -= 0.25  # every extra claim must earn its place
                    if new_terms == 0 and s.subject != sentences[chosen[0]].subject:
                        gain -= 0.2  # neither says more about the answer nor covers more
                if gain > best_gain:
                    best, best_gain = i, gain
            if best < 0 or (chosen and best_gain < self.min_gain):
                break
            chosen.append(best)
            covered |= reach[best]
            cid = sentences[best].chunk.id
            used_chunks[cid] = used_chunks.get(cid, 0) + 1
            said = f" {' '.join(_mention_words(sentences[best].quote))} "
            linked |= {
                other
                for other, key in title_keys.items()
                if other != cid and key and f" {key} " in said
            }
        if kind == "definition" and chosen:
            chosen = self._with_definition(sentences, chosen, base, q_mention)
        if wants_value and chosen:
            # The answer sentence: a value of the asked kind, from the next hop if there is one.
            named = {s.chunk.id for s in sentences
                     if s.chunk.title and f" {title_keys[s.chunk.id]} " in q_mention}
            hops = linked - named
            chosen = self._with_value(sentences, chosen, value, base, hops)
            focus = _focus(question) if kind in ("when", "how_many") else set()
            if focus:
                chosen = self._with_focus(sentences, chosen, value, base, focus, astray)
            if kind in ("who", "what", "where"):
                # The answer claim may link on too: "a friend of X" -> X's own chunk.
                said = " ".join(f" {' '.join(_mention_words(sentences[i].quote))} "
                                for i in chosen)
                linked |= {cid for cid, key in title_keys.items() if key and f" {key} " in said}
                near = {sentences[i].chunk.id for i in chosen} | linked | named
                relation = {t: term_weight(w) for w, t in zip(needs.words, needs.terms,
                                                              strict=True)}
                chosen = self._with_relation(sentences, chosen, value, base, near, relation)
            if kind in ("who", "what"):
                chosen = self._with_introduction(sentences, chosen, named)
            relation_terms = set(needs.terms)
            direct = [bool(relation_terms) and relation_terms <= _plain_terms(sentences[i].quote)
                      and (kind != "who" or _new_person(sentences[i].quote, question))
                      for i in chosen]
            chosen = _answer_first(chosen, value, [sentences[i].chunk.id in hops for i in chosen],
                                   direct)
        return [
            Claim(
                statement=sentences[i].statement,
                source_id=sentences[i].chunk.id,
                quote=sentences[i].quote,
            )
            for i in chosen
        ]

    @property
    def _room(self) -> int:
        """How many claims a draft may have once an answer sentence joins it."""
        return max(self.max_claims, min(_ANSWER_CAP, self.max_claims + 1))

    def _join(self, chosen: list[int], i: int, at: int) -> list[int]:
        """``chosen`` with sentence ``i`` at position ``at``, cut to :attr:`_room`."""
        return [*chosen[:at], i, *chosen[at:]][: self._room]

    def _with_definition(
        self,
        sentences: Sequence[_Sentence],
        chosen: list[int],
        base: Sequence[float],
        q_mention: str,
    ) -> list[int]:
        """ "What is X?" leads with what X's own chunk says first, when it names X itself.

        A sentence that mentions X in passing ("a steamer based at X") matches
        the question's words as well, but says what something else is. Of the
        chunks the question names, the one named first is X.
        """
        firsts: dict[int, int] = {}  # intro sentence -> where the question names its chunk
        for i, s in enumerate(sentences):
            key = _title_key(s.chunk.title) if s.chunk.title else ""
            at = q_mention.find(f" {key} ") if key else -1
            if at >= 0 and s.order == 0 and s.statement == _clean(s.quote):
                firsts[i] = at
        if not firsts:
            return chosen
        lead = min(firsts, key=lambda i: (firsts[i], -base[i]))
        if chosen[0] == lead:
            return chosen
        rest = [i for i in chosen if i != lead and not self._repeats(sentences[i], sentences[lead])]
        return [lead, *rest][: self._room]

    def _with_value(
        self,
        sentences: Sequence[_Sentence],
        chosen: list[int],
        value: Sequence[bool],
        base: Sequence[float],
        hops: set[str],
    ) -> list[int]:
        """The claims with one holding the asked value among the first two.

        The answer to "which year / how many / who / where" is a value the
        question does not give; on a multi-hop question it sits in the next
        hop, a chunk a chosen claim names that the question does not (the
        first hop restates the question: "The 1925 honours were made by King
        George V"; George V's own chunk has the year asked for). A chosen claim
        holding the value (from a next hop, when there is one) moves up to
        second; otherwise the best sentence that holds it (from a next hop if
        any does) joins as the second claim.
        """
        held = [i for i in chosen if value[i] and (not hops or sentences[i].chunk.id in hops)]
        if held:
            if chosen.index(held[0]) > 1:
                chosen = [chosen[0], held[0], *(i for i in chosen[1:] if i != held[0])]
            return chosen
        pool = [i for i in self._fresh(sentences, chosen) if value[i]]
        in_hop = [i for i in pool if sentences[i].chunk.id in hops]
        candidates = in_hop or ([] if any(value[i] for i in chosen) else pool)
        if not candidates:
            return chosen
        return self._join(chosen, max(candidates, key=lambda i: base[i]), 1)

    def _with_focus(
        self,
        sentences: Sequence[_Sentence],
        chosen: list[int],
        value: Sequence[bool],
        base: Sequence[float],
        focus: set[str],
        astray: set[str],
    ) -> list[int]:
        """The claims with a value sentence that names the quantity or event asked about.

        "What is the population of the town at X?": a sentence about the town
        holding some other number ("the intersection of routes 77 and 81")
        holds a value but not the one asked; a sentence saying "population"
        with a new number does. When no chosen value claim says the focus
        word, the best such sentence from a chunk the question bears on joins
        second.
        """
        if any(value[i] and sentences[i].terms & focus for i in chosen):
            return chosen
        pool = [
            i for i in self._fresh(sentences, chosen)
            if value[i] and sentences[i].terms & focus and sentences[i].chunk.id not in astray
        ]
        if not pool:
            return chosen
        return self._join(chosen, max(pool, key=lambda i: base[i]), 1)

    def _with_relation(
        self,
        sentences: Sequence[_Sentence],
        chosen: list[int],
        value: Sequence[bool],
        base: Sequence[float],
        near: set[str],
        relation: dict[str, float],
    ) -> list[int]:
        """The claims with one naming something new *beside* the relation asked about.

        "Who hosted X?": a new name in a sentence that says "hosted" answers
        it; names in a sentence about something else do not. The relation is
        the question's words outside its named things that the lead claim
        leaves open, as the sentence writes them in lower case (not inside a
        name), each weighted by how specific it is ("hosted" says more than
        "film"). When no chosen claim says as much of it as the best sentence
        from a chunk the answer is about (``near``: a chosen one, one a claim
        names, one the question names), that sentence joins second.
        """
        lead = sentences[chosen[0]]
        lead_terms = lead.terms | set(content_terms(lead.chunk.title))
        open_terms = {t: w for t, w in relation.items() if t not in lead_terms}
        if not open_terms:
            return chosen  # the lead already says the relation
        plain = {i: _plain_terms(sentences[i].quote) for i, v in enumerate(value) if v}

        def says(i: int) -> float:
            return sum(w for t, w in open_terms.items() if t in plain.get(i, ()))

        said = max(says(i) for i in chosen)
        pool = [
            i for i in self._fresh(sentences, chosen)
            if says(i) > said and sentences[i].chunk.id in near
        ]
        if not pool:
            return chosen
        return self._join(chosen, max(pool, key=lambda i: (says(i), base[i])), 1)

    def _with_introduction(
        self, sentences: Sequence[_Sentence], chosen: list[int], named: set[str]
    ) -> list[int]:
        """The answer to "who / which X" as its own chunk introduces it.

        A chosen claim from a chunk about something the question does not name
        (not in ``named``) is about the answer; that chunk's first sentence,
        when it names its subject itself, says who or what it is, full name
        included ("Mira Jane Castellane (born 1921) is a French painter"), and
        joins right after the first such claim (at most third).
        """
        for pos, i in enumerate(chosen):
            chunk = sentences[i].chunk
            if not chunk.title or chunk.id in named:
                continue
            intro = next(
                (j for j, s in enumerate(sentences)
                 if s.chunk.id == chunk.id and s.order == 0 and s.statement == _clean(s.quote)),
                None,
            )
            if intro == i:
                continue  # the claim is its chunk's introduction: look further
            if intro is None or intro in chosen or intro not in self._fresh(sentences, chosen):
                return chosen
            return self._join(chosen, intro, min(pos + 1, 2))
        return chosen

    def _fresh(self, sentences: Sequence[_Sentence], chosen: list[int]) -> list[int]:
        """Sentences not chosen and repeating none of the chosen."""
        return [
            i for i, s in enumerate(sentences)
            if i not in chosen and not any(self._repeats(s, sentences[j]) for j in chosen)
        ]

    def _repeats(self, a: _Sentence, b: _Sentence) -> bool:
        """Same or near-same sentence (the same docstring under two names, overlapping
        chunks), or one says nothing the other does not."""
        if jaccard(a.words, b.words) >= self.dedup_jaccard:
            return True
        small, large = (a.terms, b.terms) if len(a.terms) <= len(b.terms) else (b.terms, a.terms)
        return len(small) >= 2 and small <= large


def _answer_first(chosen: list[int], value: Sequence[bool], in_hop: Sequence[bool],
                  direct: Sequence[bool]) -> list[int]:
    """The claim holding the asked value leads: one saying the asked relation itself
    first, else one from the next hop.

    A lead that only restates the question's own names ("X was a junior
    hockey team") makes the reader hunt for the answer in the claims after it;
    on a multi-hop question the first hop's values ("the 1925 honours", the
    bridge's name) are not the answer, the next hop's are. But a sentence that
    says every word of the question's relation beside a new value ("Raft was
    designed by ..." for "Who designed Raft?", for "who" a person's name of
    two words) answers it where it stands: no hop is needed. ``in_hop`` and
    ``direct`` say, per chosen claim, whether its chunk is a next hop and
    whether it is such a sentence.
    """
    firsts = [pos for pos, i in enumerate(chosen) if value[i] and direct[pos]]
    if not firsts:
        firsts = [pos for pos, i in enumerate(chosen) if value[i] and in_hop[pos]]
        if value[chosen[0]] and in_hop[0]:
            return chosen
    firsts += [pos for pos, i in enumerate(chosen) if value[i]]
    if not firsts or firsts[0] == 0:
        return chosen
    lead = chosen[firsts[0]]
    return [lead, *(i for i in chosen if i != lead)]


# A person's name as prose writes it: two or more capitalised words ("Ada M. Quill").
_PERSON = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z]\.)?(?:\s+[A-Z][a-z'\u2019-]+)+")


def _new_person(sentence: str, question: str) -> bool:
    """``sentence`` names someone by a name of two words or more the question lacks."""
    return any(m.group(0) not in question for m in _PERSON.finditer(sentence))


def _focus(question: str) -> set[str]:
    """Stems of the words naming what a value question counts or dates.

    "What is the population of ...", "... can seat how many people", "how
    many people ...", "... founded in what year", "When was X born?".
    """
    words: list[str] = []
    for pattern in _FOCUS:
        words += [m.group(1) for m in pattern.finditer(question)]
    return {t for w in words if w.lower() not in _ASKING_WORDS for t in content_terms(w)}


def _astray(sentences: Sequence[_Sentence], names: Sequence[str]) -> set[str]:
    """Chunks that neither mention a named thing of the question nor are a hop from one.

    A hop is a chunk titled after something a mentioning chunk names ("played
    at the X Arena" -> the chunk titled "X Arena"), or one naming such a
    chunk's title. With no named thing in the question, no chunk is astray.
    """
    keys = [set(content_terms(n)) for n in names]
    keys = [k for k in keys if k]
    if not keys:
        return set()
    chunks = {s.chunk.id: s.chunk for s in sentences}
    terms = {cid: set(content_terms(f"{c.title} {c.text}")) for cid, c in chunks.items()}
    near = {cid for cid, t in terms.items() if any(k <= t for k in keys)}
    # "Elm Park, Rivertown" is mentioned as "Elm Park": a place after a comma
    # only tells pages apart.
    keys_of = {cid: {k for k in (_title_key(c.title), _title_key(c.title.split(",")[0])) if k}
               for cid, c in chunks.items() if c.title}
    said = {cid: f" {' '.join(_mention_words(c.text))} " for cid, c in chunks.items()}

    def linked(a: str, b: str) -> bool:
        return any(f" {key} " in said[a] for key in keys_of.get(b, ()))

    frontier = set(near)
    for _ in range(_HOPS):
        frontier = {b for b in chunks if b not in near
                    and any(linked(a, b) or linked(b, a) for a in frontier)}
        near |= frontier
    return set(chunks) - near


def _pairs(text: str) -> set[tuple[str, str]]:
    """Stemmed adjacent word pairs, not both stopwords ("plays for" ~ "play for")."""
    words = tokenize(text)
    stems = stem(words)
    return {
        (stems[i], stems[i + 1])
        for i in range(len(words) - 1)
        if not (words[i] in STOPWORDS and words[i + 1] in STOPWORDS)
    }


def _plain_terms(text: str) -> set[str]:
    """Content stems of the words not written as (part of) a name: what a sentence *says*."""
    words = re.findall(r"[^\W\d_][\w'\u2019-]*", text)
    return set(content_terms(" ".join(w for w in words if not w[:1].isupper())))


def _mention_words(text: str) -> list[str]:
    """Words as a mention of a title reads them: "Ada Quill's" -> ["ada", "quill"]."""
    return [_POSSESSIVE.sub("", w) for w in tokenize(text)]


def _title_key(title: str) -> str:
    """A title as text would mention it: "Winner (band)" -> "winner"."""
    return " ".join(_mention_words(re.sub(r"\s*\([^)]*\)\s*$", "", title)))


