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
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import JsonValue

from actors.text import (
    STOPWORDS,
    AskedPeriod,
    asked_period,
    content_terms,
    split_sentences,
    stem,
    tokenize,
    url_host,
    url_key,
)
from streams import EvidenceChunk, Feedback, QueryStat, ToolCall

from .._policy import Decision, PlannerBase, PlannerView
from ._evidence_pick import mentions, select_evidence, title_keys
from ._loop_guard import normalize_query
from ._question import (
    COMPARED_ATTRIBUTE,
    MULTI_HOP,
    OPINION,
    comparison_pair,
    desubjectivize,
    key_words,
    names_used_as_code,
    prose_entities,
    question_entities,
    words_key,
)

__all__ = ["OfflinePlanner"]


def _chunk_terms(chunk: EvidenceChunk) -> set[str]:
    return set(content_terms(f"{chunk.title} {chunk.text}"))


@dataclass(frozen=True, slots=True)
class _Bridge:
    name: str
    score: float
    source: str  # chunk id the bridge came from
    open_terms: tuple[str, ...]  # question words that chunk does not cover


class OfflinePlanner(PlannerBase):
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

    On the web the next hop is found in three steps: the round that opens the
    first pages searches no bridges (a 20-word snippet names little) and does
    not count as a search round; the next searches the names the pages read
    give, from the passage about what the question names first; and a round
    of bridge searches keeps calls and pages back to open what they find.

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
        page_reserve: pages kept back, in a round that searches bridges, for what
            those searches find (the question's next hop).
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
        page_reserve: int = 2,
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
        self.page_reserve = page_reserve
        self._excluded: set[str] = set()  # hosts flagged as spam in this run
        self._dated: set[str] = set()  # queries sent with a date filter
        self._gave_up_dates = False
        self._asked_extension = False  # the run's one budget extension was asked for
        self._reading_rounds: set[int] = set()  # rounds that only opened pages (no bridges)

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
        found = self._stop(view)
        extend = self._should_extend(view, found)
        if extend:
            found = None  # one more round, if the run grants it
        pages = [] if found is not None and found.hard else self._pages_to_open(view)
        stop = found.reason if found is not None else ""
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
            # Bridges are names the evidence mentions: while the first pages are still
            # unread, a snippet's 20 words name little, so search them once read.
            defer = bool(pages) and not _read_pages(view)
            if defer:
                self._reading_rounds.add(view.round)  # not a search round: rounds shift
            queries, reason = self._follow_up(view, done, with_bridges=not defer)
            read = self._read_on(view)
            if pages and queries and not defer:
                # Keep pages for what this round's bridge searches find (the next hop).
                pages = pages[: max(0, self._page_room(view) - self.page_reserve)] or pages[:1]
            if pages:
                reason = "open the pages of the best results; " + reason
        fresh: list[str] = []
        for q in queries:
            key = normalize_query(q)
            if key and key not in done:
                done.add(key)
                fresh.append(q)
        if fresh and view.queries and not stop:
            fresh = fresh[: self._searches_room(view, len(pages), read is not None)]
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

    def _should_extend(self, view: PlannerView, stop: _Stop | None) -> bool:
        """Ask for the run's one extension only when steps or tool calls (not time) stop
        the search right after a round that covered a part of the question not covered
        before, while another part is still missing (the run judge's typed parts)."""
        return (not self._asked_extension and view.can_extend
                and stop is not None and stop.kind in ("tool_calls", "steps")
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

    def _page_room(self, view: PlannerView) -> int:
        """Pages this round may open: the round's share, within the run's page and call budgets."""
        room = self.pages_per_round
        if view.remaining_pages is not None:
            room = min(room, view.remaining_pages)
        if view.remaining_tool_calls is not None:
            room = min(room, view.remaining_tool_calls)
        return room

    def _searches_room(self, view: PlannerView, pages: int, read: bool) -> int | None:
        """Follow-up searches this round may send (``None``: no limit of its own).

        On the web, calls are kept back to open what the searches find: a result
        found with the run's last calls is never read. Up to ``page_reserve`` calls
        (at most half of those left, and no more than the pages left) stay unspent.
        """
        if view.remaining_tool_calls is None or not any(c.snippet for c in view.evidence):
            return None  # no web results: nothing to open later, nothing to keep back
        left = view.remaining_tool_calls - pages - int(read)
        reserve = min(self.page_reserve, left // 2)
        if view.remaining_pages is not None:
            reserve = min(reserve, view.remaining_pages - pages)
        return max(0, left - max(0, reserve))

    def _pages_to_open(self, view: PlannerView) -> list[str]:
        """Result ids of unread web pages whose snippet speaks to the question, best first."""
        room = self._page_room(view)
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
            named = bool(read_text) and mentions(read_text, title_keys(c.title))
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

    def _stop(self, view: PlannerView) -> _Stop | None:
        if view.remaining_tool_calls is not None and view.remaining_tool_calls <= 0:
            return _Stop("tool_calls", "tool-call budget spent")
        if view.remaining_steps is not None and view.remaining_steps <= 1:
            return _Stop("steps", "model steps nearly spent")
        if view.remaining_s is not None and view.remaining_s < 3.0:
            return _Stop("time", "time nearly spent")
        if not view.queries:
            return None
        searched = self._search_round(view)
        if searched > self.max_rounds:
            return _Stop("rounds", f"searched {self.max_rounds} rounds")
        kinds = Counter(f.kind for f in view.feedback)
        if kinds["loop"] + kinds["duplicate"] >= 2:
            return _Stop("loops", "repeated loops")
        if (
            searched > self.min_search_rounds
            and view.evidence
            and len(view.queries) >= 2
            and self._covered(view) >= self.coverage_to_answer
        ):
            # Covered by the best pair of passages, and at least one follow-up ran.
            return _Stop("covered", "evidence covers the question")
        if (
            view.evidence
            and self._is_simple(view.question)
            and self._covered(view, top=1) >= 1.0
            and not _stops_short(_rank(view.question, view.evidence)[0])
        ):
            # A short single-hop question one passage fully covers: no bridge to find.
            return _Stop("covered", "one passage covers the whole (simple) question")
        return None

    def _search_round(self, view: PlannerView) -> int:
        """This round's number counting search rounds only (a round that only opened
        the first pages, to search what they name next, does not count)."""
        return view.round - sum(1 for r in self._reading_rounds if r < view.round)

    def _is_simple(self, question: str) -> bool:
        """Few key words and no relative clause: a single-hop question."""
        return len(key_words(question)) <= self.simple_max_terms and not MULTI_HOP.search(
            question
        )

    def _covered(self, view: PlannerView, top: int = 2) -> float:
        wanted = set(content_terms(" ".join(key_words(view.question))))
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
        keys = key_words(question)
        pair = comparison_pair(desubjectivize(question), ents)
        if pair is not None:
            named = {w for e in pair for w in tokenize(e)}
            attr = [COMPARED_ATTRIBUTE.get(w, w) for w in keys if w not in named]
            attr = [w for w in dict.fromkeys(attr) if w][:2]
            out.extend(" ".join([e, *attr]) for e in pair)
            return out
        kw = " ".join(keys)
        if kw and normalize_query(kw) != normalize_query(base):
            out.append(kw)
        if OPINION.search(question) and base != question.strip().rstrip("?!. "):
            # An opinion question deserves evidence from both sides.
            out.append(f"{base} advantages and disadvantages")
        if ents:
            # The most specific named thing on its own finds its own page.
            best = max(ents, key=lambda e: (len(tokenize(e)), len(e)))
            out.append(best)
        return out[:3]

    # --- later rounds -------------------------------------------------------------------

    def _follow_up(self, view: PlannerView, done: set[str],
                   with_bridges: bool = True) -> tuple[list[str], str]:
        empty = [q for q in view.queries if _came_back_empty(q, view.feedback)]
        rewrites = [r for r in _rewrites(view.question, empty) if normalize_query(r) not in done]
        if not view.evidence:
            return rewrites[:2], "rewrite the query after empty results"
        queries: list[str] = []
        if self._is_simple(view.question):
            reason = "a simple question: no hidden hop to search for"
        elif not with_bridges:
            reason = "read the pages before searching the names they mention"
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
        keys = key_words(question)
        q_ents = question_entities(question)
        searched_words = {w for q in view.queries for w in words_key(q.query)}
        ranked = _anchored(q_ents, _rank(question, view.evidence))[: self.top_chunks]
        held_titles = {words_key(c.title) for c in view.evidence if c.title}
        scores: dict[str, float] = {}
        meta: dict[str, _Bridge] = {}
        lowercase_words = {
            w for c in ranked for w in re.findall(r"(?<![.!?]\s)\b[a-z][a-z'-]+", c.text)
        }
        code_names = names_used_as_code(view.evidence)
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
                for name in prose_entities(sentence, code_names):
                    name = _drop_capitalised_verb(name, sentence, lowercase_words)
                    if not name:
                        continue
                    key = words_key(name)
                    if not key or key <= q_all:
                        continue  # the question already says it
                    if key <= searched_words:
                        continue  # searched before
                    if key in held_titles:
                        continue  # its own page is already held
                    if any(key <= words_key(qe) for qe in q_ents):
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
            key = words_key(b.name)
            if any(key <= words_key(k.name) or words_key(k.name) <= key for k in kept):
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
        wanted = set(content_terms(" ".join(key_words(view.question))))
        for chunk in _rank(view.question, view.evidence)[:2]:
            if not chunk.next_id or chunk.next_id in held or chunk.id in read:
                continue
            stops_short = _stops_short(chunk)
            cov = len(wanted & _chunk_terms(chunk)) / len(wanted) if wanted else 0.0
            if (stops_short and cov > 0) or 0.5 <= cov < 1.0:
                return chunk.id
        return None



def _read_pages(view: PlannerView) -> bool:
    """Whether the run has read any web page whole (not only result snippets)."""
    opened = set(view.pages)
    return bool(opened) and any(c.url and not c.snippet and url_key(c.url) in opened
                                for c in view.evidence)


def _opening(text: str, words: int = 20) -> frozenset[str]:
    """The content words a text (or a page's snippet) begins with."""
    return frozenset(content_terms(" ".join(text.split()[:words])))


def _same_text(a: frozenset[str], b: frozenset[str]) -> bool:
    """Two openings close enough to be copies of one text (Jaccard >= 0.7)."""
    if not a or not b:
        return False
    return len(a & b) / len(a | b) >= 0.7


StopKind = Literal["tool_calls", "steps", "time", "rounds", "loops", "covered"]


@dataclass(frozen=True, slots=True)
class _Stop:
    """Why the planner would answer now; ``reason`` is only what the decision says."""

    kind: StopKind
    reason: str

    @property
    def hard(self) -> bool:
        """A stop no page is worth overriding (budget or time), unlike a rounds limit."""
        return self.kind in ("tool_calls", "steps", "time")


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
    keys = key_words(question)
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


def _anchored(entities: Sequence[str], ranked: Sequence[EvidenceChunk]) -> list[EvidenceChunk]:
    """``ranked`` with the passages naming the question's own named things first.

    The next hop is named by the passage about what the question names ("the arena
    where the Lewiston Maineiacs played"), not by a passage that only shares its
    common words (another arena's page). The passage naming more words of one
    question entity, as a phrase, goes first; ties keep ``ranked``'s order.
    """
    keys = [(normalize_query(e), len(tokenize(e))) for e in entities]
    keys = [(k, n) for k, n in keys if k]
    if not keys:
        return list(ranked)

    def anchor(c: EvidenceChunk) -> int:
        text = normalize_query(f"{c.title} {c.text}")
        return max((n for k, n in keys if mentions(text, (k,))), default=0)

    return sorted(ranked, key=lambda c: -anchor(c))


def _rank(question: str, evidence: Sequence[EvidenceChunk]) -> list[EvidenceChunk]:
    """Evidence by stemmed coverage of the question, then search score, then arrival."""
    wanted = set(content_terms(" ".join(key_words(question))))

    def key(item: tuple[int, EvidenceChunk]) -> tuple[float, float, int]:
        i, c = item
        cov = len(wanted & _chunk_terms(c)) / len(wanted) if wanted else 0.0
        return (-cov, -(c.score or 0.0), i)

    return [c for _, c in sorted(enumerate(evidence), key=key)]
