"""The time period a question asks about, read from its wording (no model, no clock).

The run uses it to notice stale search results ("every page is older than the
period asked about") and to suggest a date filter. Reading a period where there
is none costs a needless filtered search, so the rules are conservative:

* a bare year counts only after a preposition that makes it a time
  (``in``/``during``/``since``/``before``/``after``/``as of``/``until``/
  ``from ... to``/``between ... and``): "the 1990 World Cup" and "Windows 2000"
  are names, "in 2000 words" is a length;
* relative phrases ("last year", "past 3 months", "this week", "yesterday")
  are computed from ``today``, which the caller passes;
* recency words ("latest", "current", "recently", "now", "today") with no
  range said give a default window (the last ``recent_days`` days); a
  capitalised one inside the question is taken for a title ("the Harbour
  Today newspaper", "the film Winter Now") and "alternating current" for physics;
* a range said wins over recency words ("the latest figure in 2019" asks
  about 2019), and several ranges are merged into the span covering them all.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

__all__ = ["DEFAULT_RECENT_DAYS", "AskedPeriod", "DateMention", "asked_period", "date_mentions",
           "is_time_sensitive"]

DEFAULT_RECENT_DAYS = 365
"""How far back "latest" / "current" / "now" reach when the question names no range."""


@dataclass(frozen=True, slots=True)
class AskedPeriod:
    """A date range a question asks about (bounds inclusive; ``None`` is unbounded).

    ``relative`` says the period moves with ``today`` ("last year", "latest"),
    i.e. the question is time-sensitive; ``default_window`` says no range was
    said and the window is the default recency one.
    """

    date_from: dt.date | None
    date_to: dt.date | None
    phrase: str
    relative: bool = False
    default_window: bool = False


_MONTHS: dict[str, int] = {}
for _i, _name in enumerate(calendar.month_name):
    if _name:
        _MONTHS[_name.lower()] = _i
        _MONTHS[_name[:3].lower()] = _i
_MONTHS["sept"] = 9
_MONTH = r"(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"

# A year 1000-2099 standing alone: not part of a longer number, a price, a code
# ("COVID-2019", "A1000") or a quantity ("in 2000 words").
_UNITS = (
    r"words?|characters?|chars?|pages?|lines?|tokens?|letters?|times|steps|points?|pts|"
    r"people|persons?|men|women|soldiers|troops|users?|votes?|units?|copies|items?|"
    r"m|km|cm|mm|ft|feet|foot|miles?|meters?|metres?|yards?|inches|kg|g|lbs?|pounds?|tons?|"
    r"tonnes?|calories|kcal|mah|rpm|hz|mhz|ghz|mb|gb|kb|ms|seconds?|minutes?|hours?|days?|"
    r"weeks?|months?|years?|dollars?|euros?|yen|rupees?|acres?|hectares?"
)
_YEAR_TAIL = rf"(?![\w%/]|[.,:]\d|\s*(?:{_UNITS})\b)"
_YEAR = r"(?<![\w$£€¥#/.,-])(?:1\d{3}|20\d{2})"

_DATE_EXPR = re.compile(
    r"(?P<iso>(?<![\w-])\d{4}-\d{2}-\d{2}(?![\w-]))"
    rf"|(?P<ma>{_MONTH})\s+(?P<da>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<ya>{_YEAR}){_YEAR_TAIL}"
    rf"|(?<!\d)(?P<db>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mb>{_MONTH}),?\s+"
    rf"(?P<yb>{_YEAR}){_YEAR_TAIL}"
    rf"|(?P<mc>{_MONTH})(?:\s+of)?,?\s+(?P<yc>{_YEAR}){_YEAR_TAIL}"
    r"|the\s+(?:early\s+|mid[\s-]+|late\s+)?(?P<dec>(?:1\d|20)\d0)'?s\b"
    rf"|(?:the\s+year\s+)?(?P<yd>{_YEAR}){_YEAR_TAIL}",
    re.IGNORECASE,
)
_PREP = re.compile(
    r"\b(?P<prep>in|during|throughout|as\s+of|on|since|from|after|before|prior\s+to|"
    r"until|till|through|up\s+(?:to|until)|between|starting(?:\s+in)?|beginning(?:\s+in)?)"
    r"\s+$",
    re.IGNORECASE,
)
_RANGE_JOIN = re.compile(r"\s+(?:to|and|until|till|through)\s+|\s*[-\u2013\u2014]\s*",
                         re.IGNORECASE)
_SHORT_END = re.compile(r"\s*[-\u2013]\s*(\d{2})(?![\w%/]|[.,]\d)")

_NUMBERS = {
    "a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15,
    "twenty": 20, "thirty": 30, "fifty": 50, "hundred": 100, "few": 3, "a few": 3,
    "couple of": 2, "a couple of": 2,
}
_NUMBER = r"\d{1,3}|a\s+few|few|a\s+couple\s+of|couple\s+of|" + "|".join(
    k for k in _NUMBERS if " " not in k and k != "a")
_ROLLING = re.compile(
    rf"(?P<the>\bthe\s+)?\b(?P<word>last|past|previous|prior|preceding)\s+"
    rf"(?:(?P<n>{_NUMBER})\s+)?(?P<unit>day|week|month|year|decade)(?P<plural>s)?\b"
    r"(?!\s+of\b|-)",
    re.IGNORECASE,
)
_POSSESSIVE_BEFORE = re.compile(r"\b(?:his|her|its|their|my|our|your|whose|final)\s+$",
                                re.IGNORECASE)
_SPAN_BEFORE = re.compile(
    r"\b(?:in|over|during|for|within|throughout|from|of|since|across|through)\s+$",
    re.IGNORECASE)
_THIS = re.compile(r"\b(?:this|current)\s+(?P<unit>week|month|year)\b(?!\s+of\b)",
                   re.IGNORECASE)
_YESTERDAY = re.compile(r"\byesterday\b", re.IGNORECASE)
_RECENCY = re.compile(
    r"\b(?:latest|newest|most\s+recent|recent|recently|currently|current|nowadays|now|"
    r"today|tonight|at\s+present|at\s+the\s+moment|these\s+days|to\s+date|to\s+this\s+day|"
    r"so\s+far(?!\s+as)|up[\s-]to[\s-]date|upcoming|right\s+now)\b",
    re.IGNORECASE,
)
# "current" as a physical quantity or a flow of water, not "the present one".
_CURRENT_BEFORE = re.compile(
    r"\b(?:alternating|direct|electric|electrical|ocean|oceanic|sea|rip|tidal|eddy|"
    r"surface|leakage|induced|peak|rated|input|output|load|base|collector|emitter)\s+$",
    re.IGNORECASE,
)
_CURRENT_AFTER = re.compile(
    r"\s+(?:density|flows?|sources?|limit\w*|transformers?|sensors?|meters?|carrying|"
    r"dividers?|loops?|draw|rating|strength|speed|clamp|gain|mirror|ratings?)\b",
    re.IGNORECASE,
)
_NOW_AFTER = re.compile(r"[\s-]+(?:known|called|named|renamed|defunct|extinct|famous)\b",
                        re.IGNORECASE)


def _year_end(year: int) -> dt.date:
    return dt.date(year, 12, 31)


def _month_end(year: int, month: int) -> dt.date:
    return dt.date(year, month, calendar.monthrange(year, month)[1])


def _minus_months(day: dt.date, months: int) -> dt.date:
    total = day.year * 12 + (day.month - 1) - months
    year, month = divmod(total, 12)
    month += 1
    if year < 1:
        return dt.date.min
    return dt.date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _expr_range(m: re.Match[str]) -> tuple[dt.date, dt.date] | None:
    """The first and last day a date expression covers, or None if it is no real date."""
    g = m.groupdict()
    try:
        if g["iso"]:
            d = dt.date.fromisoformat(g["iso"])
            return d, d
        for mk, dk, yk in (("ma", "da", "ya"), ("mb", "db", "yb")):
            if g[mk]:
                d = dt.date(int(g[yk]), _MONTHS[g[mk].lower().rstrip(".")], int(g[dk]))
                return d, d
        if g["mc"]:
            year, month = int(g["yc"]), _MONTHS[g["mc"].lower().rstrip(".")]
            return dt.date(year, month, 1), _month_end(year, month)
        if g["dec"]:
            start = int(g["dec"])
            # "the 1800s" is said of a century far more than of a decade ("the 2000s" both)
            span = 100 if start % 100 == 0 and start != 2000 else 10
            return dt.date(start, 1, 1), _year_end(start + span - 1)
        year = int(g["yd"])
        return dt.date(year, 1, 1), _year_end(year)
    except ValueError:  # "February 30, 2020"
        return None


@dataclass(frozen=True, slots=True)
class DateMention:
    """A date a text writes, as precisely as it writes it.

    ``first``/``last`` are the first and last day it covers: the same day for
    "10 July 1971", the whole month for "July 1971", the year for "1971".
    """

    start: int
    text: str
    first: dt.date
    last: dt.date

    @property
    def precision(self) -> int:
        """3 for a day, 2 for a month, 1 for a year, 0 for a longer span (a decade)."""
        if self.first == self.last:
            return 3
        if (self.first.year, self.first.month) == (self.last.year, self.last.month):
            return 2
        return 1 if self.first.year == self.last.year else 0

    @property
    def key(self) -> tuple[int, int, int]:
        """(year, month, day) of ``first``, with the parts the text does not give as 0."""
        p = self.precision
        return (self.first.year, self.first.month if p >= 2 else 0, self.first.day if p == 3 else 0)


def date_mentions(text: str) -> list[DateMention]:
    """Every date ``text`` writes, in order: ISO, "10 July 1971", "July 10, 1971",
    "July 1971", a year standing alone as a year, "the 1990s" (the question reader's rules:
    "in 2000 words" or "COVID-2019" are no dates)."""
    found: list[DateMention] = []
    for m in _DATE_EXPR.finditer(text):
        span = _expr_range(m)
        if span is not None:
            found.append(DateMention(m.start(), m.group(0), *span))
    return found


@dataclass(slots=True)
class _Found:
    start: int
    end: int
    date_from: dt.date | None
    date_to: dt.date | None
    prep: str = ""
    relative: bool = False
    default_window: bool = False
    joined: bool = False  # a range: "from X to Y", "between X and Y"


def _explicit(question: str) -> list[_Found]:
    """Dates after a time preposition, with ``from X to Y`` / ``between X and Y`` joined."""
    found: list[_Found] = []
    for m in _DATE_EXPR.finditer(question):
        span = _expr_range(m)
        if span is None:
            continue
        first, last = span
        prev = found[-1] if found else None
        if (prev is not None and prev.prep in ("from", "between", "in", "during")
                and _RANGE_JOIN.fullmatch(question, prev.end, m.start())):
            prev.end = m.end()
            prev.date_to = max(last, prev.date_to or last)
            prev.joined = True
            continue
        p = _PREP.search(question, max(0, m.start() - 24), m.start())
        if p is None:
            continue
        prep = " ".join(p.group("prep").lower().split())
        if prep == "on" and not (m.group("iso") or m.group("da") or m.group("db")):
            continue  # "on" a day only: "effect on 2019 elections" names no period
        start, end = p.start(), m.end()
        if prep in ("since", "starting", "starting in", "beginning", "beginning in"):
            lo, hi = first, None
        elif prep == "after":
            lo, hi = last + dt.timedelta(days=1), None
        elif prep in ("before", "prior to"):
            lo, hi = None, first - dt.timedelta(days=1)
        elif prep in ("until", "till", "through", "up to", "up until"):
            lo, hi = None, last
        else:
            lo, hi = first, last
            short = _SHORT_END.match(question, m.end()) if m.group("yd") else None
            if short is not None:  # "in 2010-15"
                end_year = first.year // 100 * 100 + int(short.group(1))
                if end_year > first.year:
                    hi, end = _year_end(end_year), short.end()
        found.append(_Found(start, end, lo, hi, prep))
    # "between 2019 elections": a "between" that joined no second date names no range.
    return [f for f in found if f.prep != "between" or f.joined]


def _rolling(question: str, today: dt.date) -> list[_Found]:
    """"the past 3 months", "last year" (calendar), "past week" (rolling), "this month"."""
    out: list[_Found] = []
    for m in _ROLLING.finditer(question):
        if _POSSESSIVE_BEFORE.search(question, max(0, m.start() - 12), m.start()):
            continue  # "his last year at school": a final one, not a date
        word, unit = m.group("word").lower(), m.group("unit").lower()
        n_text = " ".join((m.group("n") or "").lower().split())
        n = int(n_text) if n_text.isdigit() else _NUMBERS.get(n_text, 0)
        if n_text and n == 0:
            continue
        if not n_text and (word in ("previous", "prior", "preceding") or unit == "day"):
            continue  # "the previous year" is relative to another date; "last day of ..."
        if m.group("the") and not n_text and not _SPAN_BEFORE.search(
                question, max(0, m.start() - 12), m.start()):
            continue  # "when was the last year they won": a year asked for, not a window
        calendar_unit = not n_text and word == "last" and not m.group("the")
        if calendar_unit and unit in ("year", "month", "week"):
            lo, hi = _last_calendar(unit, today)
        else:
            count = n or 1
            if unit == "day":
                lo = today - dt.timedelta(days=count)
            elif unit == "week":
                lo = today - dt.timedelta(weeks=count)
            elif unit == "month":
                lo = _minus_months(today, count)
            else:
                lo = _minus_months(today, 12 * count * (10 if unit == "decade" else 1))
            hi = today
        out.append(_Found(m.start(), m.end(), lo, hi, relative=True))
    for m in _THIS.finditer(question):
        unit = m.group("unit").lower()
        if unit == "year":
            lo = dt.date(today.year, 1, 1)
        elif unit == "month":
            lo = today.replace(day=1)
        else:
            lo = today - dt.timedelta(days=today.weekday())
        out.append(_Found(m.start(), m.end(), lo, today, relative=True))
    for m in _YESTERDAY.finditer(question):
        if _titled(question, m.start()):
            continue
        day = today - dt.timedelta(days=1)
        out.append(_Found(m.start(), m.end(), day, day, relative=True))
    return out


def _last_calendar(unit: str, today: dt.date) -> tuple[dt.date, dt.date]:
    if unit == "year":
        return dt.date(today.year - 1, 1, 1), _year_end(today.year - 1)
    if unit == "month":
        last = today.replace(day=1) - dt.timedelta(days=1)
        return last.replace(day=1), last
    monday = today - dt.timedelta(days=today.weekday() + 7)
    return monday, monday + dt.timedelta(days=6)


def _titled(question: str, start: int) -> bool:
    """A capitalised word inside the question (not its first word) is likely part of a name."""
    if not question[start].isupper() or question.isupper():
        return False
    before = question[:start].rstrip()
    return bool(before) and before[-1] not in ".?!:;\"'(\u201c"


def _recency(question: str, today: dt.date, recent_days: int) -> list[_Found]:
    out: list[_Found] = []
    for m in _RECENCY.finditer(question):
        word = m.group().lower()
        if _titled(question, m.start()):
            continue
        if word == "current" and (
            _CURRENT_BEFORE.search(question, max(0, m.start() - 16), m.start())
            or _CURRENT_AFTER.match(question, m.end())
        ):
            continue
        if word == "now" and _NOW_AFTER.match(question, m.end()):
            continue
        out.append(_Found(m.start(), m.end(), today - dt.timedelta(days=recent_days), today,
                          relative=True, default_window=True))
    return out


def asked_period(question: str, today: dt.date, *,
                 recent_days: int = DEFAULT_RECENT_DAYS) -> AskedPeriod | None:
    """The date range ``question`` asks about, or None when it names none.

    Args:
        question: the user's question.
        today: the date the question is asked on (relative phrases count from it).
        recent_days: the window of "latest" / "current" / "now" without a range.
    """
    if recent_days < 0:
        raise ValueError("recent_days must be >= 0")
    found = [*_explicit(question), *_rolling(question, today)]
    if not found:  # "the latest figure in 2019" is the latest of 2019: a range said wins
        found = _recency(question, today, recent_days)
    if not found:
        return None
    found.sort(key=lambda f: f.start)
    lows = [f.date_from for f in found]
    highs = [f.date_to for f in found]
    date_from = None if None in lows else min(d for d in lows if d is not None)
    date_to = None if None in highs else max(d for d in highs if d is not None)
    if date_from is None and date_to is None:  # "before 2000 ... since 2010": spans all time
        return None
    phrase = ", ".join(dict.fromkeys(" ".join(question[f.start:f.end].split()) for f in found))
    return AskedPeriod(date_from, date_to, phrase,
                       relative=any(f.relative for f in found),
                       default_window=all(f.default_window for f in found))


_REFERENCE_DAY = dt.date(2000, 6, 15)


def is_time_sensitive(question: str) -> bool:
    """True when the answer depends on when the question is asked ("latest", "last year")."""
    period = asked_period(question, _REFERENCE_DAY)
    return period is not None and period.relative
