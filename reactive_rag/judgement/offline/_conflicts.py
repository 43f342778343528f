"""Conflicting evidence, found in code: two chunks give different values for what is asked.

Pure and deterministic (the run machine calls it before writing; about 1 ms
for ten paragraphs). A conflict
is only reported when both sides plainly answer the question, because a false
conflict would be a new kind of wrong answer:

* the question asks for a year/date (``when``, ``what year``), a number
  (``how many``, ``how tall``, ``what is the ...``) or, for ``who``, a name;
* the question's subject is a named entity in it (else a chunk title it
  contains), and its *relation words* are what is left of its content words
  ("born", "population", "founded");
* a sentence is read when it holds every relation word, every other entity of
  the question, and the subject as its own grammatical subject: named in it
  (not as "X's father", "father of X", "X Airport", with no other name between
  it and the relation word), or, in a chunk titled after the subject, through
  "He"/"She"/"It" or a part of the name at the start of the sentence right
  after a sentence about the subject, or, whatever the chunk's title, through
  "It"/"They"/"The <word>" right after a sentence that names the subject and
  no other name ("Orion-7 is a language model. The model has ..."; the word
  one the chunk uses for it: a title word, or what that sentence says it is);
  such a side quotes both sentences;
* the value is the one nearest the relation word (after it within 8 words,
  else before it within 5; the value itself when the relation word is the
  noun it counts: "130 billion parameters"); hedged ("reportedly", "may"), negated, bounded
  ("over", "before"), ranged ("1815-1852") or alternative ("1815 or 1816")
  values are not read, nor are sentences whose relation words point at
  different values; a name (two words at least, not in quotes or
  parentheses, not "V's son") only as "X was founded by V" or "V founded
  the X", and only when it is the one name near the relation word;
* comparisons ("A or B?", "which is older") are not one value: nothing is read;
* values compare as dates (year, then month and day when both have them),
  numbers (same unit, same as-of years; round numbers may round, 5%, 15% when
  hedged with "about") or names (sharing a surname or one inside the other is
  the same name); for names, a side whose chunk also names the other value is
  not a disagreement (co-founders, successors);
* both sides must come from different chunks and from chunks of the same
  scope: a chunk titled "Springfield, Illinois" and one titled "Springfield,
  Massachusetts" (or "Springfield (band)") are about different subjects, and
  so is one titled "Springfield Airport" whose text uses that longer name; a
  title that only mentions the subject ("Orion-7 review", "Notes on Orion-7")
  or does not name it at all puts no bound on it, so a blog and the official
  documentation, titled differently, disagree when both name the subject;
* the more credible side (``Credibility``: collection, else URL domain) leads
  and is ``preferred`` when strictly heavier; every side carries its chunk id
  and quote, and :func:`conflict_claims` makes one cited claim of each.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from actors.rerank import Credibility
from actors.text import NEGATIONS, STOPWORDS, content_terms, split_sentences, stem
from streams import Claim, Conflict, ConflictDetected, ConflictSide, EvidenceChunk

__all__ = ["conflict_claims", "conflicts_for_answer", "find_conflicts"]

Kind = Literal["date", "number", "name"]

MAX_SIDES = 3
_AFTER = 8  # a value this many words after the relation word, at most
_BEFORE = 5  # or this many before it
_NEAR_SUBJECT = 12  # the subject mention this close to the relation word
_MIN_WORDS = 4  # a side's sentence is quoted, so it must be long enough to verify

_WORD = re.compile(r"[^\W_]+")
_WH = frozenset({"who", "whom", "whose", "when", "what", "which", "how", "where", "why",
                 "in", "on", "did", "does", "do", "is", "was", "were", "are", "has", "have"})
_GENERIC = frozenset({
    "year", "years", "date", "day", "month", "decade", "century", "time", "number", "name",
    "exactly", "approximately", "roughly", "exact", "precise", "precisely", "actual",
    "actually", "originally", "officially", "current", "currently", "total", "first",
    "called", "known", "according",
})
_IRREGULAR = {
    "wrote": "write", "written": "write", "won": "win", "built": "build", "began": "begin",
    "begun": "begin", "made": "make", "led": "lead", "became": "become", "took": "take",
    "taken": "take", "gave": "give", "given": "give", "held": "hold", "sold": "sell",
    "bought": "buy", "grew": "grow", "grown": "grow", "drew": "draw", "drawn": "draw",
    "sang": "sing", "sung": "sing", "ran": "run", "found": "find", "met": "meet",
    "died": "die", "dead": "die", "death": "die", "birth": "born",
}
_COMPARING = frozenset({
    "or", "both", "either", "neither", "more", "most", "less", "least", "fewer", "larger",
    "largest", "smaller", "smallest", "bigger", "biggest", "older", "oldest", "younger",
    "youngest", "earlier", "earliest", "later", "latest", "longer", "longest", "shorter",
    "shortest", "taller", "tallest", "higher", "highest", "lower", "lowest", "farther",
    "further", "closer", "same", "different", "between", "versus", "vs",
})
_PRONOUNS = frozenset({"he", "she", "it", "they"})
_PREPOSITIONS = frozenset({"of", "with", "by", "for", "from", "to", "about", "like", "than",
                           "at", "in", "on", "under", "and", "or", "between", "alongside",
                           "including", "near", "after", "before"})
_CONNECTORS = frozenset({"of", "the", "de", "van", "von", "da", "di", "du", "del", "der",
                         "la", "le", "bin", "ibn", "al"})
_HONORIFICS = frozenset({"sir", "dr", "mr", "mrs", "ms", "lord", "lady", "saint", "st", "king",
                         "queen", "prince", "princess", "president", "professor", "prof",
                         "general", "dame", "rev"})
_HEDGES = frozenset({"reportedly", "allegedly", "supposedly", "rumoured", "rumored", "possibly",
                     "probably", "perhaps", "may", "might", "claimed", "claims", "claim",
                     "believed", "thought", "disputed", "uncertain", "unclear", "unknown",
                     "unconfirmed", "legend", "sources"})
_NEGATIONS = NEGATIONS | {"t"}  # ("t": the tail of "wasn't" once split)
_BOUNDS = ("more than", "less than", "fewer than", "at least", "at most", "up to", "over",
           "under", "nearly", "almost", "above", "below", "exceeding", "before", "after",
           "since", "until", "by", "till", "early", "late", "mid")
_APPROX = ("about", "approximately", "around", "roughly", "some", "an estimated", "estimated",
           "circa", "c.", "ca.", "approx.")
_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
    "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}
_MONTH = (r"(?:January|February|March|April|May|June|July|August|September|October|November|"
          r"December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)")
_DATES = (
    re.compile(rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<m>{_MONTH})\.?,?\s+(?P<y>\d{{3,4}})\b"),
    re.compile(rf"\b(?P<m>{_MONTH})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{3,4}})\b"),
    re.compile(rf"\b(?P<m>{_MONTH})\.?,?\s+(?P<y>\d{{4}})\b"),
    re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b"),
    re.compile(r"(?<![\d,.$€£¥])\b(?P<y>\d{1,4})\s*(?P<era>BCE|BC|CE|AD)\b"),
    re.compile(r"(?<![\d,.$€£¥])\b(?P<y>1\d{3}|20\d{2})\b(?![,.]\d)"),
)
_NUMBER = re.compile(
    r"(?:(?P<cur>[$€£¥])\s?)?(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<dec>\d+))?")
_MULTIPLIERS = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_UNITS = {
    "km": "km", "kilometre": "km", "kilometres": "km", "kilometer": "km", "kilometers": "km",
    "m": "m", "metre": "m", "metres": "m", "meter": "m", "meters": "m",
    "cm": "cm", "centimetres": "cm", "centimeters": "cm", "mm": "mm",
    "mi": "mi", "mile": "mi", "miles": "mi", "ft": "ft", "foot": "ft", "feet": "ft",
    "inch": "in", "inches": "in", "kg": "kg", "kilogram": "kg", "kilograms": "kg",
    "g": "g", "gram": "g", "grams": "g", "t": "t", "tonne": "t", "tonnes": "t", "ton": "ton",
    "tons": "ton", "lb": "lb", "lbs": "lb", "pounds": "lb", "ha": "ha", "hectare": "ha",
    "hectares": "ha", "acre": "acre", "acres": "acre", "km2": "km2", "km²": "km2",
    "mph": "mph", "kmh": "kmh", "percent": "%", "%": "%", "years": "year", "year": "year",
    "yr": "year", "days": "day", "day": "day", "hours": "hour", "hour": "hour",
    "minutes": "minute", "seconds": "second", "s": "second",
}
_KNOWN_UNITS = frozenset(_UNITS.values())
_PEOPLE = frozenset({"people", "persons", "inhabitants", "residents", "citizens", "population"})
_UNIT_WORD = re.compile(r"\s*-?\s*(?P<u>%|[A-Za-z²]+(?:\s*/\s*[A-Za-z]+)?)")


# --- tokens ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Tok:
    start: int
    end: int
    text: str
    low: str
    stem: str

    @property
    def cap(self) -> bool:
        return self.text[:1].isupper()


def _tokens(text: str) -> list[_Tok]:
    found = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(text)]
    lows = [w.casefold() for _, _, w in found]
    stems = stem(_IRREGULAR.get(w, w) for w in lows)
    return [_Tok(s, e, w, low, st) for (s, e, w), low, st in zip(found, lows, stems, strict=True)]


def _rel_stem(word: str) -> str:
    return stem([_IRREGULAR.get(word, word)])[0]


def _title_key(title: str) -> tuple[str, ...]:
    return tuple(w.casefold() for w in _WORD.findall(re.sub(r"\s*\([^)]*\)\s*$", "", title)))


def _find_seq(tokens: Sequence[_Tok], seq: Sequence[str]) -> list[int]:
    n = len(seq)
    return [i for i in range(len(tokens) - n + 1)
            if all(tokens[i + j].low == seq[j] for j in range(n))] if n else []


# --- the question ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Question:
    kind: Kind
    subject: tuple[str, ...]
    subject_text: str
    relation: frozenset[str]
    relation_text: str
    others: tuple[tuple[str, ...], ...]  # the question's other named entities
    share: bool = False  # the question asks for a percentage

    @property
    def entity_words(self) -> frozenset[str]:
        return frozenset(self.subject).union(*self.others)


def _kind(question: str) -> Kind | None:
    q = " ".join(question.casefold().split())
    words = set(_WORD.findall(q))
    if words & _COMPARING or re.search(r"\w+er than\b", q):
        return None  # "A or B?", "which has more ...": a comparison, not one value
    if q.startswith(("who ", "whom ", "whose ")):
        return "name"
    if (q.startswith("when ") or re.match(r"^(?:in |on |by )?(?:what|which) (?:year|date)\b", q)
            or " what year " in f" {q} "):
        return "date"
    if re.match(r"^how (?:many|much|tall|long|far|high|big|large|deep|heavy|wide|fast)\b", q):
        return "number"
    if q.startswith(("what ", "which ")):
        return "number"
    return None


def _entities(question: str) -> list[tuple[list[_Tok], str]]:
    toks = _tokens(question)
    spans: list[list[_Tok]] = []
    current: list[_Tok] = []
    for i, t in enumerate(toks):
        initial = i == 0 and (t.low in _WH or t.low in STOPWORDS)
        connector = (bool(current) and t.low in _CONNECTORS and i + 1 < len(toks)
                     and toks[i + 1].cap and question[t.end:toks[i + 1].start].strip() == "")
        gap = question[current[-1].end:t.start] if current else " "
        number = bool(current) and t.text.isdigit() and gap.strip() == ""
        # "Orion-7", "GPT-3.5", "Vega-2b": a glued part with a digit belongs to the name
        glued = bool(current) and gap in ("-", ".") and any(ch.isdigit() for ch in t.text)
        if (t.cap and not initial) or connector or number or glued:
            current.append(t)
        else:
            if current:
                spans.append(current)
            current = []
    if current:
        spans.append(current)
    out = []
    for span in spans:
        while span and span[-1].low in _CONNECTORS:
            span.pop()
        # "Lovelace's" -> the name without its possessive "s"
        if span and span[-1].low == "s" and question[span[-1].start - 1] in "'\u2019":
            span.pop()
        if span:
            out.append((span, question[span[0].start:span[-1].end]))
    return out


def _parse(question: str, chunks: Sequence[EvidenceChunk]) -> _Question | None:
    kind = _kind(question)
    if kind is None:
        return None
    q_tokens = _tokens(question)
    entities = _entities(question)
    if entities:
        subject_toks, subject_text = entities[0]
        subject = tuple(t.low for t in subject_toks)
        others = tuple(tuple(t.low for t in span) for span, _ in entities[1:])
    else:
        # No capitalised name: the longest chunk title the question contains.
        best: tuple[str, ...] = ()
        for chunk in chunks:
            key = _title_key(chunk.title)
            if (len(key) > len(best) and any(w not in STOPWORDS for w in key)
                    and _find_seq(q_tokens, key)):
                best = key
        if not best:
            return None
        subject, subject_text, others = best, " ".join(best), ()
    taken = set(subject).union(*others)
    relation_words = [t for t in q_tokens
                      if t.low not in taken and t.low not in STOPWORDS and t.low not in _WH
                      and t.low not in _GENERIC and not t.text.isdigit()
                      and not (t.low == "s" and question[t.start - 1:t.start] in ("'", "\u2019"))]
    if not relation_words:
        return None
    relation = frozenset(_rel_stem(t.low) for t in relation_words)
    share = bool({t.low for t in q_tokens} & {"percent", "percentage", "share", "proportion",
                                              "fraction", "rate"}) or "%" in question
    return _Question(kind=kind, subject=subject, subject_text=subject_text, relation=relation,
                     relation_text=" ".join(t.text for t in relation_words), others=others,
                     share=share)


# --- values ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Val:
    start: int  # character offsets in the sentence
    end: int
    surface: str
    kind: Kind
    date: tuple[int, int | None, int | None] = (0, None, None)
    number: float = 0.0
    precision: float = 1.0
    unit: str = ""
    approx: bool = False
    name: tuple[str, ...] = ()


def _before(text: str, start: int, words: int = 3) -> str:
    return " ".join(text[:start].casefold().split()[-words:])


def _preceded_by(text: str, start: int, phrases: Sequence[str]) -> bool:
    head = f" {_before(text, start)}"
    return any(head.endswith(" " + p) for p in phrases)


def _ranged(text: str, start: int, end: int) -> bool:
    after = text[end:end + 12]
    head = text[max(0, start - 12):start]
    if re.match(r"\s*(?:[-\u2013\u2014/]|to\b|or\b|and\b)\s*[$€£¥]?\d", after):
        return True
    if re.match(rf"\s*[-\u2013\u2014]\s*(?:\d{{1,2}}\s+)?{_MONTH}\b", text[end:end + 20]):
        return True  # "(10 December 1815 - 27 November 1852)": a span of dates
    if re.search(r"\d\s*(?:[-\u2013\u2014/]|to|or)\s*$", head):
        return True
    wide = text[max(0, start - 40):start].casefold()
    return bool(re.search(r"\bbetween\s+(?:the\s+)?$", wide)
                or re.search(r"\bbetween\s+(?:the\s+)?\S+(?:\s+\S+){0,3}\s+and\s+$", wide))


def _dates(text: str) -> tuple[list[_Val], list[tuple[int, int]]]:
    out: list[_Val] = []
    taken: list[tuple[int, int]] = []
    for pattern in _DATES:
        for m in pattern.finditer(text):
            s, e = m.span()
            if any(s < b and a < e for a, b in taken):
                continue
            groups = m.groupdict()
            year = int(groups["y"])
            if groups.get("era") in ("BC", "BCE"):
                year = -year
            raw_m = groups.get("m")
            month = (int(raw_m) if raw_m and raw_m.isdigit()
                     else _MONTHS.get((raw_m or "").casefold().rstrip("."))) if raw_m else None
            day = int(groups["d"]) if groups.get("d") else None
            if pattern is _DATES[-1] and _unit_after(text, e) is not None:
                continue  # "1500 metres" is a number, not a year
            taken.append((s, e))
            if (_preceded_by(text, s, _BOUNDS) or _preceded_by(text, s, _APPROX)
                    or _ranged(text, s, e)):
                continue
            out.append(_Val(s, e, text[s:e], "date", date=(year, month, day)))
    return out, taken


def _unit_after(text: str, end: int) -> str | None:
    m = _UNIT_WORD.match(text, end)
    if not m:
        return None
    word = m.group("u").casefold().replace(" ", "")
    return _UNITS.get(word)


def _numbers(text: str, dates: Sequence[tuple[int, int]]) -> tuple[list[_Val], set[int]]:
    """Numbers with their unit, and the bare years (as-of qualifiers) of the sentence."""
    out: list[_Val] = []
    years: set[int] = set()
    for m in _NUMBER.finditer(text):
        s, e = m.span()
        if s and (text[s - 1].isalnum() or (text[s - 1] in ",." and not m.group("cur"))):
            continue
        if e < len(text) and text[e].isdigit():
            continue
        digits = m.group("int").replace(",", "")
        dec = m.group("dec") or ""
        if any(a <= s < b for a, b in dates):
            if not m.group("cur") and "," not in m.group("int") and len(digits) == 4:
                years.add(int(digits))
            continue
        end = e
        unit = m.group("cur") or ""
        mult = 1.0
        rest = text[end:]
        pct = re.match(r"\s?(%|percent\b|per cent\b)", rest)
        if pct:
            unit, end = "%", end + pct.end()
        mm = re.match(r"\s+(thousand|million|billion|trillion)\b", text[end:])
        if mm:
            mult, end = _MULTIPLIERS[mm.group(1)], end + mm.end()
        if not unit or unit in "$€£¥":
            um = re.match(r"(\s*|-)(square\s+|sq\.?\s+)?([A-Za-z²]+)", text[end:])
            if um:
                word = um.group(3).casefold()
                glued = um.group(1) == ""
                sq = "sq-" if um.group(2) else ""
                known = _UNITS.get(word)
                if known is not None:
                    if not unit:
                        unit = sq + known
                    end += um.end()
                elif glued:
                    continue  # "10th", "3rd", "A4b": not a quantity
                elif not unit and word not in STOPWORDS and um.group(3)[:1].islower():
                    unit = "" if word in _PEOPLE else stem([word])[0]
                    end += um.end()
        if (not m.group("cur") and not dec and "," not in m.group("int") and len(digits) == 4
                and 1000 <= int(digits) <= 2099 and mult == 1.0 and unit == ""):
            years.add(int(digits))  # a bare year: when the number holds, not a number
            continue
        value = float(digits + ("." + dec if dec else "")) * mult
        if dec:
            precision = 10.0 ** -len(dec) * mult
        else:
            zeros = len(digits) - len(digits.rstrip("0")) if int(digits) else 0
            precision = 10.0 ** zeros * mult
        if _preceded_by(text, s, _BOUNDS) or _ranged(text, s, end):
            continue
        approx = _preceded_by(text, s, _APPROX)
        out.append(_Val(s, end, text[s:end].strip(), "number", number=value, precision=precision,
                        unit=unit, approx=approx))
    return out, years


def _names(text: str, toks: Sequence[_Tok], skip: frozenset[str],
           relation: frozenset[str]) -> list[_Val]:
    """Capitalised names ("John Smith", "Ludwig van Beethoven"), minus the ``skip`` words."""

    def name_word(t: _Tok) -> bool:
        return (t.cap and t.low not in skip and t.low not in _MONTHS and t.low not in STOPWORDS
                and t.stem not in relation and not t.text.isdigit())

    out: list[_Val] = []
    span: list[_Tok] = []

    def close() -> None:
        while span and span[-1].low in _CONNECTORS:
            span.pop()
        key = tuple(t.low for t in span
                    if t.low not in _CONNECTORS and t.low not in _HONORIFICS and len(t.low) > 1)
        # Two words at least ("Smith" alone, "American writer" are too weak), and not
        # an alternative name in quotes or parentheses.
        quoted = bool(span) and text[:span[0].start].rstrip()[-1:] in ('"', "(", "\u201c", "'")
        # "founded by V's son": V is not the one asked for
        owner = bool(span) and re.match(r"['\u2019]s\b", text[span[-1].end:]) is not None
        if len(key) >= 2 and not quoted and not owner:
            out.append(_Val(span[0].start, span[-1].end, text[span[0].start:span[-1].end],
                            "name", name=key))
        span.clear()

    for i, t in enumerate(toks):
        joined = bool(span) and text[span[-1].end:t.start].strip() in ("", ".")
        if name_word(t):
            if span and not joined:
                close()
            span.append(t)
        elif (span and joined and t.low in _CONNECTORS and i + 1 < len(toks)
              and name_word(toks[i + 1])):
            span.append(t)
        else:
            close()
    close()
    return out


def _same(a: _Val, b: _Val) -> bool:
    if a.kind == "date":
        (ya, ma, da), (yb, mb, db) = a.date, b.date
        if ya != yb:
            return False
        if ma is not None and mb is not None and ma != mb:
            return False
        return da is None or db is None or da == db
    if a.kind == "number":
        if a.unit != b.unit:
            return True  # not comparable: never a disagreement
        # The same figure when one may be the other rounded ("30,000" for 30,412) and
        # they are close; a round "300" is not the "330" another source measured.
        lo_a, hi_a = a.number - a.precision / 2, a.number + a.precision / 2
        lo_b, hi_b = b.number - b.precision / 2, b.number + b.precision / 2
        tolerance = 0.15 if (a.approx or b.approx) else 0.05
        top = max(abs(a.number), abs(b.number))
        close = top == 0 or abs(a.number - b.number) / top <= tolerance
        return close and (a.approx or b.approx or (lo_a <= hi_b and lo_b <= hi_a))
    sa, sb = set(a.name), set(b.name)
    return sa <= sb or sb <= sa or a.name[-1] == b.name[-1]


# --- reading one sentence -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Reading:
    chunk: EvidenceChunk
    order: int  # position of the chunk in the evidence
    start: int  # the sentence in the chunk
    end: int
    value: _Val
    scope: tuple[str, ...]
    asof: frozenset[int]
    credibility: float

    @property
    def quote(self) -> str:
        return self.chunk.text[self.start:self.end]


def _token_at(toks: Sequence[_Tok], char: int) -> int:
    for i, t in enumerate(toks):
        if t.end > char:
            return i
    return len(toks)


class _Reader:
    def __init__(self, q: _Question) -> None:
        self.q = q

    def _entity(self, t: _Tok, index: int, allowed: frozenset[str]) -> bool:
        """A name other than the subject (or the question's entities, or the value)."""
        if not t.cap or t.low in allowed or t.low in _MONTHS:
            return False
        return not (index == 0 and (t.low in STOPWORDS or t.stem in self.q.relation))

    def read(self, chunk: EvidenceChunk, start: int, end: int, *, follows_subject: bool,
             after_naming: Callable[[], frozenset[str] | None] | None = None,
             ) -> tuple[_Val, frozenset[int]] | None:
        """The value this sentence gives for the question, if it plainly gives one.

        ``after_naming`` (asked only when needed): when the previous sentence of the
        chunk named the subject and no other name, the words that may stand for it
        after "The" ("the model"), else None.
        """
        q = self.q
        text = chunk.text[start:end]
        toks = _tokens(text)
        lows = [t.low for t in toks]
        title_words = set(_title_key(chunk.title))
        if len(toks) < _MIN_WORDS:
            return None  # too short a quote to cite
        if any(t.low in _HEDGES and not (t.low == "may" and t.cap) for t in toks):
            return None
        anchors = [i for i, t in enumerate(toks) if t.stem in q.relation]
        if {toks[i].stem for i in anchors} != q.relation:
            return None
        have = set(lows) | title_words
        if any(not set(o) <= have for o in q.others):
            return None
        # --- candidate values
        dates, date_spans = _dates(text)
        values: list[_Val]
        asof: set[int] = set()
        if q.kind == "date":
            values = dates
        elif q.kind == "number":
            values, asof = _numbers(text, date_spans)
            if not q.share:  # "69% of the population" is a share, not a population
                values = [v for v in values if v.unit != "%"]
            # "990 associates" does not count "members": a counted noun must be asked for
            values = [v for v in values if v.unit in _KNOWN_UNITS or v.unit in q.relation
                      or v.unit in ("", "$", "€", "£", "¥")]
        else:
            if any(p in f" {' '.join(lows)} " for p in (" co ", " along with ", " together with ",
                                                        " alongside ", " jointly ")):
                return None
            skip = q.entity_words | (title_words if _title_key(chunk.title) == q.subject
                                     else frozenset())
            values = _names(text, toks, frozenset(skip), q.relation)
        if not values:
            return None
        spans = [(_token_at(toks, v.start), _token_at(toks, v.end - 1)) for v in values]
        picks: list[tuple[int, _Val, int]] = []  # (distance, value, anchor)
        for a in anchors:
            # "130 billion parameters" for "how many parameters": the relation word is
            # the value's counted noun (its unit), so the value is the one it ends
            inside = [v for v, (s, e) in zip(values, spans, strict=True)
                      if s < a <= e and v.unit in q.relation and v.unit not in _KNOWN_UNITS]
            if inside:
                picks.append((0, inside[0], a))
                continue
            after = [(s - a, v) for v, (s, _) in zip(values, spans, strict=True)
                     if a < s <= a + _AFTER]
            before = [(a - e, v) for v, (_, e) in zip(values, spans, strict=True)
                      if a - _BEFORE <= e < a]
            if after:
                d, v = min(after, key=lambda x: x[0])
            elif before:
                d, v = min(before, key=lambda x: x[0])
            else:
                continue
            picks.append((d, v, a))
        if not picks:
            return None
        if any(not _same(picks[0][1], p[1]) for p in picks[1:]):
            return None  # the relation words point at different values
        _, value, anchor = min(picks, key=lambda p: p[0])
        if q.kind == "name":
            near = [v for v, (s, e) in zip(values, spans, strict=True)
                    if anchor - _AFTER <= s and e <= anchor + _AFTER]
            if len(near) != 1:
                return None  # several names around the relation word
            v_at = spans[values.index(value)][0]
            if v_at > anchor:
                if v_at == 0 or lows[v_at - 1] != "by":
                    return None  # "X was founded by V" only; "He founded V": V is no founder
            else:  # "V founded X" / "V also founded the X" only
                v_end = spans[values.index(value)][1]
                gap = text[toks[v_end].end:toks[anchor].start]
                later = [i for i in _find_seq(toks, q.subject) if anchor < i <= anchor + 3]
                if (anchor - v_end > 2 or not re.fullmatch(r"[^\W_]*\s*[^\W_]*\s*", gap.strip())
                        or not later or not _plain_between(text, toks, anchor, later[0], lows)):
                    return None
        v_first, v_last = spans[values.index(value)]
        lo, hi = min(anchor, v_first), max(anchor, v_last)
        if any(lows[i] in _NEGATIONS for i in range(max(0, lo - 2), hi + 1)):
            return None
        value_words = {t.low for t in toks[v_first:v_last + 1]}
        allowed = q.entity_words | value_words | {"ad", "bc", "bce", "ce"}
        ok = self._explicit(toks, text, anchor, allowed | self._title_if_subject(chunk))
        if ok is None:
            ok = (self._by_title(chunk, toks, anchor, value_words, follows_subject)
                  or (after_naming is not None
                      and _by_mention(toks, anchor, value_words, after_naming)))
        if not ok:
            return None
        return value, frozenset(asof)

    def _title_if_subject(self, chunk: EvidenceChunk) -> frozenset[str]:
        key = _title_key(chunk.title)
        return frozenset(key) if key == self.q.subject else frozenset()

    def _explicit(self, toks: Sequence[_Tok], text: str, anchor: int,
                  allowed: frozenset[str]) -> bool | None:
        """The subject is named in the sentence: True/False, None when it is not named."""
        starts = _find_seq(toks, self.q.subject)
        if not starts:
            return None
        n = len(self.q.subject)
        best = min(starts, key=lambda i: abs(i - anchor))
        last = best + n - 1
        if min(abs(best - anchor), abs(last - anchor)) > _NEAR_SUBJECT:
            return False
        # part of a longer name ("Springfield Airport", "New Springfield", "Deluxe 2")
        for j in (best - 1, last + 1):
            if not 0 <= j < len(toks):
                continue
            # (a number right after the name is part of it even when read as the value)
            if ((toks[j].cap and toks[j].low not in allowed)
                    or (j > last and toks[j].text.isdigit()
                        and toks[j].low not in self.q.entity_words)):
                gap = (text[toks[j].end:toks[best].start] if j < best
                       else text[toks[last].end:toks[j].start])
                if gap.strip() == "" and not (j == 0 and toks[j].low in STOPWORDS):
                    return False
        # "X's father": a possessive must be of the relation itself ("X's population")
        nxt = last + 1
        if nxt < len(toks) and toks[nxt].low == "s" and text[toks[nxt].start - 1] in "'\u2019":
            follow = nxt + 1
            while follow < len(toks) and toks[follow].low in STOPWORDS:
                follow += 1
            if follow >= len(toks) or toks[follow].stem not in self.q.relation:
                return False
        # "father of X", "worked with X": X is not the sentence's subject
        prev = best - 1
        if prev >= 0 and toks[prev].low in _PREPOSITIONS:
            head = prev - 1
            if head < 0 or toks[head].stem not in self.q.relation:
                return False
        lo, hi = (last + 1, anchor) if best < anchor else (anchor + 1, best)
        return not any(self._entity(toks[i], i, allowed) for i in range(lo, hi))

    def _by_title(self, chunk: EvidenceChunk, toks: Sequence[_Tok], anchor: int,
                  value_words: set[str], follows_subject: bool) -> bool:
        """A chunk titled after the subject: "She was born ...", "Lovelace was born ..."."""
        if _title_key(chunk.title) != self.q.subject or not toks or anchor == 0:
            return False
        subject_words = {w for w in self.q.subject if w not in STOPWORDS}
        first = toks[0].low
        if first in _PRONOUNS:
            if not follows_subject:
                return False
        elif first not in subject_words:
            return False
        for i in range(1, anchor):
            w = toks[i].low
            if w in STOPWORDS or w in subject_words or w in value_words:
                continue
            return False
        return True


def _plain_between(text: str, toks: Sequence[_Tok], a: int, b: int, lows: Sequence[str]) -> bool:
    """Only function words and spaces between tokens ``a`` and ``b`` ("founded the X")."""
    gap = text[toks[a].end:toks[b].start]
    return (re.fullmatch(r"[\s\w]*", gap) is not None
            and all(w in STOPWORDS for w in lows[a + 1:b]))


def _by_mention(toks: Sequence[_Tok], anchor: int, value_words: set[str],
                after_naming: Callable[[], frozenset[str] | None]) -> bool:
    """Right after a sentence naming only the subject: "It has ...", "The model has ...".

    Whatever the chunk's title: the subject is established by the text itself.
    "The X" stands for the subject only when X is a word the chunk uses for it (a
    word of its title, or what the naming sentence says it is: "Orion is a model").
    """
    if not toks or anchor == 0 or toks[0].low not in _PRONOUNS | {"the"}:
        return False
    descriptors = after_naming()
    if descriptors is None:
        return False
    if toks[0].low in _PRONOUNS:
        begin = 1
    elif (toks[0].low == "the" and len(toks) > 1 and not toks[1].cap
          and toks[1].low in descriptors):
        begin = 2
    else:
        return False
    return all(toks[i].low in STOPWORDS or toks[i].low in value_words
               for i in range(begin, anchor))


def _mentions_subject(q: _Question, chunk: EvidenceChunk, start: int, end: int) -> bool:
    words = {t.low for t in _tokens(chunk.text[start:end])}
    return any(w in words for w in q.subject if w not in STOPWORDS)


_IS_A = re.compile(r"\b(?:is|was|are|were)\s+(?:a|an|the)\s+((?:[a-z][\w-]*\s+){0,3}[a-z][\w-]*)")


def _names_subject_alone(q: _Question, chunk: EvidenceChunk, start: int,
                         end: int) -> frozenset[str] | None:
    """The sentence names the subject and no other name: what it may be called next.

    Returns the words "The <word>" may use for the subject in the next sentence (the
    chunk title's words, and what the sentence says it is: "X is a language model"),
    or None when the sentence does not name the subject, names it as an owner ("X's
    founder"), after a preposition ("the album by X"), inside a longer name ("X Mini")
    or names someone or something else too ("X was compared with Y").
    """
    text = chunk.text[start:end]
    toks = _tokens(text)
    starts = _find_seq(toks, q.subject)
    if not starts:
        return None
    inside = {i + j for i in starts for j in range(len(q.subject))}
    for i in starts:
        nxt = i + len(q.subject)
        if nxt < len(toks) and toks[nxt].low == "s" and text[toks[nxt].start - 1] in "'\u2019":
            return None  # "X's teacher model is large. It has ..."
        if nxt < len(toks) and _joins(text, toks[nxt - 1], toks[nxt]):
            return None  # "X Mini", "X 2": a longer name
        if i and toks[i - 1].low in _PREPOSITIONS:
            return None  # "The third album by X. It was released ...": "it" is the album
    for i, t in enumerate(toks):
        if i in inside or not t.cap or t.low in q.entity_words or t.low in _MONTHS:
            continue
        if t.low == "i" or (i == 0 and t.low in STOPWORDS):
            continue
        return None  # another name: "it" may be that one
    title_words = set(_title_key(chunk.title))
    words = {w for w in title_words if w not in STOPWORDS and w not in q.subject}
    for m in _IS_A.finditer(text):
        words.update(w.casefold() for w in m.group(1).split())
    return frozenset(words - STOPWORDS)


def _scope(q: _Question, chunk: EvidenceChunk) -> tuple[str, ...]:
    """The subject as this chunk's title narrows it; chunks of different scopes never meet.

    "Springfield, Illinois" and "Springfield (Massachusetts)" qualify the subject
    (a capitalised place after a comma, or anything in parentheses); "Springfield
    Airport" is a longer name when the chunk's text uses it too. A title that only
    mentions the subject ("Orion review", "Orion model card", "Notes on Orion") is
    about the subject itself.
    """
    title = " ".join(chunk.title.split())
    m = re.fullmatch(r"(?P<head>[^,(]*?)\s*(?:\((?P<paren>[^)]*)\)\s*|,\s*(?P<comma>.+))", title)
    if m:
        qualifier = m.group("paren") if m.group("paren") is not None else m.group("comma")
        head = tuple(w.casefold() for w in _WORD.findall(m.group("head")))
        words = tuple(w.casefold() for w in _WORD.findall(qualifier or ""))
        if head == q.subject and words and (m.group("paren") is not None
                                            or qualifier[:1].isupper()):
            return (*q.subject, "|", *words)  # "Springfield, Illinois"
    toks = _tokens(title)
    text_toks: list[_Tok] | None = None
    for i in _find_seq(toks, q.subject):
        lo, hi = i, i + len(q.subject) - 1
        while lo > 0 and _joins(title, toks[lo - 1], toks[lo]):
            lo -= 1
        while hi + 1 < len(toks) and _joins(title, toks[hi], toks[hi + 1]):
            hi += 1
        if (lo, hi) == (i, i + len(q.subject) - 1):
            continue
        name = tuple(t.low for t in toks[lo:hi + 1])
        if text_toks is None:
            text_toks = _tokens(chunk.text)
        if _find_seq(text_toks, name):
            return name  # the text calls it "Springfield Airport" too: another subject
    return q.subject


def _joins(text: str, a: _Tok, b: _Tok) -> bool:
    """``a`` and ``b`` are two parts of one name: glued, or capitalised words side by side."""
    gap = text[a.end:b.start]
    if gap in ("-", "."):
        return True
    if gap.strip() != "" or not (a.cap or a.text[:1].isdigit()) or a.low in STOPWORDS:
        return False
    return (b.cap and b.low not in STOPWORDS) or b.text.isdigit()  # "Windows 95"


# --- conflicts ------------------------------------------------------------------------


def find_conflicts(
    question: str,
    chunks: Sequence[EvidenceChunk],
    credibility: Credibility | None = None,
) -> tuple[Conflict, ...]:
    """Where ``chunks`` disagree on the year, number or name ``question`` asks for.

    Args:
        question: the run's question (it decides subject, attribute and value kind).
        chunks: the evidence the writer will use, best first.
        credibility: source weights; the heavier side is ``preferred`` (none: all 1.0).

    Returns:
        One :class:`Conflict` per subject scope whose chunks give different
        values; each side quotes the exact sentence of its chunk, most
        credible first (then in evidence order). Empty when nothing disagrees
        or the question is not one this detector understands.
    """
    q = _parse(question, chunks)
    if q is None:
        return ()
    reader = _Reader(q)
    groups: dict[tuple[object, ...], list[_Reading]] = {}
    for order, chunk in enumerate(chunks):
        weight = credibility.weight(chunk) if credibility is not None else 1.0
        scope = _scope(q, chunk)
        by_title = _title_key(chunk.title) == q.subject
        previous: tuple[int, int] | None = None
        for s, e in split_sentences(chunk.text):
            follows = (previous is None and chunk.position == 0) or (
                previous is not None and _mentions_subject(q, chunk, *previous))
            naming = (None if previous is None
                      else functools.partial(_names_subject_alone, q, chunk, *previous))
            before, previous = previous, (s, e)
            got = reader.read(chunk, s, e, follows_subject=follows, after_naming=naming)
            if got is None:
                continue
            value, asof = got
            start = s
            if (before is not None and naming is not None and not by_title
                    and not _find_seq(_tokens(chunk.text[s:e]), q.subject)
                    and naming() is not None):
                start = before[0]  # "Orion is a model. It has ...": quote what names it
            key: tuple[object, ...] = (scope,)
            if q.kind == "number":
                key = (scope, value.unit, asof)
            groups.setdefault(key, []).append(
                _Reading(chunk, order, start, e, value, scope, asof, weight))
    out: list[Conflict] = []
    for readings in groups.values():
        conflict = _resolve(q, readings)
        if conflict is not None:
            out.append(conflict)
    return tuple(out)


def _resolve(q: _Question, readings: Sequence[_Reading]) -> Conflict | None:
    clusters: list[list[_Reading]] = []
    for r in readings:
        for cluster in clusters:
            if _same(cluster[0].value, r.value):
                cluster.append(r)
                break
        else:
            clusters.append([r])
    if len(clusters) < 2:
        return None
    if len({r.chunk.id for r in readings}) < 2:
        return None  # one chunk against itself is not held evidence disagreeing
    if q.kind == "name":
        for a in clusters:
            for b in clusters:
                if a is not b and any(_names_in(b[0].value.name, r.chunk.text) for r in a):
                    return None  # a side that knows the other name: not a plain disagreement
    # Most credible value first (then evidence order); each side from another chunk if it can.
    clusters.sort(key=lambda c: (-max(r.credibility for r in c), min(r.order for r in c)))
    reps: list[_Reading] = []
    for cluster in clusters[:MAX_SIDES]:
        ranked = sorted(cluster, key=lambda r: (-r.credibility, r.order, r.start))
        used = {r.chunk.id for r in reps}
        reps.append(next((r for r in ranked if r.chunk.id not in used), ranked[0]))
    if len({r.chunk.id for r in reps}) < 2:
        return None
    sides = tuple(ConflictSide(chunk_id=r.chunk.id, value=r.value.surface, quote=r.quote,
                               credibility=r.credibility, title=r.chunk.title) for r in reps)
    preferred = 0 if sides[0].credibility > sides[1].credibility else None
    return Conflict(subject=q.subject_text, attribute=q.relation_text, sides=sides,
                    preferred=preferred)


def _names_in(name: tuple[str, ...], text: str) -> bool:
    words = {w.casefold() for w in _WORD.findall(text)}
    return bool(name) and name[-1] in words and set(name) <= words


def conflicts_for_answer(
    question: str,
    evidence: Mapping[str, EvidenceChunk],
    ids: Sequence[str],
    credibility: Credibility | None = None,
) -> tuple[tuple[ConflictDetected, ...], tuple[Conflict, ...]]:
    """The machine's hook at writing time: the conflicts among the writer's evidence ``ids``.

    Returns the ``conflict.detected`` events to publish (once per run: skip
    them on a repair of the same evidence) and the conflicts to put into
    ``AnswerRequested.conflicts`` (on every attempt). Pure and deterministic.
    """
    chunks = [evidence[i] for i in ids if i in evidence]
    conflicts = find_conflicts(question, chunks, credibility)
    return tuple(ConflictDetected.of(c) for c in conflicts), conflicts


# --- claims the writer appends ----------------------------------------------------------


def _covered(text: str, support: set[str]) -> bool:
    return set(content_terms(text)) <= support


_DIGITS = re.compile(r"(?<![^\W\d_])\d+(?:[.,]\d+)*(?![^\W\d_])")


def _figures(text: str) -> set[str]:
    return {m.group().replace(",", "") for m in _DIGITS.finditer(text)}


def _figures_hold(statement: str, quote: str, title: str) -> bool:
    """The verifier finds every figure of ``statement``: in the quote, or, when the quote
    has no figure the statement leaves out, in the chunk's title too ("7" of "Orion-7")."""
    said, quoted = _figures(statement), _figures(quote)
    have = quoted if quoted - said - {"1"} else quoted | _figures(title)
    return said <= have


def conflict_claims(conflicts: Sequence[Conflict]) -> list[Claim]:
    """One claim per side of each conflict, quoting that side's exact sentence.

    The first side (the preferred one, when there is one) reads
    ``"<subject>, <attribute>: <value> in “<title>”"``, each other side
    ``"but <value> in “<title>”"``, so the rendered answer
    (``... 1815 in “A” [1] but 1816 in “B” [2]``) shows both sides, each cited.
    Every content word of a statement occurs in its quote or its chunk's title
    (the verifier checks statements that way); the subject or attribute is
    left out of a statement when its quote and title do not use those words,
    the attribute when the value already says it ("130 billion parameters"),
    and the title or subject when the verifier would not find a figure of it
    ("7" of "Orion-7" beside a quote with figures of its own).
    """
    out: list[Claim] = []
    for conflict in conflicts:
        for i, side in enumerate(conflict.sides):
            support = set(content_terms(side.quote)) | set(content_terms(side.title))
            title = " ".join(side.title.split())
            body = f"{side.value} in \u201c{title}\u201d" if title else side.value
            if not _figures_hold(body, side.quote, title):
                body = side.value
            if i:
                statement = f"but {body}"
            else:
                attribute = _attribute_in(conflict, side.quote)
                if set(content_terms(attribute)) <= set(content_terms(side.value)):
                    attribute = ""
                lead: list[str] = []
                for part in (conflict.subject, attribute):
                    if (part and _covered(part, support)
                            and _figures_hold(f"{', '.join([*lead, part])}: {body}", side.quote,
                                              title)):
                        lead.append(part)
                statement = f"{', '.join(lead)}: {body}" if lead else body
            out.append(Claim(statement=statement, source_id=side.chunk_id, quote=side.quote))
    return out


def _attribute_in(conflict: Conflict, quote: str) -> str:
    """The attribute as the quote words it ("founded" where the question said "founding")."""
    wanted = {_rel_stem(w.casefold()) for w in _WORD.findall(conflict.attribute)}
    words = [t.text for t in _tokens(quote) if t.stem in wanted]
    seen: list[str] = []
    for w in words:
        if w.casefold() not in (s.casefold() for s in seen):
            seen.append(w)
    return " ".join(seen)
