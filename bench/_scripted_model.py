"""A scripted OpenAI-compatible chat model on loopback, for ``bench/chatqa.py`` and tests.

It plays a competent, honest model that happens to know each HotpotQA row's
gold answer and gold titles, so a bench can ask "does the library keep what a
good model gives it?" without a GPU or an API key. It reads no prompt layout
beyond issue 25's request contracts: the role comes from the request's shape
(``tools``; ``response_format`` and its schema name), the question from the
``Question:`` line, and passages from the chunk ids it knows, found verbatim
in ``[brackets]``.

- planner: searches the question; then answers once both gold titles were
  shown, otherwise searches a name that occurs in what it was shown (the bridge
  a real model follows) or a rephrasing of the question; never a gold title it
  was not shown, never a query twice.
- writer: claims from shown sentences that hold the gold answer or belong to a
  gold paragraph; the quote verbatim, the statement a paraphrase (synonyms,
  US/UK/TV abbreviations, a leading phrase moved to the end, asides dropped,
  numbers and the answer kept); ``answers: true`` on the claim stating the
  answer; ``max_tokens`` honoured (a longer reply is cut, ``finish_reason``
  "length").
- support judge, sufficiency judge: honest (it knows its own paraphrases).
- follow-up rewriter / history summary: the follow-up as is; a short summary.

One fault per server instance (``FAULTS``) reproduces each model-server failure
of issue 25. Every request is recorded (:class:`CallRecord`) so a bench counts
calls and tokens from what the server saw, not from a formula.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

__all__ = [
    "FAULTS",
    "CallRecord",
    "Fault",
    "Passage",
    "Role",
    "Row",
    "ScriptedModel",
    "ScriptedServer",
    "paraphrase",
]

Fault = Literal[
    "none",
    "planner_429",  # every planner call: HTTP 429 with Retry-After: 60
    "planner_stall",  # every planner call: nothing for STALL_S (longer than any client timeout)
    "planner_cut",  # every planner stream stops mid-way (the connection is dropped)
    "planner_prose",  # the first planner turn is prose ("I will search for ...") and no tool call
    "writer_outage",  # every writer call: HTTP 500
    "writer_cut",  # the writer's reply is cut at max_tokens unless max_tokens grew
    "writer_unknown_id",  # the first draft's answer claim cites an id it was never shown
    "writer_bad_quote",  # the first draft's answer claim cites a passage its quote is not in
    "judge_stall",  # every support-judge call: nothing for STALL_S
    "judge_outage",  # every support-judge call: HTTP 500
]
FAULTS: tuple[Fault, ...] = (
    "planner_429", "planner_stall", "planner_cut", "planner_prose", "writer_outage",
    "writer_cut", "writer_unknown_id", "writer_bad_quote", "judge_stall", "judge_outage",
)

Role = Literal["planner", "writer", "support", "entailment", "sufficiency", "rewrite",
               "summary", "other"]
STALL_S = 30.0
WRITER_SYSTEM = "You answer questions using only the evidence given"
_SCHEMA_ROLES: dict[str, Role] = {
    "support": "support", "entailment": "entailment", "answerability": "sufficiency",
    "followup_rewrite": "rewrite", "history_summary": "summary",
}


@dataclass(frozen=True, slots=True)
class Passage:
    """One chunk of the corpus the model knows: its id as the index gives it."""

    id: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class Row:
    """What the model "knows" about one question: its gold answers and gold titles."""

    question: str
    answers: tuple[str, ...]
    gold_titles: tuple[str, ...]

    @property
    def yes_no(self) -> bool:
        return bool(self.answers) and all(_norm(a) in ("yes", "no") for a in self.answers)


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One request as the server saw it (``status`` 0: stalled until the client left)."""

    role: Role
    status: int
    question: str
    prompt_chars: int
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str = ""
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class WrittenClaim:
    """A claim the scripted writer wrote, and whether it wrote it correctly."""

    statement: str
    source_id: str
    quote: str
    answers: bool
    correct: bool


@dataclass(slots=True)
class Reply:
    """What one request gets back."""

    status: int = 200
    content: str = ""
    tool_calls: list[tuple[str, str, str]] = field(default_factory=list)  # id, name, args
    finish_reason: str = "stop"
    headers: dict[str, str] = field(default_factory=dict)
    stall: bool = False
    cut: bool = False
    completion_tokens: int | None = None


# --- text helpers (general English, no word from the data) ---------------------------------

_PUNCT = set(string.punctuation)
_SENTENCE = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[A-Z0-9\"'(])")
_OTHERS = "Other passages the run holds"
"""How the sufficiency prompt heads the held passages not chosen for the writer."""
_ABBREV_END = re.compile(r"(?:^|[\s(])(?:[A-Z]|[A-Z]\.[A-Z]|Dr|Mr|Mrs|Ms|St|Jr|Sr|Co|Inc|Ltd|Mt|"
                         r"Ft|Vol|Gen|Col|Lt|Sgt|Rev|Prof|Corp|Bros|Dept|Cir|Ave|Rd|v|vs|al|ca|Adm|Capt|Cmdr|"
                         r"Gov|Sen|Rep|Maj|Brig|Pres|No|Nos|"
                         r"approx)\.$")
_QUALIFIER = re.compile(r"\s*\([^)]*\)\s*$")
_ID = re.compile(r"\[([^\[\]\n]{1,300}?#\d+)\]")
_STOP = frozenset({"a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "from",
    "and", "or", "as", "is", "are", "was", "were", "be", "been", "being", "did", "does", "do",
    "has", "have", "had", "that", "this", "these", "those", "which", "who", "whom", "whose",
    "what", "when", "where", "why", "how", "its", "it", "their", "his", "her", "there", "than",
    "then", "into", "about", "also", "both", "either", "neither", "same", "more", "most", "less",
    "least", "one", "ones", "other"})
_ABBREVIATIONS: tuple[tuple[str, str], ...] = (
    ("United States of America", "USA"), ("United States", "US"), ("United Kingdom", "UK"),
    ("an American", "a US"), ("American", "US"), ("British", "UK"),  # not in a name (below)
    ("television", "TV"), ("Television", "TV"),
)
_SYNONYMS: tuple[tuple[str, str], ...] = (
    ("films", "movies"), ("film", "movie"), ("began", "started"), ("begun", "started"),
    ("largest", "biggest"), ("founded", "established"), ("located", "situated"),
    ("approximately", "about"), ("numerous", "many"), ("currently", "now"),
    ("originally", "first"), ("commenced", "started"), ("purchased", "bought"),
    ("famous", "well-known"), ("served as", "worked as"), ("also known as", "also called"),
    ("known as", "called"), ("headquartered", "based"), ("consists of", "is made up of"),
    ("including", "such as"), ("released", "issued"), ("singer", "vocalist"),
    ("albums", "records"), ("album", "record"), ("novels", "books"), ("novel", "book"),
    ("wrote", "penned"), ("produced by", "made by"), ("primarily", "mainly"),
    ("commonly", "often"), ("professional", "pro"), ("died", "passed away"),
)
_LEADING = re.compile(r"^(?P<lead>(?:In|On|At|During|After|Before|Since|From|By|As of|Until)"
                      r"\s[^,]{2,60}),\s+(?P<rest>.+)$")
_DEMONYMS = ("American", "British")
_DASHES = re.compile(r"[\u2010-\u2015]")
_PRONOUN = re.compile(r"^(He|She|It|They)\s+(?=[a-z])")
_POSSESSIVE = re.compile(r"^(His|Her|Its|Their)\s+(?=[a-z])")
_TRAILING = re.compile(r",\s(?:when|where|which|who|whose|while|although|though)\s")


def _norm(text: str) -> str:
    """HotpotQA's answer normalisation: lower case, no punctuation or articles, single spaces."""
    s = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def _ws(text: str) -> str:
    return " ".join(text.split())


def _contains(text: str, answer: str) -> bool:
    a = _norm(answer)
    return bool(a) and f" {a} " in f" {_norm(_DASHES.sub(' ', text))} "


def sentences(text: str) -> list[str]:
    """The sentences of a passage, whitespace collapsed (each a verbatim span of the text);
    an initial or a short abbreviation ("K. A.", "Dr.", "St.") does not end one."""
    out: list[str] = []
    for piece in (_ws(p) for p in _SENTENCE.split(text)):
        if out and _ABBREV_END.search(out[-1]):
            out[-1] = f"{out[-1]} {piece}"
        elif piece:
            out.append(piece)
    return out


def name_of(title: str) -> str:
    """A title as text names it: without a parenthesised qualifier ("X (band)" -> "X")."""
    return _QUALIFIER.sub("", title).strip()


def mentions(text: str, name: str) -> bool:
    """``text`` names ``name``: as is, the part of a "Place, Region" name before the comma,
    or a one-word name in another number ("berry" / "berries")."""
    forms = [re.escape(name)]
    if "," in name:
        forms.append(re.escape(name.split(",", 1)[0].strip()))
    if " " not in name and len(name) >= 5:
        forms.append(re.escape(name[:-1]) + r"\w{0,3}")
    return any(re.search(rf"(?<!\w){f}(?!\w)", text, re.I) is not None for f in forms)


def _span_of(sentence: str, answer: str) -> str | None:
    """The answer as the sentence writes it (case and punctuation as there), if it is there."""
    words = [w for w in (w.strip(string.punctuation) for w in answer.split()) if w]
    if words and words[0].lower() in ("a", "an", "the"):
        words = words[1:]
    if not words:
        return None
    pattern = r"[\W_]*".join(re.escape(w) for w in words)
    hit = re.search(rf"(?<!\w){pattern}(?!\w)", sentence, re.I)
    return hit.group(0) if hit else None


def paraphrase(sentence: str, keep: Sequence[str] = (), subject: str = "") -> str:
    """A faithful rewording of ``sentence``: a leading pronoun named (``subject``), asides and
    trailing relative clauses dropped, synonyms and abbreviations, a leading time or place
    phrase moved to the end; ``keep`` spans and every number untouched."""
    text = _ws(sentence).rstrip()
    holds: list[str] = []
    for span in keep:
        if span and span in text:
            text = text.replace(span, f"\x00{len(holds)}\x00")
            holds.append(span)
    text = re.sub(r"\s*\((?:[^()\x00]*)\)", "", text)  # asides without a kept span
    text = re.sub(r"\s*[\u2014]\s*", ", ", text)  # an em-dash aside becomes a comma one
    trailing = _TRAILING.search(text)
    if trailing and "\x00" not in text[trailing.start():] and trailing.start() > 20:
        text = text[: trailing.start()] + "."
    if subject and "\x00" not in subject:
        text = _PRONOUN.sub(f"{subject} ", text, count=1)
        text = _POSSESSIVE.sub(f"{subject}'s ", text, count=1)
    for old, new in (*_ABBREVIATIONS, *_SYNONYMS):
        # a capitalised word stays when a name goes on after it ("American Revolutionary
        # War"); a demonym only as an adjective ("an American actor", not "an American from")
        after = r"(?!\s+[A-Z])" if old.split()[-1][0].isupper() else ""
        if old.endswith(_DEMONYMS):
            after += rf"(?=\s+(?!(?:{'|'.join(_STOP)})\b)[a-z])"
        text = re.sub(rf"(?<![\w\x00-]){re.escape(old)}(?![\w\x00-]){after}", new, text)
    end = text[-1] if text and text[-1] in ".!?" else "."
    body = text.rstrip(".!?").strip()
    lead = _LEADING.match(body)
    if lead and "\x00" not in lead.group("lead"):
        rest = lead.group("rest")
        phrase = lead.group("lead")
        body = f"{rest[0].upper()}{rest[1:]} {phrase[0].lower()}{phrase[1:]}"
    for i, span in enumerate(holds):
        body = body.replace(f"\x00{i}\x00", span)
    return _ws(body) + end


def quote_span(sentence: str, answer_span: str | None, limit: int = 240) -> str:
    """A verbatim span of ``sentence`` short enough to quote: whole clauses around the answer
    (or from the start), at least a few words, at most ``limit`` characters."""
    if len(sentence) <= limit:
        return sentence
    bounds = [0, *(m.end() for m in re.finditer(r"[,;]\s", sentence)), len(sentence)]
    clauses = list(itertools.pairwise(bounds))
    at = sentence.find(answer_span) if answer_span else 0
    first = next((i for i, (a, b) in enumerate(clauses) if a <= max(at, 0) < b), 0)
    lo = hi = first
    while True:  # grow right, then left, while it fits; stop once it is long enough
        length = clauses[hi][1] - clauses[lo][0]
        if length >= 80:
            break
        if hi + 1 < len(clauses) and clauses[hi + 1][1] - clauses[lo][0] <= limit:
            hi += 1
        elif lo > 0 and clauses[hi][1] - clauses[lo - 1][0] <= limit:
            lo -= 1
        else:
            break
    start, end = clauses[lo][0], clauses[hi][1]
    if end - start < 40:  # whole clauses stay too short: words up to the limit instead
        end = len(sentence)
    if end - start > limit:  # one clause longer than the limit: words around the answer
        centre = at if at >= 0 else start
        start = max(start, centre - limit // 3)
        end = min(end, start + limit)
        if start > 0 and sentence[start - 1] != " ":
            start = sentence.find(" ", start) + 1
        if end < len(sentence) and sentence[end] != " ":
            end = sentence.rfind(" ", start, end)
    return sentence[start:end].strip().rstrip(",;").strip()


# --- the model -------------------------------------------------------------------------------


def _contents(messages: Iterable[Mapping[str, Any]], roles: Iterable[str]) -> list[str]:
    wanted = set(roles)
    out: list[str] = []
    for m in messages:
        if m.get("role") not in wanted:
            continue
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [str(p.get("text", "")) for p in content if isinstance(p, dict)]
    return out


def _tokens(chars: int) -> int:
    return max(1, math.ceil(chars / 4))


class ScriptedModel:
    """The behaviour behind :class:`ScriptedServer`: one reply per request body.

    Args:
        passages: the corpus as the index chunked it (ids exactly as runs show them).
        rows: the questions it knows (gold answers and titles).
        fault: the failure to play (``"none"``: a healthy server).
        model: the name it reports.
    """

    def __init__(self, passages: Iterable[Passage], rows: Iterable[Row], *,
                 fault: Fault = "none", model: str = "scripted") -> None:
        self.passages = {p.id: p for p in passages}
        self.rows = {_ws(r.question).casefold(): r for r in rows}
        self.fault: Fault = fault
        self.model = model
        self.calls: list[CallRecord] = []
        self.written: dict[tuple[str, str, str], WrittenClaim] = {}
        self._writes: dict[str, int] = {}  # writer requests per question
        self._first_max_tokens: dict[str, int | None] = {}

    def reset(self) -> None:
        """Forget per-question state (a new run of the same question starts afresh)."""
        self._writes.clear()
        self._first_max_tokens.clear()

    # --- reading a request ----------------------------------------------------------------

    @staticmethod
    def role(body: Mapping[str, Any]) -> Role:
        """The role a request plays, from its shape alone (CONTRACTS.md)."""
        if body.get("tools"):
            return "planner"
        fmt = body.get("response_format") or {}
        messages = body.get("messages") or []
        users = _contents(messages, ("user",))
        if any(u.lstrip().startswith("PREMISE:") for u in users):
            return "entailment"
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            schema = fmt.get("json_schema") or {}
            return _SCHEMA_ROLES.get(str(schema.get("name", "")), "other")
        system = " ".join(_contents(messages, ("system",))).lstrip()
        if system.startswith(WRITER_SYSTEM) or (isinstance(fmt, dict)
                                                and fmt.get("type") == "json_object"):
            return "writer"
        return "other"

    @staticmethod
    def question_of(body: Mapping[str, Any]) -> str:
        for text in _contents(body.get("messages") or [], ("user",)):
            for line in text.splitlines():
                for head in ("Question:", "Follow-up:"):
                    if line.startswith(head):
                        return line[len(head):].strip()
        return ""

    def shown(self, texts: Iterable[str]) -> list[Passage]:
        """Known passages whose id occurs in ``[brackets]`` in ``texts``, first mention first."""
        seen: dict[str, Passage] = {}
        for text in texts:
            for raw in _ID.findall(text):
                for cid in (raw, raw.split(":", 1)[-1]):
                    if cid in self.passages and cid not in seen:
                        seen[cid] = self.passages[cid]
                        break
        return list(seen.values())

    def known(self, question: str) -> Row:
        return self.rows.get(_ws(question).casefold()) or Row(question, (), ())

    # --- the reply ------------------------------------------------------------------------

    def respond(self, body: Mapping[str, Any]) -> tuple[Role, str, Reply]:
        role = self.role(body)
        question = self.question_of(body)
        match role:
            case "planner":
                reply = self._planner(body, question)
            case "writer":
                reply = self._writer(body, question)
            case "support":
                reply = self._judge_fault() or self._support(body, question)
            case "entailment":
                reply = self._judge_fault() or self._entailment(body)
            case "sufficiency":
                reply = Reply(content=json.dumps(self._sufficiency(body, question)))
            case "rewrite":
                reply = Reply(content=json.dumps({"standalone": question, "references": []}))
            case "summary":
                users = " ".join(_contents(body.get("messages") or [], ("user",)))
                reply = Reply(content=json.dumps({"summary": _ws(users)[:400]}))
            case _:
                reply = Reply(content="{}")
        return role, question, reply

    def _judge_fault(self) -> Reply | None:
        if self.fault == "judge_stall":
            return Reply(stall=True)
        if self.fault == "judge_outage":
            return _error(500, "the judge model is unavailable")
        return None

    # planner

    def _planner(self, body: Mapping[str, Any], question: str) -> Reply:
        messages: list[Mapping[str, Any]] = list(body.get("messages") or [])
        first_turn = not any(m.get("role") == "assistant" for m in messages)
        if self.fault == "planner_429":
            return _error(429, "rate limit reached for requests", {"Retry-After": "60"})
        if self.fault == "planner_stall":
            return Reply(stall=True)
        if self.fault == "planner_prose" and first_turn:
            return Reply(content=f"I will search for {question}")
        offered = {str((t.get("function") or {}).get("name", "")) for t in body.get("tools", [])
                   if isinstance(t, dict)}
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        calls = self._plan(messages, question, first_turn)
        out: list[tuple[str, str, str]] = []
        for i, (name, args) in enumerate(calls):
            if name in offered:
                out.append((f"call_{turn}_{i}", name, json.dumps(args, ensure_ascii=False)))
        if not out and "answer" in offered:
            out = [(f"call_{turn}_0", "answer", "{}")]
        return Reply(tool_calls=out, finish_reason="tool_calls" if out else "stop",
                     cut=self.fault == "planner_cut")

    def _plan(self, messages: Sequence[Mapping[str, Any]], question: str,
              first_turn: bool) -> list[tuple[str, dict[str, Any]]]:
        done = _searched(messages)
        if first_turn or not done:
            return [("search", {"query": question})]
        row = self.known(question)
        visible = "\n".join(_contents(messages, ("user", "tool")))
        titles = {p.title for p in self.shown([visible])}
        missing = [t for t in row.gold_titles if t not in titles]
        if not missing:  # both gold paragraphs shown (or a question it has no gold for)
            return [("answer", {})]
        calls: list[tuple[str, dict[str, Any]]] = []
        for title in missing:  # the bridge: a missing paragraph's name, where it was shown
            name = name_of(title)
            if mentions(visible, name) and name.casefold() not in done:
                calls.append(("search", {"query": name}))
        if calls:
            return calls
        for query in _rephrasings(question):
            if query.casefold() not in done:
                return [("search", {"query": query})]
        return [("answer", {})]

    # writer

    def _writer(self, body: Mapping[str, Any], question: str) -> Reply:
        if self.fault == "writer_outage":
            return _error(500, "the model server failed")
        key = _ws(question).casefold()
        attempt = self._writes.get(key, 0) + 1
        self._writes[key] = attempt
        max_tokens = body.get("max_tokens")
        limit = int(max_tokens) if isinstance(max_tokens, int) else None
        first_limit = self._first_max_tokens.setdefault(key, limit)
        messages = body.get("messages") or []
        users = _contents(messages, ("user",))
        # the prompt asks for a "lead" (the direct yes/no answer): follow it, else say the
        # verdict at the head of the answer claim, as a model told nothing would
        leads = any('"lead"' in text for text in _contents(messages, ("system",)))
        claims, lead = self.claims(question, users, faulty=attempt == 1, lead=leads)
        reply: dict[str, Any] = {"lead": lead} if leads else {}
        reply["claims"] = [{"statement": c.statement, "source_id": c.source_id,
                            "quote": c.quote, "answers": c.answers} for c in claims]
        text = json.dumps(reply, ensure_ascii=False)
        wants_more = (self.fault == "writer_cut" and limit is not None
                      and (first_limit is None or limit <= first_limit))
        if wants_more and limit is not None:  # it would write on past its limit
            cut = min(limit * 4, max(1, len(text) // 2))
            return Reply(content=text[:cut], finish_reason="length", completion_tokens=limit)
        if limit is not None and _tokens(len(text)) > limit:
            return Reply(content=text[: limit * 4], finish_reason="length",
                         completion_tokens=limit)
        return Reply(content=text)

    def claims(self, question: str, prompts: Sequence[str], *, faulty: bool = False,
               lead: bool = False) -> tuple[list[WrittenClaim], str]:
        """The claims it writes for ``question`` over the passages shown in ``prompts``, and
        its lead (the yes/no verdict, when ``lead`` asks for one apart from the claims)."""
        row = self.known(question)
        shown = self.shown(prompts)
        visible = _ws(" ".join(prompts))
        gold = set(row.gold_titles)
        ordered = [p for p in shown if p.title in gold] + [p for p in shown if p.title not in gold]
        picked: list[tuple[Passage, str, str | None]] = []  # passage, sentence, kept answer span

        def readable(p: Passage) -> list[str]:
            return [s for s in sentences(p.text) if s in visible]

        if not row.yes_no:
            for p in ordered:
                for s in readable(p):
                    span = next((sp for a in row.answers if _contains(s, a)
                                 and (sp := _span_of(s, a))), None)
                    if span:
                        picked.append((p, s, span))
                        break
                if picked:
                    break
        for p in ordered:
            if p.title not in gold or any(q.title == p.title for q, _, _ in picked):
                continue
            first = readable(p)
            if first:
                picked.append((p, first[0], None))
            if len(picked) >= 3:
                break
        if not picked and ordered:  # no gold passage shown: say what the best passage says
            first = readable(ordered[0])
            if first:
                picked.append((ordered[0], first[0], None))
        out: list[WrittenClaim] = []
        yes_no = row.answers[0].strip().capitalize() if row.yes_no else ""
        for i, (p, s, span) in enumerate(picked):
            quote = quote_span(s, span)
            statement = paraphrase(quote, [span] if span else [], name_of(p.title))
            if i == 0 and yes_no and not lead:
                statement = f"{yes_no}: {statement}"
            claim = WrittenClaim(statement, p.id, quote, answers=i == 0 and not (yes_no and lead),
                                 correct=True)
            if i == 0 and faulty:
                claim = self._fault_claim(claim, shown)
            out.append(claim)
        for c in out:
            self.written[(c.statement, c.source_id, c.quote)] = c
        return out, yes_no if lead else ""

    def _fault_claim(self, claim: WrittenClaim, shown: Sequence[Passage]) -> WrittenClaim:
        if self.fault == "writer_unknown_id":
            doc, _, _ = claim.source_id.rpartition("#")
            wrong = f"{doc}#99"
            return WrittenClaim(claim.statement, wrong, claim.quote, claim.answers, False)
        if self.fault == "writer_bad_quote":
            other = next((p for p in shown if p.id != claim.source_id
                          and _ws(claim.quote).casefold() not in _ws(p.text).casefold()), None)
            if other is not None:
                return WrittenClaim(claim.statement, other.id, claim.quote, claim.answers, False)
        return claim

    # judges

    def supported(self, statement: str, quote: str, source_id: str) -> tuple[bool, str]:
        """Its honest verdict on one claim: is the quote in the cited passage, and does the
        statement say what the quote says (it knows its own paraphrases)?"""
        passage = self.passages.get(source_id) or self.passages.get(source_id.split(":", 1)[-1])
        if passage is not None and _ws(quote).casefold() not in _ws(passage.text).casefold():
            return False, "the quote is not in the cited passage"
        written = self.written.get((statement, source_id, quote))
        if written is not None:
            return written.correct, ("the statement restates the quote" if written.correct
                                     else "the claim does not match its source")
        ours = {paraphrase(quote).casefold(), _ws(quote).casefold()}
        if _ws(statement).casefold() in ours:
            return True, "the statement restates the quote"
        return False, "the quote does not say this"

    def _support(self, body: Mapping[str, Any], question: str) -> Reply:
        text = "\n".join(_contents(body.get("messages") or [], ("user",)))
        verdicts = []
        for index, statement, cited, quote in _judge_items(text):
            ok, reason = self.supported(statement, quote, cited)
            verdicts.append({"claim": index, "label": "supported" if ok else "unsupported",
                             "reason": reason})
        return Reply(content=json.dumps({"verdicts": verdicts}, ensure_ascii=False))

    def _entailment(self, body: Mapping[str, Any]) -> Reply:
        text = "\n".join(_contents(body.get("messages") or [], ("user",)))
        premise = re.search(r"^PREMISE:\s*(.*)$", text, re.M)
        hypothesis = re.search(r"^HYPOTHESIS:\s*(.*)$", text, re.M)
        quote = premise.group(1).strip() if premise else ""
        statement = hypothesis.group(1).strip() if hypothesis else ""
        ok = any(c.correct for k, c in self.written.items() if k[0] == statement
                 and k[2] == quote) or self.supported(statement, quote, "")[0]
        return Reply(content=json.dumps({"label": "supports" if ok else "neutral",
                                         "probability": 0.95 if ok else 0.1}))

    def _sufficiency(self, body: Mapping[str, Any], question: str) -> dict[str, Any]:
        row = self.known(question)
        users = _contents(body.get("messages") or [], ("user",))
        # passages listed as "other passages the run holds" are not the writer's: it adds
        # those the answer needs (a gold paragraph, or one holding the answer) and judges
        # the chosen ones plus those
        chosen_text = [u.split(_OTHERS, 1)[0] for u in users]
        other_text = [u.split(_OTHERS, 1)[1] for u in users if _OTHERS in u]
        chosen = self.shown(chosen_text)
        add = [p for p in self.shown(other_text) if p not in chosen
               and (p.title in row.gold_titles
                    or any(_contains(p.text, a) for a in row.answers))]
        shown = [*chosen, *add]
        titles = [p.title for p in shown]
        visible = "\n".join(users)
        covered = [t for t in row.gold_titles if t in titles]
        missing = [t for t in row.gold_titles if t not in titles]
        has_answer = any(_contains(p.text, a) for p in shown for a in row.answers)
        answerable = (not missing) if row.yes_no or not row.answers else (has_answer
                                                                          or not missing)
        if not row.gold_titles:
            answerable = bool(shown)
        searches = [name_of(t) for t in missing if mentions(visible, name_of(t))]
        added = [p.id for p in add]
        if answerable:
            return {"verdict": "answerable", "answer_type": "yes/no" if row.yes_no else "entity",
                    "covered": [name_of(t) for t in covered] or [question], "missing": [],
                    "searches": [], "reason": "the passages state the answer", "add": added,
                    "conflicts": []}
        return {"verdict": "partial" if covered else "unanswerable",
                "answer_type": "yes/no" if row.yes_no else "entity",
                "covered": [name_of(t) for t in covered],
                "missing": ["the other part of the question"],
                "searches": searches or _rephrasings(question)[:1],
                "reason": "a part of the question is not in the passages", "add": added,
                "conflicts": []}


def _searched(messages: Sequence[Mapping[str, Any]]) -> set[str]:
    """Queries it already asked for (from its own earlier tool calls in the history)."""
    done: set[str] = set()
    for m in messages:
        if m.get("role") != "assistant":
            continue
        for call in m.get("tool_calls") or []:
            fn = (call.get("function") or {}) if isinstance(call, dict) else {}
            if not isinstance(fn, dict) or fn.get("name") != "search":
                continue
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                done.add(_ws(str(json.loads(fn.get("arguments") or "{}").get("query", "")))
                         .casefold())
    return done


def _rephrasings(question: str) -> list[str]:
    """Other ways to search a question: its content words; its quoted or capitalised names."""
    words = [w.strip(string.punctuation) for w in question.split()]
    content = " ".join(w for w in words if w and w.lower() not in _STOP)
    quoted = re.findall(r"\"([^\"]{2,80})\"", question)
    names = re.findall(r"(?:[A-Z][\w'&.-]*(?:\s+(?:of|the|and|de|von|van)?\s*[A-Z][\w'&.-]*)*)",
                       question)
    names = [n for n in names if n.lower() not in _STOP and len(n) > 2][1:]
    out = [content, *quoted, " ".join(names)]
    return [q for q in dict.fromkeys(_ws(q) for q in out) if q and q != _ws(question)]


_CLAIM = re.compile(r"^Claim (\d+):\s*(.*)$")


def _judge_items(text: str) -> list[tuple[int, str, str, str]]:
    """``(index, statement, cited id, quote)`` of each claim in a support-judge prompt."""
    items: list[tuple[int, str, str, str]] = []
    current: list[Any] | None = None
    for line in text.splitlines():
        hit = _CLAIM.match(line)
        if hit:
            if current is not None:
                items.append((current[0], current[1], current[2], current[3]))
            current = [int(hit.group(1)), hit.group(2).strip(), "", ""]
        elif current is not None and line.startswith("Cites:"):
            ids = _ID.findall(line)
            current[2] = ids[0] if ids else line[len("Cites:"):].strip()
        elif current is not None and line.startswith("Quote:"):
            current[3] = line[len("Quote:"):].strip()
    if current is not None:
        items.append((current[0], current[1], current[2], current[3]))
    return items


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    body = json.dumps({"error": {"message": message, "type": "server_error", "code": status}})
    return Reply(status=status, content=body, headers=headers or {})


# --- the server ------------------------------------------------------------------------------


class ScriptedServer:
    """``POST /v1/chat/completions`` on 127.0.0.1 (a free port) over a :class:`ScriptedModel`.

    Streams (SSE, tool calls as ``delta.tool_calls``, a usage chunk when asked for)
    when the body says ``"stream": true``, else one JSON body. Use ``async with``.
    """

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()

    async def __aenter__(self) -> ScriptedServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self.url

    async def stop(self) -> None:
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body: Any = await request.json()
        role, question, reply = self.model.respond(body)
        messages = body.get("messages") or []
        prompt_chars = len(json.dumps(messages)) + len(json.dumps(body.get("tools", [])))
        completion = reply.completion_tokens or _tokens(
            len(reply.content) + sum(len(n) + len(a) for _, n, a in reply.tool_calls))
        max_tokens = body.get("max_tokens")
        record = CallRecord(role, 0 if reply.stall else reply.status, question, prompt_chars,
                            _tokens(prompt_chars), completion if reply.status == 200 else 0,
                            reply.finish_reason if reply.status == 200 else "",
                            max_tokens if isinstance(max_tokens, int) else None)
        self.model.calls.append(record)
        if reply.stall:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), STALL_S)
            return web.json_response({"error": {"message": "stalled"}}, status=504)
        if reply.status != 200:
            return web.Response(status=reply.status, text=reply.content,
                                content_type="application/json", headers=reply.headers)
        usage = {"prompt_tokens": record.prompt_tokens, "completion_tokens": completion,
                 "total_tokens": record.prompt_tokens + completion}
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
            if reply.tool_calls:
                message["tool_calls"] = [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in reply.tool_calls]
            return web.json_response({
                "id": "chatcmpl-scripted", "object": "chat.completion", "model": self.model.model,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": reply.finish_reason}],
                "usage": usage})
        return await self._stream(request, body, reply, usage)

    async def _stream(self, request: web.Request, body: Mapping[str, Any], reply: Reply,
                      usage: dict[str, int]) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(request)
        events: list[dict[str, Any]] = [self._chunk({"role": "assistant", "content": ""})]
        text = reply.content
        events += [self._chunk({"content": text[i:i + 48]}) for i in range(0, len(text), 48)]
        for index, (call_id, name, args) in enumerate(reply.tool_calls):
            events.append(self._chunk({"tool_calls": [{
                "index": index, "id": call_id, "type": "function",
                "function": {"name": name, "arguments": ""}}]}))
            events += [self._chunk({"tool_calls": [{"index": index,
                                                    "function": {"arguments": args[i:i + 16]}}]})
                       for i in range(0, len(args), 16)]
        if reply.cut:  # the connection drops half-way through the reply
            for event in events[: max(2, len(events) // 2)]:
                await resp.write(f"data: {json.dumps(event)}\n\n".encode())
            if request.transport is not None:
                request.transport.close()
            return resp
        events.append(self._chunk({}, reply.finish_reason))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({"id": "chatcmpl-scripted", "object": "chat.completion.chunk",
                           "model": self.model.model, "choices": [], "usage": usage})
        for event in events:
            await resp.write(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "chatcmpl-scripted", "object": "chat.completion.chunk",
                "model": self.model.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
