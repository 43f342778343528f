"""The offline planner: multi-hop search moves without a model.

One search of the question finds the passage that *mentions* what the question
is about; multi-hop questions ("the team of the player who was MVP of X")
need a second passage that the question never names. Without a model, the
planner finds that hop in the evidence itself: names, titles, quoted terms and
numbers in the best passages that the question does not already cover are
*bridges*, searched together with the question terms the passage left open.
Comparison questions ("Who is older, A or B?") are split into one search per
entity from the start.

Everything here is deterministic and cheap (regexes, stemming, set algebra).
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pydantic import JsonValue

from actors.text import (
    CAPITALISED_NAME,
    DEMONYMS,
    STOPWORDS,
    AskedPeriod,
    asked_period,
    content_terms,
    looks_like_code,
    split_sentences,
    stem,
    tokenize,
    url_host,
)
from streams import EvidenceChunk, Feedback, QueryStat, ToolCall

from ._loop_guard import normalize_query
from ._policy import Decision, PlannerView

__all__ = [
    "OfflinePlanner",
    "desubjectivize",
    "extract_entities",
    "question_entities",
    "select_evidence",
]

# Question words and fillers that carry no topic (on top of the stopwords).
_FILLER = frozenset(
    """
    what which who whom whose when where why how name named called known also tell explain
    describe think opinion please know want like give list does did do is are was were the
    one ones kind type
    """.split()  # noqa: SIM905
)
# Lead-ins that ask for an opinion or a favour rather than name a topic. A
# following "about"/"whether"/"if" goes too; "how"/"why"/"what" stay (they are
# part of what is asked: "how vaccines work").
_SUBJECTIVE = re.compile(
    r"^\s*(?:(?:so|ok(?:ay)?|hey|hi|please)[,\s]+)*(?:"
    r"what\s+(?:do|would|did)\s+you\s+(?:think|know|say|believe|feel)\s+(?:about|of|on|regarding)"
    r"|what(?:'s|\s+is)\s+your\s+(?:opinion|view|take|understanding)\s+(?:about|of|on)"
    r"|(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:tell\s+me|explain|describe|say)"
    r"(?:\s+(?:about|whether|if))?"
    r"|(?:please\s+)?(?:tell\s+me|explain(?:\s+to\s+me)?|describe)(?:\s+(?:about|whether|if))?"
    r"|i\s+(?:want|would\s+like|'d\s+like|need)\s+to\s+(?:know|understand|learn)"
    r"(?:\s+(?:about|whether|if))?"
    r"|i(?:'m|\s+am)\s+(?:curious|wondering)(?:\s+(?:about|whether|if))?"
    r"|do\s+you\s+know(?:\s+(?:about|whether|if))?"
    r")\s+",
    re.IGNORECASE,
)
# Relative clauses and possessive chains: the shape of a question with a hidden hop.
_MULTI_HOP = re.compile(
    r"\b(?:that|which|who|whom|whose|where|when)\b.+\b(?:that|which|who|whom|whose|where)\b"
    r"|\w\s+(?:that|who|whom|whose|which)\s+\w|['\u2019]s\s+\w+\s+(?:of|in|for)\b",
    re.IGNORECASE,
)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_QUOTED = re.compile(r"[\"\u201c]([^\"\u201c\u201d]{2,80})[\"\u201d]")
_NUM_UNIT = re.compile(
    r"\b\d[\d,.]*\s*(?:%|percent|km|kilometres|kilometers|miles|m|kg|tonnes|years?|people|seats?)\b"
)
_POSSESSIVE = re.compile(r"['\u2019]s?$")
# Capitalised words that name no page worth a search of its own.
_WEAK_NAMES = DEMONYMS | frozenset(
    """
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday roman latin christian jewish
    muslim catholic north south east west northern southern eastern western
    """.split()  # noqa: SIM905
)


_OPINION = re.compile(r"\b(?:think|opinion|view|take|feel|believe)\b", re.IGNORECASE)


def desubjectivize(question: str) -> str:
    """Drop "What do you think about", "Can you tell me" and similar lead-ins.

    >>> desubjectivize("What do you think about nuclear power?")
    'nuclear power'
    """
    text = question.strip()
    for _ in range(3):
        m = _SUBJECTIVE.match(text)
        if not m or m.end() >= len(text):
            break
        text = _ARTICLE.sub("", text[m.end() :])
    text = text.strip().rstrip("?!. ")
    return text or question.strip().rstrip("?!. ")


def _words_key(text: str) -> frozenset[str]:
    return frozenset(stem(w for w in tokenize(text) if w not in STOPWORDS))


_INNER_POSSESSIVE = re.compile(r"['\u2019]s\s+")
_JOINER = re.compile(r"\s+(?:and|&|or)\s+")


def _clean_name(name: str) -> str | None:
    """Trim punctuation, possessives and a leading article; None if nothing specific is left."""
    name = _POSSESSIVE.sub("", name.rstrip(".-")).rstrip(".'\u2019-")
    words = name.split()
    if words and words[0].lower() in STOPWORDS and len(words) > 1:
        words = words[1:]
        name = " ".join(words)
    if not words or all(w.lower() in _WEAK_NAMES for w in words):
        return None
    if len(words) == 1:
        low = name.lower()
        if low in STOPWORDS or low in _FILLER or len(name) < 3:
            return None
    return name


def extract_entities(text: str) -> list[str]:
    """Names, quoted titles and number+unit phrases in ``text``, in order of appearance.

    A name with a possessive or joined by "and"/"or" is returned whole and as
    its parts ("Diamond Head Classic's MVP" also gives "Diamond Head Classic"
    and "MVP"; "Scott Derrickson and Ed Wood" gives both names); a leading article
    is dropped; months, nationalities and sentence-initial function words are
    not names.
    """
    found: list[tuple[int, int, str]] = []
    for m in _QUOTED.finditer(text):
        found.append((m.start(1), 0, m.group(1).strip()))
    for m in CAPITALISED_NAME.finditer(text):
        whole = _clean_name(m.group(0))
        if whole is None:
            continue
        found.append((m.start(), 0, whole))
        pieces = [p for p in _INNER_POSSESSIVE.split(whole) if p]
        if len(pieces) == 1:
            pieces = _JOINER.split(whole)
        if len(pieces) > 1:
            for rank, piece in enumerate(pieces, 1):
                sub = _clean_name(piece)
                if sub is not None and sub[:1].isupper():
                    found.append((m.start(), rank, sub))
    for m in _NUM_UNIT.finditer(text):
        found.append((m.start(), 0, m.group(0)))
    found.sort()
    out: list[str] = []
    seen: set[str] = set()
    for _, _, name in found:
        key = name.lower()
        if key not in seen and tokenize(name):
            seen.add(key)
            out.append(name)
    return out


# Capitalised words that are code or docstring vocabulary, never a page to search for.
_CODE_WORDS = frozenset(
    """
    none true false null nil nan undefined return returns raise raises yield yields args
    kwargs arguments argument parameters parameter param params example examples note notes
    see default defaults optional deprecated self cls usage attributes
    """.split()  # noqa: SIM905
)
# Identifiers and code tokens a sentence may embed: URLs, dotted names (``asyncio.Future``),
# snake_case and ``_private`` names, calls (``gather()``) and backticked code.
_IDENTIFIER = re.compile(
    r"\S*(?:https?://|www\.)\S*"
    r"|`[^`]*`"
    r"|\b(?:[A-Za-z_]\w*\.)+[A-Za-z_]\w+(?:\([^()\s]*\))?"
    r"|\b\w*_\w*"
    r"|\b\w+\([^()]*\)"
)
# A name an API gives a class: used dotted or called somewhere ("x.OrderedDict", "Future(").
_API_USE = re.compile(r"\.([A-Z]\w*)|\b([A-Z]\w*)\(")
_CODE_SUFFIX = re.compile(r"[a-z](?:Error|Exception|Warning|Exit|Interrupt)$")


def _code_names(chunks: Sequence[EvidenceChunk]) -> set[str]:
    """Capitalised names the evidence uses as code (dotted or called), lower-cased."""
    out: set[str] = set()
    for c in chunks:
        for m in _API_USE.finditer(f"{c.title}\n{c.text}"):
            out.add((m.group(1) or m.group(2)).lower())
    return out


def _prose_entities(sentence: str, code_names: set[str]) -> list[str]:
    """The names of a *prose* sentence worth a search: :func:`extract_entities` without code.

    A code-like sentence (see :func:`~actors.text.looks_like_code`) names nothing.
    Identifiers (URLs, dotted names, snake_case, calls, backticked code) are cut
    out before names are looked for, so a name never straddles one; code
    keywords and docstring labels ("None", "Returns", "Args") are trimmed off a
    name's ends; CamelCase exception names and names in ``code_names`` (the
    evidence uses them dotted or called: ``asyncio.Future``) are dropped.
    """
    if looks_like_code(sentence):
        return []
    masked = _IDENTIFIER.sub(" ; ", sentence)
    out: list[str] = []
    for name in extract_entities(masked):
        words = name.split()
        while words and words[0].lower().strip(".,'") in _CODE_WORDS:
            words.pop(0)
        while words and words[-1].lower().strip(".,'") in _CODE_WORDS:
            words.pop()
        if not words or any(_CODE_SUFFIX.search(w) or w.lower() in code_names for w in words):
            continue
        kept = _clean_name(" ".join(words))
        if kept is not None and kept not in out:
            out.append(kept)
    return out


def question_entities(question: str) -> list[str]:
    """The named things a question is about (its first word is a question word, not a name)."""
    text = desubjectivize(question)
    words = text.split()
    if words and words[0].lower().strip(",") in (_FILLER | STOPWORDS):
        text = "x " + " ".join(words[1:])  # the question word is not a name
    return [e for e in extract_entities(text) if e.lower() not in _FILLER]


def _key_words(question: str) -> list[str]:
    """Content words of the question in order (surface forms, not stems), no fillers."""
    out: list[str] = []
    seen: set[str] = set()
    for w in tokenize(desubjectivize(question)):
        if w in STOPWORDS or w in _FILLER or w in seen:
            continue
        seen.add(w)
        out.append(w)
    return out


def _chunk_terms(chunk: EvidenceChunk) -> set[str]:
    return set(content_terms(f"{chunk.title} {chunk.text}"))


@dataclass(frozen=True, slots=True)
class _Bridge:
    name: str
    score: float
    source: str  # chunk id the bridge came from
    open_terms: tuple[str, ...]  # question words that chunk does not cover


class OfflinePlanner:
    """Offline :class:`~reactive_rag.agent.PlannerPolicy` (no model, deterministic).

    Round 1 expands the question into 2-3 searches (the de-subjectivised
    question, its key terms, one search per named entity of a comparison),
    with a date range when the question asks about a period ("last year").
    Later rounds open the most promising web results whose page is unread,
    search bridges found in the evidence, read on from promising passages
    that stop short, and answer when the evidence covers the question, the
    run reports repeated loops, or rounds/budget run low (pages still worth
    opening are opened first). Typed feedback steers it: hosts flagged as spam
    are excluded from later searches, a search whose results were all stale
    is repeated with the asked period as a filter.

    Args:
        max_rounds: search rounds before answering (a read-on round counts).
        bridges_per_round: follow-up searches per round.
        top_chunks: how many of the best passages bridges are taken from.
        coverage_to_answer: answer early once the best two passages cover this
            share of the question's content terms...
        min_search_rounds: ...and at least this many search rounds ran.
        simple_max_terms: a question with at most this many key words, no
            relative clause and one passage covering all of them is answered
            after the first round.
        k: hits asked per search (``None`` lets the run decide).
        pages_per_round: web results opened per round (within the run's page budget).
    """

    name = "offline"

    def __init__(
        self,
        *,
        max_rounds: int = 3,
        bridges_per_round: int = 2,
        top_chunks: int = 4,
        coverage_to_answer: float = 1.0,
        min_search_rounds: int = 2,
        simple_max_terms: int = 4,
        k: int | None = None,
        pages_per_round: int = 3,
    ) -> None:
        if max_rounds < 1:
            raise ValueError("max_rounds must be >= 1")
        if k is not None and k < 1:
            raise ValueError("k must be >= 1")
        self.min_search_rounds = min_search_rounds
        self.simple_max_terms = simple_max_terms
        self.max_rounds = max_rounds
        self.bridges_per_round = bridges_per_round
        self.top_chunks = top_chunks
        self.coverage_to_answer = coverage_to_answer
        self.k = k
        self.pages_per_round = pages_per_round
        self._excluded: set[str] = set()  # hosts flagged as spam in this run
        self._dated: set[str] = set()  # queries sent with a date filter
        self._gave_up_dates = False
        self._asked_extension = False  # the run's one budget extension was asked for

    # --- public entry point -----------------------------------------------------------

    async def decide(self, view: PlannerView) -> Decision:
        """The next move for ``view`` (see the class docstring)."""
        return self.plan(view)

    def replay(self, view: PlannerView) -> Decision:
        """Make a stored turn's move again (a resumed run rebuilds this policy's state).

        The policy is deterministic and does no I/O: the same view gives the
        same decision and leaves the same per-run state (hosts excluded as
        spam, searches sent with a date filter) as when the run made it.
        """
        return self.plan(view)

    def plan(self, view: PlannerView) -> Decision:
        """Synchronous :meth:`decide` (the policy does no I/O)."""
        view = _from_points(view)
        self._excluded |= {h for f in view.feedback if f.kind == "spam" for h in f.hosts}
        self._gave_up_dates = self._dated_empty(view)
        stop = self._stop_reason(view)
        extend = self._should_extend(view, stop)
        if extend:
            stop = ""  # one more round, if the run grants it
        pages = self._pages_to_open(view) if not _hard_stop(stop) else []
        if stop and not pages:
            return Decision(action="answer", reason=stop)
        done = {normalize_query(q.query) for q in view.queries}
        read: str | None = None
        queries: list[str] = []
        reason = ""
        if stop:
            reason = f"open the pages of the best results before answering ({stop})"
        elif not view.queries:
            queries = self._expand(view.question)
            reason = "expand the question into searches"
        else:
            queries, reason = self._follow_up(view, done)
            read = self._read_on(view)
            if pages:
                reason = "open the pages of the best results; " + reason
        fresh: list[str] = []
        for q in queries:
            key = normalize_query(q)
            if key and key not in done:
                done.add(key)
                fresh.append(q)
        moves: list[tuple[str, dict[str, JsonValue]]] = []
        if read is not None:
            moves.append(("read", {"chunk_id": read, "direction": "next"}))
        moves.extend(("scrape", {"result_id": rid}) for rid in pages)
        period = self._period(view)
        moves.extend(("search", self._args(q, period)) for q in fresh)
        if not stop:
            moves.extend(("search", self._args(q, p)) for q, p in self._stale_retries(view, done))
        calls = [ToolCall(id=f"p{view.round}-{i}", tool=tool, args=args)
                 for i, (tool, args) in enumerate(moves)]
        limit = view.remaining_tool_calls
        if limit is not None:
            # an extension adds (at least) a round of bridge searches
            calls = calls[: max(0, limit) + (self.bridges_per_round if extend else 0)]
        if not calls:
            return Decision(action="answer", reason=stop or "no new angle left to search")
        if read is not None:
            reason = "read on from a promising passage" + (f"; {reason}" if fresh else "")
        if extend:
            self._asked_extension = True
            reason = ("the last round covered " + ", ".join(view.newly_covered) + "; one more "
                      "round for " + ", ".join(view.missing) + f" (budget extension); {reason}")
        if any(c.tool == "search" for c in calls):
            return Decision(action="search", calls=tuple(calls), reason=reason, extend=extend)
        if any(c.tool == "scrape" for c in calls):
            return Decision(action="scrape", calls=tuple(calls), reason=reason, extend=extend)
        return Decision(action="read", calls=tuple(calls), reason=reason, extend=extend)

    def _should_extend(self, view: PlannerView, stop: str) -> bool:
        """Ask for the run's one extension only when steps or tool calls (not time) stop
        the search right after a round that covered a part of the question not covered
        before, while another part is still missing (the run judge's typed parts)."""
        return (not self._asked_extension and view.can_extend
                and stop in ("tool-call budget spent", "model steps nearly spent")
                and bool(view.newly_covered) and bool(view.missing))

    def _args(self, query: str, period: AskedPeriod | None = None) -> dict[str, JsonValue]:
        args: dict[str, JsonValue] = {"query": query}
        if self.k is not None:
            args["k"] = self.k
        filters: dict[str, JsonValue] = {}
        if period is not None:
            if period.date_from is not None:
                filters["date_from"] = period.date_from.isoformat()
            if period.date_to is not None:
                filters["date_to"] = period.date_to.isoformat()
        if self._excluded:
            filters["exclude_sites"] = list(sorted(self._excluded))
        if filters:
            args["filters"] = filters
            if period is not None:
                self._dated.add(normalize_query(query))
        return args

    # --- web pages and soft failures ----------------------------------------------------

    def _period(self, view: PlannerView) -> AskedPeriod | None:
        """The period to filter searches by: one that moves with the run's date.

        "last year", "this month", "past 30 days" ask for recent sources; "in
        1990" asks about 1990, and a page about it need not be from 1990, so
        absolute periods are no publication filter. Neither is the default
        window of "latest" (stale results make the planner retry with it).
        Once a dated search found nothing, the source has no dates: no filter.
        """
        if not view.today or self._dated_empty(view):
            return None
        period = asked_period(view.question, _dt.date.fromisoformat(view.today))
        if period is None or not period.relative or period.default_window:
            return None
        return period

    def _dated_empty(self, view: PlannerView) -> bool:
        return any(f.kind in ("empty", "below_floor") and normalize_query(f.query) in self._dated
                   for f in view.feedback) or self._gave_up_dates

    def _recent(self, view: PlannerView) -> AskedPeriod | None:
        """The period a stale retry filters by (the default window counts here)."""
        if not view.today:
            return None
        return asked_period(view.question, _dt.date.fromisoformat(view.today))

    def _pages_to_open(self, view: PlannerView) -> list[str]:
        """Result ids of unread web pages whose snippet speaks to the question, best first."""
        room = self.pages_per_round
        if view.remaining_pages is not None:
            room = min(room, view.remaining_pages)
        if view.remaining_tool_calls is not None:
            room = min(room, view.remaining_tool_calls)
        if room <= 0:
            return []
        opened = set(view.pages)
        wanted = set(content_terms(view.question))
        held_pages = {c.url for c in view.evidence if not c.snippet and c.url}
        candidates = [c for c in view.evidence if c.snippet and c.url not in opened
                      and c.url not in held_pages and url_host(c.url) not in self._excluded
                      # the snippet must say something about the question
                      and wanted & (_chunk_terms(c) | set(content_terms(c.title)))]
        if not candidates:
            return []  # (a local-only run never gets further)
        # Order: results the final pick would hand the writer (worth reading whole),
        # then results whose title a page already read names (the question's next hop),
        # then the reranker's score against the query that found them (a 20-word
        # snippet covers few question words, so coverage would rank it poorly).
        pool = sorted(view.evidence, key=lambda c: -(c.score or 0.0))
        picked = {c.id for c in select_evidence(view.question, pool,
                                                [q.query for q in view.queries])}
        read_text = normalize_query(" ".join(c.text for c in view.evidence if not c.snippet))

        def priority(c: EvidenceChunk) -> tuple[bool, bool, float]:
            named = bool(read_text) and _mentions(read_text, _title_keys(c.title))
            return (c.id not in picked, not named, -(c.score or 0.0))

        # What the opened pages begin with: a result whose snippet repeats one is a copy
        # of a page already read (a mirror), not worth a page of the budget.
        known = [_opening(c.text) for c in view.evidence
                 if c.url in opened or (c.url in held_pages and c.position == 0)]
        picks: list[str] = []
        seen_urls: set[str] = set()
        for c in sorted(candidates, key=priority):
            start = _opening(c.text)
            if c.url in seen_urls or any(_same_text(start, k) for k in known):
                continue
            known.append(start)
            seen_urls.add(c.url)
            picks.append(c.id)
            if len(picks) >= room:
                break
        return picks

    def _stale_retries(self, view: PlannerView,
                       done: set[str]) -> list[tuple[str, AskedPeriod | None]]:
        """Searches whose results were all older than the asked period, once more with it."""
        period = self._recent(view)
        if period is None:
            return []
        out: list[tuple[str, AskedPeriod | None]] = []
        for f in view.feedback:
            if f.kind != "stale" or not f.query:
                continue
            year = period.date_to.year if period.date_to else _dt.date.fromisoformat(
                view.today).year
            retry = f.query if str(year) in f.query else f"{f.query} {year}"
            key = normalize_query(retry)
            if key and key not in done:
                done.add(key)
                out.append((retry, period))
        return out

    # --- when to stop -------------------------------------------------------------------

    def _stop_reason(self, view: PlannerView) -> str:
        if view.remaining_tool_calls is not None and view.remaining_tool_calls <= 0:
            return "tool-call budget spent"
        if view.remaining_steps is not None and view.remaining_steps <= 1:
            return "model steps nearly spent"
        if view.remaining_s is not None and view.remaining_s < 3.0:
            return "time nearly spent"
        if not view.queries:
            return ""
        if view.round > self.max_rounds:
            return f"searched {self.max_rounds} rounds"
        kinds = Counter(f.kind for f in view.feedback)
        if kinds["loop"] + kinds["duplicate"] >= 2:
            return "repeated loops"
        if (
            view.round > self.min_search_rounds
            and view.evidence
            and len(view.queries) >= 2
            and self._covered(view) >= self.coverage_to_answer
        ):
            # Covered by the best pair of passages, and at least one follow-up ran.
            return "evidence covers the question"
        if (
            view.evidence
            and self._is_simple(view.question)
            and self._covered(view, top=1) >= 1.0
            and not _stops_short(_rank(view.question, view.evidence)[0])
        ):
            # A short single-hop question one passage fully covers: no bridge to find.
            return "one passage covers the whole (simple) question"
        return ""

    def _is_simple(self, question: str) -> bool:
        """Few key words and no relative clause: a single-hop question."""
        return len(_key_words(question)) <= self.simple_max_terms and not _MULTI_HOP.search(
            question
        )

    def _covered(self, view: PlannerView, top: int = 2) -> float:
        wanted = set(content_terms(" ".join(_key_words(view.question))))
        if not wanted:
            return 1.0
        ranked = _rank(view.question, view.evidence)[:top]
        have: set[str] = set()
        for c in ranked:
            have |= _chunk_terms(c)
        return len(wanted & have) / len(wanted)

    # --- round 1 ------------------------------------------------------------------------

    def _expand(self, question: str) -> list[str]:
        base = desubjectivize(question)
        out = [base]
        ents = question_entities(question)
        keys = _key_words(question)
        pair = _comparison_pair(desubjectivize(question), ents)
        if pair is not None:
            named = {w for e in pair for w in tokenize(e)}
            attr = [_ATTRIBUTE.get(w, w) for w in keys if w not in named]
            attr = [w for w in dict.fromkeys(attr) if w][:2]
            out.extend(" ".join([e, *attr]) for e in pair)
            return out
        kw = " ".join(keys)
        if kw and normalize_query(kw) != normalize_query(base):
            out.append(kw)
        if _OPINION.search(question) and base != question.strip().rstrip("?!. "):
            # An opinion question deserves evidence from both sides.
            out.append(f"{base} advantages and disadvantages")
        if ents:
            # The most specific named thing on its own finds its own page.
            best = max(ents, key=lambda e: (len(tokenize(e)), len(e)))
            out.append(best)
        return out[:3]

    # --- later rounds -------------------------------------------------------------------

    def _follow_up(self, view: PlannerView, done: set[str]) -> tuple[list[str], str]:
        empty = [q for q in view.queries if _came_back_empty(q, view.feedback)]
        rewrites = [r for r in _rewrites(view.question, empty) if normalize_query(r) not in done]
        if not view.evidence:
            return rewrites[:2], "rewrite the query after empty results"
        queries: list[str] = []
        if self._is_simple(view.question):
            reason = "a simple question: no hidden hop to search for"
        else:
            bridges = self._bridges(view, done)
            queries = [_bridge_query(b) for b in bridges[: self.bridges_per_round]]
            reason = "search bridge entities found in the evidence"
        if empty and empty[-1] is view.queries[-1] and rewrites:
            queries.insert(0, rewrites[0])
            reason = "rewrite an empty query; " + reason
        return queries, reason

    def _bridges(self, view: PlannerView, done: set[str]) -> list[_Bridge]:
        question = view.question
        q_all = set(stem(tokenize(question)))
        keys = _key_words(question)
        q_ents = question_entities(question)
        searched_words = {w for q in view.queries for w in _words_key(q.query)}
        ranked = _rank(question, view.evidence)[: self.top_chunks]
        held_titles = {_words_key(c.title) for c in view.evidence if c.title}
        scores: dict[str, float] = {}
        meta: dict[str, _Bridge] = {}
        lowercase_words = {
            w for c in ranked for w in re.findall(r"(?<![.!?]\s)\b[a-z][a-z'-]+", c.text)
        }
        code_names = _code_names(view.evidence)
        for rank, chunk in enumerate(ranked):
            c_terms = _chunk_terms(chunk)
            open_terms = tuple(w for w in keys if stem([w])[0] not in c_terms)
            weight = 1.0 / (1.0 + rank)
            text = chunk.text
            for s, e in split_sentences(text) or [(0, len(text))]:
                sentence = text[s:e]
                s_terms = set(content_terms(sentence))
                rel = len(s_terms & q_all) / max(1, len(set(content_terms(question))))
                if rel == 0:
                    continue  # a sentence about something else names no bridge
                for name in _prose_entities(sentence, code_names):
                    name = _drop_capitalised_verb(name, sentence, lowercase_words)
                    if not name:
                        continue
                    key = _words_key(name)
                    if not key or key <= q_all:
                        continue  # the question already says it
                    if key <= searched_words:
                        continue  # searched before
                    if key in held_titles:
                        continue  # its own page is already held
                    if any(key <= _words_key(qe) for qe in q_ents):
                        continue
                    n_words = len(tokenize(name))
                    score = weight * (1.0 + rel) * (1.0 + 0.3 * min(n_words, 3) - 0.1)
                    if n_words == 1:
                        score *= 0.6
                    if name in (chunk.title or ""):
                        score *= 0.3
                    if any(ch.isdigit() for ch in name) and n_words <= 2:
                        score *= 0.5  # years and counts rarely name the next page
                    low = name.lower()
                    scores[low] = scores.get(low, 0.0) + score
                    if low not in meta or meta[low].score < score:
                        meta[low] = _Bridge(name, score, chunk.id, open_terms)
        out = [
            _Bridge(meta[k].name, v, meta[k].source, meta[k].open_terms) for k, v in scores.items()
        ]
        out.sort(key=lambda b: (-b.score, b.name))
        # One bridge per distinct word set (e.g. "Hield" vs "Buddy Hield").
        kept: list[_Bridge] = []
        for b in out:
            key = _words_key(b.name)
            if any(key <= _words_key(k.name) or _words_key(k.name) <= key for k in kept):
                continue
            if normalize_query(_bridge_query(b)) in done:
                continue
            kept.append(b)
        return kept

    def _read_on(self, view: PlannerView) -> str | None:
        """A top passage worth reading on from: it stops mid-sentence, or its
        document is strongly relevant but the passage lacks some question terms."""
        if any(f.kind == "read_limit" for f in view.feedback):
            return None
        read = set(view.reads)
        held = {c.id for c in view.evidence}
        wanted = set(content_terms(" ".join(_key_words(view.question))))
        for chunk in _rank(view.question, view.evidence)[:2]:
            if not chunk.next_id or chunk.next_id in held or chunk.id in read:
                continue
            stops_short = _stops_short(chunk)
            cov = len(wanted & _chunk_terms(chunk)) / len(wanted) if wanted else 0.0
            if (stops_short and cov > 0) or 0.5 <= cov < 1.0:
                return chunk.id
        return None


_BETWEEN = re.compile(r"^\s*,?\s*(?:or|and|vs\.?|versus)\s*$", re.IGNORECASE)
# Comparison attributes that are found on each entity's page under another word.
_ATTRIBUTE = {
    "older": "born",
    "younger": "born",
    "oldest": "born",
    "youngest": "born",
    "first": "",
    "earlier": "",
    "later": "",
    "same": "",
    "both": "",
    "longer": "",
    "larger": "",
    "bigger": "",
    "more": "",
    "higher": "",
    "taller": "",
}


def _opening(text: str, words: int = 20) -> frozenset[str]:
    """The content words a text (or a page's snippet) begins with."""
    return frozenset(content_terms(" ".join(text.split()[:words])))


def _same_text(a: frozenset[str], b: frozenset[str]) -> bool:
    """Two openings close enough to be copies of one text (Jaccard >= 0.7)."""
    if not a or not b:
        return False
    return len(a & b) / len(a | b) >= 0.7


_HARD_STOPS = ("tool-call budget spent", "model steps nearly spent", "time nearly spent")


def _hard_stop(reason: str) -> bool:
    """A stop no page is worth overriding (budget or time), unlike "searched N rounds"."""
    return reason in _HARD_STOPS


def _comparison_pair(question: str, ents: Sequence[str]) -> tuple[str, str] | None:
    """Two entities the question joins with "or"/"and"/"vs" ("A or B"), if any."""
    for a in ents:
        i = question.find(a)
        if i < 0:
            continue
        for b in ents:
            if b == a or a in b or b in a:
                continue
            j = question.find(b, i + len(a))
            if j >= 0 and _BETWEEN.match(question[i + len(a) : j]):
                return a, b
    return None


def _bridge_query(b: _Bridge) -> str:
    extra = [w for w in b.open_terms if w.lower() not in b.name.lower()][:2]
    return " ".join([b.name, *extra])


def _drop_capitalised_verb(name: str, sentence: str, lowercase_words: set[str]) -> str:
    """ "Returns None" at the start of a sentence is a verb and a name: keep "None".

    A sentence-initial word that the evidence also uses in lower case is an
    ordinary word capitalised by position, not part of a name.
    """
    words = name.split()
    at_start = sentence.lstrip("\"'\u201c(").startswith(name)
    if at_start and words and words[0].lower() in lowercase_words:
        return " ".join(words[1:])
    return name


def _stops_short(chunk: EvidenceChunk) -> bool:
    """The passage ends mid-sentence and its source goes on."""
    tail = chunk.text.rstrip()
    return bool(chunk.next_id) and bool(tail) and tail[-1] not in ".!?\"')\u201d]"


def _came_back_empty(record: QueryStat, feedback: Sequence[Feedback]) -> bool:
    """No hits, or hits that all fell under the relevance floor (the run says so)."""
    if record.hits == 0:
        return True
    if record.new_evidence:
        return False
    return any(f.kind in ("empty", "below_floor") and f.query == record.query for f in feedback)


def _rewrites(question: str, empty: Sequence[QueryStat]) -> list[str]:
    """Shorter or different forms of a query that found nothing."""
    keys = _key_words(question)
    ents = question_entities(question)
    out: list[str] = []
    out.extend(ents)
    if len(keys) > 2:
        out.append(" ".join(keys[: max(2, len(keys) // 2)]))
        out.append(" ".join(keys[len(keys) // 2 :]))
    for rec in empty:
        words = [w for w in tokenize(rec.query) if w not in STOPWORDS]
        if len(words) > 1:
            out.append(" ".join(words[:-1]))
    return out


def _from_points(view: PlannerView) -> PlannerView:
    """A compressed view with each compact chunk's text rebuilt from its key points.

    The planner's moves read passages (bridges, coverage, read-on); in a
    compressed view the key points are what it has of them, so each compact
    chunk reads as the points that cite it (a chunk no point cites stays
    empty: its title and ids still count). Full chunks and snippets are kept.
    """
    if not view.compressed or not view.points:
        return view
    texts: dict[str, list[str]] = {}
    for point in view.points:
        for chunk_id in point.chunk_ids:
            texts.setdefault(chunk_id, []).append(point.text)
    full = set(view.expanded)
    evidence = [c if c.id in full or c.snippet or c.id not in texts
                else c.model_copy(update={"text": " ".join(texts[c.id])})
                for c in view.evidence]
    return replace(view, evidence=evidence)


def _rank(question: str, evidence: Sequence[EvidenceChunk]) -> list[EvidenceChunk]:
    """Evidence by stemmed coverage of the question, then search score, then arrival."""
    wanted = set(content_terms(" ".join(_key_words(question))))

    def key(item: tuple[int, EvidenceChunk]) -> tuple[float, float, int]:
        i, c = item
        cov = len(wanted & _chunk_terms(c)) / len(wanted) if wanted else 0.0
        return (-cov, -(c.score or 0.0), i)

    return [c for _, c in sorted(enumerate(evidence), key=key)]


class _PoolScorer:
    """BM25 over the evidence pool itself: rare terms in the pool weigh more.

    Titles count twice (a passage *about* the query's entity beats one that
    mentions it in passing).
    """

    def __init__(self, evidence: Sequence[EvidenceChunk]) -> None:
        self.docs: list[Counter[str]] = []
        df: Counter[str] = Counter()
        for c in evidence:
            tf = Counter(content_terms(c.text))
            for t in content_terms(c.title):
                tf[t] += 2
            self.docs.append(tf)
            df.update(tf.keys())
        n = max(1, len(evidence))
        self.idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        self.avg = sum(sum(d.values()) for d in self.docs) / n if self.docs else 1.0

    def scores(self, query: str) -> list[float]:
        terms = set(content_terms(query))
        out: list[float] = []
        for tf in self.docs:
            length = sum(tf.values()) or 1
            s = 0.0
            for t in terms:
                f = tf.get(t, 0)
                if f:
                    s += self.idf[t] * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * length / self.avg))
            out.append(s)
        return out


_PAREN = re.compile(r"\s*\([^)]*\)\s*$")


def _title_keys(title: str) -> tuple[str, ...]:
    """How text would mention a page: "Winner (band)" -> "winner";
    "Summerlin, Nevada" -> "summerlin nevada" or "summerlin"."""
    base = _PAREN.sub("", title)
    keys = [normalize_query(base)]
    head = base.split(",")[0]
    if head != base and len(normalize_query(head)) > 3:
        keys.append(normalize_query(head))
    return tuple(k for k in keys if len(k) > 2)


def _mentions(text_norm: str, keys: Sequence[str]) -> bool:
    padded = f" {text_norm} "
    return any(f" {k} " in padded for k in keys)


def select_evidence(
    question: str,
    evidence: Sequence[EvidenceChunk],
    queries: Sequence[str] = (),
    *,
    k: int = 5,
    weights: tuple[float, float, float] = (0.6, 1.0, 1.0),
    n_heads: int = 3,
) -> list[EvidenceChunk]:
    """Pick ``k`` chunks that answer the question, including its second hop.

    Ranking everything against the question alone throws away the second hop
    (its passage rarely shares the question's words). So a chunk scores by:
    its match to the question (BM25 over the evidence pool), whether its title
    is named in the question, whether its title is *named in one of the best
    question matches* (the link a multi-hop question follows), and its best
    match to any follow-up query. ``evidence`` should be in registration order:
    that order breaks ties. ``weights`` are those of the follow-up match, the
    title named in the question and the link from a top match.
    """
    w_follow, w_title, w_link = weights
    if k <= 0 or not evidence:
        return []
    scorer = _PoolScorer(evidence)
    n = len(evidence)

    def normed(q: str) -> list[float]:
        sc = scorer.scores(q)
        top = max(sc) if sc else 0.0
        return [x / top if top > 0 else 0.0 for x in sc]

    qs = normed(question)
    q_norm = normalize_query(question)
    texts = [normalize_query(c.text) for c in evidence]
    titles = [_title_keys(c.title) if c.title else () for c in evidence]
    follow = [0.0] * n
    seen_q = {q_norm}
    for q in queries:
        key = normalize_query(q)
        if not key or key in seen_q:
            continue
        seen_q.add(key)
        for i, x in enumerate(normed(q)):
            follow[i] = max(follow[i], x)
    heads = sorted(range(n), key=lambda i: (-qs[i], i))[:n_heads]
    score: list[float] = []
    for i in range(n):
        s = qs[i] + w_follow * follow[i]
        if _mentions(q_norm, titles[i]):
            s += w_title
        link = max((qs[h] for h in heads if h != i and _mentions(texts[h], titles[i])), default=0.0)
        s += w_link * link
        score.append(s)
    order = sorted(range(n), key=lambda i: (-score[i], i))
    return [evidence[i] for i in order[:k]]
